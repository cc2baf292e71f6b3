"""A study's files drawn from its summary: `results.csv` (one row per job), `pareto.png`
(test accuracy against parameters and against latency, one colour per arm, error bars over
seeds, the front drawn) and `curves.png` (each job's test accuracy during training, coloured
by arm). Drawing only: the study driver (`studies.py`) decides when, the domain what.

A user waits for these after the study's last job, so they are drawn the way a job's own
figures are (`core.export`): on a figure kept from the last study's chart, with fixed
margins, plain log tick labels, and no pyplot; and, where the process may use a second core,
the two charts side by side (`chart_files`).
"""

from __future__ import annotations

import csv
import io
import logging
import math
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.ticker import Formatter

from archsearch.core.deploy.forked import ForkedStepFailed, start_forked
from archsearch.core.export import figure_png, kept_figure, new_figure
from archsearch.jobs.domain.studies.pareto import pareto_front
from archsearch.schemas.studies import ArmSummary, Stat, StudyDetail

CSV_FIELDS = (
    "job_id",
    "arm",
    "method",
    "seed",
    "status",
    "test_accuracy",
    "parameters",
    "macs",
    "optimizer_steps",
    "samples_seen",
    "compact_bytes",
    "latency_ms",
    "wall_clock_s",
)
Curves = dict[str, list[list[tuple[int, float]]]]  # arm label -> per job: (step, accuracy)
Colour = tuple[float, float, float, float]  # RGBA
MARKER_SIZE = 36.0  # points squared: matplotlib's default 6 pt marker
CAP_SIZE = 36.0  # a 6 pt cap, as `errorbar(capsize=3)` draws
# A chart takes a tenth of a second; a child still drawing after this is stuck (a lock some
# other thread held at the fork): the chart is drawn again in the process.
CHILD_TIMEOUT_S = 60.0

log = logging.getLogger(__name__)


def chart_files(detail: StudyDetail, curves: Curves, side_by_side: bool) -> dict[str, bytes]:
    """`pareto.png` and `curves.png`. `side_by_side`: the curves are drawn in a child process
    forked for them while this one draws the Pareto chart: on two cores, 0.12 s where one
    after the other took 0.15 s (`bench/study.py`; the fork and the pages both processes then
    copy on write cost the rest). A child that fails leaves its chart to be drawn here."""
    if not side_by_side:
        return {"pareto.png": pareto_png(detail), "curves.png": curves_png(detail, curves)}
    child = start_forked(lambda: curves_png(detail, curves), "the study's curves chart")
    try:
        pareto = pareto_png(detail)
    except BaseException:
        child.stop()
        raise
    try:
        drawn = child.result(timeout_s=CHILD_TIMEOUT_S)
    except ForkedStepFailed as error:
        log.warning("%s; drawing it here", error)
        drawn = curves_png(detail, curves)
    return {"pareto.png": pareto, "curves.png": drawn}


def results_csv(rows: list[dict[str, object]]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


class PlainLogLabels(Formatter):
    """Log-axis labels in plain text (0.2, 5000), not matplotlib's default `2 x 10^-1`
    mathtext, laid out glyph by glyph at several times the cost. As the default does,
    minor ticks are labelled only on an axis spanning less than a decade (arms of nearby
    sizes): all of them below a third of a decade, else those at 2 and 5."""

    def __init__(self, minor: bool) -> None:
        self.minor = minor

    def __call__(self, x: float, pos: int | None = None) -> str:
        if self.minor and not self._labels_minor(x):
            return ""
        return f"{x:g}"

    def _labels_minor(self, x: float) -> bool:
        low, high = self.axis.get_view_interval() if self.axis else (1.0, 10.0)
        decades = math.log10(high / low) if low > 0 and high > low else 1.0
        leading = round(x / 10 ** math.floor(math.log10(x) + 1e-9)) if x > 0 else 0
        return decades < 1 / 3 or (decades < 1 and leading in (2, 5))


def _colours(arms: list[ArmSummary]) -> dict[str, Colour]:
    cmap = colormaps["tab20"]
    return {arm.label: cmap(i % 20) for i, arm in enumerate(arms)}


def _scatter(ax: Axes, arms: list[ArmSummary], x_of: str, colours: dict[str, Colour]) -> None:
    points = [
        (getattr(arm, x_of), arm.test_accuracy, colours[arm.label], arm.label)
        for arm in arms
        if getattr(arm, x_of) is not None and arm.test_accuracy is not None
    ]
    if points:
        _points_with_error_bars(ax, points)
    front = [(x.mean, y.mean) for x, y, _, _ in points]
    # The front of this plot's own axes (the study's front is over parameters; the latency
    # plot marks the arms no other arm beats with both lower latency and higher accuracy).
    line = sorted(front[i] for i in pareto_front([(y, x) for x, y in front]))
    if line:
        ax.step(*zip(*line, strict=True), where="post", color="black", lw=1, label="Pareto front")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(PlainLogLabels(minor=False))
    ax.xaxis.set_minor_formatter(PlainLogLabels(minor=True))
    ax.set_xlabel(x_of.replace("_", " "))
    ax.set_ylabel("test accuracy")
    ax.grid(alpha=0.3)


def _points_with_error_bars(ax: Axes, points: list[tuple[Stat, Stat, Colour, str]]) -> None:
    """Each arm's mean with its std as bars, all arms in one collection per kind of mark:
    `errorbar` per arm made some forty artists for eight arms, a third of the chart's CPU
    (a study's charts are what its user waits for after the last job)."""
    x = np.array([p[0].mean for p in points])
    y = np.array([p[1].mean for p in points])
    # On a log axis a bar reaching zero or below spans the whole plot: clip its lower arm.
    x_low = x - np.minimum([p[0].std for p in points], 0.9 * x)
    x_high = x + np.array([p[0].std for p in points])
    y_std = np.array([p[1].std for p in points])
    colours = [p[2] for p in points]
    bars = [((a, b), (c, b)) for a, b, c in zip(x_low, y, x_high, strict=True)]
    bars += [((a, b - e), (a, b + e)) for a, b, e in zip(x, y, y_std, strict=True)]
    ax.add_collection(LineCollection(bars, colors=colours * 2, linewidths=1.5))
    ax.scatter(np.r_[x_low, x_high], np.r_[y, y], s=CAP_SIZE, c=colours * 2, marker="|")
    ax.scatter(np.r_[x, x], np.r_[y - y_std, y + y_std], s=CAP_SIZE, c=colours * 2, marker="_")
    ax.scatter(x, y, s=MARKER_SIZE, c=colours, zorder=3)
    for colour, label in zip(colours, (p[3] for p in points), strict=True):
        ax.plot([], [], "o", color=colour, label=label)  # the arm's legend entry


def pareto_png(detail: StudyDetail) -> bytes:
    has_latency = any(arm.latency_ms is not None for arm in detail.arms)
    ncols, width = (2, 6.5) if has_latency else (1, 8.0)
    with kept_figure("study-pareto", ncols, width, height=5.5) as (fig, axes):
        return _draw_pareto(fig, axes[0], detail, has_latency)


def _draw_pareto(fig: Any, axes: Any, detail: StudyDetail, has_latency: bool) -> bytes:
    colours = _colours(detail.arms)
    _scatter(axes[0], detail.arms, "parameters", colours)
    axes[0].set_title(f"{detail.name}: accuracy vs parameters (mean ± std over seeds)")
    if has_latency:
        _scatter(axes[1], detail.arms, "latency_ms", colours)
        axes[1].set_title("accuracy vs the compact model's CPU time per call, 1 thread (ms)")
    axes[-1].legend(fontsize=7, loc="lower right", ncol=2)
    return figure_png(fig)


def curves_png(detail: StudyDetail, curves: Curves) -> bytes:
    if not any(points for series in curves.values() for points in series):
        # No line to draw: a kept figure would keep the last chart's axis limits.
        fig, axes = new_figure(width=9.0, height=5.5)
        return _draw_curves(fig, axes[0][0], detail, curves)
    with kept_figure("study-curves", width=9.0, height=5.5) as (fig, axes):
        return _draw_curves(fig, axes[0][0], detail, curves)


def _draw_curves(fig: Any, ax: Axes, detail: StudyDetail, curves: Curves) -> bytes:
    colours = _colours(detail.arms)
    for label, series in curves.items():
        for i, points in enumerate(series):
            if points:
                steps, values = zip(*points, strict=True)
                ax.plot(
                    steps,
                    values,
                    color=colours.get(label, "grey"),
                    alpha=0.8,
                    label=label if i == 0 else None,
                )
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"{detail.name}: test accuracy during training")
    ax.grid(alpha=0.3)
    if curves:
        ax.legend(fontsize=7, ncol=2)
    return figure_png(fig)
