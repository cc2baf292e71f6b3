# One image for the API, the migration step, the bootstrap step and the workers.
# On Linux `pip install torch` takes PyPI's CUDA build, which the worker uses on a GPU host
# (and which runs on the CPU elsewhere); the server extra adds the API, worker and engine.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
RUN pip install --no-cache-dir "torch>=2.3,<2.15"
COPY pyproject.toml README.md ./
COPY archsearch archsearch
RUN pip install --no-cache-dir ".[server]"
# Processes run unprivileged. The folders that compose mounts as named volumes exist here,
# owned by that user, so Docker gives a new volume the same owner.
RUN useradd --system --uid 10001 --create-home --home-dir /home/archsearch archsearch \
    && mkdir -p /var/lib/archsearch/artifacts /data/datasets \
    && chown -R archsearch:archsearch /var/lib/archsearch /data/datasets
USER archsearch:archsearch
ENTRYPOINT ["archsearch"]
