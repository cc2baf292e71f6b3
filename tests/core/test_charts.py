"""A chart's data (`core.charts`) draws the very PNG the figure code draws from the same
values, survives JSON as PostgreSQL stores it, and draws the same after the trip."""

from __future__ import annotations

import json
import math

import pytest

from archsearch.core import charts
from archsearch.core.charts.layout import curves_png
from archsearch.core.charts.pruning import mask_logits_png, spectrum_png
from tests.core.test_plots import histograms, history, spectra


def stored(chart: charts.Chart) -> charts.Chart:
    """The chart as a JSON column gives it back (no NaN: PostgreSQL's json refuses it)."""
    loaded: charts.Chart = json.loads(json.dumps(chart, allow_nan=False))
    return loaded


def test_each_chart_draws_what_its_figure_code_draws() -> None:
    rows, counts, spectrum = history(3, 1.0), histograms(4, 40, 0), spectra(("mask",), 90, 1)
    files = {"spectrum.json": json.dumps(spectrum).encode()}
    cases = [
        (charts.curves(rows, "prune"), curves_png(rows, "prune")),
        (charts.mask_logits(counts, (-3.0, 3.0), 2), mask_logits_png(counts, (-3.0, 3.0), 2)),
        (charts.mask_logits(counts, (-1.0, 4.0), None), mask_logits_png(counts, (-1.0, 4.0), None)),
        (charts.spectrum("spectrum.json"), spectrum_png(spectrum)),
    ]
    for chart, direct in cases:
        assert charts.draw(stored(chart), files.__getitem__) == direct


def test_curves_keep_only_the_drawn_fields_and_no_value_json_refuses() -> None:
    rows = history(2, 1.0)
    rows[0] |= {"test_loss": math.inf, "val_accuracy": 0.5, "phase_finetune": 1.0}
    rows[1]["train_loss"] = math.nan
    chart = stored(charts.curves(rows, "train"))
    assert [set(row) for row in chart["history"]] == [set(charts.CURVE_FIELDS)] * 2
    assert chart["history"][0]["test_loss"] is None and chart["history"][1]["train_loss"] is None
    assert charts.draw(chart, {}.__getitem__)[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown chart kind 'pie'"):
        charts.draw({"kind": "pie"}, {}.__getitem__)
