"""Unit granularity: which layer reads the units (neurons, channels) of which layer.

"Differentiable Architecture Pruning for Transfer Learning", section 2.2, with the binary
mask over units instead of connections: one two-temperature mask per output neuron of a
Linear layer and per output channel of a convolution. The mask is applied where the unit is
read (`nn.masked`, `UnitRead`), so a pruned unit is read by no one and compaction
(`pruning.compact`) removes it together with the filter or neuron that computes it.

Per family, every unit that a later layer reads is masked, the classes are not:
- mlp: hidden neuron j of `layers.i` is read by column j of `layers.{i+1}`;
- cnn / vgg: channel c of a conv is read by input channel c of the next conv, or by the
  head's first Linear (`positions` columns per channel after the flatten); the head's hidden
  neurons as in an MLP;
- mobilenet_v1: channel c of a width level (the stem or a pointwise conv) is read through
  the next block's depthwise filter c by the next pointwise conv's column c (the pair goes
  together), or by the classifier after the last block.
"""

from __future__ import annotations

import torch
from torch import nn

from archsearch.core.models import create_model
from archsearch.core.models.registry import Architecture
from archsearch.core.nn.masked import MaskedMixin
from archsearch.core.nn.masked_model import mask_model, masked_layers
from archsearch.core.nn.unit_columns import UnitRead
from archsearch.core.pruning.compact_conv import ConvChain, cnn_chain, vgg_chain
from archsearch.specs.model_configs import CNNConfig, MLPConfig
from archsearch.specs.prune_model_configs import MobileNetV1Config, VGGConfig

UnitPlan = dict[str, UnitRead]
UNIT_CONFIGS = (MLPConfig, CNNConfig, VGGConfig, MobileNetV1Config)


def _chain_reads(names: list[str], widths: list[int]) -> UnitPlan:
    """Each layer after the first reads every unit of the one before it."""
    return {
        reader: UnitRead(source, width)
        for source, reader, width in zip(names, names[1:], widths, strict=False)
    }


def _conv_plan(chain: ConvChain, conv_widths: list[int], hidden: list[int]) -> UnitPlan:
    plan = _chain_reads(chain.convs, conv_widths)
    plan[chain.head[0]] = UnitRead(chain.convs[-1], conv_widths[-1])
    plan.update(_chain_reads(chain.head, hidden))
    return plan


def _mobilenet_plan(config: MobileNetV1Config) -> UnitPlan:
    def width(channels: int) -> int:  # as `models.mobilenet` rounds them
        return max(1, round(channels * config.width_multiplier))

    levels = ["features.0.0", *(f"features.{i}.1.0" for i in range(1, len(config.blocks) + 1))]
    widths = [width(config.stem), *(width(c) for c, _ in config.blocks)]
    plan = {
        f"features.{i}.1.0": UnitRead(levels[i - 1], widths[i - 1])
        for i in range(1, len(config.blocks) + 1)
    }
    plan["classifier"] = UnitRead(levels[-1], widths[-1])
    return plan


def unit_plan(architecture: Architecture) -> UnitPlan:
    """Masked layer name -> the units it reads, for the families that prune units."""
    config = architecture.config
    if isinstance(config, MLPConfig):
        names = [f"layers.{i}" for i in range(len(config.hidden) + 1)]
        return _chain_reads(names, list(config.hidden))
    if isinstance(config, CNNConfig):
        chain = cnn_chain(config, architecture.input_shape)
        return _conv_plan(chain, list(config.channels), list(config.hidden))
    if isinstance(config, VGGConfig):
        widths = [w for stage in config.stages for w in stage]
        return _conv_plan(vgg_chain(config), widths, list(config.hidden))
    if isinstance(config, MobileNetV1Config):
        return _mobilenet_plan(config)
    raise ValueError(f"unit granularity has no plan for the {config.name!r} family")


def unit_l1_scores(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Per layer masked at unit granularity, the mean |w| of each unit's own filter or
    neuron (its row in the producing layer, pruned columns counted as zero): the L1-norm
    criterion of filter pruning (Li et al., 2017), divided by the fan-in so that units of
    wide and narrow layers rank on one scale."""
    scores = {}
    for name, layer in masked_layers(model):
        if layer.unit_source is None:
            continue
        producer = model.get_submodule(layer.unit_source)
        assert isinstance(producer, (nn.Linear, nn.Conv2d)), "producers are Linear or Conv2d"
        weight = producer.weight.detach()
        if isinstance(producer, MaskedMixin):
            weight = weight * producer.hard_mask()
        scores[name] = weight.abs().flatten(1).mean(dim=1)
    return scores


def _unit_readers(architecture: Architecture) -> dict[str, MaskedMixin]:
    """The masked layers of a fresh unit-granularity model of `architecture`, by name."""
    model = create_model(architecture)
    mask_model(model, units=unit_plan(architecture))
    return {name: layer for name, layer in masked_layers(model) if layer.unit_source}


def as_unit_masks(
    masks: dict[str, torch.Tensor], architecture: Architecture
) -> dict[str, torch.Tensor] | None:
    """The per-unit masks behind weight-shaped `masks` when a unit-granularity prune job
    wrote them (every unit's columns all kept or all cut, in exactly the layers that read
    units), else None. Mask files are weight-shaped at both granularities (`mask_bytes`), so
    a reader such as `transfer` tells them apart by this structure."""
    if not isinstance(architecture.config, UNIT_CONFIGS):
        return None
    readers = _unit_readers(architecture)
    if set(masks) != set(readers):
        return None
    out = {}
    for name, mask in masks.items():
        layer = readers[name]
        if tuple(mask.shape) != tuple(layer.weight.shape):
            return None
        units = layer.units_kept(mask)
        if not torch.equal(layer.expand(units), mask.to(torch.bool)):
            return None
        out[name] = units
    return out


def as_weight_masks(
    unit_masks: dict[str, torch.Tensor], architecture: Architecture
) -> dict[str, torch.Tensor]:
    """Per-unit masks broadcast to their readers' weight shapes (the mask-file form)."""
    readers = _unit_readers(architecture)
    return {name: readers[name].expand(mask.to(torch.bool)) for name, mask in unit_masks.items()}


def units_kept(model: torch.nn.Module) -> list[dict[str, str | int]]:
    """Per layer whose units are pruned (the job page's layer table): the layer that
    computes them, the layer that reads them (where the mask sits), how many it has and how
    many stay. Empty at weight granularity."""
    return [
        {
            "layer": layer.unit_source,
            "read_by": name,
            "units": int(layer.mask_logits.numel()),
            "kept": int((layer.mask_logits.detach() > 0).sum()),
        }
        for name, layer in masked_layers(model)
        if layer.unit_source
    ]
