"""Where a train job's CPU time goes, timed inside the job itself.

The functions the `train` method calls are wrapped in place for the duration of one run
(the very objects the worker runs, no copy of the method): each part's time is exclusive
of the timed parts it calls, so the parts and "other" add up to the job's total. The
per-epoch test passes and the checkpoints happen inside `fit`; "training loop" is `fit`
without them.
"""

from __future__ import annotations

import importlib
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any

# part -> (module, attribute path) of what the train job calls for it
PARTS = {
    "training loop": ("archsearch.core.methods.train", "fit"),
    "test passes (per epoch)": ("archsearch.core.training", "evaluate_predictions"),
    "checkpoints": ("archsearch.jobs.runtime.context", "DbRunContext.save_checkpoint"),
    "save model": ("archsearch.core.methods.train", "save_model"),
    "curves.png": ("archsearch.core.methods.train", "curves_png"),
    "deployment (latency + ONNX)": ("archsearch.core.methods.train", "write_deployment"),
    "prediction check": ("archsearch.core.methods.train", "prediction_check"),
}

# The work a job does once, whatever its epochs, beside the loop.
FIXED = ("save model", "curves.png", "deployment (latency + ONNX)", "prediction check")


class Breakdown:
    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = {}
        self._run: dict[str, float] = {}
        self._stack: list[list[float]] = []  # per active part: [start, children's time]

    def _timed(self, part: str, func: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(func)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._stack.append([time.process_time(), 0.0])
            try:
                return func(*args, **kwargs)
            finally:
                start, children = self._stack.pop()
                elapsed = time.process_time() - start
                self._run[part] = self._run.get(part, 0.0) + elapsed - children
                if self._stack:
                    self._stack[-1][1] += elapsed

        return timed

    @contextmanager
    def timing(self) -> Iterator[None]:
        """Wrap every part for one job run; record its parts' CPU seconds afterwards."""
        saved = []
        for part, (module_name, path) in PARTS.items():
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
            for owner, name, original in saved:
                setattr(owner, name, original)

    def record(self, total: float) -> None:
        for part in PARTS:
            self.seconds.setdefault(part, []).append(self._run.get(part, 0.0))
        self.seconds.setdefault("other", []).append(total - sum(self._run.values()))
        self.seconds.setdefault("total", []).append(total)

    def report(self, plain: float) -> None:
        """Each part's median CPU seconds, and as a share of the plain loop's (same rounds)."""
        print("\ntrain job, where the CPU time goes (median s over rounds; share of plain loop):")
        for part, seconds in self.seconds.items():
            median = statistics.median(seconds)
            print(f"  {part:28s} {median:6.2f} s  {median / plain:6.1%}")
        fixed = statistics.median(
            sum(self.seconds[part][r] for part in FIXED) for r in range(len(self.seconds["other"]))
        )
        print(f"  fixed end-of-job work ({', '.join(FIXED)}): {fixed:.2f} s = {fixed / plain:.1%}")
