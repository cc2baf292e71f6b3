"""Torch threads per worker process come from `ARCHSEARCH_TORCH_THREADS`, else
`OMP_NUM_THREADS`, by default this process's share of the cores it may use (a cgroup's CPU
quota included), and are applied to torch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from archsearch.jobs.platform.cores import cgroup_cpu_quota, usable_cores
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.device import apply_torch_threads

CORES = usable_cores()


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
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    team = {"broker_url": "redis://127.0.0.1:6379/0"}
    assert Settings(**team).resolved_torch_threads == CORES
    assert Settings(**team, worker_processes=2).resolved_torch_threads == max(1, CORES // 2)
    assert Settings(**team, worker_processes=4 * CORES).resolved_torch_threads == 1
    # Embedded: the runner threads of the one process share its cores.
    assert Settings(local_runner_threads=2).resolved_torch_threads == max(1, CORES // 2)


def test_omp_num_threads_is_honoured_below_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARCHSEARCH_TORCH_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert Settings(worker_processes=1).resolved_torch_threads == 1
    assert Settings(torch_threads=2).resolved_torch_threads == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "many")  # not a count: the cores' share, as unset
    assert Settings(worker_processes=1).resolved_torch_threads == CORES


@pytest.mark.parametrize(
    ("files", "cpus"),
    [
        ({"cpu.max": "200000 100000\n"}, 2),
        ({"cpu.max": "150000 100000\n"}, 2),  # 1.5 CPUs: rounded up
        ({"cpu.max": "50000 100000\n"}, 1),
        ({"cpu.max": "max 100000\n"}, None),  # no quota
        ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),  # no cgroup files at all
    ],
)
def test_cgroup_cpu_quota_of_v2_and_v1(
    tmp_path: Path, files: dict[str, str], cpus: int | None
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cgroup_cpu_quota(tmp_path) == cpus


def test_a_quota_caps_the_cores(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("100000 100000\n")
    assert usable_cores(tmp_path) == 1
    (tmp_path / "cpu.max").write_text(f"{1000 * 100000} 100000\n")  # above the cores
    assert usable_cores(tmp_path) == len(os.sched_getaffinity(0))


def test_applied_to_torch() -> None:
    before = torch.get_num_threads()
    try:
        assert apply_torch_threads(Settings(torch_threads=1)) == 1
        assert torch.get_num_threads() == 1
        apply_torch_threads(Settings(torch_threads=2))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
