"""A study as the API and the artifacts show it: per-arm figures over seeds, the Pareto
front, one row per job, and each job's accuracy curve."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from sqlalchemy.orm import Session

from archsearch.jobs.domain.errors import NotFound
from archsearch.jobs.domain.studies import repository as studies_repository
from archsearch.jobs.domain.studies.aggregation import (
    JobFacts,
    compact_bytes,
    latency,
    spent,
    summarise,
)
from archsearch.jobs.domain.studies.expansion import get_path
from archsearch.jobs.domain.studies.tables import Study
from archsearch.jobs.domain.tables import Job
from archsearch.schemas.jobs import JobStatus
from archsearch.schemas.studies import StudyDetail, StudyPublic

STUDY_ARTIFACTS = ("results.csv", "study.json", "pareto.png", "curves.png", "report.md")


def job_facts(study: Study, jobs: list[Job], sizes: dict[uuid.UUID, int]) -> list[JobFacts]:
    space = list(study.config.get("space") or {})
    facts = []
    for job in jobs:
        wall = None
        if job.started_at is not None and job.finished_at is not None:
            wall = (job.finished_at - job.started_at).total_seconds()
        facts.append(
            JobFacts(
                arm=job.study_arm or "base",
                method=job.method,
                status=JobStatus(job.status).value,
                metrics=job.latest_metrics or {},
                wall_clock_s=wall,
                compact_bytes=sizes.get(job.id),
                params={path: get_path(job.spec, path) for path in space},
                batch_size=get_path(job.spec, "training.batch_size"),
            )
        )
    return facts


def study_public(study: Study, counts: dict[str, int]) -> StudyPublic:
    public = StudyPublic.model_validate(study)
    return public.model_copy(update={"counts": counts})


def read_study(session: Session, study_id: uuid.UUID, team_id: uuid.UUID | None) -> StudyDetail:
    """The study with its per-arm figures and Pareto front."""
    study = studies_repository.get_study(session, study_id, team_id=team_id)
    jobs = studies_repository.study_jobs(session, study.id)
    sizes = studies_repository.compact_sizes(session, [job.id for job in jobs])
    budget = None if study.budget is None else study.budget.get("steps")
    facts = job_facts(study, jobs, sizes)
    arms, pareto = summarise(facts, budget)
    counts = dict(Counter(JobStatus(job.status).value for job in jobs))
    return StudyDetail.model_validate(
        {
            **study_public(study, counts).model_dump(),
            "config": study.config,
            **spent(facts),
            "arms": arms,
            "pareto": pareto,
            "artifacts": list(STUDY_ARTIFACTS) if study.artifacts_at else [],
        }
    )


def artifact_key_of(
    session: Session, study_id: uuid.UUID, name: str, team_id: uuid.UUID | None
) -> str:
    """Where a built artifact of the study is stored; NotFound names the ones it has."""
    study = studies_repository.get_study(session, study_id, team_id=team_id)
    if study.artifacts_at is None or name not in STUDY_ARTIFACTS:
        built = ", ".join(STUDY_ARTIFACTS) if study.artifacts_at else "none yet"
        raise NotFound(f"study {study_id} has no artifact {name!r}; it has {built}")
    return studies_repository.artifact_key(study_id, name)


def list_studies(
    session: Session, team_id: uuid.UUID | None, limit: int, id_prefix: str | None = None
) -> list[StudyPublic]:
    studies = studies_repository.list_studies(session, team_id, limit, id_prefix)
    counts = studies_repository.status_counts(session, [study.id for study in studies])
    return [study_public(study, dict(counts[study.id])) for study in studies]


def result_rows(session: Session, study_id: uuid.UUID) -> list[dict[str, Any]]:
    """One row per job, for results.csv."""
    study = studies_repository.get_study(session, study_id)
    jobs = studies_repository.study_jobs(session, study_id)
    sizes = studies_repository.compact_sizes(session, [job.id for job in jobs])
    rows = []
    for job, facts in zip(jobs, job_facts(study, jobs, sizes), strict=True):
        metrics = facts.metrics
        rows.append(
            {
                "job_id": str(job.id),
                "arm": facts.arm,
                "method": job.method,
                "seed": get_path(job.spec, "training.seed"),
                "status": facts.status,
                **{k: metrics.get(k) for k in ("test_accuracy", "parameters", "macs")},
                "optimizer_steps": metrics.get("optimizer_steps"),
                "samples_seen": metrics.get("samples_seen"),
                "compact_bytes": compact_bytes(metrics, facts.compact_bytes),
                "latency_ms": latency(metrics),
                "wall_clock_s": facts.wall_clock_s,
            }
        )
    return rows


def accuracy_curves(
    session: Session, study_id: uuid.UUID
) -> dict[str, list[list[tuple[int, float]]]]:
    """Per arm, each job's test accuracy during training (step, value), read in one query
    (not two per job: a study's user waits for its charts after its last job)."""
    jobs = studies_repository.study_jobs(session, study_id)
    series = studies_repository.metric_series_by_job(
        session, [job.id for job in jobs], "test_accuracy"
    )
    curves: dict[str, list[list[tuple[int, float]]]] = {}
    for job in jobs:
        curves.setdefault(job.study_arm or "base", []).append(series.get(job.id, []))
    return curves
