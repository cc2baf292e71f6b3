"""The model registry's rules: promote a succeeded job to the next immutable version of a
team's model, move and remove aliases (each change recorded with who and when), and read
models back as their public form. Each change is one use case that commits once.
"""

from __future__ import annotations

import importlib.metadata
import re
import uuid
from dataclasses import dataclass

from pydantic import ValidationError
from sqlalchemy.orm import Session

from archsearch.core.errors import UserError
from archsearch.jobs.domain.accounts.service import Principal
from archsearch.jobs.domain.errors import AmbiguousId, Forbidden, InvalidTransition, NotFound
from archsearch.jobs.domain.jobs import repository as jobs
from archsearch.jobs.domain.jobs.charts import draw_pending_charts
from archsearch.jobs.domain.models import repository
from archsearch.jobs.domain.models.tables import (
    ModelVersion,
    ModelVersionFile,
    RegisteredModel,
)
from archsearch.jobs.domain.tables import Artifact, Job
from archsearch.jobs.domain.webhooks import events
from archsearch.jobs.platform.objects import ObjectMissing
from archsearch.jobs.platform.store import ArtifactStore
from archsearch.schemas.jobs import JobStatus
from archsearch.schemas.models import (
    ALIAS_PATTERN,
    MODEL_NAME_PATTERN,
    AliasEventPublic,
    AliasPublic,
    Lineage,
    ModelDetail,
    ModelFilePublic,
    ModelPublic,
    ModelVersionPublic,
    ParentPublic,
    key_metric_names,
)
from archsearch.specs import job_spec_adapter

MODEL_CARD = "model-card.md"
MODEL_CARD_MAX_CHARS = 100_000


class InvalidName(UserError):
    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def check_model_name(name: str) -> str:
    if not re.fullmatch(MODEL_NAME_PATTERN, name):
        raise InvalidName(
            f"model name {name!r} is not allowed: 1 to 100 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
            "name",
        )
    return name


def check_alias(alias: str) -> str:
    if not re.fullmatch(ALIAS_PATTERN, alias):
        raise InvalidName(
            f"alias {alias!r} is not allowed: a letter, then up to 63 letters, digits, "
            "'_' or '-' (e.g. candidate, production)",
            "alias",
        )
    return alias


@dataclass(frozen=True)
class Promoted:
    model: RegisteredModel
    version: ModelVersion


def promote(
    session: Session,
    store: ArtifactStore,
    principal: Principal,
    name: str,
    job_id: uuid.UUID,
    description: str,
) -> Promoted:
    """The job's artifacts become version `latest + 1` of the team's model `name`."""
    principal.require("submit")
    check_model_name(name)
    job = jobs.get_job(session, job_id, team_id=principal.team_filter)
    if job.status is not JobStatus.succeeded:
        raise InvalidTransition(
            f"job {job_id} is {job.status.value}; only a succeeded job can be promoted"
        )
    draw_pending_charts(session, store, job_id)  # a version's files are all real files
    artifacts = jobs.list_artifacts(session, job_id)
    if not artifacts:
        raise InvalidTransition(f"job {job_id} has no artifacts to promote")
    model = repository.locked_model(session, principal.team_id, name, principal.name)
    model.latest_version += 1
    version = ModelVersion(
        id=uuid.uuid4(),
        model_id=model.id,
        version=model.latest_version,
        job_id=job.id,
        description=description,
        lineage=_lineage(session, store, job, artifacts).model_dump(mode="json"),
        created_by=principal.name,
    )
    repository.add_version(session, version, [_file_of(a, store) for a in artifacts])
    _version_created(session, principal, name, version, description)
    session.commit()
    return Promoted(model, version)


def _version_created(
    session: Session, principal: Principal, name: str, version: ModelVersion, description: str
) -> None:
    created = {"model": name, "version": version.version, "job_id": str(version.job_id)}
    data = {**created, "actor": principal.name, "description": description}
    events.record(session, principal.team_id, events.MODEL_VERSION_CREATED, f"model:{name}", data)


def _file_of(artifact: Artifact, store: ArtifactStore) -> ModelVersionFile:
    assert artifact.size is not None and artifact.sha256 is not None, "charts drawn first"
    return ModelVersionFile(
        name=artifact.name,
        object_key=store.artifact_key(artifact.job_id, artifact.name),
        media_type=artifact.media_type,
        size=artifact.size,
        sha256=artifact.sha256,
    )


def _lineage(
    session: Session, store: ArtifactStore, job: Job, artifacts: list[Artifact]
) -> Lineage:
    dataset = job.spec.get("dataset") if isinstance(job.spec, dict) else None
    dataset_id = dataset.get("id") if isinstance(dataset, dict) else None
    return Lineage(
        job_id=job.id,
        method=job.method,
        spec=job.spec,
        dataset=dataset,
        dataset_sha256=repository.dataset_sha256(session, dataset_id) if dataset_id else None,
        archsearch_version=importlib.metadata.version("archsearch"),
        metrics=job.latest_metrics or {},
        model_card=_model_card(store, job.id, {a.name for a in artifacts}),
    )


def _model_card(store: ArtifactStore, job_id: uuid.UUID, names: set[str]) -> str | None:
    if MODEL_CARD not in names:
        return None
    try:
        text = store.read_artifact(job_id, MODEL_CARD).decode("utf-8", errors="replace")
    except ObjectMissing:
        return None
    return text[:MODEL_CARD_MAX_CHARS]


def set_alias(
    session: Session, principal: Principal, name: str, alias: str, version: int
) -> tuple[RegisteredModel, int | None]:
    """Point `alias` at an existing `version`; returns the model and the version before."""
    principal.require("submit")
    check_alias(alias)
    model = _changeable_model(session, principal, name)
    if repository.get_version(session, model, version).archived_at is not None:
        raise InvalidTransition(
            f"version {version} of model {name!r} is archived; restore it before an alias "
            "points at it"
        )
    before = repository.set_alias(session, model, alias, version, principal.name)
    _alias_changed(session, principal, name, alias, before, version)
    session.commit()
    return model, before


def remove_alias(
    session: Session, principal: Principal, name: str, alias: str
) -> tuple[RegisteredModel, int]:
    principal.require("submit")
    model = _changeable_model(session, principal, name)
    before = repository.remove_alias(session, model, alias, principal.name)
    _alias_changed(session, principal, name, alias, before, None)
    session.commit()
    return model, before


def _alias_changed(
    session: Session,
    principal: Principal,
    name: str,
    alias: str,
    before: int | None,
    after: int | None,
) -> None:
    change = {"model": name, "alias": alias, "from_version": before, "to_version": after}
    events.record(
        session,
        principal.team_id,
        events.MODEL_ALIAS_CHANGED,
        f"model:{name}",
        {**change, "actor": principal.name},
    )


def archive(
    session: Session, principal: Principal, name: str, number: int, archived: bool
) -> ModelVersion:
    """Archive a version (refused while an alias points at it: move the alias first) or
    restore it. Nothing is deleted: its files stay downloadable by number."""
    principal.require("submit")
    model = _changeable_model(session, principal, name)
    version = repository.get_version(session, model, number)
    pointing = [a.alias for a in repository.aliases_of(session, model.id) if a.version == number]
    if archived and pointing:
        raise InvalidTransition(
            f"version {number} of model {name!r} is what {', '.join(pointing)} point(s) at; "
            "move or remove the alias first"
        )
    repository.archive_version(version, principal.name if archived else None)
    session.commit()
    return version


def resolve(session: Session, principal: Principal, name: str, ref: str) -> ModelVersion:
    """The version `ref` names: a number, or an alias of the model."""
    model = readable_model(session, principal, name)
    if ref.isdigit():
        return repository.get_version(session, model, int(ref))
    found = repository.find_alias(session, model.id, ref)
    if found is None:
        raise NotFound(f"model {name!r} has no alias {ref!r}")
    return repository.get_version(session, model, found.version)


def version_file(
    session: Session, principal: Principal, name: str, ref: str, file: str
) -> tuple[ModelVersion, ModelVersionFile]:
    version = resolve(session, principal, name, ref)
    found = repository.get_file(session, version.id, file)
    if found is None:
        raise NotFound(f"version {version.version} of model {name!r} has no file {file!r}")
    return version, found


def list_models(session: Session, principal: Principal) -> list[ModelPublic]:
    """The team's models; an admin's list holds every team's (each with its `team_id`)."""
    if principal.is_admin:
        return [_public(session, m) for m in repository.every_model(session)]
    return [_public(session, m) for m in repository.list_models(session, principal.team_id)]


def _changeable_model(session: Session, principal: Principal, name: str) -> RegisteredModel:
    """The caller's team's model `name`, locked for a change. An admin reads every team's
    models but changes only its own team's: told so, rather than a bare "no model"."""
    own = repository.find_model(session, principal.team_id, name, for_update=True)
    if own is not None:
        return own
    if principal.is_admin and repository.models_named(session, name):
        raise Forbidden(
            f"model {name!r} belongs to another team: an admin reads every team's models, "
            "but promotes, aliases and archives only in its own team"
        )
    return repository.get_model(session, principal.team_id, name)  # raises NotFound


def readable_model(session: Session, principal: Principal, name: str) -> RegisteredModel:
    """The caller's team's model `name`. An admin, who lists every team's models, reads
    another team's too: its own team's first, else the one team's of that name (several
    teams': 409 naming them; changes stay with the model's own team)."""
    own = repository.find_model(session, principal.team_id, name)
    if own is not None or not principal.is_admin:
        return own or repository.get_model(session, principal.team_id, name)
    found = repository.models_named(session, name)
    if len(found) > 1:
        teams = [str(m.team_id) for m in found]
        raise AmbiguousId(f"{len(found)} teams have a model {name!r}: {', '.join(teams)}", teams)
    if not found:
        raise NotFound(f"no model {name!r} in any team; GET /v1/models lists them")
    return found[0]


def _public(session: Session, model: RegisteredModel) -> ModelPublic:
    aliases = [AliasPublic.model_validate(a) for a in repository.aliases_of(session, model.id)]
    return ModelPublic(
        name=model.name,
        latest_version=model.latest_version,
        created_by=model.created_by,
        created_at=model.created_at,
        updated_at=model.updated_at,
        aliases=aliases,
        team_id=model.team_id,
    )


def read_model(session: Session, principal: Principal, name: str) -> ModelDetail:
    model = readable_model(session, principal, name)
    versions = versions_public(session, model, repository.versions_of(session, model.id))
    history = repository.alias_history(session, model.id)
    return ModelDetail(
        **_public(session, model).model_dump(),
        versions=versions,
        alias_history=[AliasEventPublic.model_validate(e) for e in history],
    )


def read_version(session: Session, principal: Principal, name: str, ref: str) -> ModelVersionPublic:
    version = resolve(session, principal, name, ref)
    model = readable_model(session, principal, name)
    return versions_public(session, model, [version])[0]


def versions_public(
    session: Session, model: RegisteredModel, versions: list[ModelVersion]
) -> list[ModelVersionPublic]:
    files = repository.files_of(session, [v.id for v in versions])
    aliases = repository.aliases_of(session, model.id)
    studies = repository.study_ids_of(session, [v.job_id for v in versions])
    lineages = [Lineage.model_validate(v.lineage) for v in versions]
    parents = _parents(session, model.team_id, lineages)
    return [
        ModelVersionPublic(
            model=model.name,
            version=v.version,
            description=v.description,
            created_by=v.created_by,
            created_at=v.created_at,
            archived_at=v.archived_at,
            archived_by=v.archived_by,
            aliases=[a.alias for a in aliases if a.version == v.version],
            files=[ModelFilePublic.model_validate(f) for f in files if f.version_id == v.id],
            lineage=lineage,
            key_metrics=key_metric_names(lineage.metrics),
            study_id=studies.get(v.job_id),
            parents=parents[lineage.job_id],
        )
        for v, lineage in zip(versions, lineages, strict=True)
    ]


def _parents(
    session: Session, team_id: uuid.UUID | None, lineages: list[Lineage]
) -> dict[uuid.UUID, list[ParentPublic]]:
    """For each version's job, the jobs its spec built on and where they were promoted."""
    built_on = {lineage.job_id: _job_references(lineage.spec) for lineage in lineages}
    ids = [uuid.UUID(ref) for refs in built_on.values() for ref in refs.values()]
    promoted = repository.versions_of_jobs(session, team_id, ids) if ids else {}
    return {
        job_id: [
            ParentPublic(field=field, job_id=uuid.UUID(ref), model=found[0], version=found[1])
            if (found := promoted.get(uuid.UUID(ref)))
            else ParentPublic(field=field, job_id=uuid.UUID(ref))
            for field, ref in refs.items()
        ]
        for job_id, refs in built_on.items()
    }


def _job_references(spec: dict[str, object]) -> dict[str, str]:
    """The spec's job references (stored resolved to whole ids); none for a spec this version
    of archsearch no longer reads."""
    try:
        references = job_spec_adapter.validate_python(spec).job_references()
    except ValidationError:
        return {}
    return {field: ref for field, ref in references.items() if _is_uuid(ref)}


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True
