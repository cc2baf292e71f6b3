"""A worker's memory hygiene: the warm heap is exempt from the cyclic collector,
and a finished job's reference cycles are freed at once."""

from __future__ import annotations

import gc
import weakref

from archsearch.jobs.runtime.warmup import freeze_heap, release_memory


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle, as a closed matplotlib figure holds


def test_freeze_heap_exempts_what_is_alive() -> None:
    try:
        freeze_heap()
        assert gc.get_freeze_count() > 1000
    finally:
        gc.unfreeze()  # the rest of the test session collects as usual


def test_release_memory_frees_a_jobs_cycles() -> None:
    gc.disable()  # no automatic collection may free it first
    try:
        node = Node()
        alive = weakref.ref(node)
        del node
        assert alive() is not None, "a cycle outlives its last name"
        release_memory()
        assert alive() is None
    finally:
        gc.enable()
