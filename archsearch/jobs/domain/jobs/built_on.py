"""Submit-time checks of a job against the jobs it builds on, for the failures a run would
otherwise hit in its first seconds (`UserError`s raised early in `core/methods/`): a
transfer whose mask cannot fit the new dataset, a transfer of a baseline mask its prune job
never saved, a grow job continuing a model grow cannot continue, spectra of jobs that have
none. Each raises a `UserError` naming the spec field to change (a 422 at submit).

Decided from the stored specs and the datasets' facts (no torch, no artifact read): the
shapes a mask was learned for follow from the source job's model family and dataset.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from archsearch.core.errors import UserError
from archsearch.jobs.domain.datasets import catalog
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.platform.settings import Settings
from archsearch.specs import JobBase, parse_job_spec
from archsearch.specs.grow import GrowJob
from archsearch.specs.prune import PruneJob
from archsearch.specs.transfer import CompareSpectraJob, TransferJob

# Families whose layers see the input only through the first convolution's channels (global
# pooling before the classifier); an MLP's first layer takes every input value, and a
# plain CNN's head takes the flattened image, so its size matters too.
CHANNELS_ONLY = frozenset({"vgg", "mobilenet_v1", "mobilenet_dnw"})


def refuse(field: str, message: str) -> UserError:
    error = UserError(message)
    error.field = field
    return error


def check_built_on(
    session: Session,
    settings: Settings,
    spec: JobBase,
    facts: catalog.DatasetFacts,
    team_id: uuid.UUID | None,
) -> None:
    """Refuse `spec` when a job it builds on (already resolved and succeeded) makes its run
    fail at once."""
    if isinstance(spec, TransferJob) and spec.source_job:
        _check_transfer(session, settings, spec, facts, team_id)
    elif isinstance(spec, GrowJob) and spec.from_job:
        _check_grow_start(session, settings, spec, facts, team_id)
    elif isinstance(spec, CompareSpectraJob):
        for index, job_id in enumerate(spec.jobs):
            _prune_source(session, f"jobs[{index}]", job_id, "compare its Laplacian spectrum")


def _prune_source(session: Session, field: str, job_id: str, purpose: str) -> PruneJob:
    job = session.get(Job, uuid.UUID(job_id))
    assert job is not None, "a referenced job is resolved before these checks"
    source = _parsed(job)
    if not isinstance(source, PruneJob):
        raise refuse(field, f"job {job_id} is a {job.method} job; only a prune job can {purpose}")
    return source


def _parsed(job: Job) -> JobBase | None:
    try:
        return parse_job_spec(job.spec)
    except (ValidationError, ValueError):
        return None  # a spec of an older version: the run decides


def _facts_of(
    session: Session, settings: Settings, spec: JobBase, team_id: uuid.UUID | None
) -> catalog.DatasetFacts | None:
    try:
        return catalog.resolve(session, settings, spec.dataset, team_id)
    except UserError:
        return None  # the source's dataset is gone: its saved architecture still says


def _check_transfer(
    session: Session,
    settings: Settings,
    spec: TransferJob,
    facts: catalog.DatasetFacts,
    team_id: uuid.UUID | None,
) -> None:
    assert spec.source_job is not None
    source = _prune_source(session, "source_job", spec.source_job, "give a transfer its mask")
    if spec.mask in ("magnitude", "imp") and spec.mask not in source.baselines:
        raise refuse(
            "mask",
            f"job {spec.source_job} saved no {spec.mask} mask (its baselines: "
            f"{list(source.baselines) or 'none'}); use mask: learned, random or reshuffle, or "
            f"prune with baselines: ['{spec.mask}']",
        )
    learned_on = _facts_of(session, settings, source, team_id)
    if learned_on is not None:
        problem = mask_fit_problem(source, learned_on, facts, spec.first_layer == "dense")
        if problem is not None:
            raise refuse(*problem)


def mask_fit_problem(
    source: PruneJob,
    learned_on: catalog.DatasetFacts,
    target: catalog.DatasetFacts,
    first_layer_dense: bool,
) -> tuple[str, str] | None:
    """(field, message) when the source's mask cannot be put on the target's network."""
    keep = set(source.keep_dense)
    if learned_on.num_classes != target.num_classes and "last" not in keep:
        return "dataset", (
            f"the source job's mask covers the last layer for {learned_on.num_classes} classes; "
            f"this dataset has {target.num_classes}: prune again with keep_dense: ['last'] "
            "(the last layer unmasked), or transfer to a dataset with as many classes"
        )
    before, after = learned_on.input_shape, target.input_shape
    if before == after:
        return None
    family = source.model.name
    if family == "cnn" and before[1:] != after[1:]:
        return "dataset", (
            f"a cnn's head takes the flattened {before[1:]} image the mask was learned on; "
            f"this dataset's images are {after[1:]}: transfer to images of the same size"
        )
    if family in CHANNELS_ONLY | {"cnn"} and before[0] == after[0]:
        return None
    if "first" in keep or first_layer_dense:
        return None
    return "first_layer", (
        f"the source job's mask covers the first layer for inputs {before}; this dataset's "
        f"are {after}: set first_layer: dense (or prune with keep_dense: ['first'])"
    )


def _check_grow_start(
    session: Session,
    settings: Settings,
    spec: GrowJob,
    facts: catalog.DatasetFacts,
    team_id: uuid.UUID | None,
) -> None:
    assert spec.from_job is not None
    if spec.growth.family == "cnn":
        raise refuse(
            "from_job",
            "growth.family 'cnn' starts from growth.initial_channels; from_job can only "
            "continue an 'mlp' (leave from_job empty or use family 'mlp')",
        )
    job = session.get(Job, uuid.UUID(spec.from_job))
    start = _parsed(job) if job is not None else None
    model = getattr(start, "model", None)
    if start is None or model is None:
        return  # a grow job's own MLP, or an old spec: the run checks the saved model
    trained_on = _facts_of(session, settings, start, team_id)
    if (problem := grow_start_problem(spec, model, trained_on, facts)) is not None:
        raise refuse(*problem)


def grow_start_problem(
    spec: GrowJob,
    model: Any,
    trained_on: catalog.DatasetFacts | None,
    facts: catalog.DatasetFacts,
) -> tuple[str, str] | None:
    """(field, message) when grow cannot continue `model` (trained on `trained_on`)."""
    if model.name != "mlp":
        return "from_job", (
            f"job {spec.from_job} trained a {model.name!r} model; grow can only continue an "
            "'mlp' (or leave from_job empty to start from a tiny MLP)"
        )
    shape = (facts.input_shape, facts.num_classes)
    if trained_on is not None and (trained_on.input_shape, trained_on.num_classes) != shape:
        return "dataset", (
            f"job {spec.from_job}'s model takes {trained_on.input_shape} -> "
            f"{trained_on.num_classes} classes, but this dataset is {facts.input_shape} -> "
            f"{facts.num_classes}; use the same dataset"
        )
    if model.activation != spec.growth.activation:
        return "growth.activation", (
            f"job {spec.from_job}'s MLP uses activation {model.activation!r}; set "
            "growth.activation to the same value"
        )
    if not model.bias or model.dropout > 0:
        return "from_job", "grow needs an MLP with bias=true and dropout=0"
    return None
