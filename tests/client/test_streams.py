"""Following a job's live stream on the light side: the event-stream parser, and wait()
reading a real embedded server's stream (SQLite) instead of polling it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from archsearch.client import ArchsearchClient
from archsearch.client.streams import ServerEvent, parse_events
from archsearch.schemas.jobs import JobPublic
from tests.embedded import start_embedded
from tests.service import procs
from tests.service.sse import points, read_stream

JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 15}}


def test_parse_events_reads_what_the_server_sends() -> None:
    body = (
        "id: 0-0\nevent: status\ndata: {}\n\n"
        ": ping\n\n"
        "event: progress\ndata: {\n"  # no id: the last one carries over
        'data: "step": 1}\n\n'
        "id: 4-2\nevent:end\ndata:x\n\n"
        "event: partial\ndata: never finished"
    )
    events = list(parse_events(body.split("\n")))
    assert events == [
        ServerEvent("status", "{}", "0-0"),
        None,  # the keep-alive
        ServerEvent("progress", '{\n"step": 1}', "0-0"),
        ServerEvent("end", "x", "4-2"),
    ]


@pytest.mark.slow
def test_wait_follows_the_stream_of_an_embedded_server(tmp_path: Path) -> None:
    port = procs.free_port()
    server = start_embedded(tmp_path / "home", port, tmp_path)
    url, requests, updates = f"http://127.0.0.1:{port}", [], list[JobPublic]()
    try:
        with ArchsearchClient(url) as client:
            client.http.event_hooks["request"].append(lambda r: requests.append(r.url.path))
            job_id = client.submit(JOB).id
            final = client.wait(job_id, timeout=300, on_update=updates.append)
            stream = read_stream(f"{url}/v1/jobs/{job_id}/stream")
            stored = client.metrics(job_id)
    finally:
        server.stop()
    assert final.status == "succeeded", final.error
    # One stream, no polling of the job.
    assert requests.count(f"/v1/jobs/{job_id}/stream") == 1
    assert f"/v1/jobs/{job_id}" not in requests
    progress = [u.progress for u in updates]
    assert progress == sorted(progress) and progress[-1] == 1.0
    assert any(0.0 < p < 1.0 for p in progress), "no progress was followed while it ran"
    assert updates[-1] == final
    # The same stream read again on SQLite: every point once, ending with the job.
    assert stream[0].event == "status" and stream[-1].event == "end"
    assert json.loads(stream[-1].data)["status"] == "succeeded"
    expected = sorted((name, p.step, p.value) for name, ps in stored.items() for p in ps)
    assert sorted(points(stream)) == expected


def test_a_server_without_streams_is_polled() -> None:
    """An older server (here a stand-in on a real socket) answers 404 for the stream of a
    job it has: wait() polls the job instead."""
    job = JobPublic.model_validate(_job_json("succeeded"))

    class OlderServer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server name
            missing = self.path.endswith("/stream")
            body = b'{"error":"not_found","detail":"no route"}' if missing else job_bytes
            self.send_response(404 if missing else 200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    job_bytes = job.model_dump_json().encode()
    server = ThreadingHTTPServer(("127.0.0.1", 0), OlderServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with ArchsearchClient(f"http://127.0.0.1:{server.server_port}") as client:
            assert client.wait(job.id, poll=0.01, timeout=10) == job
    finally:
        server.shutdown()


def _job_json(status: str) -> dict[str, object]:
    return {
        "id": "6f2ccf80-9f2d-4cee-a144-cd02c7040b7b",
        "method": "train",
        "status": status,
        "label": None,
        "spec": {},
        "progress": 1.0,
        "step": 10,
        "total_steps": 10,
        "latest_metrics": {},
        "error": None,
        "attempts": 1,
        "cancel_requested": False,
        "worker": None,
        "created_at": "2026-11-22T12:00:00Z",
        "started_at": None,
        "finished_at": None,
        "updated_at": "2026-11-22T12:00:00Z",
        "owner_id": None,
        "team_id": None,
        "priority": 0,
        "device": "auto",
    }
