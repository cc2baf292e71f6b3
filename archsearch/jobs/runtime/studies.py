"""The worker's side of studies: advance a study when one of its jobs ends and on the
periodic tick, and store its artifacts once it has ended (drawn by `study_charts`):
`results.csv`, `study.json` (the summary the API serves), `pareto.png`, `curves.png` and
`report.md` (which method wins at which size).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from archsearch.core.deploy.forked import CAN_FORK
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import repository as jobs_repository
from archsearch.jobs.domain.studies import repository, service, summary
from archsearch.jobs.domain.studies.report import report_markdown
from archsearch.jobs.platform.broker import CeleryEnqueuer
from archsearch.jobs.platform.cores import usable_cores
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.services import Services
from archsearch.jobs.runtime import study_charts

log = logging.getLogger(__name__)
_enqueuer: CeleryEnqueuer | None = None  # one broker client per process, built on first use


def after_job_finished(services: Services, job_id: uuid.UUID) -> None:
    """Called once a job's outcome is recorded: tell its pruning trial how it ended and
    advance its study, if it has one. Never raises: the job's outcome stands, and the
    periodic tick advances the study later."""
    try:
        with transaction(services.sessions) as session:
            job = jobs_repository.get_job(session, job_id)
            study_id = job.study_id
            if study_id is not None:
                service.settle_pruning_trial(session, services.settings, job)
        if study_id is not None:
            advance(services, study_id)
    except Exception:
        log.exception("advancing the study of job %s failed; the next tick retries", job_id)


@dataclass(frozen=True)
class StudyTrial:
    """What a study's job needs of its study while it runs."""

    # The question asked after each epoch (should it stop?) when the study has a pruner.
    pruning: Callable[[int, float], bool] | None


def study_trial(services: Services, job_id: uuid.UUID) -> StudyTrial | None:
    """The job's trial when it belongs to a study; None for any other job."""
    with transaction(services.sessions) as session:
        job = jobs_repository.get_job(session, job_id)
        if job.study_id is None:
            return None
        return StudyTrial(pruning=service.trial_pruning(session, services.settings, job))


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
        "results.csv": study_charts.results_csv(rows),
        "study.json": detail.model_dump_json(indent=2).encode(),
        **study_charts.chart_files(detail, curves, side_by_side=_second_core()),
        "report.md": report_markdown(detail).encode(),
    }
    for name, data in files.items():
        services.store.objects.put_bytes(repository.artifact_key(study_id, name), data)
    with transaction(services.sessions) as session:
        repository.get_study(session, study_id, for_update=True).artifacts_at = utcnow()
    log.info("study %s: artifacts built", study_id)


def _second_core() -> bool:
    """Whether a chart may be drawn in a forked child on another core: the user waits for the
    charts after the study's last job, and the worker draws them before it claims its next."""
    return CAN_FORK and usable_cores() > 1
