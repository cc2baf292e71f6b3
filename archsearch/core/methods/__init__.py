"""Methods by name. Each module `core.methods.<method>` exposes `run(spec, data, ctx)`.

Looked up lazily, so adding a method is adding a module; nothing here changes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from archsearch.core.context import Result, RunContext
from archsearch.core.data.loaders import Dataset
from archsearch.core.spec import METHOD_NAMES, JobBase

MethodRun = Callable[[JobBase, Dataset, RunContext], Result]


def get_method(name: str) -> MethodRun:
    assert name in METHOD_NAMES, f"unknown method {name!r}; available: {', '.join(METHOD_NAMES)}"
    module = importlib.import_module(f"archsearch.core.methods.{name}")
    return module.run  # type: ignore[no-any-return]
