"""A deployment step in a forked child: its result comes back, and a child that dies, raises,
hangs or outlives its job never leaves the job waiting."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

from archsearch.core.deploy.forked import ForkedStepFailed, never, run_forked, start_forked
from archsearch.core.deploy.onnx import (
    export_onnx,
    onnx_artifact,
    onnx_max_abs_diff,
    ort_session,
    sparse_initializers,
)
from archsearch.core.errors import JobCancelled
from archsearch.core.models import Architecture, create_model
from archsearch.specs.model_configs import MLPConfig

SHAPE = (1, 8, 8)
ARCH = Architecture(MLPConfig(hidden=(16,)), SHAPE, 10)


def gone(pid: int) -> bool:
    """True once `pid` is neither running nor a zombie waiting to be reaped."""
    return not Path(f"/proc/{pid}").exists()


@pytest.fixture
def two_torch_threads() -> Iterator[None]:
    """torch on two threads whose OpenMP pool has run, as in a worker on two cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    a = torch.randn(512, 512)
    for _ in range(3):
        a @ a  # a parallel region: libgomp's threads now exist in this process
    yield
    torch.set_num_threads(before)


def test_the_step_runs_in_another_process_and_its_result_comes_back() -> None:
    pid, payload = run_forked(lambda: (os.getpid(), b"x" * 3_000_000), never, 60, "a step")
    assert pid != os.getpid()
    assert payload == b"x" * 3_000_000  # more than a pipe holds: read while it is written


@pytest.mark.usefixtures("two_torch_threads")
def test_torch_runs_in_the_child_after_the_parent_used_its_thread_pool() -> None:
    a = torch.randn(512, 512)
    product = run_forked(lambda: a @ a, never, 60, "a product")  # hung for ever on 2 threads
    torch.testing.assert_close(product, a @ a)


@pytest.mark.usefixtures("two_torch_threads")
def test_the_exported_file_and_its_check_are_those_computed_in_one_process() -> None:
    torch.manual_seed(0)
    model = create_model(ARCH).eval()
    x = torch.randn(16, *SHAPE)
    data, record = onnx_artifact(model, ARCH, x)
    in_process = sparse_initializers(export_onnx(model, SHAPE))
    assert data == in_process
    assert record["max_abs_diff"] == onnx_max_abs_diff(ort_session(in_process), model, x)
    assert set(record["latency"]) == {
        "batch_1_s",
        "batch_64_s",
        "batch_1_wall_s",
        "batch_64_wall_s",
    }


def test_a_killed_child_fails_the_step_with_the_signal() -> None:
    with pytest.raises(ForkedStepFailed, match="the process of a step was killed by SIGKILL"):
        run_forked(lambda: os.kill(os.getpid(), signal.SIGKILL), never, 60, "a step")


def test_an_error_in_the_child_is_reported_with_its_message() -> None:
    def fail() -> None:
        raise ValueError("no such layer")

    with pytest.raises(ForkedStepFailed, match="a step failed in its process: ValueError: no such"):
        run_forked(fail, never, 60, "a step")


def test_a_child_that_ends_without_a_result_says_so() -> None:
    with pytest.raises(ForkedStepFailed, match=r"ended \(code 3\) without a result"):
        run_forked(lambda: os._exit(3), never, 60, "a step")


def stopped_by_its_group() -> int:
    for signum in (signal.SIGTERM, signal.SIGINT):
        os.kill(os.getpid(), signum)  # as Ctrl-C or a kill of the worker's group reaches it
    return 42


def test_a_stop_sent_to_the_whole_process_group_lets_the_step_finish() -> None:
    """The parent stops the job at its next checkpoint; the child's step is not cut short."""
    assert run_forked(stopped_by_its_group, never, 60, "a step") == 42


def sleeper(pid_file: Path) -> None:
    pid_file.write_text(str(os.getpid()))
    time.sleep(600)


def child_pid(pid_file: Path) -> int:
    return int(pid_file.read_text())


def test_a_hung_child_is_killed_at_its_time_limit(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with pytest.raises(ForkedStepFailed, match="did not finish within its time limit"):
        run_forked(lambda: sleeper(pid_file), never, 1.0, "a step")
    assert gone(child_pid(pid_file)), "the child was killed and reaped"


def waits_for(path: Path) -> int:
    """The number written to `path`, once written: `write_text` creates the file before it
    writes, so an empty file is one still being written."""
    deadline = time.monotonic() + 60
    while not (path.exists() and path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return int(path.read_text())


def test_a_started_step_computes_while_its_parent_goes_on(tmp_path: Path) -> None:
    """The child's step can only end once the parent, after starting it, has written the
    file it waits for: the two ran at the same time."""
    signal_file = tmp_path / "go"
    step = start_forked(lambda: (os.getpid(), waits_for(signal_file)), "a step")
    signal_file.write_text("7")
    pid, value = step.result(timeout_s=60)
    assert (pid, value) == (step.pid, 7)
    assert pid != os.getpid()
    assert gone(pid)


def test_a_stopped_step_leaves_no_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    step = start_forked(lambda: sleeper(pid_file), "a step")
    waits_for(pid_file)
    step.stop()
    assert gone(step.pid)
    step.stop()  # stopping again (after the result was read, say) does nothing


def test_a_started_steps_time_limit_counts_from_its_start(tmp_path: Path) -> None:
    step = start_forked(lambda: sleeper(tmp_path / "pid"), "a step")
    time.sleep(0.3)
    with pytest.raises(ForkedStepFailed, match="did not finish within its time limit"):
        step.result(timeout_s=0.2)
    assert gone(step.pid)


def test_a_cancelled_job_kills_its_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with pytest.raises(JobCancelled):
        run_forked(lambda: sleeper(pid_file), pid_file.exists, 600, "a step")
    assert gone(child_pid(pid_file))


def test_a_step_forked_from_a_thread_other_than_the_main_one_runs() -> None:
    """An embedded runner's jobs run in threads of the server process."""
    results: list[object] = []
    thread = threading.Thread(target=lambda: results.append(run_forked(lambda: 42, never, 60, "")))
    thread.start()
    thread.join(60)
    assert results == [42]


class MisbehavesInAChild(nn.Module):
    """Computes as the MLP does, except in a process other than the one that built it,
    where its forward runs `misbehave` first (a kill, a sleep that never ends)."""

    def __init__(self, misbehave: Callable[[], object]) -> None:
        super().__init__()
        self.parent, self.misbehave = os.getpid(), misbehave
        self.linear = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if os.getpid() != self.parent:
            self.misbehave()
        return self.linear(x.flatten(1))


def killed() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_an_export_whose_process_is_killed_is_a_failed_export_saying_so() -> None:
    data, record = onnx_artifact(MisbehavesInAChild(killed), ARCH, torch.randn(4, *SHAPE))
    assert data is None
    assert record["exported"] is False
    assert "the ONNX export was killed by SIGKILL" in record["reason"]


def test_a_job_cancelled_during_its_export_ends_cancelled() -> None:
    with pytest.raises(JobCancelled, match="the ONNX export"):
        onnx_artifact(
            MisbehavesInAChild(lambda: time.sleep(600)),
            ARCH,
            torch.randn(4, *SHAPE),
            should_stop=lambda: True,
        )


def test_a_step_runs_in_a_process_holding_over_a_thousand_descriptors() -> None:
    """A server with many clients: its pipe's descriptor is past `select`'s FD_SETSIZE."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    most = hard if hard != resource.RLIM_INFINITY else max(soft, 1100)
    assert most >= 1100, "this process may not open 1100 descriptors: raise its hard limit"
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    null = os.open(os.devnull, os.O_RDONLY)
    held = [os.dup(null) for _ in range(1030)]
    try:
        assert run_forked(lambda: 42, never, 60, "a step") == 42
    finally:
        for fd in [*held, null]:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


ORPHANED = """
import os, time
from archsearch.core.deploy.forked import run_forked

def sleep_forever():
    print(os.getpid(), flush=True)
    time.sleep(600)

run_forked(sleep_forever, lambda: False, 600, "a step")
"""


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="Linux only (PR_SET_PDEATHSIG)")
def test_a_parent_killed_outright_leaves_no_child_behind(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", ORPHANED], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    for _ in range(300):  # the kernel kills it as its parent exits; polled, up to 30 s
        if not Path(f"/proc/{child}").exists() or "Z" in proc_state(child):
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists() or "Z" in proc_state(child)


def proc_state(pid: int) -> str:
    """The State line of /proc/<pid>/status ("" once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return ""
    return next(line for line in status.splitlines() if line.startswith("State:"))
