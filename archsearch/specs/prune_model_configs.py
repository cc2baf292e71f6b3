"""Parent model families for architecture pruning: a VGG-style net and MobileNetV1.

Owned by the prune method. VGG follows Simonyan and Zisserman (2014), the parent
network of "Differentiable Architecture Pruning for Transfer Learning" (section 3.2);
MobileNetV1 follows Howard et al. (2017): depthwise-separable conv blocks. Both are small
by default so that they run on a CPU; widths and depths are configurable.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from archsearch.specs.model_configs import Activation, ModelConfigBase

Width = Annotated[int, Field(ge=1)]


def _image_problem(name: str, input_shape: tuple[int, ...], downsamples: int) -> str | None:
    if len(input_shape) != 3:
        return f"model {name!r} needs image inputs (C, H, W); the dataset's are {input_shape}"
    side = min(input_shape[1:])
    if side < 2**downsamples:
        return (
            f"model {name!r} halves the image {downsamples} times but the images are only "
            f"{side} pixels wide; use fewer stages"
        )
    return None


class VGGConfig(ModelConfigBase):
    """Stages of 3x3 conv (+ batch norm) + activation, each stage ending in a 2x2 max pool;
    then global average pooling and a fully connected head."""

    name: Literal["vgg"] = "vgg"
    stages: tuple[tuple[Width, ...], ...] = Field(
        default=((16,), (32,), (64, 64)),
        min_length=1,
        description="conv widths per stage; each stage ends with a 2x2 max pool",
    )
    hidden: tuple[Width, ...] = (64,)
    activation: Activation = "relu"
    batch_norm: bool = True
    bias: bool = True

    def input_problem(self, input_shape: tuple[int, ...]) -> str | None:
        if any(len(stage) == 0 for stage in self.stages):
            return "model 'vgg': every stage needs at least one conv width"
        return _image_problem("vgg", input_shape, len(self.stages))


class MobileNetV1Config(ModelConfigBase):
    """A 3x3 stem conv, then depthwise-separable blocks (3x3 depthwise + 1x1 pointwise),
    global average pooling and a linear classifier."""

    name: Literal["mobilenet_v1"] = "mobilenet_v1"
    stem: Width = 16
    blocks: tuple[tuple[Width, Literal[1, 2]], ...] = Field(
        default=((32, 1), (64, 2), (64, 1), (128, 2)),
        min_length=1,
        description="(output channels, stride) of each depthwise-separable block",
    )
    width_multiplier: float = Field(default=1.0, gt=0, le=4)
    activation: Activation = "relu"

    def input_problem(self, input_shape: tuple[int, ...]) -> str | None:
        downsamples = sum(1 for _, stride in self.blocks if stride == 2)
        return _image_problem("mobilenet_v1", input_shape, downsamples)


MODEL_CONFIGS: tuple[type[ModelConfigBase], ...] = (VGGConfig, MobileNetV1Config)
