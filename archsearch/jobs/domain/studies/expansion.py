"""A study request expanded into job specs: (arms x grid points x seeds), each validated
with the jobs' own models and fitted to the study's budget.

Pure (no database): the service checks the cap first, then every expanded spec; the first
invalid one is refused with a 422 that names its arm and the field.

Equal tuning: when arms set a training knob (a `training.*` path: learning rate, weight
decay, schedule, batch size) to two or more values, that knob is being tuned, and every arm
that leaves it unset is run at each of those values too, so a baseline is never compared at
its default against a method given a sweep. An arm that pins the knob keeps its value.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from archsearch.core.errors import UserError
from archsearch.schemas.studies import StudyArm, StudyCreate
from archsearch.specs import JobBase, parse_job_spec
from archsearch.specs.budget import fit_to_budget, steps_for_epochs, train_size
from archsearch.specs.common import merge_over_defaults
from archsearch.specs.errors import field_path


class InvalidStudy(UserError):
    """An expanded spec is invalid or the study is over a limit (422, naming the field)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class PlannedJob:
    arm: str  # the arm's label, grid point included: "prune,density=0.1"
    seed: int
    spec: JobBase


def set_path(spec: Mapping[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `spec` with the dotted `path` set (intermediate objects created)."""
    head, _, rest = path.partition(".")
    out = dict(spec)
    if not rest:
        out[head] = value
        return out
    inner = out.get(head)
    out[head] = set_path(inner if isinstance(inner, Mapping) else {}, rest, value)
    return out


def get_path(spec: Mapping[str, Any], path: str) -> Any:
    """The value at the dotted `path` of `spec`; None where a part of it is missing."""
    node: Any = spec
    for key in path.split("."):
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def grid_points(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in the order given ([{}] for no grid)."""
    keys = list(grid)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*grid.values())]


def arm_label(arm: StudyArm, point: Mapping[str, Any]) -> str:
    suffix = ",".join(f"{path.rsplit('.', 1)[-1]}={value}" for path, value in point.items())
    return f"{arm.label},{suffix}" if suffix and arm.label != "base" else suffix or arm.label


# Knobs under `training` that are not tuning: the seed is the study's, the budget sets the
# epochs, and precision is a device choice.
NOT_TUNING = frozenset({"training.seed", "training.epochs", "training.precision"})


def leaf_paths(spec: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Every dotted path to a non-object value of `spec`, with its value."""
    out: dict[str, Any] = {}
    for key, value in spec.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(leaf_paths(value, f"{path}."))
        else:
            out[path] = value
    return out


def tuned_knobs(arms: Sequence[StudyArm]) -> dict[str, list[Any]]:
    """The training knobs the arms sweep (set to 2+ distinct values), values in first-seen order."""
    seen: dict[str, list[Any]] = {}
    for arm in arms:
        for path, value in leaf_paths(arm.spec).items():
            values = seen.setdefault(path, [])
            if path.startswith("training.") and path not in NOT_TUNING and value not in values:
                values.append(value)
    return {path: values for path, values in seen.items() if len(values) >= 2}


def equally_tuned(arms: Sequence[StudyArm]) -> list[StudyArm]:
    """The arms, each arm that leaves a tuned knob unset repeated at every value of it."""
    tuned = tuned_knobs(arms)
    out = []
    for arm in arms:
        own = leaf_paths(arm.spec)
        missing = {path: values for path, values in tuned.items() if path not in own}
        for point in grid_points(missing):
            spec: Mapping[str, Any] = arm.spec
            for path, value in point.items():
                spec = set_path(spec, path, value)
            # Built, not validated: the label carries a grid-style suffix ("train,lr=0.01")
            # that a user-given label may not contain, so that it cannot clash with one.
            out.append(StudyArm.model_construct(label=arm_label(arm, point), spec=dict(spec)))
    return out


def planned_count(request: StudyCreate, arms: Sequence[StudyArm]) -> int:
    """Jobs the study would create, counted without building the grid (it may be huge)."""
    points = math.prod(len(values) for values in request.grid.values())
    return len(equally_tuned(arms)) * points * len(request.seeds)


def raw_spec(
    request: StudyCreate, arm_spec: Mapping[str, Any], point: Mapping[str, Any], seed: int
) -> dict[str, Any]:
    """Base, then the arm, then the grid point; the study's dataset and the seed last."""
    spec = merge_over_defaults(dict(request.base), dict(arm_spec))
    for path, value in point.items():
        spec = set_path(spec, path, value)
    spec["dataset"] = dict(request.dataset)
    return set_path(spec, "training.seed", seed)


def parse_arm_spec(label: str, raw: dict[str, Any]) -> JobBase:
    try:
        return parse_job_spec(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        if first["type"] in ("union_tag_invalid", "union_tag_not_found"):
            # The offending field is the discriminator itself ('method', or a model's 'name').
            loc = (*loc, str(first.get("ctx", {}).get("discriminator", "")).strip("'"))
        field = field_path(loc, "spec")
        raise InvalidStudy(
            f"arm {label!r}: {field}: {first['msg']}", field=f"arms[{label}].{field}"
        ) from None


def expand(request: StudyCreate, arms: Sequence[StudyArm]) -> Iterator[PlannedJob]:
    """The jobs of a fixed study, arm by arm (equally tuned), grid point by point, seed by
    seed."""
    for arm in equally_tuned(arms):
        for point in grid_points(request.grid):
            label = arm_label(arm, point)
            for seed in request.seeds:
                spec = parse_arm_spec(label, raw_spec(request, arm.spec, point, seed))
                yield PlannedJob(arm=label, seed=seed, spec=spec)


def fit_budget(job: PlannedJob, steps: int, n_train: int, n_classes: int) -> PlannedJob:
    """The job with its epoch knobs set so that it spends `steps` (see specs.budget)."""
    try:
        spec = fit_to_budget(job.spec, steps, n_train, n_classes)
    except ValueError as exc:
        raise InvalidStudy(f"arm {job.arm!r}: {exc}", field=f"arms[{job.arm}].budget") from None
    return PlannedJob(arm=job.arm, seed=job.seed, spec=spec)


def budget_steps(request: StudyCreate, n_train: int, n_classes: int) -> int | None:
    """The budget in optimizer steps; epochs count at the base spec's batch size."""
    if request.budget is None:
        return None
    if request.budget.steps is not None:
        return request.budget.steps
    assert request.budget.epochs is not None, "validated: steps or epochs"
    base = parse_arm_spec("base", raw_spec(request, {"method": "train"} | request.base, {}, 0))
    n = train_size(base.dataset, n_train, n_classes)
    return max(1, steps_for_epochs(request.budget.epochs, n, base.training.batch_size))
