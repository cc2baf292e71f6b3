# Two images from one Dockerfile, each built once and tagged in docker-compose.yml:
# - `api`: the API, the migration step and the bootstrap step. No torch nor CUDA libraries:
#   the API never imports them (an import-linter contract and tests/test_packaging.py).
# - `worker`: the workers, with the engine. On Linux `pip install torch` takes PyPI's CUDA
#   build, which the worker uses on a GPU host (and which runs on the CPU elsewhere), and the
#   `gpu` extra (nvidia-ml-py, pure Python) for the utilisation figure of each job on a GPU.
# Both install through deploy/constraints.txt, which pins every package they get.
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY deploy/constraints.txt ./constraints.txt
COPY pyproject.toml README.md ./
COPY archsearch archsearch

FROM base AS api
RUN pip install -c constraints.txt ".[api]" \
    && useradd --system --uid 10001 --create-home --home-dir /home/archsearch archsearch \
    && mkdir -p /var/lib/archsearch/artifacts /data/datasets \
    && chown -R archsearch:archsearch /var/lib/archsearch /data/datasets
# Processes run unprivileged. The folders that compose mounts as named volumes exist here,
# owned by that user, so Docker gives a new volume the same owner.
USER archsearch:archsearch
# Liveness of the API on its default port (the slim image has no curl).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
ENTRYPOINT ["archsearch"]

FROM base AS worker
RUN pip install -c constraints.txt torch \
    && pip install -c constraints.txt ".[server,gpu]" \
    && useradd --system --uid 10001 --create-home --home-dir /home/archsearch archsearch \
    && mkdir -p /var/lib/archsearch/artifacts /data/datasets \
    && chown -R archsearch:archsearch /var/lib/archsearch /data/datasets
USER archsearch:archsearch
# A worker serves no HTTP; the queue and its heartbeats in the database tell its health.
HEALTHCHECK NONE
ENTRYPOINT ["archsearch"]
