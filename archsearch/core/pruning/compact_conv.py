"""Compaction of conv families (`cnn`, `vgg`): channels left without inputs or outputs go.

"Differentiable Architecture Pruning for Transfer Learning", section 2.1: the found
architecture, made physically small. A channel whose outgoing weights are all pruned is
unused and removed. A channel with no incoming weight outputs a constant k = act(BN(bias));
it is removed when k = 0, and, after the last conv, also when k != 0 by folding k into the
head's bias (the head sees k at every position). Elsewhere a nonzero constant cannot be
folded exactly (zero padding makes its effect position dependent), so the channel stays.
Hidden units of the fully connected head are compacted like an MLP's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from archsearch.core.models.layers import ACTIVATIONS
from archsearch.core.pruning.compact_mlp import compact_chain
from archsearch.specs.model_configs import CNNConfig
from archsearch.specs.prune_model_configs import VGGConfig

State = dict[str, torch.Tensor]
BN_KEYS = ("weight", "bias", "running_mean", "running_var")


@dataclass
class ConvChain:
    """Where a sequential conv family keeps its layers in the state dict."""

    convs: list[str]  # conv module prefixes, in forward order
    bns: list[str | None]  # batch-norm prefix after each conv (None: no batch norm)
    head: list[str]  # Linear prefixes of the fully connected head
    positions: int  # head inputs per channel of the last conv (flattened spatial size)
    activation: str


def cnn_chain(config: CNNConfig, input_shape: tuple[int, ...]) -> ConvChain:
    n = len(config.channels)
    shrink = 2**n if config.pool else 1  # grown CNNs do not pool ('same' padding keeps sizes)
    side = (input_shape[1] // shrink) * (input_shape[2] // shrink)
    return ConvChain(
        [f"features.{i}.0" for i in range(n)],
        [f"features.{i}.1" if config.batch_norm else None for i in range(n)],
        [f"head.{j}" for j in range(len(config.hidden) + 1)],
        side,
        config.activation,
    )


def vgg_chain(config: VGGConfig) -> ConvChain:
    convs = [
        f"features.{s}.{3 * j}" for s, stage in enumerate(config.stages) for j in range(len(stage))
    ]
    bns = [
        f"features.{s}.{3 * j + 1}" if config.batch_norm else None
        for s, stage in enumerate(config.stages)
        for j in range(len(stage))
    ]
    return ConvChain(
        convs, bns, [f"head.{j}" for j in range(len(config.hidden) + 1)], 1, config.activation
    )


def _constant(state: State, chain: ConvChain, k: int) -> torch.Tensor:
    """act(BN(bias)) per channel of conv k: the output of a channel without inputs."""
    bias = state.get(f"{chain.convs[k]}.bias")
    value = (
        bias.clone()
        if bias is not None
        else torch.zeros(state[f"{chain.convs[k]}.weight"].shape[0])
    )
    bn = chain.bns[k]
    if bn is not None:
        eps = 1e-5  # nn.BatchNorm2d's default, used by every family here
        value = (value - state[f"{bn}.running_mean"]) / torch.sqrt(state[f"{bn}.running_var"] + eps)
        value = value * state[f"{bn}.weight"] + state[f"{bn}.bias"]
    out: torch.Tensor = ACTIVATIONS[chain.activation]()(value)
    return out


def _drop_channel(state: State, chain: ConvChain, k: int, c: int) -> None:
    conv = chain.convs[k]
    last = k + 1 == len(chain.convs)
    head_w, head_b = f"{chain.head[0]}.weight", f"{chain.head[0]}.bias"
    if last and head_b in state and not state[f"{conv}.weight"][c].any():
        # No inputs: the head sees the constant k_c at each of the channel's positions.
        block = state[head_w][:, c * chain.positions : (c + 1) * chain.positions]  # (out, S)
        state[head_b] = state[head_b] + block.sum(1) * _constant(state, chain, k)[c]
    keep = torch.arange(state[f"{conv}.weight"].shape[0]) != c
    for key in ("weight", "bias"):
        if f"{conv}.{key}" in state:
            state[f"{conv}.{key}"] = state[f"{conv}.{key}"][keep]
    if chain.bns[k] is not None:
        for key in BN_KEYS:
            state[f"{chain.bns[k]}.{key}"] = state[f"{chain.bns[k]}.{key}"][keep]
    if not last:
        state[f"{chain.convs[k + 1]}.weight"] = state[f"{chain.convs[k + 1]}.weight"][:, keep]
    else:
        state[head_w] = state[head_w][:, keep.repeat_interleave(chain.positions)]


def _removable_channel(state: State, chain: ConvChain, k: int) -> int | None:
    weight = state[f"{chain.convs[k]}.weight"]  # (C_out, C_in, kh, kw)
    if weight.shape[0] <= 1:
        return None
    if k + 1 < len(chain.convs):
        dead_out = ~state[f"{chain.convs[k + 1]}.weight"].any(dim=(0, 2, 3))
    else:
        head = state[f"{chain.head[0]}.weight"].view(-1, weight.shape[0], chain.positions)
        dead_out = ~head.any(dim=(0, 2))
    dead_in = ~weight.flatten(1).any(dim=1)
    last_foldable = k + 1 == len(chain.convs) and f"{chain.head[0]}.bias" in state
    if not last_foldable:
        dead_in = dead_in & (_constant(state, chain, k) == 0)
    candidates = (dead_out | dead_in).nonzero().flatten()
    return int(candidates[0]) if len(candidates) else None


def compact_conv_state(state: State, chain: ConvChain) -> tuple[State, list[int], list[int]]:
    """Compacted state, conv widths and head hidden widths."""
    state = {k: v.clone() for k, v in state.items()}
    changed = True
    while changed:
        changed = False
        for k in range(len(chain.convs)):
            c = _removable_channel(state, chain, k)
            if c is not None:
                _drop_channel(state, chain, k, c)
                changed = True
    weights = [state[f"{p}.weight"] for p in chain.head]
    biases = [state.get(f"{p}.bias") for p in chain.head]
    weights, biases = compact_chain(weights, biases, chain.activation)
    for prefix, w, b in zip(chain.head, weights, biases, strict=True):
        state[f"{prefix}.weight"] = w
        if b is not None:
            state[f"{prefix}.bias"] = b
    widths = [state[f"{p}.weight"].shape[0] for p in chain.convs]
    return state, widths, [w.shape[0] for w in weights[:-1]]
