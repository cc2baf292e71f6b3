"""What one run of a job used of its device: name, peak memory and utilisation.

A pool process runs many jobs one after another, so every figure is taken over this run
alone: on CUDA the allocator's peak is reset when the run starts
(`torch.cuda.reset_peak_memory_stats`) and read when it ends; on CPU the process's resident
high-water mark (VmHWM) is reset through `/proc/self/clear_refs` ("5", Linux 4.0+) and read
from `/proc/self/status` at the end. That CPU figure is the peak of the whole process while
the job ran (what the process held before the job counts too: it cannot be told apart), and
where the mark cannot be reset it is the process's lifetime peak (`ru_maxrss`), and says so
in `peak_memory_kind`.

Utilisation: on CUDA the mean of NVML's device utilisation sampled while the run goes on
(the `nvidia-ml-py` package, the `[gpu]` extra; without it the figure is null and
`utilization_note` says why). NVML measures the whole device, other processes included. On
CPU: the process's CPU time over the run's wall time, i.e. how many cores it kept busy on
average (every thread of the process counts, torch's intra-op threads included).
"""

from __future__ import annotations

import platform
import resource
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

try:
    import pynvml  # the optional `[gpu]` extra (nvidia-ml-py)
except ImportError:  # a CPU worker, or a GPU one without the extra: utilisation is null
    pynvml = None

NVML_PERIOD_SECONDS = 0.5
_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


@dataclass(frozen=True)
class RunFigures:
    """A run's figures, as stored in `figures.json` and shown on the job page."""

    device: str  # cpu | cuda
    device_name: str
    wall_seconds: float
    peak_memory_bytes: int | None
    peak_memory_kind: str  # cuda_max_allocated | rss_since_run_start | rss_process_lifetime
    utilization: float | None  # GPU: mean fraction busy; CPU: cores kept busy on average
    utilization_kind: str  # nvml_gpu_mean | process_cpu_time_over_wall
    utilization_note: str | None = None  # why `utilization` is null

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def as_metrics(self) -> dict[str, float]:
        """The numeric figures as job metrics (absent when unknown)."""
        metrics: dict[str, float] = {}
        if self.peak_memory_bytes is not None:
            metrics["device_peak_memory_mb"] = self.peak_memory_bytes / 2**20
        if self.utilization is not None:
            metrics["device_utilization"] = self.utilization
        return metrics


class FiguresProbe:
    """Measures one run: `start()` when it begins, `finish()` when it ends."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._started = 0.0
        self._cpu_started = 0.0
        self._rss_reset = False
        self._sampler: _NvmlSampler | None = None

    def start(self) -> FiguresProbe:
        self._started, self._cpu_started = time.perf_counter(), _process_cpu_seconds()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self._sampler = _NvmlSampler(self.device)
            self._sampler.start()
        else:
            self._rss_reset = _reset_rss_peak()
        return self

    def finish(self) -> RunFigures:
        wall = max(time.perf_counter() - self._started, 1e-9)
        if self.device.type == "cuda":
            return self._cuda_figures(wall)
        busy = (_process_cpu_seconds() - self._cpu_started) / wall
        peak = _rss_peak_bytes() if self._rss_reset else None
        kind = "rss_since_run_start" if peak is not None else "rss_process_lifetime"
        return RunFigures(
            "cpu",
            cpu_name(),
            wall,
            peak if peak is not None else _lifetime_rss_bytes(),
            kind,
            busy,
            "process_cpu_time_over_wall",
        )

    def _cuda_figures(self, wall: float) -> RunFigures:
        assert self._sampler is not None, "start() before finish()"
        utilization, note = self._sampler.stop()
        return RunFigures(
            "cuda",
            torch.cuda.get_device_name(self.device),
            wall,
            int(torch.cuda.max_memory_allocated(self.device)),
            "cuda_max_allocated",
            utilization,
            "nvml_gpu_mean",
            note,
        )


def cpu_name() -> str:
    """The CPU's model name (`/proc/cpuinfo`), else what `platform` knows, else "cpu"."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def _process_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _reset_rss_peak() -> bool:
    """Reset this process's resident high-water mark; False where the kernel does not let
    us (not Linux, an old kernel, a read-only /proc)."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return _rss_peak_bytes() is not None


def _rss_peak_bytes() -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # reported in kB
    except OSError:
        pass
    return None


def _lifetime_rss_bytes() -> int:
    # ru_maxrss is in kilobytes on Linux (bytes on macOS, where this fallback is taken).
    scale = 1 if platform.system() == "Darwin" else 1024
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale


def _pci_bus_id(device: torch.device) -> str | None:
    """The device's PCI address as NVML spells it ("00000000:3B:00.0"), None where torch
    does not report it."""
    props = torch.cuda.get_device_properties(device)
    parts = [getattr(props, f"pci_{name}_id", None) for name in ("domain", "bus", "device")]
    if any(part is None for part in parts):
        return None
    domain, bus, slot = parts
    return f"{domain:08X}:{bus:02X}:{slot:02X}.0"


class _NvmlSampler:
    """Samples NVML's utilisation of one GPU in a daemon thread while a run goes on."""

    def __init__(self, device: torch.device, period: float = NVML_PERIOD_SECONDS) -> None:
        self.device, self.period = device, period
        self.samples: list[float] = []
        self.note: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        handle = self._handle()
        if handle is not None:
            self._thread = threading.Thread(target=self._loop, args=(handle,), daemon=True)
            self._thread.start()

    def stop(self) -> tuple[float | None, str | None]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 * self.period)
        if not self.samples:
            return None, self.note or "the run ended before NVML gave a sample"
        return sum(self.samples) / len(self.samples) / 100.0, None

    def _handle(self) -> Any:
        if pynvml is None:
            self.note = "nvidia-ml-py is not installed (pip install 'archsearch[gpu]')"
            return None
        try:
            pynvml.nvmlInit()
            bus_id = _pci_bus_id(self.device)
            if bus_id:  # CUDA_VISIBLE_DEVICES renumbers devices; NVML does not
                return pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)
            return pynvml.nvmlDeviceGetHandleByIndex(self.device.index or 0)
        except pynvml.NVMLError as exc:
            self.note = f"NVML is not usable here ({exc})"
            return None

    def _loop(self, handle: Any) -> None:
        while True:
            try:
                self.samples.append(float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            except pynvml.NVMLError as exc:
                self.note = f"NVML stopped answering ({exc})"
                return
            if self._stop.wait(self.period):
                return
