"""Starting and stopping the real processes the service tests talk to."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import psycopg

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_URL = "redis://127.0.0.1:6379/13"


T = TypeVar("T")


def create_database(name: str) -> str:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"postgresql://postgres@127.0.0.1:5432/{name}"


def drop_database(name: str) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def replace_with(self, other: Proc) -> None:
        self.popen, self.log_path = other.popen, other.log_path

    def kill(self, sig: int = signal.SIGKILL) -> None:
        # Each process leads its own group: this reaches Celery's pool children too.
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            pass
        self.popen.wait(timeout=30)

    def stop(self) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
                self.popen.wait(timeout=15)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                self.kill()


def start(name: str, args: list[str], env: dict[str, str], log_dir: Path) -> Proc:
    """An `archsearch` command (api, worker, ...) in its own process group."""
    return start_program(name, [sys.executable, "-m", "archsearch.cli.main", *args], env, log_dir)


def start_program(name: str, argv: list[str], env: dict[str, str], log_dir: Path) -> Proc:
    """Any program (e.g. the S3 server of the object-store tests), logging to `log_dir`."""
    log_path = log_dir / f"{name}-{time.monotonic_ns()}.log"
    handle = open(log_path, "wb")
    popen = subprocess.Popen(
        argv,
        env={**os.environ, **env},
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return Proc(name, popen, log_path)


def wait_until(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.1) -> T:
    """The predicate's first truthy value within `timeout` seconds, polled every `interval`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(interval)
    raise TimeoutError(what)


def wait_http(url: str, proc: Proc, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.log()}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{proc.name} did not answer at {url}:\n{proc.log()}")


def wait_log(proc: Proc, needle: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if needle in proc.log():
            return
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.log()}")
        time.sleep(0.2)
    raise TimeoutError(f"{proc.name} never logged {needle!r}:\n{proc.log()}")


def user_with_token(database_url: str, name: str = "bench") -> str:
    """A team and a user of that name, and a submit token for it (benchmarks, tests)."""
    from archsearch.jobs.domain.accounts import repository as account_repo
    from archsearch.jobs.domain.accounts.service import issue_token
    from archsearch.jobs.platform.db import make_engine, make_session_factory, transaction

    engine = make_engine(database_url)
    with transaction(make_session_factory(engine)) as session:
        team = account_repo.create_team(session, name, None)
        account_repo.create_user(session, team, name, False, None)
        token = issue_token(session, name, "submit", 1)
    engine.dispose()
    return token
