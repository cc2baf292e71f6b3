"""Compact models: a masked model rebuilt smaller through the registry, same outputs.

"Differentiable Architecture Pruning for Transfer Learning", section 2.1: the output of
pruning is an architecture. Neurons (`mlp`, and the heads of `cnn` / `vgg`) and channels
(`cnn`, `vgg`) left without inputs or outputs are removed; see `compact_mlp` and
`compact_conv` for the exact rules. `mobilenet_v1` (depthwise convs tie a channel's input
to its output) loses a channel together with its depthwise filter (`compact_mobilenet`).
"""

from __future__ import annotations

import torch

from archsearch.core.models.registry import Architecture, create_model
from archsearch.core.pruning.compact_conv import cnn_chain, compact_conv_state, vgg_chain
from archsearch.core.pruning.compact_mlp import compact_chain
from archsearch.core.pruning.compact_mobilenet import compact_mobilenet
from archsearch.specs.model_configs import CNNConfig, MLPConfig, ModelConfigBase
from archsearch.specs.prune_model_configs import MobileNetV1Config, VGGConfig

State = dict[str, torch.Tensor]


def compact_mlp(state: State, config: MLPConfig) -> tuple[State, MLPConfig]:
    depth = len(config.hidden) + 1
    weights = [state[f"layers.{i}.weight"] for i in range(depth)]
    biases = [state[f"layers.{i}.bias"] if config.bias else None for i in range(depth)]
    weights, biases = compact_chain(weights, biases, config.activation)
    compact: State = {}
    for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
        compact[f"layers.{i}.weight"] = w
        if b is not None:
            compact[f"layers.{i}.bias"] = b
    return compact, config.model_copy(update={"hidden": tuple(w.shape[0] for w in weights[:-1])})


def _compact_state(
    state: State, architecture: Architecture
) -> tuple[State, ModelConfigBase] | None:
    config = architecture.config
    if isinstance(config, MLPConfig):
        return compact_mlp(state, config)
    if isinstance(config, CNNConfig):
        new, widths, hidden = compact_conv_state(state, cnn_chain(config, architecture.input_shape))
        return new, config.model_copy(update={"channels": tuple(widths), "hidden": tuple(hidden)})
    if isinstance(config, VGGConfig):
        new, widths, hidden = compact_conv_state(state, vgg_chain(config))
        stages, start = [], 0
        for stage in config.stages:
            stages.append(tuple(widths[start : start + len(stage)]))
            start += len(stage)
        return new, config.model_copy(update={"stages": tuple(stages), "hidden": tuple(hidden)})
    if isinstance(config, MobileNetV1Config):
        return compact_mobilenet(state, config)
    return None


def compact_model(
    state: State, architecture: Architecture
) -> tuple[torch.nn.Module, Architecture] | None:
    """The compact model (eval mode) and its architecture, or None for unsupported families."""
    compacted = _compact_state(state, architecture)
    if compacted is None:
        return None
    compact_state, compact_config = compacted
    compact_arch = Architecture(compact_config, architecture.input_shape, architecture.num_classes)
    model = create_model(compact_arch)
    model.load_state_dict(compact_state)
    return model.eval(), compact_arch
