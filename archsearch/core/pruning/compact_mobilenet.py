"""Compaction of MobileNetV1: a channel goes with its depthwise filter.

A depthwise conv ties channel c of a block's input to channel c of its output, so channel c
of a width level (the output of the stem or of a block's pointwise conv) is removed together
with the next block's depthwise filter c and pointwise input column c. It is removable when:
- nobody reads it: the next depthwise filter c or the next pointwise column c is all zero
  (for the last level, the classifier's column c);
- it is a constant zero: its producing filter is all zero and act(BN(0)) = 0 there.
What a removed channel still contributed is a constant: the depthwise output act(BN(0)) of
an all-zero filter or input, which a 1x1 pointwise conv spreads evenly, so it is folded
exactly into the pointwise conv's batch norm (`running_mean -= w[:, c] * k`); after the last
level, the pooled constant is folded into the classifier's bias. Batch norm is in eval mode.
"""

from __future__ import annotations

import torch

from archsearch.core.models.layers import ACTIVATIONS
from archsearch.specs.prune_model_configs import MobileNetV1Config

State = dict[str, torch.Tensor]
BN_KEYS = ("weight", "bias", "running_mean", "running_var")
EPS = 1e-5  # nn.BatchNorm2d's default


def _act_bn_zero(state: State, bn: str, activation: str) -> torch.Tensor:
    """act(BN(0)) per channel: the output of a conv channel whose filter is all zero."""
    value = -state[f"{bn}.running_mean"] / torch.sqrt(state[f"{bn}.running_var"] + EPS)
    out: torch.Tensor = ACTIVATIONS[activation]()(
        value * state[f"{bn}.weight"] + state[f"{bn}.bias"]
    )
    return out


def _levels(blocks: int) -> list[str]:
    """Producer conv prefix of each width level: the stem, then each block's pointwise conv."""
    return ["features.0", *(f"features.{i}.1" for i in range(1, blocks + 1))]


def _removable(state: State, level: int, n_levels: int, activation: str) -> int | None:
    producer = _levels(n_levels - 1)[level]
    weight = state[f"{producer}.0.weight"]  # (C, C_in, kh, kw)
    if weight.shape[0] <= 1:
        return None  # a config needs at least one channel
    zero_const = ~weight.flatten(1).any(1) & (_act_bn_zero(state, f"{producer}.1", activation) == 0)
    if level + 1 == n_levels:
        unread = ~state["classifier.weight"].any(0)
        dead_in = ~weight.flatten(1).any(1)  # constant output: folded into the classifier bias
    else:
        dw, pw = f"features.{level + 1}.0.0.weight", f"features.{level + 1}.1.0.weight"
        unread = ~state[dw].flatten(1).any(1) | ~state[pw].flatten(1).any(0)
        dead_in = zero_const
    candidates = (unread | dead_in).nonzero().flatten()
    return int(candidates[0]) if len(candidates) else None


def _drop_rows(state: State, prefix: str, keep: torch.Tensor) -> None:
    """Remove output channels of a conv + batch-norm pair (prefix.0 conv, prefix.1 BN)."""
    state[f"{prefix}.0.weight"] = state[f"{prefix}.0.weight"][keep]
    for key in BN_KEYS:
        state[f"{prefix}.1.{key}"] = state[f"{prefix}.1.{key}"][keep]


def _drop(state: State, level: int, n_levels: int, c: int, activation: str) -> None:
    producer = _levels(n_levels - 1)[level]
    keep = torch.arange(state[f"{producer}.0.weight"].shape[0]) != c
    if level + 1 == n_levels:
        if not state[f"{producer}.0.weight"][c].any():  # pooled constant -> classifier bias
            k = _act_bn_zero(state, f"{producer}.1", activation)[c]
            state["classifier.bias"] = (
                state["classifier.bias"] + state["classifier.weight"][:, c] * k
            )
        state["classifier.weight"] = state["classifier.weight"][:, keep]
    else:
        dw, pw = f"features.{level + 1}.0", f"features.{level + 1}.1"
        # The depthwise channel is constant (zero filter or zero input): fold into pw's BN.
        k = _act_bn_zero(state, f"{dw}.1", activation)[c]
        state[f"{pw}.1.running_mean"] = (
            state[f"{pw}.1.running_mean"] - state[f"{pw}.0.weight"][:, c, 0, 0] * k
        )
        _drop_rows(state, dw, keep)
        state[f"{pw}.0.weight"] = state[f"{pw}.0.weight"][:, keep]
    _drop_rows(state, producer, keep)


def compact_mobilenet(state: State, config: MobileNetV1Config) -> tuple[State, MobileNetV1Config]:
    """The compact state and config (width multiplier 1, the kept widths)."""
    state = {k: v.clone() for k, v in state.items()}
    n_levels = len(config.blocks) + 1
    changed = True
    while changed:
        changed = False
        for level in range(n_levels):
            c = _removable(state, level, n_levels, config.activation)
            if c is not None:
                _drop(state, level, n_levels, c, config.activation)
                changed = True
    widths = [state[f"{p}.0.weight"].shape[0] for p in _levels(n_levels - 1)]
    blocks = tuple((w, stride) for w, (_, stride) in zip(widths[1:], config.blocks, strict=True))
    return state, config.model_copy(
        update={"stem": widths[0], "blocks": blocks, "width_multiplier": 1.0}
    )
