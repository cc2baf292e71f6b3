"""The Pareto front of a study: arms no other arm beats on accuracy and size at once.

A point dominates another when it is at least as accurate with at most as many parameters,
and strictly better on one of the two. Sorting by parameters (then accuracy, best first)
makes one pass enough: a point is on the front when it is more accurate than every point
before it.
"""

from __future__ import annotations

from collections.abc import Sequence


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the non-dominated (accuracy, parameters) points, smallest model first.

    Equal points are all kept (none dominates the other)."""
    order = sorted(range(len(points)), key=lambda i: (points[i][1], -points[i][0]))
    front: list[int] = []
    best: tuple[float, float] | None = None
    for i in order:
        accuracy, size = points[i]
        if best is None or accuracy > best[0] or (accuracy, size) == best:
            front.append(i)
            best = (accuracy, size)
    return front
