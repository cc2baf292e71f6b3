"""One growth step between two layers of a small CNN ("Spotting expressivity bottlenecks and
fixing them optimally", sections 3.1-3.3, with the statistics over unfolded patches of
`core.growth.conv`).

The registry `cnn` with `pool=false` and `batch_norm=false` is a chain of convolutions
conv_1 .. conv_C (stride 1, same padding), each followed by the activation, then flatten and
the head's linear layers. We view the whole network as a chain of convolutions: the first
head layer is a convolution whose kernel covers the whole (H, W) map (no padding, one output
position; its weight reshaped (d, C, H, W) is exactly the flattened linear), and the other
head layers are 1x1 convolutions on 1x1 maps. Growing the pair (chain[i], chain[i + 1])
adds output channels (or hidden neurons) to chain[i]: every layer but the classifier grows,
the last convolution's channels included, with the one closed form of `conv`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.growth import conv, solver
from archsearch.core.growth.layer_step import (
    LayerGrowth,
    LayerPolicy,
    _none,
    _signed,
    amplitudes,
    one_sided_slopes,
)


def convs_of(model: nn.Module) -> list[nn.Conv2d]:
    features = getattr(model, "features", None)
    assert isinstance(features, nn.Sequential), "CNN growth needs the registry `cnn`"
    convs = []
    for block in features:
        assert isinstance(block, nn.Sequential), "CNN growth needs the registry `cnn` blocks"
        assert not any(isinstance(m, (nn.MaxPool2d, nn.BatchNorm2d)) for m in block), (
            "CNN growth needs pool=false and batch_norm=false"
        )
        conv_layer = block[0]
        assert isinstance(conv_layer, nn.Conv2d), "a CNN block starts with its convolution"
        convs.append(conv_layer)
    return convs


def _head_list(model: nn.Module) -> nn.ModuleList:
    head = getattr(model, "head", None)
    assert isinstance(head, nn.ModuleList), "CNN growth needs the registry `cnn` head"
    return head


def head_of(model: nn.Module) -> list[nn.Linear]:
    """The head's linear layers (hidden ones, then the classifier)."""
    layers = [layer for layer in _head_list(model) if isinstance(layer, nn.Linear)]
    assert len(layers) == len(_head_list(model)), "the CNN head must be nn.Linear layers"
    return layers


def chain(model: nn.Module, spatial: tuple[int, int]) -> list[nn.Conv2d]:
    """The CNN as convolutions: the features' own convs, then the head as conv proxies."""
    convs, head = convs_of(model), head_of(model)
    height, width = spatial
    proxies: list[nn.Conv2d] = []
    for j, layer in enumerate(head):
        c_in = convs[-1].out_channels if j == 0 else layer.in_features
        kernel = (height, width) if j == 0 else (1, 1)
        proxy = nn.Conv2d(
            c_in,
            layer.out_features,
            kernel,
            bias=layer.bias is not None,
            device=layer.weight.device,
            dtype=layer.weight.dtype,
        )
        with torch.no_grad():
            proxy.weight.copy_(layer.weight.reshape(proxy.weight.shape))
            if layer.bias is not None and proxy.bias is not None:
                proxy.bias.copy_(layer.bias)
        proxies.append(proxy)
    return [*convs, *proxies]


@torch.no_grad()
def write_back(model: nn.Module, i: int, layer: nn.Conv2d) -> None:
    """Put chain element i back into the model (a head proxy becomes an nn.Linear again)."""
    convs = convs_of(model)
    if i < len(convs):
        block = getattr(model, "features", None)[i]  # type: ignore[index]
        assert isinstance(block, nn.Sequential), "CNN growth needs the registry `cnn`"
        block[0] = layer
        return
    linear = nn.Linear(
        layer.weight[0].numel(),
        layer.out_channels,
        bias=layer.bias is not None,
        device=layer.weight.device,
        dtype=layer.weight.dtype,
    )
    linear.weight.copy_(layer.weight.reshape(layer.out_channels, -1))  # (C, H, W) flatten order
    if layer.bias is not None:
        linear.bias.copy_(layer.bias)
    _head_list(model)[i - len(convs)] = linear


def _act(model: nn.Module) -> nn.Module:
    act = getattr(model, "act", None)
    assert isinstance(act, nn.Module), "the CNN needs an `act` module"
    return act


def _tail(layers: list[nn.Conv2d], act: nn.Module, a_next: torch.Tensor, i: int) -> torch.Tensor:
    out = a_next
    for layer in layers[i + 2 :]:
        out = layer(act(out))
    return out.flatten(1)  # (n, classes)


def _kernel2(out_weights: torch.Tensor, conv2: nn.Conv2d) -> torch.Tensor:
    """(C2 K2, K) output weights as a conv kernel (C2, K, k, k), as `widen_conv_pair` lays it."""
    k = out_weights.shape[1]
    return out_weights.T.reshape(k, conv2.out_channels, *conv2.kernel_size).transpose(0, 1)


def _new_pre(b_in: torch.Tensor, conv1: nn.Conv2d, in_weights: torch.Tensor) -> torch.Tensor:
    """Pre-activations of the new channels (n, K, H', W')."""
    kernel = in_weights[:, :-1].reshape(-1, *conv1.weight.shape[1:])
    return F.conv2d(b_in, kernel, in_weights[:, -1], padding=conv1.padding)


class PairStats:
    """B_{l-1} (conv1's input maps), B_l (conv2's input maps), V_goal (n, C2, L), the loss."""

    def __init__(
        self, layers: list[nn.Conv2d], act: nn.Module, x: torch.Tensor, y: torch.Tensor, i: int
    ) -> None:
        assert i + 1 < len(layers), f"layer {i} is the classifier, it cannot grow"
        with torch.no_grad():
            h = x
            for layer in layers[:i]:
                h = act(layer(h))
            self.b_in = h  # (n, C0, H, W)
            self.mid = act(layers[i](h))  # (n, C1, H', W')
        a_next = layers[i + 1](self.mid).detach().requires_grad_(True)  # (n, C2, H'', W'')
        loss = F.cross_entropy(_tail(layers, act, a_next, i), y)
        (grad,) = torch.autograd.grad(loss, a_next)
        self.a_next = a_next.detach()
        self.v_goal = (-grad * x.shape[0]).flatten(2)  # (n, C2, L) per-sample goals
        self.loss = loss.item()


def pair_rtol(stats: PairStats, policy: LayerPolicy) -> float:
    """The eigenvalue cut for statistics summed over every (sample, position) pair."""
    return policy.rtol_for(stats.v_goal.shape[0] * stats.v_goal.shape[2], stats.b_in.dtype)


def solve_pair(
    layers: list[nn.Conv2d], stats: PairStats, i: int, policy: LayerPolicy
) -> tuple[torch.Tensor, solver.Neurons]:
    b_mid = conv.patches(stats.mid, layers[i + 1])  # (n, p, L)
    rtol = pair_rtol(stats, policy)
    dw = conv.conv_best_update(stats.v_goal, b_mid, rtol)  # (C2, p)
    v_proj = stats.v_goal - torch.einsum("npl,op->nol", b_mid, dw)
    neurons = conv.optimal_channels(stats.b_in, layers[i], layers[i + 1], v_proj, rtol)
    return dw, solver.select(
        neurons, policy.max_neurons, policy.rel_threshold, policy.abs_threshold
    )


def candidate(
    layers: list[nn.Conv2d],
    act: nn.Module,
    stats: PairStats,
    y: torch.Tensor,
    i: int,
    dw: torch.Tensor,
    neurons: solver.Neurons,
) -> Callable[[float, float], float]:
    """loss(gamma0, gamma): conv2 nudged by gamma0 dW*, channels scaled sqrt(|gamma|) per side."""
    conv1, conv2 = layers[i], layers[i + 1]
    with torch.no_grad():
        delta = torch.einsum("npl,op->nol", conv.patches(stats.mid, conv2), dw).reshape(
            stats.a_next.shape
        )
        pre_new = _new_pre(stats.b_in, conv1, neurons.in_weights) if neurons.count else None
        kernel2 = _kernel2(neurons.out_weights, conv2)

    @torch.no_grad()
    def loss(gamma0: float, gamma: float) -> float:
        moved = stats.a_next + gamma0 * delta
        if pre_new is not None and gamma != 0.0:
            root, sign = abs(gamma) ** 0.5, (1.0 if gamma >= 0 else -1.0)
            moved = moved + sign * root * F.conv2d(
                act(root * pre_new), kernel2, padding=conv2.padding
            )
        return F.cross_entropy(_tail(layers, act, moved, i), y).item()

    return loss


def first_order_rate(
    act: nn.Module, layers: list[nn.Conv2d], stats: PairStats, i: int, neurons: solver.Neurons
) -> float:
    """d loss / d gamma at gamma = 0+ for the channels alone (exact one-sided slopes)."""
    if neurons.count == 0:
        return 0.0
    slope_pos, slope_neg = one_sided_slopes(act)
    pre = _new_pre(stats.b_in, layers[i], neurons.in_weights)  # (n, K, H', W')
    lin = torch.where(pre > 0, slope_pos, slope_neg) * pre
    moved = F.conv2d(
        lin, _kernel2(neurons.out_weights, layers[i + 1]), padding=layers[i + 1].padding
    )
    return -float((stats.v_goal * moved.flatten(2)).sum() / stats.v_goal.shape[0])


def grow_pair(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    i: int,
    policy: LayerPolicy,
    generator: torch.Generator | None = None,
) -> LayerGrowth:
    """Compute, line-search and apply one growth step of chain layer i, in place."""
    layers, act = chain(model, (x.shape[2], x.shape[3])), _act(model)
    stats = PairStats(layers, act, x, y, i)
    dw, neurons = solve_pair(layers, stats, i, policy)
    if policy.random:
        assert generator is not None, "random channels need a seeded generator"
        neurons = solver.random_like(neurons, generator)
    loss_at = candidate(layers, act, stats, y, i, dw, neurons)
    first, second = amplitudes(loss_at, stats.loss, policy)
    gamma0, gamma = first.gamma, second.gamma
    if gamma == 0.0:
        neurons = _none(neurons)
    lam2 = neurons.lambdas[: neurons.count].square().sum().item() if not policy.random else 0.0
    predicted = _predicted_decrease(act, layers, stats, i, dw, neurons, gamma0, gamma)
    record = LayerGrowth(
        layer=i,
        width_before=layers[i].out_channels,
        added=neurons.count,
        lambdas=[float(v) for v in neurons.lambdas],
        lambda2_sum=lam2,
        gamma0=gamma0,
        gamma=gamma,
        loss_before=stats.loss,
        loss_after=second.loss,
        predicted_decrease=predicted,
        kept_directions=neurons.directions,
        eig_rtol=pair_rtol(stats, policy),
        gamma0_at_bound=first.at_bound,
        gamma_at_bound=second.at_bound,
    )
    apply_pair(model, layers, i, dw, neurons, gamma0, gamma)
    return record


def _predicted_decrease(
    act: nn.Module,
    layers: list[nn.Conv2d],
    stats: PairStats,
    i: int,
    dw: torch.Tensor,
    neurons: solver.Neurons,
    gamma0: float,
    gamma: float,
) -> float:
    """The first-order loss decrease the step predicts: gamma0 dW* plus gamma's neurons."""
    predicted = gamma0 * dw_rate(stats, layers[i + 1], dw)
    return predicted - abs(gamma) * first_order_rate(act, layers, stats, i, _signed(neurons, gamma))


def dw_rate(stats: PairStats, conv2: nn.Conv2d, dw: torch.Tensor) -> float:
    """<V_goal, dW* B_l> / n: the first-order decrease per unit gamma0."""
    move = torch.einsum("npl,op->nol", conv.patches(stats.mid, conv2), dw)
    return float((stats.v_goal * move).sum()) / int(stats.v_goal.shape[0])


@torch.no_grad()
def apply_pair(
    model: nn.Module,
    layers: list[nn.Conv2d],
    i: int,
    dw: torch.Tensor,
    neurons: solver.Neurons,
    gamma0: float,
    gamma: float,
) -> None:
    conv2 = layers[i + 1]
    if gamma0 != 0.0:
        conv2.weight.add_((gamma0 * dw[:, :-1]).reshape(conv2.weight.shape).to(conv2.weight))
        if conv2.bias is not None:
            conv2.bias.add_((gamma0 * dw[:, -1]).to(conv2.bias))
    if neurons.count == 0:
        write_back(model, i + 1, conv2)
        return
    root = abs(gamma) ** 0.5
    signed = _signed(neurons, gamma)
    new1, new2 = conv.widen_conv_pair(
        layers[i], conv2, root * signed.in_weights, root * signed.out_weights
    )
    write_back(model, i, new1)
    write_back(model, i + 1, new2)
