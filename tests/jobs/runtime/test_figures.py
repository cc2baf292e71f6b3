"""A run's device figures (`jobs/runtime/figures.py`): each run's own peak memory and
utilisation, measured for real on this machine's CPU (the CUDA branch on a GPU only)."""

from __future__ import annotations

import importlib.util
import time

import pytest
import torch

from archsearch.jobs.runtime.figures import FiguresProbe, _NvmlSampler

MB = 2**20


def _hold(megabytes: int) -> None:
    block = torch.ones(megabytes * MB // 4)  # float32: resident once written
    assert float(block[-1]) == 1.0


def test_cpu_peak_is_this_runs_own() -> None:
    big = FiguresProbe(torch.device("cpu")).start()
    _hold(300)
    first = big.finish()
    small = FiguresProbe(torch.device("cpu")).start()
    _hold(20)
    second = small.finish()
    assert first.device == second.device == "cpu"
    assert first.peak_memory_kind == "rss_since_run_start", "Linux lets a process reset VmHWM"
    assert first.peak_memory_bytes is not None and second.peak_memory_bytes is not None
    # The second run's peak no longer carries the first run's 300 MB block.
    assert first.peak_memory_bytes - second.peak_memory_bytes > 200 * MB
    assert first.as_metrics()["device_peak_memory_mb"] == first.peak_memory_bytes / MB


def test_cpu_utilization_is_cpu_time_over_wall_time() -> None:
    idle = FiguresProbe(torch.device("cpu")).start()
    time.sleep(0.5)
    asleep = idle.finish()
    busy = FiguresProbe(torch.device("cpu")).start()
    wall, cpu = time.perf_counter(), time.process_time()
    while time.process_time() - cpu < 0.3:  # CPU time, not wall: a loaded machine only slows it
        pass
    expected = (time.process_time() - cpu) / (time.perf_counter() - wall)
    working = busy.finish()
    assert asleep.utilization is not None and working.utilization is not None
    assert asleep.utilization < 0.05
    assert working.utilization == pytest.approx(expected, rel=0.15)
    assert working.utilization_kind == "process_cpu_time_over_wall"
    assert working.device_name and working.utilization_note is None


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None, reason="pynvml installed")
def test_without_nvml_the_gpu_utilization_is_null_and_says_why() -> None:
    sampler = _NvmlSampler(torch.device("cuda"))
    sampler.start()
    assert sampler.stop() == (None, "nvidia-ml-py is not installed (pip install 'archsearch[gpu]')")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_peak_is_this_runs_own() -> None:
    device = torch.device("cuda")
    first = FiguresProbe(device).start()
    block = torch.ones(256 * MB // 4, device=device)
    del block
    big = first.finish()
    second = FiguresProbe(device).start()
    torch.ones(MB // 4, device=device).sum().item()
    small = second.finish()
    assert big.device == "cuda" and big.peak_memory_kind == "cuda_max_allocated"
    assert big.peak_memory_bytes is not None and small.peak_memory_bytes is not None
    assert big.peak_memory_bytes >= 256 * MB > small.peak_memory_bytes
    assert big.device_name == torch.cuda.get_device_name(device)
