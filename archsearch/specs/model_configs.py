"""Model family configs: frozen, torch-free, discriminated on `name`.

A config plus the dataset's input shape and class count rebuilds a model exactly; that
triple is what `architecture.json` stores. Method-specific families (neural graphs,
MobileNetV1, VGG) live in their method's spec module and are gathered here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from archsearch.specs.common import Frozen

Activation = Literal["relu", "selu", "gelu", "tanh", "elu", "identity"]


class ModelConfigBase(Frozen):
    """Base of every model config. `input_problem` says why an input shape does not fit."""

    name: str  # each family narrows it to its registry name, the union's discriminator

    def input_problem(self, input_shape: tuple[int, ...]) -> str | None:
        return None


class MLPConfig(ModelConfigBase):
    name: Literal["mlp"] = "mlp"
    hidden: tuple[Annotated[int, Field(ge=1)], ...] = (256, 128)
    activation: Activation = "relu"
    bias: bool = True
    dropout: float = Field(default=0.0, ge=0, lt=1)


class CNNConfig(ModelConfigBase):
    """Conv blocks (conv, optional batch norm, activation, 2x2 max pool), then an MLP head."""

    name: Literal["cnn"] = "cnn"
    channels: tuple[Annotated[int, Field(ge=1)], ...] = (16, 32)
    kernel_size: Literal[1, 3, 5] = 3
    hidden: tuple[Annotated[int, Field(ge=1)], ...] = (64,)
    activation: Activation = "relu"
    batch_norm: bool = True
    bias: bool = True
    # False: no max pool after the convs (grown CNNs: pooling breaks the first-order
    # linearisation of a new channel between two convolutions).
    pool: bool = True

    def input_problem(self, input_shape: tuple[int, ...]) -> str | None:
        if len(input_shape) != 3:
            return f"model 'cnn' needs image inputs (C, H, W); the dataset's are {input_shape}"
        side = min(input_shape[1:])
        if self.pool and side < 2 ** len(self.channels):
            return (
                f"model 'cnn' pools {len(self.channels)} times but the images are only "
                f"{side} pixels wide; use fewer 'channels' entries"
            )
        return None
