"""The client's retries, against a real HTTP server on a free port that answers from a
script: idempotent reads are retried a bounded number of times, a submit never is."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from archsearch.client import ApiError, ArchsearchClient, ServerUnreachable
from archsearch.schemas.jobs import JobPublic
from tests.service.procs import free_port

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
JOB = JobPublic(
    id=uuid.uuid4(),
    method="train",
    status="running",
    label=None,
    spec={},
    progress=0.5,
    step=1,
    total_steps=2,
    latest_metrics={},
    error=None,
    attempts=1,
    cancel_requested=False,
    worker=None,
    created_at=NOW,
    started_at=NOW,
    finished_at=None,
    updated_at=NOW,
    owner_id=None,
    team_id=None,
    priority=0,
    device="cpu",
)


class Scripted(ThreadingHTTPServer):
    """Answers each request with the next status of `statuses` (then 200 with the job)."""

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.statuses: list[int] = []
        self.seen: list[str] = []


class Handler(BaseHTTPRequestHandler):
    server: Scripted

    def answer(self) -> None:
        self.server.seen.append(self.command)
        self.rfile.read(int(self.headers.get("content-length") or 0))
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        body = (
            JOB.model_dump_json() if status < 400 else '{"error": "unavailable", "detail": "later"}'
        ).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = answer

    def log_message(self, *_: object) -> None:  # keep the test output clean
        pass


@pytest.fixture()
def server() -> Iterator[Scripted]:
    scripted = Scripted(free_port())
    thread = threading.Thread(target=scripted.serve_forever, daemon=True)
    thread.start()
    yield scripted
    scripted.shutdown()
    scripted.server_close()


def client_of(server: Scripted, retries: int = 3) -> ArchsearchClient:
    return ArchsearchClient(f"http://127.0.0.1:{server.server_port}", retries=retries)


def test_a_read_is_retried_through_bad_gateways(server: Scripted) -> None:
    server.statuses = [503, 502, 504]
    with client_of(server) as client:
        job = client.get_job(JOB.id)
    assert job == JOB and isinstance(job, JobPublic)
    assert server.seen == ["GET"] * 4


def test_retries_are_bounded(server: Scripted) -> None:
    server.statuses = [503] * 10
    with client_of(server, retries=2) as client, pytest.raises(ApiError) as caught:
        client.get_job(JOB.id)
    assert caught.value.status == 503 and caught.value.detail == "later"
    assert server.seen == ["GET"] * 3


def test_a_submit_is_never_repeated(server: Scripted) -> None:
    server.statuses = [503]
    with client_of(server) as client, pytest.raises(ApiError) as caught:
        client.submit({"method": "train", "dataset": {"name": "digits"}})
    assert caught.value.status == 503
    assert server.seen == ["POST"]


def test_no_server_is_server_unreachable() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with ArchsearchClient(url, retries=1) as client, pytest.raises(ServerUnreachable) as caught:
        client.list_jobs()
    assert str(caught.value) == f"no archsearch server at {url}: start one with `archsearch serve`"


def test_wait_rides_out_an_unavailable_server(server: Scripted) -> None:
    # More 503s than one read retries: wait() itself keeps polling, then sees the job.
    server.statuses = [503] * 6
    seen = []
    with client_of(server, retries=1) as client, pytest.raises(TimeoutError):
        client.wait(JOB.id, poll=0.01, timeout=1.5, on_update=seen.append)
    assert seen and all(job == JOB for job in seen)
    assert len(server.seen) > 6
