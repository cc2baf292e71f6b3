"""The Pareto front against a brute-force check of dominance."""

from __future__ import annotations

import random

from archsearch.jobs.domain.studies.pareto import pareto_front


def dominated(p: tuple[float, float], q: tuple[float, float]) -> bool:
    """q dominates p: at least as accurate, at most as large, better on one."""
    return q[0] >= p[0] and q[1] <= p[1] and q != p


def brute_force(points: list[tuple[float, float]]) -> set[int]:
    return {i for i, p in enumerate(points) if not any(dominated(p, q) for q in points)}


def test_front_matches_brute_force_on_random_clouds() -> None:
    rng = random.Random(7)
    for trial in range(300):
        n = rng.randint(0, 25)
        # Few distinct values, so ties in accuracy, in size and in both occur often.
        points = [(rng.choice([0.5, 0.7, 0.8, 0.9]), float(rng.randint(1, 8))) for _ in range(n)]
        assert set(pareto_front(points)) == brute_force(points), (trial, points)


def test_front_is_ordered_smallest_first() -> None:
    points = [(0.9, 1000.0), (0.8, 10.0), (0.95, 5000.0), (0.7, 100.0)]
    assert pareto_front(points) == [1, 0, 2]
