"""Connection benchmark: do plain HTTP clients polling `GET /v1/jobs/{id}` on an embedded
`archsearch serve` that runs jobs ever see `Connection reset by peer`?

Each configuration starts its own `archsearch serve` (its own data home, jobs running on its
runner threads) and `--threads` plain clients: `http.client` on one kept-alive connection
each, polling one job with a random pause of 0 to `--idle-max` seconds between requests.
Every failed request is counted by kind (reset, closed without answer, other). The
configurations run one after the other, then once more in reverse order (interleaved), with
the load average printed beside each:

- `default`: the server's keep-alive (75 s), pauses of up to `--idle-max` seconds.
- `short keep-alive, plain`: the server's keep-alive set to `--short-keep-alive` (2 s) and
  pauses around it: the race the server's long default exists to avoid (the server closes
  an idle connection as the client sends on it).
- `short keep-alive, careful`: the same server, clients that open a new connection when
  theirs was idle longer than the server's keep-alive less a second, and retry a GET once
  when a reused connection fails (what httpx, requests/urllib3 and the archsearch client do).

Target: 0 failed requests under `default` and under `careful`.

    python bench/connections.py [--threads 8] [--seconds 30] [--idle-max 3]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUSY_JOB = {"method": "train", "dataset": {"name": "digits"}, "training": {"epochs": 400}}


@dataclass
class Server:
    port: int
    process: subprocess.Popen[bytes]
    home: Path
    keep_alive: float

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.home, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(keep_alive: float | None) -> Server:
    home, port = Path(tempfile.mkdtemp(prefix="archsearch-conn-")), free_port()
    env = {**os.environ, "ARCHSEARCH_HOME": str(home), "PYTHONPATH": str(REPO)}
    for name in ("ARCHSEARCH_DATABASE_URL", "ARCHSEARCH_BROKER_URL", "ARCHSEARCH_ARTIFACT_ROOT"):
        env.pop(name, None)
    if keep_alive is not None:
        env["ARCHSEARCH_KEEP_ALIVE_SECONDS"] = str(keep_alive)
    log = open(home / "serve.log", "wb")  # noqa: SIM115 - the process writes it until stop
    process = subprocess.Popen(
        [sys.executable, "-m", "archsearch.cli.main", "serve", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = Server(port, process, home, keep_alive or 75.0)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError((home / "serve.log").read_text()[-3000:])
        try:
            if request(server, "GET", "/readyz")[0] == 200:
                return server
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError("serve did not become ready")


def request(server: Server, method: str, path: str, body: object = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if payload else {}
        connection.request(method, path, body=payload, headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


@dataclass
class Tally:
    ok: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    retried: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, ok: int, failures: Counter[str], retried: int) -> None:
        with self.lock:
            self.ok += ok
            self.failures.update(failures)
            self.retried += retried


def failure_kind(exc: BaseException) -> str:
    if isinstance(exc, ConnectionResetError):
        return "reset"
    if isinstance(exc, http.client.RemoteDisconnected | BrokenPipeError):
        return "closed"
    return type(exc).__name__


class Poller:
    """One client thread: one kept-alive connection, one job polled until the deadline."""

    def __init__(self, server: Server, path: str, idle_max: float, careful: bool) -> None:
        self.server, self.path, self.idle_max, self.careful = server, path, idle_max, careful
        self.connection: http.client.HTTPConnection | None = None
        self.last_used = 0.0
        self.ok, self.failures, self.retried = 0, Counter[str](), 0

    def _fresh(self) -> http.client.HTTPConnection:
        if self.connection is not None:
            self.connection.close()
        self.connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        return self.connection

    def _get(self, connection: http.client.HTTPConnection) -> None:
        connection.request("GET", self.path)
        answer = connection.getresponse()
        answer.read()
        if answer.status != 200:
            raise RuntimeError(f"status {answer.status}")

    def poll_once(self) -> None:
        stale = time.monotonic() - self.last_used > self.server.keep_alive - 1
        connection = self.connection
        if connection is None or (self.careful and stale):
            connection = self._fresh()
        try:
            self._get(connection)
        except (OSError, http.client.HTTPException) as exc:
            if not self.careful:
                self.failures[failure_kind(exc)] += 1
                self._fresh()
                return
            self.retried += 1  # a reused connection failed: a GET is safe to send again
            self._get(self._fresh())
        self.ok += 1
        self.last_used = time.monotonic()

    def run(self, deadline: float, tally: Tally) -> None:
        while time.monotonic() < deadline:
            try:
                self.poll_once()
            except (OSError, http.client.HTTPException, RuntimeError) as exc:
                self.failures[failure_kind(exc)] += 1
                self._fresh()
            time.sleep(random.uniform(0, self.idle_max))
        tally.add(self.ok, self.failures, self.retried)


def submit_jobs(server: Server, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        status, body = request(server, "POST", "/v1/jobs", BUSY_JOB)
        assert status == 201, body
        ids.append(json.loads(body)["id"])
    return ids


def run_config(server: Server, args: argparse.Namespace, idle_max: float, careful: bool) -> Tally:
    job_ids = submit_jobs(server, args.jobs)
    tally = Tally()
    deadline = time.monotonic() + args.seconds
    threads = [
        threading.Thread(
            target=Poller(server, f"/v1/jobs/{job_ids[i % len(job_ids)]}", idle_max, careful).run,
            args=(deadline, tally),
        )
        for i in range(args.threads)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for job_id in job_ids:
        request(server, "POST", f"/v1/jobs/{job_id}/cancel")
    return tally


def report(name: str, tally: Tally, load: tuple[float, float, float]) -> None:
    failures = ", ".join(f"{kind} {n}" for kind, n in sorted(tally.failures.items())) or "none"
    print(
        f"{name:<28} {tally.ok:>7} answered   failed: {failures:<24} "
        f"retried on a new connection: {tally.retried:<4} load {load[0]:.1f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--jobs", type=int, default=2, help="jobs running while polled")
    parser.add_argument("--idle-max", type=float, default=3.0)
    parser.add_argument("--short-keep-alive", type=float, default=2.0)
    args = parser.parse_args()
    short = args.short_keep_alive
    configs = [
        ("default", None, args.idle_max, False),
        ("short keep-alive, plain", short, 2 * short, False),
        ("short keep-alive, careful", short, 2 * short, True),
    ]
    print(f"{args.threads} plain http.client threads, {args.seconds:.0f} s per configuration")
    for name, keep_alive, idle_max, careful in configs + configs[::-1]:
        server = start_server(keep_alive)
        try:
            tally = run_config(server, args, idle_max, careful)
        finally:
            server.stop()
        report(name, tally, os.getloadavg())


if __name__ == "__main__":
    main()
