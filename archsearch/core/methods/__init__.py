"""Methods by name. Each module `core.methods.<method>` exposes `run(spec, data, ctx)`.

Looked up lazily, so adding a method is adding a module; nothing here changes. Every
method comes wrapped by `core.budget.measured`: its metrics gain what it trained
(`optimizer_steps`, `statistics_batches`, `statistics_samples`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from archsearch.core.budget import measured
from archsearch.core.context import Result, RunContext
from archsearch.core.data.loaders import Dataset
from archsearch.specs import METHOD_NAMES, JobBase

MethodRun = Callable[[JobBase, Dataset, RunContext], Result]


def get_method(name: str) -> MethodRun:
    assert name in METHOD_NAMES, f"unknown method {name!r}; available: {', '.join(METHOD_NAMES)}"
    module = importlib.import_module(f"archsearch.core.methods.{name}")
    run: MethodRun = module.run
    return measured(run)
