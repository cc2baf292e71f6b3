"""Starting the service's processes; the only place that wires api, jobs and worker."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys

from rich.console import Console

from archsearch.jobs.domain.errors import SchemaBehind
from archsearch.jobs.platform.settings import Settings

console = Console(stderr=True)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def _settings(host: str | None = None, port: int | None = None) -> Settings:
    settings = Settings()
    overrides = {k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    return settings.model_copy(update=overrides) if overrides else settings


def upgrade_database() -> str | None:
    from archsearch.jobs.platform.migrate import head_revision, upgrade

    settings = Settings()
    settings.prepare_directories()
    upgrade(settings.resolved_database_url)
    return head_revision()


def database_revisions() -> tuple[str | None, str | None]:
    from archsearch.jobs.platform.migrate import current_revision, head_revision
    from archsearch.jobs.platform.services import Services

    return current_revision(Services.from_settings(Settings()).engine), head_revision()


def _check_schema_or_exit(services: object) -> None:
    from archsearch.jobs.platform.migrate import ensure_schema_current

    try:
        ensure_schema_current(services.engine)  # type: ignore[attr-defined]
    except SchemaBehind as exc:
        console.print(f"[red]error:[/red] {exc}")
        sys.exit(2)


def serve_embedded(host: str | None, port: int | None) -> None:
    """API and a local runner in one process; a SQLite database is migrated automatically."""
    import uvicorn

    from archsearch.api.app import create_app
    from archsearch.jobs.platform.migrate import upgrade
    from archsearch.jobs.platform.services import Services
    from archsearch.jobs.runtime.runner import LocalRunner

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = _settings(host, port)
    if not settings.tokens_required and settings.host not in LOOPBACK_HOSTS:
        console.print(
            f"[red]error:[/red] without tokens the embedded server only binds to localhost, "
            f"not {settings.host}; set ARCHSEARCH_AUTH=token and create tokens with "
            "`archsearch admin` to serve a network"
        )
        sys.exit(2)
    services = Services.from_settings(settings)
    if settings.resolved_database_url.startswith("sqlite"):
        upgrade(settings.resolved_database_url)  # one user, one file: keep it current
    _check_schema_or_exit(services)
    runner = LocalRunner(services, threads=settings.local_runner_threads)
    runner.start()
    console.print(
        f"archsearch (embedded) at http://{settings.host}:{settings.port}  data: {settings.home}"
    )
    try:
        uvicorn.run(
            create_app(services, runner),
            host=settings.host,
            port=settings.port,
            log_level="warning",
        )
    finally:
        runner.stop()


def serve_team_api(host: str | None, port: int | None) -> None:
    import uvicorn

    from archsearch.api.app import create_app
    from archsearch.jobs.platform.broker import CeleryEnqueuer
    from archsearch.jobs.platform.services import Services

    settings = _settings(host, port)
    if settings.broker_url is None or settings.database_url is None:
        console.print(
            "[red]error:[/red] `archsearch api` needs ARCHSEARCH_DATABASE_URL and "
            "ARCHSEARCH_BROKER_URL; for one machine use `archsearch serve`"
        )
        sys.exit(2)
    services = Services.from_settings(settings)
    _check_schema_or_exit(services)
    uvicorn.run(
        create_app(services, CeleryEnqueuer(settings)),
        host=settings.host,
        port=settings.port,
        log_level="warning",
    )


def visible_gpus() -> list[str]:
    """GPU indices this machine offers, without importing torch in the supervisor."""
    if os.environ.get("CUDA_VISIBLE_DEVICES"):
        return [i for i in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if i.strip()]
    if shutil.which("nvidia-smi") is None:
        return []
    listing = subprocess.run(
        ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    return [line.strip() for line in listing.stdout.splitlines() if line.strip().isdigit()]


def run_worker(device: str, extra: list[str]) -> None:
    """One worker process per device: each GPU gets its own process pinned to it."""
    from archsearch.jobs.platform.services import Services

    settings = Settings()
    if settings.broker_url is None:
        console.print(
            "[red]error:[/red] `archsearch worker` needs ARCHSEARCH_BROKER_URL "
            "(and ARCHSEARCH_DATABASE_URL); `archsearch serve` runs jobs itself"
        )
        sys.exit(2)
    _check_schema_or_exit(Services.from_settings(settings))
    gpus = visible_gpus() if device in ("auto", "cuda") else []
    if device == "cuda" and not gpus:
        console.print("[red]error:[/red] --device cuda but this machine shows no GPU (nvidia-smi)")
        sys.exit(2)
    if len(gpus) > 1:
        _supervise_one_per_gpu(gpus, extra)
        return
    kind = "cuda" if gpus else "cpu"
    os.environ["ARCHSEARCH_WORKER_DEVICE"] = kind  # read by archsearch.worker.app's Settings below
    from archsearch.worker.app import app

    queues = f"{settings.queue_name},{settings.queue_name}.{kind}"
    app.worker_main(["worker", "--loglevel=INFO", "--concurrency=1", "-Q", queues, *extra])


def _supervise_one_per_gpu(gpus: list[str], extra: list[str]) -> None:
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "archsearch.cli.main",
                "worker",
                "--device",
                "cuda",
                "-n",
                f"gpu{index}@%h",
                *extra,
            ],
            env={**os.environ, "CUDA_VISIBLE_DEVICES": index},
        )
        for index in gpus
    ]
    try:
        for child in children:
            child.wait()
    finally:
        for child in children:
            child.terminate()
