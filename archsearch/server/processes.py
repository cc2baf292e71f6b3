"""Starting the service's processes: the embedded server, the team API, the workers, and the
database migrations they refuse to run without. Every function takes the process's Settings,
built once at the command line's edge."""

from __future__ import annotations

import errno
import gc
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
from typing import NoReturn

import uvicorn
from fastapi import FastAPI
from rich.console import Console
from rich.markup import escape

from archsearch.api.app import create_app
from archsearch.jobs.platform.broker import CeleryEnqueuer
from archsearch.jobs.platform.migrate import (
    SchemaBehind,
    current_revision,
    ensure_schema_current,
    head_revision,
    upgrade,
)
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.runner import LocalRunner

console = Console(stderr=True)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def exit_with(message: str, code: int = 2) -> NoReturn:
    console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(code)


def quiet_logging() -> None:
    """Our INFO lines, but not Alembic's: a user starting a server has no use for
    "Context impl SQLiteImpl" on every start."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)


def upgrade_database(settings: Settings) -> str | None:
    settings.prepare_directories()
    upgrade(settings.resolved_database_url)
    return head_revision()


def database_revisions(settings: Settings) -> tuple[str | None, str | None]:
    return current_revision(Services.from_settings(settings).engine), head_revision()


def check_schema_or_exit(services: Services) -> None:
    try:
        ensure_schema_current(services.engine)
    except SchemaBehind as exc:
        exit_with(str(exc))


def bind_or_exit(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything starts, so a taken port is one clear line
    instead of a traceback after the migrations ran."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio sets TCP_NODELAY only on accepted sockets whose
    # protocol says TCP. Without it Nagle's algorithm holds a response's body until the
    # client's delayed ACK of its headers: about 40 ms on every small answer.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            exit_with(
                f"port {port} on {host} is taken (another archsearch serve?); "
                f"stop it or pick another port with --port"
            )
        exit_with(f"cannot listen on {host}:{port}: {exc.strerror}")
    return sock


def run_http(app: FastAPI, sock: socket.socket, settings: Settings) -> None:
    # Forwarded headers only from the proxies named (uvicorn's default: 127.0.0.1 alone).
    # Keep-alive longer than uvicorn's 5 s: a client polling every few seconds otherwise
    # reuses a connection the server is closing at that instant, and gets a reset.
    config = uvicorn.Config(
        app,
        log_level="warning",
        proxy_headers=True,
        forwarded_allow_ips=settings.forwarded_allow_ips,
        timeout_keep_alive=int(settings.keep_alive_seconds),
    )
    # What exists by now (routes, models, schemas, SQLAlchemy's metadata, the runner's torch)
    # lives as long as the process: frozen, a full collection no longer walks it. In the API
    # process that walk took about 240 ms, every time the request churn set one off.
    gc.collect()
    gc.freeze()
    uvicorn.Server(config).run(sockets=[sock])


def refuse_open_network_without_tokens(settings: Settings, what: str) -> None:
    """Without tokens every caller is an admin: only this machine may be one."""
    if not settings.tokens_required and settings.host not in LOOPBACK_HOSTS:
        exit_with(
            f"without tokens {what} only binds to localhost, not {settings.host}; "
            "set ARCHSEARCH_AUTH=token and create tokens with `archsearch admin` to serve a network"
        )


def exit_cleanly_on(*signals: signal.Signals) -> None:
    """uvicorn stops on these signals, then raises them again once it has stopped; exiting
    through SystemExit (rather than the default handlers' abrupt end) lets the `finally`
    blocks run: the local runner hands its running jobs back to the queue."""

    def leave(signum: int, _: object) -> None:
        raise SystemExit(0)

    for signum in signals:
        signal.signal(signum, leave)


def serve_embedded(settings: Settings) -> None:
    """API and a local runner in one process; a SQLite database is migrated automatically."""
    quiet_logging()
    refuse_open_network_without_tokens(settings, "the embedded server")
    sock = bind_or_exit(settings.host, settings.port)
    services = Services.from_settings(settings)
    if settings.resolved_database_url.startswith("sqlite"):
        upgrade(settings.resolved_database_url)  # one user, one file: keep it current
    check_schema_or_exit(services)
    runner = LocalRunner(services, threads=settings.local_runner_threads)
    runner.start()
    exit_cleanly_on(signal.SIGTERM, signal.SIGINT)
    url = f"http://{settings.host}:{settings.port}"
    console.print(
        f"archsearch (embedded) at {url}\n"
        f"  API docs: {url}/docs\n"
        f"  data:     {settings.home}\n"
        "  stop with Ctrl+C",
        highlight=False,
    )
    try:
        run_http(create_app(services, runner), sock, settings)
    finally:
        runner.stop()


def serve_team_api(settings: Settings) -> None:
    quiet_logging()
    if settings.broker_url is None or settings.database_url is None:
        exit_with(
            "`archsearch api` needs ARCHSEARCH_DATABASE_URL and ARCHSEARCH_BROKER_URL; "
            "for one machine use `archsearch serve`"
        )
    refuse_open_network_without_tokens(settings, "`archsearch api`")
    sock = bind_or_exit(settings.host, settings.port)
    services = Services.from_settings(settings)
    check_schema_or_exit(services)
    console.print(
        f"archsearch API at http://{settings.host}:{settings.port}  (docs: /docs)", highlight=False
    )
    run_http(create_app(services, CeleryEnqueuer(settings)), sock, settings)


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


def run_worker(settings: Settings, device: str, extra: list[str]) -> None:
    """One worker process per device: each GPU gets its own process pinned to it."""
    if settings.broker_url is None:
        exit_with(
            "`archsearch worker` needs ARCHSEARCH_BROKER_URL (and ARCHSEARCH_DATABASE_URL); "
            "`archsearch serve` runs jobs itself"
        )
    check_schema_or_exit(Services.from_settings(settings))
    gpus = visible_gpus() if device in ("auto", "cuda") else []
    if device == "cuda" and not gpus:
        exit_with("--device cuda but this machine shows no GPU (nvidia-smi)")
    if len(gpus) > 1:
        supervise_one_per_gpu(gpus, extra)
        return
    kind = "cuda" if gpus else "cpu"
    # A fresh interpreter (same pid, same environment) for the Celery main process: the pool
    # processes forked from it would otherwise inherit this command's modules (see
    # `archsearch.worker.__main__`). It gets this process's module search path, so that it
    # imports the same archsearch.
    path = os.pathsep.join(entry or os.getcwd() for entry in sys.path)
    sys.stdout.flush()
    sys.stderr.flush()
    command = [sys.executable, "-m", "archsearch.worker", kind, *extra]
    os.execve(sys.executable, command, {**os.environ, "PYTHONPATH": path})


def supervise_one_per_gpu(gpus: list[str], extra: list[str]) -> None:
    command = [sys.executable, "-m", "archsearch.cli.main", "worker", "--device", "cuda"]
    children = [
        subprocess.Popen(
            [*command, "-n", f"gpu{index}@%h", *extra],
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
