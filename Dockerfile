# One image for the API, the migration step and the workers.
# On a GPU host `pip install torch` takes the CUDA build, which the worker uses.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
RUN pip install --no-cache-dir "torch>=2.3,<2.15"
COPY pyproject.toml README.md ./
COPY archsearch archsearch
RUN pip install --no-cache-dir .
ENTRYPOINT ["archsearch"]
