"""What an arm of `bench/study.py` spent its wall clock on, from the jobs' own timestamps
(created, started, finished: the server's clock, the same machine's as the bench's), and
where the machine's CPU went meanwhile (/proc).

A job's run time is `finished - started` (claim to recorded outcome). A queue gap is time
in which no worker ran a job of the arm while one of them was waiting (created, not yet
started); idle worker-seconds count every free worker while a job waits, so a gap on one
of two workers shows too.
"""

from __future__ import annotations

import bisect
import os
import random
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class JobTimes:
    created: float  # seconds since the epoch, server clock
    started: float
    finished: float
    worker: str

    @classmethod
    def from_row(
        cls, created: datetime, started: datetime, finished: datetime, worker: str
    ) -> JobTimes:
        return cls(created.timestamp(), started.timestamp(), finished.timestamp(), worker)


@dataclass
class ArmRun:
    """One arm of one round: its jobs' times, its own costs, the CPU spent meanwhile."""

    name: str
    t0: float  # client clock just before the first submit
    submit_s: float  # the submit request(s), summed
    jobs: list[JobTimes]
    end: float  # last job ended, or (a study) its artifacts stored
    cpu: dict[str, float] = field(default_factory=dict)  # seconds per process group
    study_id: str = ""
    study_ended: float = 0.0  # a study: when `advance` marked it ended (before its artifacts)

    @property
    def wall_s(self) -> float:
        return self.end - self.t0

    @property
    def last_finished(self) -> float:
        return max(job.finished for job in self.jobs)

    @property
    def after_last_job_s(self) -> float:
        """The study's artifact build (advance, charts, report) after its last job."""
        return max(0.0, self.end - self.last_finished)

    @property
    def to_study_end_s(self) -> float:
        """From the last job's end to the study marked ended (the job's end, `advance`)."""
        return max(0.0, self.study_ended - self.last_finished) if self.study_ended else 0.0

    @property
    def run_sum_s(self) -> float:
        return sum(job.finished - job.started for job in self.jobs)

    @property
    def to_first_start_s(self) -> float:
        return min(job.started for job in self.jobs) - self.t0


def queue_gaps(jobs: list[JobTimes], workers: int) -> tuple[float, float]:
    """(seconds no job ran while one waited, idle worker-seconds while jobs waited)."""
    bounds = sorted({t for job in jobs for t in (job.created, job.started, job.finished)})
    none_ran = idle_worker_s = 0.0
    for start, end in zip(bounds, bounds[1:], strict=False):
        waiting = sum(job.created <= start < job.started for job in jobs)
        running = sum(job.started <= start < job.finished for job in jobs)
        if waiting:
            none_ran += (end - start) if running == 0 else 0.0
            idle_worker_s += (end - start) * min(max(0, workers - running), waiting)
    return none_ran, idle_worker_s


def between_jobs(jobs: list[JobTimes]) -> list[float]:
    """On each worker, the seconds from a job's end to the start of its next job (the
    worker's after-job work: its outcome, the study's advance, its next claim)."""
    gaps = []
    for worker in {job.worker for job in jobs}:
        mine = sorted((job for job in jobs if job.worker == worker), key=lambda j: j.started)
        gaps += [b.started - a.finished for a, b in zip(mine, mine[1:], strict=False)]
    return gaps


def descendants(root: int) -> list[int]:
    """`root` and every process below it (Celery's pool processes under their parent)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid, ppid = _pid_and_parent(stat.read_text())
        except (OSError, ValueError):  # ended while we looked
            continue
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _pid_and_parent(stat: str) -> tuple[int, int]:
    head, tail = stat.rsplit(")", 1)
    return int(head.split(" (", 1)[0]), int(tail.split()[1])


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of these processes (0 for one that has ended)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLOCK_TICKS


def schedstat(pid: int) -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for one) of the process's main
    thread, the one a Celery pool process runs its jobs in (/proc/<pid>/schedstat)."""
    try:
        ran, waited, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    except (OSError, ValueError):  # ended
        return 0.0, 0.0
    return int(ran) / 1e9, int(waited) / 1e9


class SchedSamples:
    """Each pool process's CPU and run-queue wait sampled over time, so a job's share is
    read off between its start and its end (linear between samples)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.values: dict[int, list[tuple[float, float]]] = {}

    def sample(self, pids: list[int]) -> None:
        self.times.append(time.time())
        for pid in pids:
            self.values.setdefault(pid, [(0.0, 0.0)] * (len(self.times) - 1))
            self.values[pid].append(schedstat(pid))

    def at(self, pid: int, when: float) -> tuple[float, float]:
        series, times = self.values[pid], self.times
        i = min(max(bisect.bisect_left(times, when), 1), len(times) - 1)
        share = (when - times[i - 1]) / max(1e-9, times[i] - times[i - 1])
        share = min(1.0, max(0.0, share))
        (c0, w0), (c1, w1) = series[i - 1], series[i]
        return c0 + share * (c1 - c0), w0 + share * (w1 - w0)

    def job(self, job: JobTimes) -> tuple[float, float]:
        """(CPU seconds, seconds waiting for a CPU) of the job's worker during the job."""
        pid = int(job.worker.rsplit(":", 1)[1])
        if pid not in self.values or len(self.times) < 2:
            return float("nan"), float("nan")
        (c0, w0), (c1, w1) = self.at(pid, job.started), self.at(pid, job.finished)
        return c1 - c0, w1 - w0


def machine_busy_seconds() -> float:
    """CPU seconds every core spent busy since boot (all processes, everyone's)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / CLOCK_TICKS


CPU_GROUPS = ("api", "workers", "postgres", "bench", "others")


def print_overhead(
    rounds: list[tuple[ArmRun, ArmRun]], epochs: int, workers: int, hook_s: float
) -> None:
    jobs = len(rounds[0][0].jobs)
    print("\n## Overhead of a study over the same jobs submitted one by one\n")
    print(
        f"{jobs} train jobs on digits ({epochs} epochs), {workers} workers, arms in ABBA "
        "order. Wall = the client's first submit to the last job's end (plain) or to the "
        "study's artifacts stored (study). Waiting is a PostgreSQL poll every 50 ms in both "
        "arms. Each cell: study / plain.\n"
    )
    print_wall_table(rounds, workers)
    print_cpu_table(rounds)
    print_summary(rounds, workers)
    own = jobs * hook_s
    print(
        f"\nthe study's work between jobs: {jobs} x advance_study {hook_s * 1e3:.1f} ms "
        f"= {own:.3f} s"
    )


def _pair(study: float, plain: float, digits: int = 2) -> str:
    return f"{study:.{digits}f} / {plain:.{digits}f}"


def print_wall_table(rounds: list[tuple[ArmRun, ArmRun]], workers: int) -> None:
    print(
        "| round | first | wall s | ratio | job run-time sum s | no job running while one "
        "waits s | idle worker-s while jobs wait | submit s | to first start s "
        "| after last job s (study ended + artifacts) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for i, (study, plain) in enumerate(rounds):
        (s_none, s_idle), (p_none, p_idle) = (queue_gaps(a.jobs, workers) for a in (study, plain))
        first = "study" if study.t0 < plain.t0 else "plain"
        print(
            f"| {i} | {first} | {_pair(study.wall_s, plain.wall_s)} "
            f"| {study.wall_s / plain.wall_s:.3f} | {_pair(study.run_sum_s, plain.run_sum_s)} "
            f"| {_pair(s_none, p_none)} | {_pair(s_idle, p_idle)} "
            f"| {_pair(study.submit_s, plain.submit_s, 3)} "
            f"| {_pair(study.to_first_start_s, plain.to_first_start_s, 3)} "
            f"| {study.after_last_job_s:.3f} ({study.to_study_end_s:.3f} + "
            f"{study.after_last_job_s - study.to_study_end_s:.3f}) |"
        )


def print_cpu_table(rounds: list[tuple[ArmRun, ArmRun]]) -> None:
    print("\nCPU seconds spent during each arm (/proc; others = the rest of the machine)\n")
    print("| round | " + " | ".join(CPU_GROUPS) + " |")
    print("|---|" + "---|" * len(CPU_GROUPS))
    for i, (study, plain) in enumerate(rounds):
        cells = [_pair(study.cpu[group], plain.cpu[group]) for group in CPU_GROUPS]
        print(f"| {i} | " + " | ".join(cells) + " |")


def ratio_of_sums(rounds: list[tuple[ArmRun, ArmRun]]) -> float:
    return sum(s.wall_s for s, _ in rounds) / sum(p.wall_s for _, p in rounds)


def bootstrap_interval(
    rounds: list[tuple[ArmRun, ArmRun]], draws: int = 2000
) -> tuple[float, float]:
    """90% interval of the ratio of summed walls, rounds drawn with replacement."""
    rng = random.Random(0)
    ratios = sorted(ratio_of_sums(rng.choices(rounds, k=len(rounds))) for _ in range(draws))
    return ratios[int(0.05 * draws)], ratios[int(0.95 * draws) - 1]


QUIET_SHARE = 0.1  # the rest of the machine's CPU per second of an arm, at most


def quiet(arm: ArmRun) -> bool:
    """Whether the machine's other processes left this arm alone (other sessions share it)."""
    return arm.cpu["others"] / arm.wall_s < QUIET_SHARE


def print_summary(rounds: list[tuple[ArmRun, ArmRun]], workers: int) -> None:
    print_ratio(f"all {len(rounds)} rounds", rounds)
    calm = [(s, p) for s, p in rounds if quiet(s) and quiet(p)]
    if len(calm) >= 2:
        print_ratio(
            f"the {len(calm)} rounds in which the rest of the machine used under "
            f"{QUIET_SHARE:.1f} CPU-s per second of either arm",
            calm,
        )
    print_decomposition(rounds, workers)


def print_ratio(which: str, rounds: list[tuple[ArmRun, ArmRun]]) -> None:
    low, high = bootstrap_interval(rounds)
    ratios = sorted(s.wall_s / p.wall_s for s, p in rounds)
    print(
        f"\nwall clock ratio study / plain, {which}: {ratio_of_sums(rounds):.3f} (summed "
        f"walls), 90% bootstrap interval {low:.3f}-{high:.3f}; median of rounds "
        f"{statistics.median(ratios):.3f} (min {ratios[0]:.3f}, max {ratios[-1]:.3f}); "
        "goal <= 1.05"
    )


def _median(values: list[float]) -> float:
    return statistics.median(values)


def print_decomposition(rounds: list[tuple[ArmRun, ArmRun]], workers: int) -> None:
    """Median over rounds of what differs between the arms, as a share of the plain wall."""
    plain_wall = _median([p.wall_s for _, p in rounds])
    parts = {
        "wall": [s.wall_s - p.wall_s for s, p in rounds],
        "job run-time sum / workers": [(s.run_sum_s - p.run_sum_s) / workers for s, p in rounds],
        "idle worker-s while jobs wait / workers": [
            (queue_gaps(s.jobs, workers)[1] - queue_gaps(p.jobs, workers)[1]) / workers
            for s, p in rounds
        ],
        "submit to first start": [s.to_first_start_s - p.to_first_start_s for s, p in rounds],
        "after the last job (artifacts)": [s.after_last_job_s for s, _ in rounds],
        "worker CPU": [s.cpu["workers"] - p.cpu["workers"] for s, p in rounds],
        "API CPU": [s.cpu["api"] - p.cpu["api"] for s, p in rounds],
        "others' CPU": [s.cpu["others"] - p.cpu["others"] for s, p in rounds],
    }
    between = [[_median(between_jobs(arm.jobs)) * 1e3 for arm in pair] for pair in rounds]
    print(
        "\na worker's time from a job's end to its next job's start, median over rounds: "
        f"study {_median([b[0] for b in between]):.1f} ms, "
        f"plain {_median([b[1] for b in between]):.1f} ms"
    )
    print(f"\nstudy minus plain, median over rounds (plain wall median {plain_wall:.2f} s):")
    for name, values in parts.items():
        value = _median(values)
        print(f"  {name}: {value:+.3f} s ({value / plain_wall * 100:+.1f}% of the plain wall)")
    fixed = _median(
        [s.after_last_job_s + s.to_first_start_s - p.to_first_start_s for s, p in rounds]
    )
    print(
        "  the study's own fixed cost (its end and artifacts after the last job, and its "
        f"submit to first start beyond a plain job's): {fixed:.3f} s; <= 1.05 takes a plain "
        f"wall of >= {fixed / 0.05:.1f} s"
    )


def print_job_spread(rounds: list[tuple[ArmRun, ArmRun]], sched: SchedSamples) -> None:
    """The same job (by its place in the study) over every round and arm: its wall time,
    the CPU of the thread that ran it meanwhile, and the time that thread was runnable but
    waited for a CPU (the kernel's run-queue wait)."""
    print(
        "\nidentical jobs over all rounds and arms, min / median / max seconds: run time, "
        "the CPU of the thread that ran it, that thread's wait for a CPU (schedstat)\n"
    )
    print("| job | run time | CPU | waiting for a CPU |")
    print("|---|---|---|---|")
    totals = [0.0, 0.0, 0.0]
    for index in range(len(rounds[0][0].jobs)):
        jobs = [arm.jobs[index] for pair in rounds for arm in pair]
        walls = [job.finished - job.started for job in jobs]
        cpus, waits = zip(*(sched.job(job) for job in jobs), strict=True)
        cells = [_spread(values) for values in (walls, cpus, waits)]
        print(f"| {index} | " + " | ".join(cells) + " |")
        totals = [t + sum(v) for t, v in zip(totals, (walls, cpus, waits), strict=True)]
    wall, cpu, wait = totals
    print(
        f"\nof all job run time: {cpu / wall * 100:.0f}% on a CPU, {wait / wall * 100:.0f}% "
        f"waiting for a CPU, {(wall - cpu - wait) / wall * 100:.0f}% neither (database, I/O)"
    )


def _spread(values: list[float] | tuple[float, ...]) -> str:
    ordered = sorted(values)
    return f"{ordered[0]:.2f} / {_median(ordered):.2f} / {ordered[-1]:.2f}"


def print_timeline(arm: ArmRun) -> None:
    """Each job of one arm: created, started, finished (seconds after the first submit)."""
    print(f"\n{arm.name} arm, seconds after its first submit: job created / started / ended")
    for job in arm.jobs:
        times = (job.created - arm.t0, job.started - arm.t0, job.finished - arm.t0)
        print("  " + " / ".join(f"{t:.3f}" for t in times) + f"  on {job.worker}")
    print(f"  end (artifacts for a study): {arm.end - arm.t0:.3f}")
