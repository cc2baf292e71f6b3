"""Every model family's config, gathered into one discriminated union on `name`.

Each method's spec module contributes its families in `MODEL_CONFIGS`, so adding a family
means adding it there, never editing this file's union by hand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Union

from pydantic import Field

from archsearch.specs import graph_model_configs, prune_model_configs
from archsearch.specs.model_configs import CNNConfig, MLPConfig, ModelConfigBase

MODEL_CONFIG_TYPES: tuple[type[ModelConfigBase], ...] = (
    MLPConfig,
    CNNConfig,
    *graph_model_configs.MODEL_CONFIGS,
    *prune_model_configs.MODEL_CONFIGS,
)
if TYPE_CHECKING:  # a union built at run time; type checkers see the common base
    ModelConfig = ModelConfigBase
else:
    ModelConfig = Annotated[Union[MODEL_CONFIG_TYPES], Field(discriminator="name")]  # noqa: UP007 (a union built at run time needs Union[...])
MODEL_NAMES = tuple(t.model_fields["name"].default for t in MODEL_CONFIG_TYPES)
