"""Webhook deliveries through a receiver outage and a killed worker: 100 jobs end (some
with warnings) while the loopback receiver is up, then down for 30 s, then up again, and the
worker delivering the outbox (the one holding the sweeps' turn: the fleet's only worker
sender) is SIGKILLed once. Every job event arrives, each under
one delivery id, signed, in order per job, and none is lost. The transitions are written
through the domain, as a worker writes them, so the test takes about a minute."""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections import defaultdict
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.accounts import repository as account_repo
from archsearch.jobs.domain.jobs import claims, sweeper
from archsearch.jobs.domain.jobs import repository as jobs
from archsearch.jobs.domain.tables import SweeperTurn
from archsearch.jobs.platform.db import transaction
from archsearch.schemas.jobs import JobStatus
from tests.service import procs
from tests.service.conftest import Accounts, start_worker
from tests.service.webhook_receiver import Receiver

pytestmark = [pytest.mark.service, pytest.mark.slow]

SECRET = "outage-secret-0123456789"
JOB_EVENTS = ["job.succeeded", "job.failed", "job.cancelled", "job.warning"]
OUTAGE_SECONDS = 30


def end_job(sessions: sessionmaker[Session], team_id: uuid.UUID, i: int) -> list[tuple[str, str]]:
    """Job `i` runs and ends; returns the (event, job id) pairs a receiver must get."""
    with transaction(sessions) as session:
        job = jobs.create_job(
            session, "train", {"method": "train"}, f"j{i}", jobs.Placement("alice", team_id=team_id)
        )
        claims.claim_job(session, job.id, "w", 60, 3)
        status = (
            JobStatus.cancelled
            if i % 10 == 0
            else JobStatus.failed
            if i % 7 == 0
            else JobStatus.succeeded
        )
        warnings = [("low_accuracy", "accuracy is low")] if i % 5 == 0 else []
        jobs.finish_job(session, job.id, status, "done", warnings=warnings)
        expected = [(f"job.{status.value}", str(job.id))]
        return expected + [("job.warning", str(job.id))] if warnings else expected


def test_every_job_event_arrives_once_through_an_outage_and_a_killed_worker(
    api_url: str,
    accounts: Accounts,
    sessions: sessionmaker[Session],
    service_env: dict[str, str],
    log_dir: Path,
) -> None:
    worker = start_worker(service_env, log_dir, "outage-worker")
    hand_the_turn_to(sessions, worker)
    receiver = Receiver()
    receiver.start()
    headers = {"Authorization": f"Bearer {accounts.tokens['alice']}"}
    body = {"url": receiver.url, "events": JOB_EVENTS, "secret": SECRET}
    hook = httpx.post(f"{api_url}/v1/webhooks", json=body, headers=headers).json()
    with transaction(sessions) as session:
        team_id = account_repo.team_by_name(session, "alpha").id
    expected: list[tuple[str, str]] = []
    try:
        expected += [e for i in range(0, 34) for e in end_job(sessions, team_id, i)]
        time.sleep(2)
        receiver.stop()
        down_at = time.monotonic()
        expected += [e for i in range(34, 67) for e in end_job(sessions, team_id, i)]
        time.sleep(3)
        assert turn_holder(sessions) == name_of(worker)  # the worker sending, not the API alone
        worker.kill()  # SIGKILL, whatever it holds
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down_at)))
        receiver.start()
        expected += [e for i in range(67, 100) for e in end_job(sessions, team_id, i)]
        _wait_for_all(receiver, len(expected), timeout=90)
    finally:
        receiver.stop()
        worker.stop()
    _check(receiver, expected)
    _print_log(api_url, hook["id"], headers)


def name_of(worker: procs.Proc) -> str:
    return f"{socket.gethostname()}:{worker.popen.pid}"  # as `executor.worker_name` names it


def turn_holder(sessions: sessionmaker[Session]) -> str | None:
    with sessions() as session:
        turn = session.get(SweeperTurn, sweeper.SWEEPS)
        return None if turn is None else turn.holder


def hand_the_turn_to(sessions: sessionmaker[Session], worker: procs.Proc) -> None:
    """Make `worker` the fleet's worker sender (the session's worker may hold the turn): name
    it the holder for a few seconds, then see that it renews the turn itself."""
    with transaction(sessions) as session:
        session.query(SweeperTurn).filter_by(name=sweeper.SWEEPS).delete()
        assert sweeper.take_turn(session, name_of(worker), tick_seconds=2.0)
    with sessions() as session:
        given = session.get(SweeperTurn, sweeper.SWEEPS)
        assert given is not None
        handed_until = given.expires_at

    def renewed() -> bool:
        with sessions() as session:
            turn = session.get(SweeperTurn, sweeper.SWEEPS)
            return turn is not None and turn.expires_at != handed_until

    procs.wait_until(renewed, 15, "the outage worker renewing the sweeps' turn")
    assert turn_holder(sessions) == name_of(worker)


def _first_receipts(receiver: Receiver) -> dict[str, tuple[str, dict[str, object]]]:
    firsts: dict[str, tuple[str, dict[str, object]]] = {}
    for got in receiver.received:
        firsts.setdefault(got.delivery, (got.event, got.json()))
    return firsts


def _wait_for_all(receiver: Receiver, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(_first_receipts(receiver)) < count and time.monotonic() < deadline:
        time.sleep(0.2)


def _check(receiver: Receiver, expected: list[tuple[str, str]]) -> None:
    assert all(got.signed_by(SECRET) for got in receiver.received)
    firsts = _first_receipts(receiver)
    arrived = sorted((event, str(body["job"]["id"])) for event, body in firsts.values())  # type: ignore[index]
    assert arrived == sorted(expected)  # each event once, by delivery id; none missing
    order: dict[str, list[str]] = defaultdict(list)
    for got in receiver.received:
        order[got.json()["job"]["id"]].append(got.event)
    for job_id, seen in order.items():
        if "job.warning" in seen:  # the outcome went first, every time
            assert seen.index("job.warning") > 0, (job_id, seen)
    repeats = len(receiver.received) - len(firsts)
    print(f"\n{len(expected)} events, {len(firsts)} delivery ids, {repeats} repeated receipts")


def _print_log(api_url: str, hook_id: str, headers: dict[str, str]) -> None:
    log = httpx.get(f"{api_url}/v1/webhooks/{hook_id}/deliveries?limit=1000", headers=headers)
    deliveries = log.json()["data"]
    assert {d["status"] for d in deliveries} == {"delivered"}
    retried = [d for d in deliveries if d["attempts"] > 1]
    attempts = sorted(d["attempts"] for d in deliveries)
    print(f"deliveries {len(deliveries)}, retried {len(retried)}, most attempts {attempts[-1]}")
    if retried:  # one delivery through the outage: its first and last tries
        shown = retried[-1]
        shown["attempt_log"] = [*shown["attempt_log"][:2], "...", *shown["attempt_log"][-2:]]
        print(json.dumps(shown, indent=1))
