"""The job figures (`curves.png`, `mask-logits.png`, `spectrum.png`, `swaps.png`,
`growth.png`) drawn on kept figures: each PNG is the one a new figure gives, whatever the
kept figure drew before."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from PIL import Image

from archsearch.core.charts.pruning import mask_logits_png, spectrum_png
from archsearch.core.export import curves_png, figure_png, kept_figure
from archsearch.core.growth.schedule import GrowState
from archsearch.core.methods.grow import growth_png
from archsearch.core.search.report import swaps_png


def history(epochs: int, scale: float) -> list[dict[str, float]]:
    return [
        {
            "epoch": float(e + 1),
            "train_loss": scale / (e + 1),
            "test_loss": 1.1 * scale / (e + 1),
            "test_accuracy": 0.5 + 0.04 * e,
        }
        for e in range(epochs)
    ]


def histograms(epochs: int, bins: int, seed: int) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 20_000, (epochs, bins)).astype(float).tolist()


def spectra(names: tuple[str, ...], size: int, seed: int) -> dict[str, list[float]]:
    rng = np.random.default_rng(seed)
    return {name: sorted(rng.uniform(0, 2, size).tolist()) for name in names}


def swaps(epochs: int, seed: int) -> list[dict[str, float]]:
    rng = np.random.default_rng(seed)
    return [
        {"edges_entered": float(a), "edges_left": float(b), "real_edges": float(c)}
        for a, b, c in rng.integers(0, 5_000, (epochs, 3))
    ]


def growth(rows: int, seed: int, baseline: bool) -> bytes:
    rng = np.random.default_rng(seed)
    state = GrowState()
    state.history = [
        {"seconds": 2.0 * i, "parameters": 1e3 * 2**i, "test_accuracy": float(a)}
        for i, a in enumerate(np.sort(rng.uniform(0.1, 0.9, rows)))
    ]
    scratch = [{"seconds": 3.0 * i, "parameters": 5e4, "test_accuracy": 0.1 * i} for i in range(4)]
    return growth_png(state, scratch if baseline else [])


# Each kind in a sequence that changes what the last plot left: the number of epochs and
# ticks, a title or none, a legend or none, the scale of the values, the number of lines.
SEQUENCES: dict[str, tuple[dict, list[Callable[[], bytes]]]] = {
    "curves": (
        {"ncols": 2},
        [
            lambda: curves_png(history(2, 1.0), "prune"),
            lambda: curves_png(history(10, 0.3), "train"),
            lambda: curves_png(history(1, 2.0)),
            lambda: curves_png(history(4, 1e4), "grow"),
        ],
    ),
    "mask-logits": (
        {"ncols": 2, "width": 5.5},
        [
            lambda: mask_logits_png(histograms(2, 80, 0), (-1.1, 3.3), 1),
            lambda: mask_logits_png(histograms(10, 80, 1), (-1.5, 1.5), None),
            lambda: mask_logits_png(histograms(1, 40, 2), (-1.1, 5.5), 0),
            lambda: mask_logits_png(histograms(5, 80, 3), (-1.5, 1.5), None),
        ],
    ),
    "swaps": (
        {"ncols": 2},
        [
            lambda: swaps_png(swaps(3, 0), "search (dnw)"),
            lambda: swaps_png(swaps(12, 1), "search (dnw), 2 graphs"),
            lambda: swaps_png(swaps(1, 2), ""),
        ],
    ),
    "growth": (
        {"ncols": 2},
        [
            lambda: growth(6, 0, baseline=True),
            lambda: growth(2, 1, baseline=False),
            lambda: growth(9, 2, baseline=True),
        ],
    ),
    "spectrum": (
        {},
        [
            lambda: spectrum_png(spectra(("mask", "weighted"), 1178, 0)),
            lambda: spectrum_png(spectra(("mask",), 90, 1)),
            lambda: spectrum_png(spectra(("a", "b", "c"), 300, 2)),
        ],
    ),
}


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)))


@pytest.mark.parametrize("kind", sorted(SEQUENCES))
def test_a_kept_figure_draws_what_a_new_figure_draws(kind: str) -> None:
    shape, plots = SEQUENCES[kind]
    for plot in plots * 2:
        # While the kept figure is held, a plot of the same kind draws on a new figure.
        with kept_figure(kind, **shape):
            fresh = plot()
        kept = plot()
        assert np.array_equal(pixels(kept), pixels(fresh)) and kept == fresh


def test_a_plot_that_fails_halfway_leaves_nothing_behind() -> None:
    rows = history(3, 1.0)
    del rows[1]["test_accuracy"]  # the loss panel is drawn, then the accuracy panel fails
    with pytest.raises(KeyError):
        curves_png(rows, "half")
    after = curves_png(history(3, 1.0))
    with kept_figure("curves", ncols=2):
        fresh = curves_png(history(3, 1.0))
    assert after == fresh


def test_a_kept_figure_forgets_bars_tables_and_figure_texts() -> None:
    """What the job figures do not draw today is cleared too: a plot of bars, error bars, a
    table, a figure legend and text draws on a kept figure what it draws on a new one."""

    def plot(fig: Any, axes: Any, shift: float) -> bytes:
        ax = axes[0][0]
        ax.bar([1, 2, 3], [3 + shift, 1, 2], label="bars")
        ax.errorbar([1, 2], [1, 2 + shift], yerr=[0.1, 0.2], label="errors")
        ax.table(cellText=[[f"{shift}"]], loc="bottom")
        ax.legend()
        fig.text(0.5, 0.02, f"note {shift}")
        fig.legend(["a figure legend"])
        return figure_png(fig)

    for shift in (0.0, 1.5, 0.5):
        with kept_figure("test-bars") as (fig, axes):
            with kept_figure("test-bars") as (new_fig, new_axes):
                fresh = plot(new_fig, new_axes, shift)
            assert plot(fig, axes, shift) == fresh
