"""A study's charts (`pareto.png`, `curves.png`): drawn on kept figures, each PNG is the one
a new figure gives; drawn side by side in two processes, the ones drawn in one; and log axes
carry plain labels where matplotlib would label them."""

from __future__ import annotations

import datetime as dt
import os
import uuid

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from archsearch.core.export import kept_figure
from archsearch.jobs.runtime import study_charts
from archsearch.jobs.runtime.study_charts import (
    PlainLogLabels,
    chart_files,
    curves_png,
    pareto_png,
)
from archsearch.schemas.studies import ArmSummary, Stat, StudyDetail

Curves = dict[str, list[list[tuple[int, float]]]]


def arm(i: int, latency: bool) -> ArmSummary:
    return ArmSummary(
        label=f"prune d={0.5 / (i + 1):.2f}",
        method="prune",
        jobs=3,
        counts={"succeeded": 3},
        test_accuracy=Stat(mean=0.9 - 0.02 * i, std=0.005 * (i + 1), n=3),
        parameters=Stat(mean=2.3e5 / (i + 1) ** 2, std=1e3, n=3),
        latency_ms=Stat(mean=0.5 / (i + 1), std=0.01, n=3) if latency else None,
    )


def detail(arms: int, latency: bool, name: str) -> StudyDetail:
    now = dt.datetime.now(dt.UTC)
    return StudyDetail(
        id=uuid.uuid4(),
        name=name,
        status="finished",
        dataset={"name": "mnist"},
        budget=None,
        seeds=[0, 1, 2],
        sampler=None,
        n_trials=None,
        parallel=None,
        trials_asked=0,
        cancel_requested=False,
        owner_id=None,
        team_id=None,
        created_at=now,
        updated_at=now,
        finished_at=now,
        config={},
        arms=[arm(i, latency) for i in range(arms)],
    )


def curves(arms: int, points: int) -> Curves:
    return {
        f"prune d={0.5 / (i + 1):.2f}": [
            [(10 * s, 0.5 + 0.4 * s / points - 0.01 * i - 0.003 * k) for s in range(points)]
            for k in range(3)
        ]
        for i in range(arms)
    }


def mixed() -> StudyDetail:
    """Arms a panel has no point for: no latency measured, no accuracy (its jobs failed)."""
    study = detail(4, True, "mixed")
    study.arms[1] = study.arms[1].model_copy(update={"latency_ms": None})
    study.arms[2] = study.arms[2].model_copy(update={"test_accuracy": None})
    return study


# Each sequence changes what the last chart left: arms, panels, names, lines, a legend.
PARETO = [
    detail(5, True, "sweep"),
    detail(2, False, "two arms"),
    detail(7, True, "seven"),
    mixed(),
]
CURVES = [(PARETO[0], curves(5, 40)), (PARETO[1], {}), (PARETO[2], curves(7, 9))]


@pytest.mark.parametrize("study", PARETO, ids=lambda d: d.name)
def test_a_kept_pareto_chart_draws_what_a_new_one_draws(study: StudyDetail) -> None:
    for shape in ((2, 6.5), (1, 8.0)):  # whichever the kept figure is, a new one is held
        with kept_figure("study-pareto", *shape, height=5.5):
            fresh = pareto_png(study)
        pareto_png(PARETO[(PARETO.index(study) + 1) % len(PARETO)])  # leave another behind
        assert pareto_png(study) == fresh


@pytest.mark.parametrize("index", range(len(CURVES)))
def test_a_kept_curves_chart_draws_what_a_new_one_draws(index: int) -> None:
    study, lines = CURVES[index]
    with kept_figure("study-curves", width=9.0, height=5.5):
        fresh = curves_png(study, lines)
    curves_png(*CURVES[(index + 1) % len(CURVES)])
    assert curves_png(study, lines) == fresh
    assert curves_png(study, lines) != curves_png(*CURVES[(index + 1) % len(CURVES)])


def test_charts_drawn_side_by_side_are_those_drawn_one_after_the_other() -> None:
    study, lines = CURVES[0]
    assert chart_files(study, lines, side_by_side=True) == {
        "pareto.png": pareto_png(study),
        "curves.png": curves_png(study, lines),
    }


def test_a_chart_whose_child_fails_is_drawn_in_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parent, draw = os.getpid(), study_charts.curves_png
    drawn_in: list[int] = []

    def fails_in_a_child(study: StudyDetail, lines: Curves) -> bytes:
        if os.getpid() != parent:
            os._exit(9)  # as a child the out-of-memory killer took, say
        drawn_in.append(os.getpid())
        return draw(study, lines)

    monkeypatch.setattr(study_charts, "curves_png", fails_in_a_child)
    study, lines = CURVES[2]
    charts = chart_files(study, lines, side_by_side=True)
    assert drawn_in == [parent]
    assert charts["curves.png"] == draw(study, lines)


def labels_on(low: float, high: float) -> tuple[PlainLogLabels, PlainLogLabels]:
    figure = Figure()
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    ax.set_xscale("log")
    ax.set_xlim(low, high)
    major, minor = PlainLogLabels(minor=False), PlainLogLabels(minor=True)
    ax.xaxis.set_major_formatter(major)
    ax.xaxis.set_minor_formatter(minor)
    return major, minor


def test_log_labels_are_plain_and_minor_ones_only_on_a_short_axis() -> None:
    major, minor = labels_on(1e3, 1e6)
    assert (major(1e4), major(1e5), minor(2e4), minor(5e4)) == ("10000", "100000", "", "")
    major, minor = labels_on(0.08, 0.6)  # under a decade: 2 and 5 labelled
    assert (major(0.1), minor(0.2), minor(0.3), minor(0.5)) == ("0.1", "0.2", "", "0.5")
    _, minor = labels_on(0.2, 0.4)  # under a third of a decade: every minor tick
    assert (minor(0.2), minor(0.3), minor(0.4)) == ("0.2", "0.3", "0.4")
