"""Plots of the prune method: mask-logit histograms over training, spectra, spectra PCA."""

from __future__ import annotations

from typing import Any

import numpy as np

from archsearch.core.charts.layout import (
    figure_png,
    kept_figure,
    new_figure,
    plain_log_ticks,
    whole_number_ticks,
)


def mask_logits_png(
    histograms: list[list[float]], value_range: tuple[float, float], frozen_epoch: int | None
) -> bytes:
    """Histogram of the mask logits after each epoch: the masks settling on either side of 0."""
    with kept_figure("mask-logits", ncols=2, width=5.5) as (fig, axes):
        _draw_heat(axes[0][0], histograms, value_range, frozen_epoch)
        _draw_last_histograms(axes[0][1], histograms, value_range)
        return figure_png(fig)


def _draw_heat(
    heat_ax: Any,
    histograms: list[list[float]],
    value_range: tuple[float, float],
    frozen_epoch: int | None,
) -> None:
    counts = np.log1p(np.asarray(histograms, dtype=float))  # (epochs, bins)
    edges = np.linspace(*value_range, counts.shape[1] + 1)
    heat_ax.imshow(
        counts.T,
        aspect="auto",
        origin="lower",
        cmap="viridis",
        interpolation="nearest",  # one column per epoch, not blended into its neighbours
        extent=(0.5, len(histograms) + 0.5, edges[0], edges[-1]),
    )
    heat_ax.axhline(0.0, color="white", lw=0.8, ls="--")
    if frozen_epoch is not None:
        heat_ax.axvline(frozen_epoch + 0.5, color="red", lw=0.8, label="masks frozen")
        heat_ax.legend(loc="upper right", fontsize=7)
    heat_ax.set(xlabel="epoch", ylabel="mask logit w", title="log(1 + count) per epoch")
    whole_number_ticks(heat_ax.xaxis)


def _draw_last_histograms(
    last_ax: Any, histograms: list[list[float]], value_range: tuple[float, float]
) -> None:
    edges = np.linspace(*value_range, len(histograms[0]) + 1)
    centers = (edges[:-1] + edges[1:]) / 2
    for i in sorted({0, len(histograms) // 2, len(histograms) - 1}):
        last_ax.step(centers, np.asarray(histograms[i]) + 1, where="mid", label=f"epoch {i + 1}")
    last_ax.axvline(0.0, color="k", lw=0.8, ls="--")
    last_ax.set(
        xlabel="mask logit w (clipped)", ylabel="1 + count", yscale="log", title="histograms"
    )
    plain_log_ticks(last_ax.yaxis)
    last_ax.legend(fontsize=7)


def spectrum_png(spectra: dict[str, list[float]]) -> bytes:
    with kept_figure("spectrum") as (fig, axes):
        ax = axes[0][0]
        for label, values in spectra.items():
            ax.plot(range(1, len(values) + 1), values, label=label)
        ax.set(
            xlabel="index (ascending)", ylabel="eigenvalue", title="normalized Laplacian spectrum"
        )
        ax.legend()
        return figure_png(fig)


def spectra_pca_png(coords: np.ndarray, labels: list[str], ratio: np.ndarray) -> bytes:
    fig, axes = new_figure(width=5.0, height=4.2)
    ax = axes[0][0]
    ax.scatter(coords[:, 0], coords[:, 1])
    for (x, y), label in zip(coords, labels, strict=False):
        ax.annotate(label, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set(
        xlabel=f"PC1 ({ratio[0]:.0%})",
        ylabel=f"PC2 ({ratio[1]:.0%})",
        title="Laplacian spectra, 2-D PCA",
    )
    return figure_png(fig)
