"""A worker process warms up (torch threads from the settings, methods and plotting loaded,
one forward and backward) before it lists itself in `workers`."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

from sqlalchemy import select

from archsearch.jobs.domain.tables import WorkerRecord
from archsearch.jobs.platform.db import make_engine, make_session_factory
from tests.service import procs

READY = re.compile(r"worker (\S+) ready: (\d+) torch threads, warmed up in ([\d.]+)s")


def test_worker_is_warm_with_its_threads_before_it_is_listed(
    service_env: dict[str, str], log_dir: Path, pg_url: str
) -> None:
    env = {**service_env, "ARCHSEARCH_TORCH_THREADS": "1"}
    proc = procs.start(
        "warm-worker", ["worker", "-n", f"warm-{uuid.uuid4().hex[:6]}@%h"], env, log_dir
    )
    engine = make_engine(pg_url)
    try:
        procs.wait_log(proc, "torch threads, warmed up in", timeout=120)
        match = READY.search(proc.log())
        assert match is not None, proc.log()
        name, threads, seconds = match.group(1), int(match.group(2)), float(match.group(3))
        assert threads == 1 and seconds > 0
        sessions = make_session_factory(engine)
        deadline = time.monotonic() + 20
        listed: list[str] = []
        while name not in listed and time.monotonic() < deadline:
            with sessions() as session:  # its presence thread writes the row right after
                listed = list(session.scalars(select(WorkerRecord.name)))
            time.sleep(0.2)
        assert name in listed
    finally:
        proc.stop()
        engine.dispose()
