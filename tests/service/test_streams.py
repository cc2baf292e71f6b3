"""Live streams (Server-Sent Events) against the real API and worker processes: a job's
stream carries every metric point and event once, resumes after Last-Event-ID with no gap
and no duplicate (also across a SIGKILLed worker), stays inside the caller's team, and the
jobs stream sees a job submitted, started and finished."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from archsearch.api.live.streaming import RECENT_METRICS
from archsearch.client import ArchsearchClient
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.platform.db import transaction
from tests.conftest import SUBSET_TRAIN
from tests.service import procs
from tests.service.conftest import Accounts, start_worker
from tests.service.sse import StreamReader, of_kind, points, read_stream

pytestmark = pytest.mark.service

SMALL_JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 3}}
EPOCHS = 12  # a point per epoch, each stored before its checkpoint: long enough to kill mid-run
RESUMABLE_JOB = {
    "method": "train",
    "dataset": {"name": "mnist", "train_subset": SUBSET_TRAIN},
    "training": {"epochs": EPOCHS, "batch_size": 16},  # ~0.5 s an epoch: 250 steps
}


def stored_points(client: ArchsearchClient, job_id: uuid.UUID) -> list[tuple[str, int, float]]:
    series = client.metrics(job_id)
    return sorted((name, p.step, p.value) for name, ps in series.items() for p in ps)


def by_kind(events: list[Any], *kinds: str) -> dict[str, list[str]]:
    return {kind: [e.data for e in events if e.event == kind] for kind in kinds}


def test_a_stream_sends_everything_once_and_resumes_after_its_last_event_id(
    api_url: str, client: ArchsearchClient, auth_headers: dict[str, str]
) -> None:
    job = client.submit(SMALL_JOB)
    url = f"{api_url}/v1/jobs/{job.id}/stream"
    full = read_stream(url, auth_headers)

    assert full[0].event == "status" and full[-1].event == "end"
    assert json.loads(full[-1].data)["status"] == "succeeded"
    assert sorted(points(full)) == stored_points(client, job.id)  # every point, once
    timeline = [(e.to_status, e.reason) for e in client.events(job.id)]
    assert [(e["to_status"], e["reason"]) for e in of_kind(full, "event")] == timeline
    assert [e.id for e in full] == sorted((e.id for e in full), key=_position)  # never back

    middle = [e for e in full if e.event == "metric"][len(points(full)) // 2]
    after = full[full.index(middle) + 1 :]
    expected = by_kind(after, "metric", "event")
    resumed = read_stream(url, {**auth_headers, "Last-Event-ID": middle.id or ""})
    assert resumed[0].event == "status" and resumed[-1].event == "end"
    assert by_kind(resumed, "metric", "event") == expected
    # The query parameter (EventSource's first connect) does the same; a header (its
    # reconnects) wins over it.
    by_query = read_stream(f"{url}?last_event_id={middle.id}", auth_headers)
    assert by_kind(by_query, "metric", "event") == expected
    both = read_stream(f"{url}?last_event_id=0-0", {**auth_headers, "Last-Event-ID": middle.id})
    assert by_kind(both, "metric", "event") == expected


def _position(event_id: str | None) -> tuple[int, int]:
    metric_seq, event_id_part = (event_id or "0-0").split("-")
    return int(metric_seq), int(event_id_part)


def test_a_bad_last_event_id_is_a_422_naming_it(
    api_url: str, client: ArchsearchClient, auth_headers: dict[str, str]
) -> None:
    job = client.submit(SMALL_JOB)
    url = f"{api_url}/v1/jobs/{job.id}/stream"
    response = httpx.get(url, params={"last_event_id": "12"}, headers=auth_headers)
    assert response.status_code == 422
    assert response.json()["detail"][0]["field"] == "query.last_event_id"
    response = httpx.get(url, headers={**auth_headers, "Last-Event-ID": "9" * 19 + "-1"})
    assert response.status_code == 422 and response.json()["error"] == "invalid_cursor"
    assert "last_event_id" in response.json()["detail"]
    client.wait(job.id, timeout=120)


def test_another_teams_job_stream_is_a_404_and_the_jobs_stream_hides_it(
    api_url: str, worker: procs.Proc, accounts: Accounts
) -> None:
    alice = {"Authorization": f"Bearer {accounts.tokens['alice']}"}
    mine_stream = StreamReader(f"{api_url}/v1/jobs/stream", alice)
    mine_stream.start()
    assert mine_stream.opened.wait(10) and mine_stream.status == 200
    with ArchsearchClient(api_url, token=accounts.tokens["carol"]) as carol:
        theirs = carol.submit(SMALL_JOB)
        response = httpx.get(f"{api_url}/v1/jobs/{theirs.id}/stream", headers=alice)
        assert response.status_code == 404
        assert response.headers["content-type"] == "application/json"
        assert response.json() == {"error": "not_found", "detail": f"no job {theirs.id}"}
        carol.wait(theirs.id, timeout=120)
    time.sleep(1.0)  # a few ticks of the poller after the job ended
    mine_stream.close()
    assert str(theirs.id) not in {e["id"] for e in of_kind(mine_stream.events, "job")}


def test_the_jobs_stream_sees_jobs_submitted_started_and_finished(
    api_url: str, client: ArchsearchClient, auth_headers: dict[str, str]
) -> None:
    mine: list[str] = []

    def last_one_done(event: Any) -> bool:
        data = json.loads(event.data)
        return len(mine) == 2 and data["id"] == mine[1] and data["status"] == "succeeded"

    reader = StreamReader(f"{api_url}/v1/jobs/stream?method=train", auth_headers, last_one_done)
    reader.start()
    assert reader.opened.wait(10) and reader.status == 200
    # No worker offers a GPU: this one waits (as submitted) until it is cancelled.
    waiting = client.submit({**SMALL_JOB, "resources": {"device": "cuda"}})
    mine.append(str(waiting.id))
    time.sleep(1.0)
    client.cancel(waiting.id)
    mine.append(str(client.submit(SMALL_JOB).id))
    events = of_kind(reader.finish(120), "job")

    def statuses(job_id: str) -> list[str]:
        return [e["status"] for e in events if e["id"] == job_id]

    assert statuses(mine[0]) == ["queued", "cancelled"]
    # A job claimed within one tick of its submit may first show as running.
    ran = statuses(mine[1])
    assert ran[0] in ("queued", "running") and ran[-1] == "succeeded" and "running" in ran
    assert ran == sorted(ran, key=["queued", "running", "succeeded"].index)


@pytest.mark.slow
def test_no_point_is_lost_or_sent_twice_across_a_worker_kill(
    api_url: str,
    worker: procs.Proc,
    service_env: dict[str, str],
    log_dir: Path,
    sessions: sessionmaker[Session],
    token: str,
    auth_headers: dict[str, str],
) -> None:
    worker.stop()  # the doomed worker gets the job
    doomed = start_worker(service_env, log_dir, "doomed")
    with ArchsearchClient(api_url, token=token) as client:
        job_id = client.submit(RESUMABLE_JOB).id
        url = f"{api_url}/v1/jobs/{job_id}/stream"
        through = StreamReader(url, auth_headers)  # one connection across the kill
        through.start()
        procs.wait_until(
            lambda: 2 <= len(client.metrics(job_id).get("test_accuracy", [])) < EPOCHS - 1,
            300,
            "the job never checkpointed two epochs",
        )
        doomed.kill()
        # What a resumed attempt does with the points between its checkpoint and the
        # kill: report them again (same values), which `record_metrics` upserts.
        with transaction(sessions) as session:
            again = [(step, name, value) for name, step, value in stored_points(client, job_id)]
            repository.record_metrics(session, job_id, again)
        rescuer = start_worker(service_env, log_dir, "rescuer")  # its reaper requeues the job
        try:
            early = read_until_requeued(url, auth_headers)
            events = through.finish(240)
            later = read_stream(url, {**auth_headers, "Last-Event-ID": early[-1].id or ""})
        finally:
            rescuer.stop()
            worker.replace_with(start_worker(service_env, log_dir, "worker"))
        stored = stored_points(client, job_id)

    reasons = [e["reason"] for e in of_kind(events, "event")]
    assert any("resuming from checkpoint" in r for r in reasons), reasons
    assert json.loads(events[-1].data)["status"] == "succeeded"
    assert sorted(points(events)) == stored  # none lost, none twice
    assert sorted(points(early) + points(later)) == stored  # resumed: the same
    assert of_kind(early, "event") + of_kind(later, "event") == of_kind(events, "event")


def read_until_requeued(url: str, headers: dict[str, str]) -> list[Any]:
    """A second client that reads until the lapsed lease requeued the job, then leaves
    (the rest is read by resuming after its last event id)."""
    reader = StreamReader(url, headers, lambda e: e.event == "event" and "lease" in e.data)
    reader.start()
    return reader.finish(120)


def test_a_stopping_api_closes_its_open_streams(
    service_env: dict[str, str],
    log_dir: Path,
    client: ArchsearchClient,
    auth_headers: dict[str, str],
) -> None:
    """uvicorn waits for open responses before it stops: the streams must end themselves,
    or a deploy would hang on a stream of a job that waits for hours."""
    port = procs.free_port()
    api = procs.start("api-stopping", ["api", "--port", str(port)], service_env, log_dir)
    procs.wait_http(f"http://127.0.0.1:{port}/healthz", api)
    waiting = client.submit({**SMALL_JOB, "resources": {"device": "cuda"}})  # no GPU worker
    try:
        base = f"http://127.0.0.1:{port}/v1/jobs"
        readers = [StreamReader(f"{base}/{waiting.id}/stream", auth_headers)]
        readers.append(StreamReader(f"{base}/stream", auth_headers))
        for reader in readers:
            reader.start()
            assert reader.opened.wait(10) and reader.status == 200
        started = time.monotonic()
        api.stop()  # SIGTERM, then SIGKILL after 15 s
        assert time.monotonic() - started < 5, api.log()
        for reader in readers:
            reader.finish(5)
    finally:
        api.kill()
        client.cancel(waiting.id)


def test_a_late_client_gets_the_state_and_a_recent_window_then_history_on_demand(
    api_url: str,
    client: ArchsearchClient,
    sessions: sessionmaker[Session],
    auth_headers: dict[str, str],
) -> None:
    """A job with a long history (no worker takes it: it asks for a CUDA device): a new
    client first gets `status`, then only the last RECENT_METRICS points, then live points;
    `history=all` replays every point; a resumed client gets what follows its position."""
    job = client.submit({**SMALL_JOB, "resources": {"device": "cuda"}})
    total = RECENT_METRICS + 300
    with transaction(sessions) as session:
        history = [(step, "loss", 1.0 / step) for step in range(1, total + 1)]
        repository.record_metrics(session, job.id, history)
    url = f"{api_url}/v1/jobs/{job.id}/stream"
    late = StreamReader(
        url, auth_headers, lambda e: e.event == "metric" and '"step":9999' in e.data
    )
    late.start()
    procs.wait_until(
        lambda: len(points(late.events)) >= RECENT_METRICS, 60, "no recent window came"
    )
    with transaction(sessions) as session:
        repository.record_metrics(session, job.id, [(9999, "loss", 0.5)])
    events = late.finish(60)
    assert events[0].event == "status" and json.loads(events[0].data)["status"] == "queued"
    window = [step for _, step, _ in points(events)]
    assert window == [*range(total - RECENT_METRICS + 1, total + 1), 9999]  # recent, then live

    everything = StreamReader(f"{url}?history=all", auth_headers, lambda e: '"step":9999' in e.data)
    everything.start()
    assert [step for _, step, _ in points(everything.finish(60))] == [*range(1, total + 1), 9999]
    # Resuming wins over the window: what follows the position, however much.
    first_id = events[1].id or ""
    resumed = StreamReader(
        url, {**auth_headers, "Last-Event-ID": first_id}, lambda e: "9999" in e.data
    )
    resumed.start()
    assert [step for _, step, _ in points(resumed.finish(60))] == window[1:]
