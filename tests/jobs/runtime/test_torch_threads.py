"""Torch threads per worker process come from `ARCHSEARCH_TORCH_THREADS`, by default this
process's share of the machine's cores, and are applied to torch."""

from __future__ import annotations

import os

import pytest
import torch

from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.device import apply_torch_threads

CORES = len(os.sched_getaffinity(0))


def test_the_setting_wins_and_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARCHSEARCH_TORCH_THREADS", "3")
    assert Settings().resolved_torch_threads == 3
    monkeypatch.setenv("ARCHSEARCH_TORCH_THREADS", "0")
    with pytest.raises(ValueError, match="torch_threads"):
        Settings()


def test_default_is_the_cores_shared_by_the_machines_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("TORCH_THREADS", "WORKER_PROCESSES", "BROKER_URL", "LOCAL_RUNNER_THREADS"):
        monkeypatch.delenv(f"ARCHSEARCH_{name}", raising=False)
    team = {"broker_url": "redis://127.0.0.1:6379/0"}
    assert Settings(**team).resolved_torch_threads == CORES
    assert Settings(**team, worker_processes=2).resolved_torch_threads == max(1, CORES // 2)
    assert Settings(**team, worker_processes=4 * CORES).resolved_torch_threads == 1
    # Embedded: the runner threads of the one process share its cores.
    assert Settings(local_runner_threads=2).resolved_torch_threads == max(1, CORES // 2)


def test_applied_to_torch() -> None:
    before = torch.get_num_threads()
    try:
        assert apply_torch_threads(Settings(torch_threads=1)) == 1
        assert torch.get_num_threads() == 1
        apply_torch_threads(Settings(torch_threads=2))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
