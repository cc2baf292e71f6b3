"""Model registry: builders registered by name, created from frozen configs.

As timm's `_registry.py`: a decorator registers a builder; `create_model` raises an error
that lists the valid names. An architecture (config + input shape + class count)
round-trips through `architecture.json`, so a downloaded model can be rebuilt. Its
`preprocessing` record says how raw data becomes the model's input (scaling, mean/std, class
names), so the reported accuracy can be reproduced from the raw dataset files alone; files
written before that record existed load with `preprocessing=None`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from pydantic import TypeAdapter
from torch import nn

from archsearch.core.errors import IncompatibleModelError, UserError
from archsearch.specs.families import ModelConfig
from archsearch.specs.model_configs import ModelConfigBase

Builder = Callable[[Any, tuple[int, ...], int], nn.Module]
_BUILDERS: dict[str, Builder] = {}
_model_config_adapter: TypeAdapter[ModelConfigBase] = TypeAdapter(ModelConfig)

B = TypeVar("B", bound=Builder)


def register_model(name: str) -> Callable[[B], B]:
    """Register `builder(config, input_shape, num_classes) -> nn.Module` under `name`."""

    def decorate(builder: B) -> B:
        assert name not in _BUILDERS, f"model {name!r} registered twice"
        _BUILDERS[name] = builder
        return builder

    return decorate


def list_models() -> list[str]:
    _import_families()
    return sorted(_BUILDERS)


def _import_families() -> None:
    # Importing a family module runs its @register_model decorators.
    import archsearch.core.models  # noqa: F401


@dataclass(frozen=True)
class Preprocessing:
    """Raw sample -> model input: `x = (raw / scale - mean[c]) / std[c]` per channel (or per
    feature for tables), as float32 of shape `input_shape`; output index i is `class_names[i]`."""

    input_shape: tuple[int, ...]
    dtype: str
    scale: float  # raw values are divided by this first (255 for 8-bit images)
    mean: tuple[float, ...]
    std: tuple[float, ...]
    class_names: tuple[str, ...]
    raw: str  # what the raw data is, e.g. "uint8 IDX images"

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Preprocessing:
        return cls(
            input_shape=tuple(int(d) for d in raw["input_shape"]),
            dtype=str(raw["dtype"]),
            scale=float(raw["scale"]),
            mean=tuple(float(m) for m in raw["mean"]),
            std=tuple(float(s) for s in raw["std"]),
            class_names=tuple(str(c) for c in raw["class_names"]),
            raw=str(raw.get("raw", "")),
        )


@dataclass(frozen=True)
class Architecture:
    """Everything needed to rebuild a model: its config and the shape of its data."""

    config: ModelConfigBase
    input_shape: tuple[int, ...]
    num_classes: int
    preprocessing: Preprocessing | None = None

    def to_json(self) -> str:
        payload: dict[str, Any] = {
            "model": self.config.model_dump(mode="json"),
            "input_shape": list(self.input_shape),
            "num_classes": self.num_classes,
        }
        if self.preprocessing is not None:
            payload["preprocessing"] = asdict(self.preprocessing)
        return json.dumps(payload, indent=2)

    @classmethod
    def from_json(cls, text: str | bytes) -> Architecture:
        raw = json.loads(text)
        pre = raw.get("preprocessing")  # absent in files of earlier versions
        return cls(
            config=_model_config_adapter.validate_python(raw["model"]),
            input_shape=tuple(raw["input_shape"]),
            num_classes=int(raw["num_classes"]),
            preprocessing=Preprocessing.from_dict(pre) if pre is not None else None,
        )


def create_model(architecture: Architecture) -> nn.Module:
    """Build a freshly initialised model (seed torch first for a reproducible init)."""
    _import_families()
    config = architecture.config
    name = config.name
    if name not in _BUILDERS:
        raise UserError(f"unknown model {name!r}; available: {', '.join(sorted(_BUILDERS))}")
    problem = config.input_problem(architecture.input_shape)
    if problem:
        raise IncompatibleModelError(problem)
    return _BUILDERS[name](config, architecture.input_shape, architecture.num_classes)
