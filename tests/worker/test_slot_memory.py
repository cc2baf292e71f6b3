"""A slot's offer and memory cap, in a real forked process as a pool process is: what it
offers the claim, a CPU cap that refuses a large tensor and still lets small ones through,
and the message a job over its cap fails with. The end to end run (a real worker with two
slots) is `tests/service/test_slots.py`."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from multiprocessing.connection import Connection

import pytest
import torch

from archsearch.jobs.domain.jobs.offer import Offer
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.device import (
    cap_slot_memory,
    is_out_of_memory,
    local_offer,
    out_of_memory_message,
)

CAP_GB = 0.5


def test_a_cpu_slot_offers_its_share() -> None:
    offer = local_offer(Settings(worker_device="cpu", worker_slots=4))
    assert offer == Offer("cpu", None, 4) and offer.device_share == 0.25
    assert local_offer(Settings(worker_device="cpu")).device_share == 1.0


def test_slots_share_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    team = {"broker_url": "redis://127.0.0.1:6379/13"}
    one, four = Settings(**team), Settings(**team, worker_slots=4)  # type: ignore[arg-type]
    assert four.resolved_torch_threads == max(1, one.resolved_torch_threads // 4)


def _allocate_in_a_capped_slot(answer: Connection) -> None:
    try:
        answer.send(_capped_allocations())
    except BaseException as exc:  # the parent reports it, rather than waiting for an answer
        answer.send((None, repr(exc), 0))


def _capped_allocations() -> tuple[str | None, str, int]:
    settings = Settings(worker_device="cpu", worker_slots=2, worker_slot_memory_gb=CAP_GB)
    cap = cap_slot_memory(settings, local_offer(settings))
    refused = ""
    try:
        torch.ones(int(2 * CAP_GB * 2**30), dtype=torch.uint8)  # twice the cap
    except Exception as exc:
        refused = (
            out_of_memory_message(settings, torch.device("cpu"))
            if is_out_of_memory(exc)
            else repr(exc)
        )
    small = torch.ones(64 * 2**20, dtype=torch.uint8).numel()  # 64 MB: within the cap
    return cap, refused, small


def test_a_capped_cpu_slot_refuses_what_exceeds_its_cap() -> None:
    receive, send = multiprocessing.get_context("fork").Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(
        target=_allocate_in_a_capped_slot, args=(send,)
    )
    child.start()
    assert receive.poll(120), "the capped child did not answer"
    cap, refused, small = receive.recv()
    child.join(30)
    assert cap is not None and cap.startswith(f"{CAP_GB:g} GB beyond its warm")
    assert refused.startswith(f"the job ran out of the {CAP_GB:g} GB of memory its worker slot")
    assert "ARCHSEARCH_WORKER_SLOT_MEMORY_GB" in refused
    assert small == 64 * 2**20


def test_uncapped_message_and_what_counts_as_out_of_memory() -> None:
    assert is_out_of_memory(MemoryError()) and is_out_of_memory(torch.OutOfMemoryError("x"))
    assert not is_out_of_memory(RuntimeError("shape mismatch"))
    plain = out_of_memory_message(Settings(), torch.device("cpu"))
    assert plain.startswith("the job ran out of device memory")


CUDA_SLOT = """
import torch
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.device import cap_slot_memory, is_out_of_memory, local_offer
from archsearch.jobs.runtime.device import out_of_memory_message

settings = Settings(worker_device="cuda", worker_slots=2)
offer = local_offer(settings)
total = torch.cuda.get_device_properties(0).total_memory
assert abs(offer.gpu_memory_gb - total / 2**30 / 2) < 1e-6, offer
print("cap:", cap_slot_memory(settings, offer))
small = torch.ones(total // 4, dtype=torch.uint8, device="cuda")  # a quarter: within half
try:
    torch.ones(total // 2, dtype=torch.uint8, device="cuda")  # plus a half: beyond the slot
    print("not refused")
except Exception as exc:
    print("refused:", is_out_of_memory(exc), out_of_memory_message(settings, small.device))
"""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_slot_holds_its_fraction_of_the_gpu() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CUDA_SLOT], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "refused: True the job ran out of the" in done.stdout, done.stdout
    assert "GB of GPU memory its worker slot allows (2 jobs share this GPU" in done.stdout
