"""An upload sent with chunked transfer encoding (no Content-Length) is refused with 413 as
soon as it passes the limit while it streams, not after it was spooled whole, and leaves
nothing behind: no row, no file in the dataset store, no temporary file held open.

The client is a raw socket that sends the body in chunks and watches for the answer between
them, as a hostile client would; before the fix the server read all 64 MiB first.
"""

from __future__ import annotations

import json
import os
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlalchemy import select as sql_select
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.domain.datasets.tables import UploadedDataset
from archsearch.schemas.errors import ErrorBody
from tests.service import procs

pytestmark = pytest.mark.service

LIMIT = 1 << 20
TOTAL = 64 << 20  # what the client would send if nobody stopped it
CHUNK = 64 << 10
BOUNDARY = "archsearch-test-boundary"


@pytest.fixture(scope="module")
def small_limit_api(
    service_env: dict[str, str], log_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[int, Path, procs.Proc]]:
    artifacts = tmp_path_factory.mktemp("small-limit-artifacts")
    env = {
        **service_env,
        "ARCHSEARCH_UPLOAD_MAX_BYTES": str(LIMIT),
        "ARCHSEARCH_ARTIFACT_ROOT": str(artifacts),
    }
    port = procs.free_port()
    proc = procs.start("api-small-limit", ["api", "--port", str(port)], env, log_dir)
    procs.wait_http(f"http://127.0.0.1:{port}/healthz", proc)
    yield port, artifacts, proc
    proc.stop()


def _head(port: int, token: str) -> bytes:
    return (
        "POST /v1/datasets HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {token}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()


def _body_chunks() -> Iterator[bytes]:
    yield (
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="file"; filename="big.csv"\r\n'
        "Content-Type: text/csv\r\n\r\na,label\r\n"
    ).encode()
    row = b"1,0\r\n" * (CHUNK // 5)
    for _ in range(TOTAL // len(row)):
        yield row
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


def _send_until_answered(port: int, token: str) -> tuple[int, bytes]:
    """Send the chunked upload until the server answers; (body bytes sent, the answer)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(_head(port, token))
    sock.setblocking(False)
    sent, pending, chunks, finished = 0, b"", _body_chunks(), False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        still_sending = [sock] if pending or not finished else []
        readable, writable, _ = select.select([sock], still_sending, [], 5)
        if readable:
            break
        if writable:
            if not pending:
                data = next(chunks, None)
                if data is None:  # all sent: the last chunk, then only wait for the answer
                    pending, data, finished = b"0\r\n\r\n", b"", True
                else:
                    pending = b"%x\r\n%s\r\n" % (len(data), data)
                sent += len(data)
            pending = pending[sock.send(pending) :]
    sock.setblocking(True)
    sock.settimeout(10)
    answer = b""
    while not answer.endswith(b"}"):
        try:
            piece = sock.recv(65536)
        except OSError:
            break
        if not piece:
            break
        answer += piece
    sock.close()
    return sent, answer


def _open_temporary_files(pid: int) -> list[str]:
    fds = Path(f"/proc/{pid}/fd")
    targets = [os.readlink(fd) for fd in fds.iterdir() if fd.is_symlink()]
    return [t for t in targets if "(deleted)" in t]


def test_chunked_upload_stops_at_the_limit_and_leaves_nothing(
    small_limit_api: tuple[int, Path, procs.Proc],
    token: str,
    sessions: sessionmaker[Session],
) -> None:
    port, artifacts, proc = small_limit_api
    with sessions() as session:
        before = session.scalar(sql_select(func.count()).select_from(UploadedDataset))

    sent, answer = _send_until_answered(port, token)

    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), answer[:300]
    error = ErrorBody.model_validate(json.loads(body))
    assert error.error == "too_large" and "UPLOAD_MAX_BYTES" in str(error.detail)
    # Refused while it streamed: the client was stopped long before its 64 MiB were out
    # (the slack is what the kernel's socket buffers hold in flight).
    assert sent < TOTAL // 4, sent
    with sessions() as session:
        assert session.scalar(sql_select(func.count()).select_from(UploadedDataset)) == before
    incoming = artifacts / "datasets" / ".incoming"
    assert not incoming.exists() or not any(incoming.iterdir())
    time.sleep(0.5)
    assert _open_temporary_files(proc.popen.pid) == []
