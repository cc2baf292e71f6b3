"""A job's charts, drawn from their data: `curves.png`, `mask-logits.png`, `spectrum.png`.

A method hands the data a chart is drawn from (`Chart`: a small JSON object) to its
`RunContext.save_chart`. The service's context stores it and draws the PNG only when the
file is first downloaded (`jobs.domain.jobs.charts`), so a job no longer pays for figures
nobody opens (a study's trials mostly); the in-memory context draws at once. This package
imports matplotlib and numpy only, never torch: the API process draws with it.

The layout every figure shares is `layout`; the prune method's figures are `pruning`
("Differentiable Architecture Pruning", the mask logits of section 2.2; "Disentangling
Neural Architectures and Weights", the Laplacian spectra of section 5).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from archsearch.core.charts.layout import curves_png
from archsearch.core.charts.pruning import mask_logits_png, spectrum_png

Chart = dict[str, Any]  # {"kind": ..., its arguments}: JSON, kept until the PNG is drawn
CURVE_FIELDS = ("epoch", "train_loss", "test_loss", "test_accuracy")  # what curves.png draws


def curves(history: list[dict[str, float]], title: str) -> Chart:
    """`curves.png`: loss and accuracy per epoch. Only the drawn fields are kept, a value
    that is not finite as null (JSON has no NaN; PostgreSQL refuses one)."""
    rows = [{key: _finite(row.get(key)) for key in CURVE_FIELDS} for row in history]
    return {"kind": "curves", "history": rows, "title": title}


def mask_logits(
    histograms: list[list[float]], value_range: tuple[float, float], frozen_epoch: int | None
) -> Chart:
    """`mask-logits.png`: the histogram of the mask logits after each epoch."""
    return {
        "kind": "mask_logits",
        "histograms": histograms,
        "value_range": list(value_range),
        "frozen_epoch": frozen_epoch,
    }


def spectrum(data_file: str) -> Chart:
    """`spectrum.png`, drawn from the job's own `data_file` (spectrum.json), not a copy."""
    return {"kind": "spectrum", "data": data_file}


def draw(chart: Chart, read_artifact: Callable[[str], bytes]) -> bytes:
    """The PNG of `chart`; `read_artifact(name)` reads a file of the same job."""
    kind = chart.get("kind")
    if kind == "curves":
        history = [{k: _nan_for_null(v) for k, v in row.items()} for row in chart["history"]]
        return curves_png(history, chart["title"])
    if kind == "mask_logits":
        low, high = chart["value_range"]
        return mask_logits_png(chart["histograms"], (low, high), chart["frozen_epoch"])
    if kind == "spectrum":
        return spectrum_png(json.loads(read_artifact(chart["data"])))
    raise ValueError(f"unknown chart kind {kind!r}")


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _nan_for_null(value: float | None) -> float:
    return math.nan if value is None else value
