"""The worker's side of studies (issue 12): advance a study when one of its jobs ends and
on the periodic tick, and build its artifacts once it has ended.

Artifacts: `results.csv` (one row per job), `study.json` (the summary the API serves),
`pareto.png` (test accuracy against parameters and against latency, one colour per arm,
error bars over seeds, the front drawn), `curves.png` (each job's test accuracy during
training, coloured by arm), and `report.md` (which method wins at which size).
"""

from __future__ import annotations

import csv
import io
import logging
import uuid

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the headless backend is chosen)
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from archsearch.jobs.domain.base import utcnow  # noqa: E402
from archsearch.jobs.domain.jobs import repository as jobs_repository  # noqa: E402
from archsearch.jobs.domain.studies import repository, service, summary  # noqa: E402
from archsearch.jobs.domain.studies.report import report_markdown  # noqa: E402
from archsearch.jobs.platform.broker import CeleryEnqueuer  # noqa: E402
from archsearch.jobs.platform.db import transaction  # noqa: E402
from archsearch.jobs.platform.services import Services  # noqa: E402
from archsearch.schemas.studies import ArmSummary, StudyDetail  # noqa: E402

log = logging.getLogger(__name__)
_enqueuer: CeleryEnqueuer | None = None  # one broker client per process, built on first use
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


def after_job_finished(services: Services, job_id: uuid.UUID) -> None:
    """Called once a job's outcome is recorded: advance its study, if it has one. Never
    raises: the job's outcome stands, and the periodic tick advances the study later."""
    try:
        with transaction(services.sessions) as session:
            study_id = jobs_repository.get_job(session, job_id).study_id
        if study_id is not None:
            advance(services, study_id)
    except Exception:
        log.exception("advancing the study of job %s failed; the next tick retries", job_id)


def advance(services: Services, study_id: uuid.UUID) -> None:
    with transaction(services.sessions) as session:
        step = service.advance_study(session, services.settings, study_id)
    if step.new_jobs:
        log.info("study %s: %d new trial job(s)", study_id, len(step.new_jobs))
        wake_workers(services, step.new_jobs)
    if step.ended:
        build_artifacts(services, study_id)


def wake_workers(services: Services, jobs: list[tuple[uuid.UUID, str]]) -> None:
    """Wake idle workers for new trial jobs (this worker's own loop claims one anyway;
    embedded mode's runner drains the queue after every job)."""
    if services.settings.broker_url is None:
        return
    global _enqueuer
    if _enqueuer is None:
        _enqueuer = CeleryEnqueuer(services.settings)
    try:
        service.wake(_enqueuer, jobs)
    except Exception:  # the periodic wake-up of waiting jobs covers a lost message
        log.warning("could not wake workers for %d trial job(s)", len(jobs))


def advance_open_studies(services: Services) -> None:
    """The periodic tick: advance every running study, and build the artifacts of any
    that ended without them (cancelled from the API, or a worker died while building)."""
    with transaction(services.sessions) as session:
        running = repository.unfinished_study_ids(session)
        unbuilt = repository.ended_without_artifacts(session)
    for study_id in running:
        advance(services, study_id)
    for study_id in unbuilt:
        build_artifacts(services, study_id)


def build_artifacts(services: Services, study_id: uuid.UUID) -> None:
    with transaction(services.sessions) as session:
        detail = summary.read_study(session, study_id, team_id=None)
        rows = summary.result_rows(session, study_id)
        curves = summary.accuracy_curves(session, study_id)
    files = {
        "results.csv": results_csv(rows),
        "study.json": detail.model_dump_json(indent=2).encode(),
        "pareto.png": pareto_png(detail),
        "curves.png": curves_png(detail, curves),
        "report.md": report_markdown(detail).encode(),
    }
    for name, data in files.items():
        services.store.objects.put_bytes(repository.artifact_key(study_id, name), data)
    with transaction(services.sessions) as session:
        repository.get_study(session, study_id, for_update=True).artifacts_at = utcnow()
    log.info("study %s: artifacts built", study_id)


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
    line = sorted(
        (x, y)
        for x, y in front
        if not any(a <= x and b >= y and (a, b) != (x, y) for a, b in front)
    )
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


def _png(fig: Figure) -> bytes:
    out = io.BytesIO()
    fig.tight_layout()
    fig.savefig(out, format="png", dpi=110)
    plt.close(fig)
    return out.getvalue()
