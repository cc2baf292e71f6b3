"""A job's charts, drawn when first downloaded (`core.charts`).

The worker keeps the data a chart is drawn from on its artifact row and writes no file; the
first download (or a promotion to the model registry, whose versions point at files) draws
the PNG here, in the API process, stores it and fills in the row's size and sha256. Two
first downloads at once both draw: the same data gives the same bytes, and the row's upsert
takes the last. The drawing is the job's own figure code, so the file is the one the job
would have written.
"""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from archsearch.core import charts
from archsearch.jobs.domain.errors import NotFound
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.domain.tables import Artifact
from archsearch.jobs.platform.objects import ObjectMissing
from archsearch.jobs.platform.store import ArtifactStore


def is_pending(artifact: Artifact) -> bool:
    """True for a chart not drawn yet (no file in the store)."""
    return artifact.sha256 is None


def draw_chart(session: Session, store: ArtifactStore, artifact: Artifact) -> Artifact:
    """Draw `artifact`'s PNG from its chart data, store it and record it in `session` (the
    caller commits). Returns the row, now with its size and sha256."""
    assert artifact.chart is not None, f"{artifact.name} is not a chart waiting to be drawn"
    job_id, chart = artifact.job_id, artifact.chart

    def read_data_file(name: str) -> bytes:
        try:
            return store.read_artifact(job_id, name)
        except ObjectMissing:
            raise NotFound(
                f"artifact {artifact.name!r} of job {job_id} cannot be drawn: "
                f"the file it is drawn from, {name!r}, is missing"
            ) from None

    png = charts.draw(chart, read_data_file)
    stored = store.write_artifact(job_id, artifact.name, png)
    repository.upsert_artifact(session, job_id, artifact.name, artifact.media_type, stored)
    session.refresh(artifact)
    return artifact


def draw_pending_charts(session: Session, store: ArtifactStore, job_id: uuid.UUID) -> None:
    """Draw every chart of the job not drawn yet (the caller commits)."""
    waiting = select(Artifact).where(Artifact.job_id == job_id, Artifact.sha256.is_(None))
    for artifact in session.scalars(waiting).all():
        draw_chart(session, store, artifact)
