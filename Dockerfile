# One image for the API, the migration step and the workers.
# On Linux `pip install torch` takes PyPI's CUDA build, which the worker uses on a GPU host
# (and which runs on the CPU elsewhere); the server extra adds the API, worker and engine.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
RUN pip install --no-cache-dir "torch>=2.3,<2.15"
COPY pyproject.toml README.md ./
COPY archsearch archsearch
RUN pip install --no-cache-dir ".[server]"
ENTRYPOINT ["archsearch"]
