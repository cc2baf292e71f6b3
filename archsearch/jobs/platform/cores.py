"""How many CPU cores this process may really use, for its share of torch threads.

`os.sched_getaffinity` counts the cores a process may be scheduled on, which in a
container is every core of the node: a pod limited to 2 CPUs by its cgroup's CPU quota on
a 64-core node would otherwise start 64 torch threads, and the kernel would throttle them
to 2 cores' time (each step waits for its slowest thread). The quota, where one is set,
is the smaller figure: cgroup v2's `cpu.max` ("200000 100000": 2 CPUs), or v1's
`cpu.cfs_quota_us` over `cpu.cfs_period_us`, rounded up.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def usable_cores(cgroup_root: Path = CGROUP_ROOT) -> int:
    """The cores this process may run on, capped by its cgroup's CPU quota (>= 1)."""
    if hasattr(os, "sched_getaffinity"):
        cores = len(os.sched_getaffinity(0))
    else:
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota(cgroup_root)
    return max(1, min(cores, quota) if quota is not None else cores)


def cgroup_cpu_quota(cgroup_root: Path = CGROUP_ROOT) -> int | None:
    """CPUs the cgroup's quota allows, rounded up; None when no quota is set or readable."""
    v2 = _read(cgroup_root / "cpu.max")
    if v2 is not None:
        quota, _, period = v2.partition(" ")
        return _cpus(quota, period)
    quota_v1 = _read(cgroup_root / "cpu" / "cpu.cfs_quota_us")
    period_v1 = _read(cgroup_root / "cpu" / "cpu.cfs_period_us")
    if quota_v1 is None or period_v1 is None:
        return None
    return _cpus(quota_v1, period_v1)


def _cpus(quota: str, period: str) -> int | None:
    """ceil(quota / period); None for "max" (v2) or -1 (v1): no quota."""
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return max(1, math.ceil(quota_us / period_us))


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
