"""`swaps.png` draws an epoch without a swap count (the dense epochs before a search) as a
gap, never as a count of 0: a flat zero line would claim the edges stood still."""

from __future__ import annotations

import math

from archsearch.core.export import new_figure
from archsearch.core.search.report import _draw_swaps, per_epoch

# Two dense epochs (no edge selection yet, so no swap counts), then three of search.
HISTORY = [
    {"train_loss": 1.0},
    {"train_loss": 0.8},
    {"edges_entered": 40.0, "edges_left": 40.0, "real_edges": 819.0},
    {"edges_entered": 12.0, "edges_left": 12.0, "real_edges": 819.0},
    {"edges_entered": 0.0, "edges_left": 0.0, "real_edges": 819.0},
]


def test_an_epoch_without_the_count_is_a_gap_and_a_real_zero_stays() -> None:
    entered = per_epoch(HISTORY, "edges_entered")
    assert all(math.isnan(v) for v in entered[:2])
    assert entered[2:] == [40.0, 12.0, 0.0]


def test_the_drawn_lines_carry_the_gaps() -> None:
    fig, axes = new_figure(ncols=2)
    _draw_swaps(fig, axes, HISTORY, "search")
    swaps, real = axes[0]
    for line in [*swaps.get_lines(), *real.get_lines()]:
        drawn = list(line.get_ydata())
        assert all(math.isnan(v) for v in drawn[:2]), line.get_label()
        assert not any(math.isnan(v) for v in drawn[2:])
