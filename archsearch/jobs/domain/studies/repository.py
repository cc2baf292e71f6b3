"""All SQL of studies. Callers own the transaction; nothing here commits."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from archsearch.jobs.domain import ids
from archsearch.jobs.domain.errors import NotFound
from archsearch.jobs.domain.ids import id_range
from archsearch.jobs.domain.studies.tables import Study
from archsearch.jobs.domain.tables import Artifact, Job, Metric
from archsearch.jobs.platform.store import check_artifact_name
from archsearch.schemas.jobs import TERMINAL_STATUSES, JobStatus
from archsearch.schemas.studies import StudyStatus

COMPACT_ARTIFACTS = ("model-compact.safetensors", "model.safetensors")


def get_study(
    session: Session,
    study_id: uuid.UUID,
    *,
    for_update: bool = False,
    team_id: uuid.UUID | None = None,
) -> Study:
    """The study; with `team_id`, another team's study is reported missing, as if absent."""
    study = session.get(Study, study_id, with_for_update=for_update or None)
    if study is None or (team_id is not None and study.team_id != team_id):
        raise NotFound(f"no study {study_id}")
    return study


def list_studies(
    session: Session,
    team_id: uuid.UUID | None = None,
    limit: int = 100,
    id_prefix: str | None = None,
) -> list[Study]:
    """Newest first; `id_prefix` (hex digits) keeps the studies whose id starts so."""
    query = select(Study).order_by(Study.created_at.desc(), Study.id.desc()).limit(limit)
    if team_id is not None:
        query = query.where(Study.team_id == team_id)
    if id_prefix:
        query = query.where(Study.id.between(*id_range(id_prefix)))
    return list(session.scalars(query))


def status_counts(
    session: Session, study_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, Counter[str]]:
    """Jobs by status for each study, in one grouped query."""
    counts: dict[uuid.UUID, Counter[str]] = {study_id: Counter() for study_id in study_ids}
    if not study_ids:
        return counts
    query = (
        select(Job.study_id, Job.status, func.count())
        .where(Job.study_id.in_(study_ids))
        .group_by(Job.study_id, Job.status)
    )
    for study_id, status, count in session.execute(query):
        assert study_id is not None, "filtered on study_id"
        counts[study_id][str(getattr(status, "value", status))] = count
    return counts


def study_jobs(session: Session, study_id: uuid.UUID) -> list[Job]:
    query = select(Job).where(Job.study_id == study_id).order_by(Job.created_at, Job.id)
    return list(session.scalars(query))


def fixed_with_open_jobs(session: Session, study_id: uuid.UUID) -> bool:
    """Whether the study is a fixed one (no sampler) with a job still queued or running,
    read in one query, without the study's lock or its jobs' rows."""
    open_job = (
        select(Job.id)
        .where(Job.study_id == study_id, Job.status.not_in(list(TERMINAL_STATUSES)))
        .exists()
    )
    query = select(Study.id).where(Study.id == study_id, Study.sampler.is_(None), open_job)
    return session.scalar(query) is not None


def open_job_ids(session: Session, study_id: uuid.UUID) -> list[uuid.UUID]:
    """Jobs of the study that are queued or running."""
    query = select(Job.id).where(
        Job.study_id == study_id, Job.status.not_in(list(TERMINAL_STATUSES))
    )
    return list(session.scalars(query))


def queued_arm_jobs(session: Session, study_id: uuid.UUID, arm: str) -> list[Job]:
    """The arm's jobs still queued, locked; one a worker is claiming now is skipped (it
    starts, and its arm's state stops it at its first epoch)."""
    query = (
        select(Job)
        .where(Job.study_id == study_id, Job.study_arm == arm, Job.status == JobStatus.queued)
        .order_by(Job.created_at, Job.id)
        .with_for_update(skip_locked=True)
    )
    return list(session.scalars(query))


def compact_sizes(session: Session, job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, int]:
    """Bytes of each job's compact model (its plain model when it has no compact one)."""
    if not job_ids:
        return {}
    query = select(Artifact.job_id, Artifact.name, Artifact.size).where(
        Artifact.job_id.in_(job_ids),
        Artifact.name.in_(COMPACT_ARTIFACTS),
    )
    found: dict[uuid.UUID, dict[str, int]] = {}
    for job_id, name, size in session.execute(query):
        if size is not None:
            found.setdefault(job_id, {})[name] = size
    return {
        job_id: next(sizes[name] for name in COMPACT_ARTIFACTS if name in sizes)
        for job_id, sizes in found.items()
    }


def metric_series_by_job(
    session: Session, job_ids: Sequence[uuid.UUID], name: str
) -> dict[uuid.UUID, list[tuple[int, float]]]:
    """One metric's (step, value) points of each job, in step order, in one query."""
    if not job_ids:
        return {}
    query = (
        select(Metric.job_id, Metric.step, Metric.value)
        .where(Metric.job_id.in_(job_ids), Metric.name == name)
        .order_by(Metric.job_id, Metric.step)
    )
    series: dict[uuid.UUID, list[tuple[int, float]]] = {}
    for job_id, step, value in session.execute(query):
        series.setdefault(job_id, []).append((step, value))
    return series


def unfinished_study_ids(session: Session) -> list[uuid.UUID]:
    return list(session.scalars(select(Study.id).where(Study.status == StudyStatus.running)))


def tag_job(job: Job, study_id: uuid.UUID, arm: str, trial: int | None = None) -> None:
    job.study_id, job.study_arm, job.study_trial = study_id, arm, trial


def new_study(**values: Any) -> Study:
    return Study(id=uuid.uuid4(), status=StudyStatus.running, trials_asked=0, **values)


def artifact_key(study_id: uuid.UUID, name: str) -> str:
    return f"studies/{study_id.hex}/{check_artifact_name(name)}"


def ended_without_artifacts(session: Session) -> list[uuid.UUID]:
    query = select(Study.id).where(
        Study.status != StudyStatus.running, Study.artifacts_at.is_(None)
    )
    return list(session.scalars(query))


def resolve_study_id(session: Session, text: str, team_id: uuid.UUID | None) -> uuid.UUID:
    """The study of the caller's team that `text`, a whole id or a unique start of one, names."""
    return ids.resolve(session, Study.id, Study.team_id, text, team_id, "study")
