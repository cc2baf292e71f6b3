"""Where a job's CPU time goes, timed inside the job itself (train and prune jobs).

The functions a method calls are wrapped in place for the duration of one run (the very
objects the worker runs, no copy of the method): each part's time is exclusive of the
timed parts it calls, so the parts and "other" add up to the job's total. The per-epoch
test passes and the checkpoints happen inside `fit`; "training loop" is `fit` without
them. Parts nested in the end-of-job work (a figure inside the spectrum, the ONNX export
inside the deployment, every artifact write) are named with the part they sit in.
"""

from __future__ import annotations

import importlib
import resource
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any

TRAIN = "archsearch.core.methods.train"
PRUNE = "archsearch.core.methods.prune"
TRAINING = "archsearch.core.training"
CONTEXT = "archsearch.jobs.runtime.context"
WRITE = "archsearch.core.deploy.write"

# What every job's deployment does inside `write_deployment`, each timed on its own.
DEPLOYMENT = {
    "  deployment: sizes": (WRITE, "_size"),
    "  deployment: sparse file": (WRITE, "sparse_state_bytes"),
    "  deployment: layer forms": (WRITE, "choose_forms"),
    "  deployment: latency": (WRITE, "model_latencies"),
    "  deployment: ONNX export + check": (WRITE, "onnx_artifact"),
    "  deployment: model card": (WRITE, "model_card"),
}

# part -> (module, attribute path) of what the job calls for it, per method
PARTS: dict[str, dict[str, tuple[str, str]]] = {
    "train": {
        "training loop": (TRAIN, "fit"),
        "test passes (per epoch)": (TRAINING, "evaluate_predictions"),
        "checkpoints": (CONTEXT, "DbRunContext.save_checkpoint"),
        "save model": (TRAIN, "save_model"),
        "chart rows (drawn on download)": (CONTEXT, "DbRunContext.save_chart"),
        "deployment (latency + ONNX)": (TRAIN, "write_deployment"),
        **DEPLOYMENT,
        "prediction check": (TRAIN, "prediction_check"),
        "artifact writes": (CONTEXT, "DbRunContext.save_artifact"),
    },
    "prune": {
        "build masked model": (PRUNE, "build_masked_model"),
        "training loop": (PRUNE, "fit"),
        "test passes (per epoch)": (TRAINING, "evaluate_predictions"),
        "checkpoints": (CONTEXT, "DbRunContext.save_checkpoint"),
        "final test pass": (PRUNE, "evaluate_predictions"),
        "prediction check": (PRUNE, "prediction_check"),
        "density report": (PRUNE, "density_report"),
        "mask files": (PRUNE, "_save_baselines"),
        "save pruned (masked + compact)": (PRUNE, "save_pruned"),
        "deployable (plain + compact)": (PRUNE, "pruned_deployable"),
        "deployment (latency + ONNX)": (PRUNE, "write_deployment"),
        **DEPLOYMENT,
        "spectrum": (PRUNE, "save_spectrum"),
        "chart rows (drawn on download)": (CONTEXT, "DbRunContext.save_chart"),
        "baselines": (PRUNE, "baseline_masks"),
        "artifact writes": (CONTEXT, "DbRunContext.save_artifact"),
    },
}

# The work a job does once, whatever its epochs, beside the loop and its test passes.
PER_EPOCH = ("training loop", "test passes (per epoch)", "checkpoints", "build masked model")


def cpu_now() -> float:
    """CPU seconds of this process and of its children that ended: a job's ONNX export runs
    in a child process it forks (`core.deploy.forked`), whose CPU `process_time` leaves out."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


class Breakdown:
    def __init__(self, method: str) -> None:
        self.method = method
        self.parts = PARTS[method]
        self.seconds: dict[str, list[float]] = {}
        self._run: dict[str, float] = {}
        self._stack: list[list[float]] = []  # per active part: [start, children's time]

    def _timed(self, part: str, func: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(func)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._stack.append([cpu_now(), 0.0])
            try:
                return func(*args, **kwargs)
            finally:
                start, children = self._stack.pop()
                elapsed = cpu_now() - start
                self._run[part] = self._run.get(part, 0.0) + elapsed - children
                if self._stack:
                    self._stack[-1][1] += elapsed

        return timed

    @contextmanager
    def timing(self) -> Iterator[None]:
        """Wrap every part for one job run; record its parts' CPU seconds afterwards."""
        saved = []
        for part, (module_name, path) in self.parts.items():
            owner: Any = importlib.import_module(module_name)
            *outer, name = path.split(".")
            for attribute in outer:
                owner = getattr(owner, attribute)
            original = getattr(owner, name)
            saved.append((owner, name, original))
            setattr(owner, name, self._timed(part, original))
        self._run = {}
        try:
            yield
        finally:
            for owner, name, original in reversed(saved):
                setattr(owner, name, original)

    def record(self, total: float) -> None:
        for part in self.parts:
            self.seconds.setdefault(part, []).append(self._run.get(part, 0.0))
        self.seconds.setdefault("other", []).append(total - sum(self._run.values()))
        self.seconds.setdefault("total", []).append(total)

    def report(self, case: str, plain: float) -> None:
        """Each part's median CPU seconds, and as a share of the plain loop's (same rounds)."""
        print(f"\n{case} job, where the CPU time goes (median s over rounds; share of plain loop):")
        for part, seconds in self.seconds.items():
            median = statistics.median(seconds)
            print(f"  {part:36s} {median:6.2f} s  {median / plain:6.1%}")
        looped = [part for part in PER_EPOCH if part in self.parts]
        fixed = statistics.median(
            total - sum(self.seconds[part][r] for part in looped)
            for r, total in enumerate(self.seconds["total"])
        )
        print(
            f"  fixed per-job work (total less {', '.join(looped)}): "
            f"{fixed:.2f} s = {fixed / plain:.1%}"
        )
        rows = [part for part in self.parts if part.startswith("chart rows")]
        kept = statistics.median(
            sum(self.seconds[part][r] for part in rows) for r in range(len(self.seconds["total"]))
        )
        print(f"  of which the charts' data kept (drawn on first download, not here): {kept:.2f} s")
