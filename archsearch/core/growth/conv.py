"""Growing the channels of a convolution: "Spotting expressivity bottlenecks and fixing them
optimally", sections 3.1-3.2 with statistics over unfolded patches.

For a pair conv1 -> sigma -> conv2 (stride 1, same padding, no pooling in between), a new
channel k of conv1 with input kernel alpha_k (patch vector, bias last) and output kernel
omega_k of conv2 moves conv2's pre-activation, to first order, by
    V_new(i, :, l) = sum_delta omega_k[:, delta] alpha_k^T P_i(l + delta)
where P_i(m) is the patch of conv1's input at position m (zero where conv2 pads). Unfolding
the patch tensor again with conv2's kernel gives T_i(l) (q, K2), so the linear term is
alpha_k^T N vec(omega_k) with N = sum_{i,l} T_i(l) (x) v(i, l) / n: exact. The quadratic term
is not separable in (alpha, omega) for K2 > 1; like the paper's convolutional extension we
use S = sum_{i,l} T_i(l) T_i(l)^T / n, which keeps the first-order gain of the chosen
channels exactly sum_k lambda_k^2 (tested) while the line search handles the curvature.
dW* (Prop. 3.1) is exact: a least-squares fit over every (sample, position) pair.

`core.growth.cnn_step` applies it to every consecutive pair of a registry `cnn` (pool off,
no batch norm), with the head's linear layers seen as convolutions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.growth import solver


def _geometry(conv: nn.Conv2d) -> tuple[tuple[int, int], tuple[int, int]]:
    """(kernel, padding) as int pairs; growth supports stride 1, groups 1, numeric padding."""
    assert conv.stride == (1, 1) and conv.groups == 1, "growth supports stride 1, groups 1"
    assert not isinstance(conv.padding, str), "give the padding as numbers, not 'same'"
    kh, kw = conv.kernel_size
    ph, pw = conv.padding
    return (kh, kw), (ph, pw)


def patches(x: torch.Tensor, conv: nn.Conv2d) -> torch.Tensor:
    """Unfolded input patches of `conv` with a ones row for the bias: (n, C k k + 1, L)."""
    kernel, padding = _geometry(conv)
    cols = F.unfold(x, kernel, padding=padding)  # (n, C k k, L)
    ones = torch.ones(cols.shape[0], 1, cols.shape[2], dtype=cols.dtype, device=cols.device)
    return torch.cat([cols, ones], dim=1)


def conv_best_update(v_goal: torch.Tensor, b_patches: torch.Tensor, rtol: float) -> torch.Tensor:
    """dW* of conv2 over all (sample, position) pairs: (C2, C1 k k + 1), bias last.

    Args:
        v_goal: (n, C2, L) desired moves of conv2's pre-activation.
        b_patches: (n, C1 k k + 1, L) conv2's input patches, from `patches`.
    """
    rows = b_patches.transpose(1, 2).reshape(-1, b_patches.shape[1])  # (n L, p)
    targets = v_goal.transpose(1, 2).reshape(-1, v_goal.shape[1])  # (n L, C2)
    # best_update divides by the row count; dW* does not depend on that normalisation.
    return solver.best_update(targets, rows, rtol)


def channel_statistics(
    x: torch.Tensor,
    conv1: nn.Conv2d,
    conv2: nn.Conv2d,
    v_proj: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """S (q, q) and N (q, K2 C2) of the new-channel problem; q = C0 k1 k1 + 1, K2 = k2 k2."""
    n, (height, width) = x.shape[0], x.shape[2:]
    (kh, kw), (ph, pw) = _geometry(conv1)
    out_h, out_w = height + 2 * ph - kh + 1, width + 2 * pw - kw + 1  # conv1's output size
    p = patches(x, conv1).reshape(n, -1, out_h, out_w)  # (n, q, H', W'): a patch per position
    q, k2 = p.shape[1], conv2.kernel_size[0] * conv2.kernel_size[1]
    kernel, padding = _geometry(conv2)
    t = F.unfold(p, kernel, padding=padding)  # (n, q K2, L), channel-major
    t = t.reshape(n, q, k2, -1)  # (n, q, K2, L)
    s = torch.einsum("nqkl,nrkl->qr", t, t) / n  # (q, q)
    big_n = torch.einsum("nqkl,nol->qko", t, v_proj).reshape(q, -1) / n  # (q, K2 C2)
    return s, big_n


def optimal_channels(
    x: torch.Tensor,
    conv1: nn.Conv2d,
    conv2: nn.Conv2d,
    v_proj: torch.Tensor,
    rtol: float,
) -> solver.Neurons:
    """Channels as `solver.Neurons`: in_weights (K, q), out_weights (C2 K2, K) in (o, kernel)
    order."""
    s, big_n = channel_statistics(x, conv1, conv2, v_proj)
    s64, n64 = s.double(), big_n.double()
    values, vectors = solver.eigh_psd(s64, rtol)  # (r,), (q, r)
    scaled = vectors / values.sqrt()  # (q, r)
    u, lambdas, vh = solver.svd_canonical(scaled.T @ n64)
    keep = lambdas > lambdas.max() * 1e-10 if lambdas.numel() else lambdas.bool()
    u, lambdas, v = u[:, keep], lambdas[keep], vh[keep].T  # (r, R), (R,), (K2 C2, R)
    root = lambdas.sqrt()
    k2, c2 = conv2.kernel_size[0] * conv2.kernel_size[1], conv2.out_channels
    # v is ordered (kernel, out); conv2's weight wants (out, kernel).
    omega = (v * root).reshape(k2, c2, -1).transpose(0, 1).reshape(c2 * k2, -1)
    alpha = ((scaled @ u) * root).T
    return solver.Neurons(
        alpha.to(x.dtype).contiguous(), omega.to(x.dtype), lambdas.to(x.dtype), values.numel()
    )


@torch.no_grad()
def widen_conv_pair(
    conv1: nn.Conv2d,
    conv2: nn.Conv2d,
    in_weights: torch.Tensor,
    out_weights: torch.Tensor,
) -> tuple[nn.Conv2d, nn.Conv2d]:
    """conv1 with K more output channels and conv2 with K more input channels.

    Args:
        in_weights: (K, C0 k1 k1 + 1), bias last.
        out_weights: (C2 k2 k2, K), rows ordered (out channel, kernel position).
    """
    k = in_weights.shape[0]

    def like(conv: nn.Conv2d, c_in: int, c_out: int) -> nn.Conv2d:
        kernel, padding = _geometry(conv)
        return nn.Conv2d(
            c_in,
            c_out,
            kernel,
            padding=padding,
            bias=conv.bias is not None,
            device=conv.weight.device,
            dtype=conv.weight.dtype,
        )

    new1 = like(conv1, conv1.in_channels, conv1.out_channels + k)
    new2 = like(conv2, conv2.in_channels + k, conv2.out_channels)
    kernel1 = in_weights[:, :-1].reshape(k, *conv1.weight.shape[1:])
    new1.weight.copy_(torch.cat([conv1.weight, kernel1.to(conv1.weight)]))
    if conv1.bias is not None and new1.bias is not None:
        new1.bias.copy_(torch.cat([conv1.bias, in_weights[:, -1].to(conv1.bias)]))
    kernel2 = out_weights.T.reshape(k, conv2.out_channels, *conv2.kernel_size).transpose(0, 1)
    new2.weight.copy_(torch.cat([conv2.weight, kernel2.to(conv2.weight)], dim=1))
    if conv2.bias is not None and new2.bias is not None:
        new2.bias.copy_(conv2.bias)
    return new1, new2
