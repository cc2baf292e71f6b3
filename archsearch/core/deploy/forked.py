"""A step run in a short-lived child process forked for it: a job's ONNX export (for its
memory), a study's second chart (for a second core).

What the ONNX step maps and allocates (the TorchScript exporter, onnx's protobufs,
onnxruntime's session and the pages of its library: some 40-50 MB on the 235k-parameter MNIST
MLP) would otherwise stay in the worker's pool process for the rest of its life and set its
peak resident memory (`bench/worker_memory.py`); in a child it dies with the child.

Fork, not a fresh interpreter: the child starts with the parent's model and imported modules
for nothing, where a spawned one would import torch again (0.7 s) and need the model pickled
to it. The price: the child starts cold and copies the pages it writes, so that MLP's ONNX
step costs 60-70 ms of CPU in the child (8,000 page faults, the exporter's first call) and
the fork 7 ms, against 20 ms warm in the job's own process (`bench/engine.py` counts it).

What forking a threaded process asks of the child:
- torch's OpenMP pool (GNU libgomp) does not survive a fork: a child that enters a parallel
  region after its parent used two threads or more hangs for ever. The child runs torch on one
  thread; a step that wants more threads for another runtime is told the parent's count.
- It logs nothing: a handler of the parent (the job's log writes to the database) would write
  on connections the parent owns. It ends by `os._exit`: no exit handler of the parent runs,
  no inherited buffer is flushed twice.
- It ignores SIGTERM and SIGINT: a stop meant for the worker reaches its whole process group
  (Ctrl-C, `kill` of the group, systemd), and the child's step is a fraction of a second; the
  parent then stops the job at its next checkpoint, as it would have. On Linux it is killed
  when its parent dies (`PR_SET_PDEATHSIG`): a worker killed outright leaves no child behind.

The parent waits for the result while polling `should_stop`, and kills the child when the job
is cancelled, preempted, or the step outlives its time limit: a job never hangs on its child.
The result comes back pickled through a pipe (between a process and its own fork, never to
or from a user). `run_forked` waits at once; `start_forked` lets the parent work meanwhile
and wait later (`ForkedStep.result`), or stop the child (`ForkedStep.stop`).
"""

from __future__ import annotations

import ctypes
import logging
import os
import pickle
import select
import signal
import time
import warnings
from collections.abc import Callable
from typing import Generic, NoReturn, TypeVar, cast

import torch

from archsearch.core.errors import ArchsearchError, JobCancelled

T = TypeVar("T")
POLL_S = 0.25  # how often the waiting parent asks whether the job should stop
READ_BYTES = 1 << 20
PR_SET_PDEATHSIG = 1  # prctl(2)


# Python 3.12+ warns at every fork of a threaded process; this module's children run one step
# with the precautions above and end by `_exit`. Scoped to forks called from here.
warnings.filterwarnings(
    "ignore", r"This process .* is multi-threaded", DeprecationWarning, module=__name__
)


class ForkedStepFailed(ArchsearchError):
    """The child process of a step died, raised, or outlived its time limit."""


CAN_FORK = hasattr(os, "fork")


def never() -> bool:
    """A `should_stop` for a step nothing cancels."""
    return False


def run_forked(
    step: Callable[[], T], should_stop: Callable[[], bool], timeout_s: float, what: str
) -> T:
    """`step()` computed in a child process forked for it (in this process where there is no
    `fork`). Raises `JobCancelled` when `should_stop()` turns true while it runs, and
    `ForkedStepFailed` (naming `what`) when the child dies, raises or takes over `timeout_s`."""
    if not CAN_FORK:
        return step()
    return start_forked(step, what).result(should_stop, timeout_s)


def start_forked(step: Callable[[], T], what: str) -> ForkedStep[T]:
    """`step()` started in a child process forked for it; this process goes on meanwhile.
    Only where `CAN_FORK`."""
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _run_child(step, write_fd, parent)
    os.close(write_fd)
    return ForkedStep(pid, read_fd, what)


class ForkedStep(Generic[T]):
    """A step running in its child process (`start_forked`): wait for its result once, or stop
    it. Either reaps the child."""

    def __init__(self, pid: int, read_fd: int, what: str) -> None:
        self.pid, self.what = pid, what
        self._read_fd: int | None = read_fd
        self._started = time.monotonic()  # the time limit counts from the fork

    def result(self, should_stop: Callable[[], bool] = never, timeout_s: float = 600.0) -> T:
        """The step's result. Raises `JobCancelled` when `should_stop()` turns true first, and
        `ForkedStepFailed` when the child dies, raises, or runs past `timeout_s` after its
        start; the child is gone when this returns or raises."""
        assert self._read_fd is not None, "a forked step's result is read once"
        deadline = self._started + timeout_s
        try:
            payload = _read_result(self._read_fd, should_stop, deadline, self.what)
        except BaseException:
            os.kill(self.pid, signal.SIGKILL)
            raise
        finally:
            status = self._reap()
        return cast(T, _result(payload, status, self.what))

    def stop(self) -> None:
        """Kill the child and reap it; nothing when its result was read already."""
        if self._read_fd is None:
            return
        os.kill(self.pid, signal.SIGKILL)
        self._reap()

    def _reap(self) -> int:
        assert self._read_fd is not None
        os.close(self._read_fd)
        self._read_fd = None
        _, status = os.waitpid(self.pid, 0)
        return status


def _run_child(step: Callable[[], object], write_fd: int, parent: int) -> NoReturn:
    code = 1
    try:
        _quiet_child(parent)
        payload = pickle.dumps(("ok", step()))
        code = 0
    except BaseException as exc:  # anything: the parent reports it, the child ends here
        payload = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
    try:
        with os.fdopen(write_fd, "wb") as out:
            out.write(payload)
    finally:
        os._exit(code)


def _quiet_child(parent: int) -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)
    _die_with(parent)
    logging.disable(logging.CRITICAL)
    torch.set_num_threads(1)  # see the module docstring: libgomp's pool did not survive


def _die_with(parent: int) -> None:
    """SIGKILL this process when the thread that forked it ends (Linux; elsewhere nothing)."""
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux
        return
    if os.getppid() != parent:  # it died before the call: nobody waits for this result
        os._exit(1)


def _read_result(
    read_fd: int, should_stop: Callable[[], bool], deadline: float, what: str
) -> bytes:
    chunks: list[bytes] = []
    poller = select.poll()  # not `select.select`: a server's descriptors pass FD_SETSIZE
    poller.register(read_fd, select.POLLIN)
    while True:
        if poller.poll(POLL_S * 1000):
            chunk = os.read(read_fd, READ_BYTES)
            if not chunk:  # the child closed its end: it is done, or dead
                return b"".join(chunks)
            chunks.append(chunk)
        elif should_stop():
            raise JobCancelled(f"cancelled during {what}")
        elif time.monotonic() > deadline:
            raise ForkedStepFailed(f"{what} did not finish within its time limit; stopped")


def _result(payload: bytes, status: int, what: str) -> object:
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        hint = " (as the system's out-of-memory killer does)" if name == "SIGKILL" else ""
        raise ForkedStepFailed(f"the process of {what} was killed by {name}{hint}")
    try:
        outcome, value = pickle.loads(payload)
    except Exception as exc:  # an empty or cut result: the child ended before writing it
        code = os.WEXITSTATUS(status)
        message = f"the process of {what} ended (code {code}) without a result"
        raise ForkedStepFailed(message) from exc
    if outcome != "ok":
        raise ForkedStepFailed(f"{what} failed in its process: {value}")
    return value
