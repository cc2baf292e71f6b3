"""Model families of Discovering Neural Wirings (neural graphs, MobileNetV1-DNW). Torch-free.

Edge budgets are per graph. The tiny classifier (`neural_graph`, section 3.1) has one graph;
MobileNetV1-DNW (Table 4, section 2.4) has one graph per stage, so there the budget is per
stage: the pointwise edges of MobileNetV1 at `edge_width`.

A compact (pruned) model is the same family with `compact` set: explicit kept-node counts
and edge lists, so `architecture-compact.json` alone rebuilds the pruned wiring.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import Field, model_validator

from archsearch.specs.common import Frozen
from archsearch.specs.model_configs import Activation, ModelConfigBase

Count = Annotated[int, Field(ge=1)]

MOBILENET_STEM = 32
MOBILENET_STAGE_CHANNELS = (64, 128, 256, 512, 1024)


class CompactGraph(Frozen):
    """The pruned wiring of one graph, in compact node numbering.

    Static graphs: `blocks` are the kept nodes per block. Dynamic graphs: (inputs, others,
    outputs). `edges` are (target, source) pairs; `kept` the original node ids.
    """

    blocks: tuple[Annotated[int, Field(ge=0)], ...]
    edges: tuple[tuple[int, int], ...]
    kept: tuple[int, ...]
    offsets: bool = Field(default=False, description="fold removed constant nodes as offsets")


def _budget(k_edges: int | None, density: float | None, admissible: int) -> int:
    if k_edges is not None:
        return k_edges
    assert density is not None, "validated: one of k_edges / density is set"
    return max(1, min(admissible, round(density * admissible)))


class NeuralGraphConfig(ModelConfigBase):
    """The tiny classifier of section 3.1: a downsampling stem, one neural graph, pool + FC.

    `input_nodes` receive the stem's channels, `hidden_blocks` are the static graph's inner
    blocks, `output_nodes` feed the pool and FC. Dynamic settings use the same node count
    with every ordered pair admissible (cycles allowed). With `node_op="act"` the graph is
    MLP-style: no stem, one input node per input feature, nodes apply batch norm and
    `activation` (input nodes only the norm), and the output nodes are batch-normalised
    before the classifier.
    """

    name: Literal["neural_graph"] = "neural_graph"
    setting: Literal["static", "discrete", "continuous"] = "static"
    node_op: Literal["conv", "act"] = "conv"
    norm: Literal["instance", "batch"] | None = Field(
        default=None,
        description="node normalisation; default: batch for static graphs (section 2.4's "
        "node op), instance for discrete/continuous ones (per sample, the same at every step)",
    )
    activation: Activation = "relu"
    input_nodes: Count = 16
    hidden_blocks: tuple[Count, ...] = (32, 32, 32)
    output_nodes: Count = 32
    downsample: Literal[1, 2, 4] | None = Field(
        default=None, description="stem stride product; None: 4 for images >= 16 px, else 2"
    )
    steps: int = Field(default=4, ge=1, le=64, description="discrete time: steps T")
    ode_method: Literal["dopri5", "bosh3", "adaptive_heun", "rk4", "euler"] = "dopri5"
    ode_tol: float = Field(default=1e-3, gt=0, description="continuous: rtol = atol")
    adjoint: bool = Field(default=False, description="continuous: adjoint method (less memory)")
    density: float | None = Field(
        default=0.1, gt=0, le=1, description="real edges as a fraction of admissible ones"
    )
    k_edges: int | None = Field(default=None, ge=1, description="edge budget; overrides density")
    compact: CompactGraph | None = None

    @property
    def node_norm(self) -> Literal["instance", "batch"]:
        # Measured on MNIST (640 images, the search defaults, 80 steps): instance norm at
        # the static graph's 7x7 nodes reached 0.38 test accuracy, batch norm 0.66.
        if self.norm is not None:
            return self.norm
        return "batch" if self.setting == "static" else "instance"

    def num_nodes(self, input_shape: tuple[int, ...]) -> int:
        return self.first_block(input_shape) + sum(self.hidden_blocks) + self.output_nodes

    def first_block(self, input_shape: tuple[int, ...]) -> int:
        return math.prod(input_shape) if self.node_op == "act" else self.input_nodes

    def stem_strides(self, input_shape: tuple[int, ...]) -> tuple[int, int]:
        factor = self.downsample or (4 if min(input_shape[1:]) >= 16 else 2)
        return {1: (1, 1), 2: (2, 1), 4: (2, 2)}[factor]

    def admissible_edges(self, input_shape: tuple[int, ...]) -> int:
        n = self.num_nodes(input_shape)
        if self.setting != "static":
            return n * n
        blocks = [self.first_block(input_shape), *self.hidden_blocks, self.output_nodes]
        return sum(a * sum(blocks[i + 1 :]) for i, a in enumerate(blocks))

    def edge_budget(self, input_shape: tuple[int, ...]) -> int:
        return _budget(self.k_edges, self.density, self.admissible_edges(input_shape))

    def input_problem(self, input_shape: tuple[int, ...]) -> str | None:
        if self.node_op == "conv" and len(input_shape) != 3:
            return f"neural_graph with conv nodes needs images (C, H, W); got {input_shape}"
        admissible = self.admissible_edges(input_shape)
        if self.k_edges is not None and self.k_edges > admissible:
            return (
                f"k_edges={self.k_edges} exceeds the {admissible} admissible edges of this "
                "graph; lower k_edges or use density"
            )
        return None

    @model_validator(mode="after")
    def _one_budget(self) -> NeuralGraphConfig:
        if self.density is None and self.k_edges is None:
            raise ValueError("give the edge budget as 'k_edges' or 'density'")
        return self


class MobileNetDNWConfig(ModelConfigBase):
    """MobileNetV1-DNW (Table 4): a 3x3 stem, then one static graph per stage, pool + FC.

    Stage s has blocks (input nodes, then `stage_layers[s]` blocks); its output nodes are the
    next stage's input nodes, which apply their 3x3 conv with stride 2 from stage 2 on.
    Nodes follow MobileNetV1 x `width`; each stage's edge budget is the pointwise edges of
    MobileNetV1 x `edge_width` (default: `width`). `small` also limits the final FC to the
    FC edges of MobileNetV1 x `edge_width` (MobileNetV1-DNW-Small).
    """

    name: Literal["mobilenet_dnw"] = "mobilenet_dnw"
    width: float = Field(default=0.25, gt=0, le=4)
    edge_width: float | None = Field(default=None, gt=0, le=4)
    stage_layers: tuple[Count, ...] = (1, 2, 2, 6, 2)
    stem_stride: Literal[1, 2] = Field(
        default=1, description="1 for 28x28/32x32 inputs (as on CIFAR-10), 2 for 224x224"
    )
    small: bool = False
    compact: tuple[CompactGraph, ...] | None = None

    def channels(self, width: float) -> list[int]:
        base = [MOBILENET_STEM, *MOBILENET_STAGE_CHANNELS[: len(self.stage_layers)]]
        return [max(1, round(c * width)) for c in base]

    def stage_blocks(self) -> list[tuple[int, ...]]:
        c = self.channels(self.width)
        return [(c[s], *([c[s + 1]] * n)) for s, n in enumerate(self.stage_layers)]

    def stage_budgets(self) -> list[int]:
        """Pointwise edges of MobileNetV1 x edge_width, per stage (c_in * c_out per layer)."""
        c = self.channels(self.edge_width or self.width)
        return [c[s] * c[s + 1] + (n - 1) * c[s + 1] ** 2 for s, n in enumerate(self.stage_layers)]

    def fc_budget(self, num_classes: int) -> int | None:
        return (
            self.channels(self.edge_width or self.width)[-1] * num_classes if self.small else None
        )

    def input_problem(self, input_shape: tuple[int, ...]) -> str | None:
        if len(input_shape) != 3:
            return f"mobilenet_dnw needs images (C, H, W); got {input_shape}"
        if (self.edge_width or self.width) > self.width:
            return "edge_width must not exceed width (the budget must fit the graph)"
        if len(self.stage_layers) > len(MOBILENET_STAGE_CHANNELS):
            return f"at most {len(MOBILENET_STAGE_CHANNELS)} stages"
        return None


MODEL_CONFIGS: tuple[type, ...] = (NeuralGraphConfig, MobileNetDNWConfig)
