"""A worker's memory hygiene: the warm heap is exempt from the cyclic collector,
a finished job's reference cycles are freed at once, and what a lazy import left alive
joins the frozen heap."""

from __future__ import annotations

import gc
import weakref

from archsearch.jobs.runtime.warmup import (
    HEAP_FROZEN,
    REFREEZE_ABOVE,
    freeze_heap,
    release_memory,
    thaw_heap,
)


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle, as a closed matplotlib figure holds


def test_freeze_heap_exempts_what_is_alive() -> None:
    try:
        freeze_heap()
        assert gc.get_freeze_count() > 1000
    finally:
        thaw_heap()  # the rest of the test session collects as usual


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


def test_release_memory_freezes_what_a_lazy_import_left_in_a_frozen_heap() -> None:
    try:
        freeze_heap()
        frozen = gc.get_freeze_count()
        few = [Node() for _ in range(100)]  # a job's ordinary survivors
        release_memory()
        assert gc.get_freeze_count() == frozen
        many = [Node() for _ in range(REFREEZE_ABOVE)]  # as a module's objects
        release_memory()
        assert gc.get_freeze_count() >= frozen + REFREEZE_ABOVE
        assert len(gc.get_objects()) < REFREEZE_ABOVE
        del few, many
    finally:
        thaw_heap()


def test_release_memory_freezes_nothing_where_the_heap_was_never_frozen() -> None:
    assert not HEAP_FROZEN.is_set() and gc.get_freeze_count() == 0
    many = [Node() for _ in range(REFREEZE_ABOVE + 1)]
    release_memory()
    assert gc.get_freeze_count() == 0
    del many
