"""Growable fully connected layers: widen a (Linear, Linear) pair, nudge a Linear.

Used by `core.growth` ("Spotting expressivity bottlenecks and fixing them optimally",
section 3.2: W_l^T <- (W_l^T alpha_1 ... alpha_K), W_{l+1} <- (W_{l+1} omega_1 ... omega_K)).
The layers stay plain `nn.Linear`, so a grown MLP is an ordinary registry `mlp` with wider
`hidden` and reloads from `architecture.json` + `model.safetensors` alone.
"""

from __future__ import annotations

import torch
from torch import nn

from archsearch.core.optimizers import FunctionalOptimizer


def with_bias_column(h: torch.Tensor) -> torch.Tensor:
    """Activities B with a last column of ones: the bias row of the paper's b = (x, 1)."""
    return torch.cat([h, torch.ones(h.shape[0], 1, dtype=h.dtype, device=h.device)], dim=1)


@torch.no_grad()
def nudge_linear(layer: nn.Linear, delta: torch.Tensor) -> None:
    """W <- W + delta in place, where delta (out, in + 1) carries the bias as last column."""
    assert delta.shape == (layer.out_features, layer.in_features + 1), (
        f"delta {tuple(delta.shape)} does not fit {layer}"
    )
    layer.weight.add_(delta[:, :-1].to(layer.weight))
    if layer.bias is not None:
        layer.bias.add_(delta[:, -1].to(layer.bias))


@torch.no_grad()
def widen_pair(
    first: nn.Linear, second: nn.Linear, in_weights: torch.Tensor, out_weights: torch.Tensor
) -> tuple[nn.Linear, nn.Linear]:
    """New layers with K extra hidden neurons between `first` and `second`.

    Args:
        first: the layer whose outputs are the grown neurons (out = width).
        second: the layer that reads them (in = width).
        in_weights: (K, first.in_features + 1) input weights, bias last.
        out_weights: (second.out_features, K) output weights.
    """
    k = in_weights.shape[0]
    assert second.in_features == first.out_features, "layers must be consecutive"
    assert in_weights.shape == (k, first.in_features + 1), (
        f"bad in_weights {tuple(in_weights.shape)}"
    )
    assert out_weights.shape == (second.out_features, k), (
        f"bad out_weights {tuple(out_weights.shape)}"
    )
    width = first.out_features + k
    device, dtype = first.weight.device, first.weight.dtype
    new_first = nn.Linear(
        first.in_features, width, bias=first.bias is not None, device=device, dtype=dtype
    )
    new_second = nn.Linear(
        width, second.out_features, bias=second.bias is not None, device=device, dtype=dtype
    )
    new_first.weight.copy_(torch.cat([first.weight, in_weights[:, :-1].to(first.weight)], dim=0))
    if first.bias is not None:
        new_first.bias.copy_(torch.cat([first.bias, in_weights[:, -1].to(first.bias)]))
    new_second.weight.copy_(torch.cat([second.weight, out_weights.to(second.weight)], dim=1))
    if second.bias is not None:
        new_second.bias.copy_(second.bias)
    return new_first, new_second


def _padded(old: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """`old` in the leading corner of zeros of `shape` (the new neurons' entries start at 0)."""
    new = torch.zeros(shape, dtype=old.dtype, device=old.device)
    new[tuple(slice(0, n) for n in old.shape)] = old
    return new


def carry_optimizer_state(
    old: FunctionalOptimizer,
    old_params: list[nn.Parameter],
    new: FunctionalOptimizer,
    new_params: list[nn.Parameter],
) -> None:
    """Copy per-parameter optimiser state (Adam moments, momentum) onto widened parameters.

    `old_params[i]` and `new_params[i]` are the same tensor before and after growth; the new
    rows and columns start with zero moments, so a growth step does not reset what the
    optimiser has learnt about the existing weights.
    """
    assert len(old_params) == len(new_params), "parameter lists must match one to one"
    for before, after in zip(old_params, new_params, strict=True):
        state = old.state.get(before)
        if not state:
            continue
        assert all(a >= b for a, b in zip(after.shape, before.shape, strict=True)), (
            "growth never shrinks"
        )
        new.state[after] = {
            key: _padded(value, after.shape)
            if torch.is_tensor(value) and value.shape == before.shape
            else value
            for key, value in state.items()
        }


def linears(model: nn.Module) -> list[nn.Linear]:
    """The registry MLP's `layers` (hidden ones, then the classifier), typed."""
    layers = getattr(model, "layers", None)
    assert isinstance(layers, nn.ModuleList), "growth needs an MLP with a `layers` ModuleList"
    assert all(isinstance(layer, nn.Linear) for layer in layers), "MLP layers must be nn.Linear"
    return [layer for layer in layers if isinstance(layer, nn.Linear)]


def activation_of(model: nn.Module) -> nn.Module:
    act = getattr(model, "act", None)
    assert isinstance(act, nn.Module), "growth needs an MLP with an `act` activation module"
    return act


def replace_linear(model: nn.Module, index: int, layer: nn.Linear) -> None:
    layers = getattr(model, "layers", None)
    assert isinstance(layers, nn.ModuleList), "growth needs an MLP with a `layers` ModuleList"
    layers[index] = layer
