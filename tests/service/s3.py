"""A real S3-compatible server for the object-store tests and bench: moto's standalone
server, started as its own process on a free loopback port and spoken to over HTTP."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from tests.service import procs

# moto accepts any credentials; the processes find these where boto3 always looks.
S3_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def start_s3_server(log_dir: Path) -> tuple[procs.Proc, str]:
    """The server process and its endpoint URL, once it answers."""
    port = procs.free_port()
    argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    proc = procs.start_program("s3", argv, S3_CREDENTIALS, log_dir)
    endpoint = f"http://127.0.0.1:{port}"
    procs.wait_http(f"{endpoint}/", proc)
    return proc, endpoint


def s3_client(endpoint: str) -> Any:
    return boto3.session.Session(
        aws_access_key_id=S3_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=S3_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=S3_CREDENTIALS["AWS_DEFAULT_REGION"],
    ).client("s3", endpoint_url=endpoint, config=Config(s3={"addressing_style": "path"}))


def create_bucket(endpoint: str, bucket: str) -> None:
    s3_client(endpoint).create_bucket(Bucket=bucket)


def s3_env(endpoint: str, bucket: str, prefix: str) -> dict[str, str]:
    """What a service process needs to keep its files in `s3://bucket/prefix`."""
    return {
        **S3_CREDENTIALS,
        "ARCHSEARCH_STORAGE_URL": f"s3://{bucket}/{prefix}",
        "ARCHSEARCH_S3_ENDPOINT_URL": endpoint,
    }


def own_folder(env: dict[str, str], home: Path) -> dict[str, str]:
    """`env` with a data home and artifact root of this process's own (nothing shared)."""
    return {
        **env,
        "ARCHSEARCH_HOME": str(home),
        "ARCHSEARCH_ARTIFACT_ROOT": str(home / "artifacts"),
    }


def keys(endpoint: str, bucket: str, prefix: str) -> set[str]:
    """Every key under `prefix` in the bucket, relative to it."""
    client = s3_client(endpoint)
    found: set[str] = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        found |= {item["Key"].removeprefix(prefix) for item in page.get("Contents", [])}
    return found
