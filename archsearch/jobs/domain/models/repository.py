"""All SQL of the model registry. Callers own the transaction; nothing here commits."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.datasets.tables import UploadedDataset
from archsearch.jobs.domain.errors import NotFound
from archsearch.jobs.domain.models.tables import (
    ModelAlias,
    ModelAliasEvent,
    ModelVersion,
    ModelVersionFile,
    RegisteredModel,
)
from archsearch.jobs.domain.tables import Job


def team_key(team_id: uuid.UUID | None) -> str:
    """The key a team's model names are unique under ("" for embedded mode's one user)."""
    return "" if team_id is None else team_id.hex


def _insert_for(session: Session) -> Any:
    return postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert


def find_model(
    session: Session, team_id: uuid.UUID | None, name: str, *, for_update: bool = False
) -> RegisteredModel | None:
    query = select(RegisteredModel).where(
        RegisteredModel.team_key == team_key(team_id), RegisteredModel.name == name
    )
    if for_update:
        query = query.with_for_update()
    return session.scalars(query).one_or_none()


def get_model(
    session: Session, team_id: uuid.UUID | None, name: str, *, for_update: bool = False
) -> RegisteredModel:
    """The team's model `name`; another team's model of that name is not found."""
    model = find_model(session, team_id, name, for_update=for_update)
    if model is None:
        raise NotFound(f"no model {name!r}; GET /v1/models lists them")
    return model


def locked_model(
    session: Session, team_id: uuid.UUID | None, name: str, actor: str
) -> RegisteredModel:
    """The team's model `name` under a row lock, created first if it is new. Two first
    promotions at once both insert; the unique key keeps one and the other reads it."""
    values = {
        "id": uuid.uuid4(),
        "team_key": team_key(team_id),
        "team_id": team_id,
        "name": name,
        "latest_version": 0,
        "created_by": actor,
        "created_at": utcnow(),
        "updated_at": utcnow(),
    }
    statement = _insert_for(session)(RegisteredModel).values(values)
    session.execute(statement.on_conflict_do_nothing(index_elements=["team_key", "name"]))
    return get_model(session, team_id, name, for_update=True)


def list_models(session: Session, team_id: uuid.UUID | None) -> list[RegisteredModel]:
    query = select(RegisteredModel).where(RegisteredModel.team_key == team_key(team_id))
    return list(session.scalars(query.order_by(RegisteredModel.name)))


def every_model(session: Session) -> list[RegisteredModel]:
    """Every team's models (what an admin lists), by name, then team."""
    query = select(RegisteredModel).order_by(RegisteredModel.name, RegisteredModel.team_key)
    return list(session.scalars(query))


def models_named(session: Session, name: str) -> list[RegisteredModel]:
    """The models of that name in every team (names are unique per team only)."""
    query = select(RegisteredModel).where(RegisteredModel.name == name)
    return list(session.scalars(query.order_by(RegisteredModel.team_key)))


def add_version(session: Session, version: ModelVersion, files: Sequence[ModelVersionFile]) -> None:
    session.add(version)
    session.flush()
    for file in files:
        file.version_id = version.id
    session.add_all(files)
    session.flush()


def versions_of(session: Session, model_id: uuid.UUID) -> list[ModelVersion]:
    query = select(ModelVersion).where(ModelVersion.model_id == model_id)
    return list(session.scalars(query.order_by(ModelVersion.version.desc())))


def get_version(session: Session, model: RegisteredModel, version: int) -> ModelVersion:
    query = select(ModelVersion).where(
        ModelVersion.model_id == model.id, ModelVersion.version == version
    )
    found = session.scalars(query).one_or_none()
    if found is None:
        raise NotFound(f"model {model.name!r} has no version {version}")
    return found


def files_of(session: Session, version_ids: Sequence[uuid.UUID]) -> list[ModelVersionFile]:
    query = select(ModelVersionFile).where(ModelVersionFile.version_id.in_(version_ids))
    return list(session.scalars(query.order_by(ModelVersionFile.name)))


def get_file(session: Session, version_id: uuid.UUID, name: str) -> ModelVersionFile | None:
    return session.get(ModelVersionFile, (version_id, name))


def aliases_of(session: Session, model_id: uuid.UUID) -> list[ModelAlias]:
    query = select(ModelAlias).where(ModelAlias.model_id == model_id)
    return list(session.scalars(query.order_by(ModelAlias.alias)))


def find_alias(session: Session, model_id: uuid.UUID, alias: str) -> ModelAlias | None:
    return session.get(ModelAlias, (model_id, alias))


def set_alias(
    session: Session, model: RegisteredModel, alias: str, version: int, actor: str
) -> int | None:
    """Point `alias` at `version`; returns the version it pointed at before (None: new)."""
    found = find_alias(session, model.id, alias)
    before = None if found is None else found.version
    if found is None:
        found = ModelAlias(model_id=model.id, alias=alias)
        session.add(found)
    found.version, found.updated_by, found.updated_at = version, actor, utcnow()
    session.add(
        ModelAliasEvent(
            model_id=model.id, alias=alias, from_version=before, to_version=version, actor=actor
        )
    )
    session.flush()
    return before


def remove_alias(session: Session, model: RegisteredModel, alias: str, actor: str) -> int:
    """Remove `alias`; returns the version it pointed at."""
    found = find_alias(session, model.id, alias)
    if found is None:
        raise NotFound(f"model {model.name!r} has no alias {alias!r}")
    before = found.version
    session.execute(
        delete(ModelAlias).where(ModelAlias.model_id == model.id, ModelAlias.alias == alias)
    )
    session.add(
        ModelAliasEvent(
            model_id=model.id, alias=alias, from_version=before, to_version=None, actor=actor
        )
    )
    session.flush()
    return before


def alias_history(session: Session, model_id: uuid.UUID) -> list[ModelAliasEvent]:
    query = select(ModelAliasEvent).where(ModelAliasEvent.model_id == model_id)
    return list(session.scalars(query.order_by(ModelAliasEvent.id)))


def dataset_sha256(session: Session, dataset_id: str) -> str | None:
    """The stored sha256 of an uploaded dataset, or None when it is gone."""
    query = select(UploadedDataset.stored_sha256).where(UploadedDataset.id == dataset_id)
    return session.scalar(query)


def archive_version(version: ModelVersion, actor: str | None) -> None:
    """Archive (`actor` given) or restore (None) a version."""
    version.archived_at = utcnow() if actor is not None else None
    version.archived_by = actor


def study_ids_of(session: Session, job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, uuid.UUID]:
    """The study of each job that belongs to one."""
    query = select(Job.id, Job.study_id).where(Job.id.in_(job_ids), Job.study_id.is_not(None))
    return {job_id: study_id for job_id, study_id in session.execute(query) if study_id}


def versions_of_jobs(
    session: Session, team_id: uuid.UUID | None, job_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, tuple[str, int]]:
    """(model name, version) each of `job_ids` was promoted to in the team's registry (the
    first version, when a job was promoted more than once)."""
    query = (
        select(ModelVersion.job_id, RegisteredModel.name, ModelVersion.version)
        .join(RegisteredModel, RegisteredModel.id == ModelVersion.model_id)
        .where(RegisteredModel.team_key == team_key(team_id), ModelVersion.job_id.in_(job_ids))
        .order_by(ModelVersion.created_at.desc())
    )
    return {job_id: (name, number) for job_id, name, number in session.execute(query)}
