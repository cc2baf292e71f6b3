"""A study's files drawn from its summary: `results.csv` (one row per job), `pareto.png`
(test accuracy against parameters and against latency, one colour per arm, error bars over
seeds, the front drawn) and `curves.png` (each job's test accuracy during training, coloured
by arm). Drawing only: the study driver (`studies.py`) decides when, the domain what.
"""

from __future__ import annotations

import csv
import io

import matplotlib

matplotlib.use("Agg")  # headless: workers have no display
import matplotlib.pyplot as plt  # noqa: E402  (after the headless backend is chosen)
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from archsearch.jobs.domain.studies.pareto import pareto_front  # noqa: E402
from archsearch.schemas.studies import ArmSummary, StudyDetail  # noqa: E402

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


def results_csv(rows: list[dict[str, object]]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def _colours(arms: list[ArmSummary]) -> dict[str, object]:
    cmap = plt.get_cmap("tab20")
    return {arm.label: cmap(i % 20) for i, arm in enumerate(arms)}


def _scatter(ax: Axes, arms: list[ArmSummary], x_of: str, colours: dict[str, object]) -> None:
    front = []
    for arm in arms:
        x, y = getattr(arm, x_of), arm.test_accuracy
        if x is None or y is None:
            continue
        ax.errorbar(
            x.mean,
            y.mean,
            # On a log axis a bar reaching zero or below spans the whole plot: clip its lower arm.
            xerr=[[min(x.std, 0.9 * x.mean)], [x.std]],
            yerr=y.std,
            fmt="o",
            color=colours[arm.label],
            label=arm.label,
            capsize=3,
        )
        front.append((x.mean, y.mean))
    # The front of this plot's own axes (the study's front is over parameters; the latency
    # plot marks the arms no other arm beats with both lower latency and higher accuracy).
    line = sorted(front[i] for i in pareto_front([(y, x) for x, y in front]))
    if line:
        ax.step(*zip(*line, strict=True), where="post", color="black", lw=1, label="Pareto front")
    ax.set_xscale("log")
    ax.set_xlabel(x_of.replace("_", " "))
    ax.set_ylabel("test accuracy")
    ax.grid(alpha=0.3)


def pareto_png(detail: StudyDetail) -> bytes:
    colours = _colours(detail.arms)
    has_latency = any(arm.latency_ms is not None for arm in detail.arms)
    fig, axes = plt.subplots(
        1, 2 if has_latency else 1, figsize=(13 if has_latency else 8, 5.5), squeeze=False
    )
    _scatter(axes[0][0], detail.arms, "parameters", colours)
    axes[0][0].set_title(f"{detail.name}: accuracy vs parameters (mean ± std over seeds)")
    if has_latency:
        _scatter(axes[0][1], detail.arms, "latency_ms", colours)
        axes[0][1].set_title("accuracy vs CPU latency of the compact model (ms)")
    axes[0][-1].legend(fontsize=7, loc="lower right", ncol=2)
    return _png(fig)


def curves_png(detail: StudyDetail, curves: dict[str, list[list[tuple[int, float]]]]) -> bytes:
    colours = _colours(detail.arms)
    fig, ax = plt.subplots(figsize=(9, 5.5))
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
    return _png(fig)


# Margins in inches around the panels (tick labels, axis labels, titles) and between two.
MARGINS_IN = {"left": 0.9, "right": 0.2, "bottom": 0.6, "top": 0.45, "gap": 1.0}


def _fixed_layout(fig: Figure) -> None:
    """Fixed margins instead of `tight_layout`, which lays the figure out once more before
    the save draws it: ~20% of a chart's CPU time, paid after a study's last job."""
    width, height = fig.get_size_inches()
    m, panels = MARGINS_IN, max(1, len(fig.axes))
    panel = (width - m["left"] - m["right"] - m["gap"] * (panels - 1)) / panels
    fig.subplots_adjust(
        left=m["left"] / width,
        right=1 - m["right"] / width,
        bottom=m["bottom"] / height,
        top=1 - m["top"] / height,
        wspace=m["gap"] / panel,
    )


def _png(fig: Figure) -> bytes:
    out = io.BytesIO()
    _fixed_layout(fig)
    fig.savefig(out, format="png", dpi=110)
    plt.close(fig)
    return out.getvalue()
