"""Closed-form solutions of "Spotting expressivity bottlenecks and fixing them optimally".

Section 3.1 (Prop. 3.1): the best update dW* of the existing next-layer weights.
Section 3.2 (Prop. 3.2): the optimal new neurons from the SVD of S^{-1/2} N.
Appendix B.3: S = B^T B / n is often singular (constant pixels, duplicated inputs, dead
units); we take S^{+} and S^{-1/2} from an eigendecomposition that treats eigenvalues below
`rtol * max` as exactly zero. This is exact on range(S), and N = B^T V / n always lies in
range(S), so no noise or ridge is ever added.

Which eigenvalues are noise? Sampling noise does not single out the small ones: in the
whitened basis every direction of S carries the same sampling noise, about E||v||^2 / n of
sum(lambda^2), whatever its eigenvalue (section 3.4's variance is spread evenly). What grows
as an eigenvalue shrinks is round-off: S is accumulated in the inputs' precision over n
rows, so eigenvalues below about eps * sqrt(n) * max are not resolved (`roundoff_rtol`).
Measured on MNIST growth steps (statistics batch 1024, 785 inputs), cutting there keeps
~550 of ~585 directions and 93-98% of sum(lambda^2); on a held-out batch of the same size
the selected neurons' first-order decrease is 1.5-10x that of a cut at 1% of the top
eigenvalue (41 directions, 4-40% of sum(lambda^2)), about that of a cut at 1e-9. The grown
networks nevertheless end less accurate (bench/grow.py), so the job's default stays 1e-2.

Convention: samples are rows. B (n, p) holds the activities feeding a layer with a last
column of ones for the bias; V (n, d) holds per-sample desired pre-activation updates
V_goal = -dl_i/da (eta = 1). Linear algebra runs in float64 for stability.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Neurons:
    """New neurons of one layer, already scaled so that V_new = B in_weights^T out^T.

    With sigma'(0) = 1, neuron k moves the next pre-activation by lambda_k B alpha_k v_k^T;
    we split the factor lambda_k evenly as sqrt(lambda_k) on both sides.
    """

    in_weights: torch.Tensor  # (K, p): alpha_k^T sqrt(lambda_k), last column = bias
    out_weights: torch.Tensor  # (d, K): v_k sqrt(lambda_k)
    lambdas: torch.Tensor  # (R,) all singular values, descending (not only the K kept)
    directions: int = 0  # eigen-directions of S kept (the rank r of the whitened problem)

    @property
    def count(self) -> int:
        return int(self.in_weights.shape[0])


def roundoff_rtol(rows: int, dtype: torch.dtype) -> float:
    """Relative size below which eigenvalues of a Gram matrix summed over `rows` products in
    `dtype` are round-off: eps * sqrt(rows) (float32, 1024 rows: 3.8e-6)."""
    return torch.finfo(dtype).eps * math.sqrt(max(1, rows))


def eigh_psd(s: torch.Tensor, rtol: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues above `rtol * max` and their eigenvectors of a PSD matrix."""
    assert s.shape[0] == s.shape[1], f"S must be square, got {tuple(s.shape)}"
    s = 0.5 * (s + s.T)  # symmetrise away round-off before eigh
    values, vectors = torch.linalg.eigh(s)
    top = values.max() if values.numel() else torch.tensor(0.0, dtype=s.dtype)
    if not torch.isfinite(top) or top <= 0:
        return values[:0], vectors[:, :0]
    keep = values > rtol * top
    return values[keep], vectors[:, keep]  # (r,), (p, r)


def pinv_psd(s: torch.Tensor, rtol: float = 1e-7) -> torch.Tensor:
    """Moore-Penrose pseudo-inverse of a PSD matrix, small eigenvalues cut at `rtol`."""
    values, vectors = eigh_psd(s, rtol)
    return (vectors / values) @ vectors.T  # (p, p)


def best_update(v_goal: torch.Tensor, b: torch.Tensor, rtol: float = 1e-7) -> torch.Tensor:
    """dW* = (V^T B / n) (B^T B / n)^+ : argmin ||V - B dW^T||_F (Prop. 3.1). Returns (d, p)."""
    assert v_goal.shape[0] == b.shape[0], "V_goal and B must have one row per sample"
    n, p = b.shape
    v64, b64 = v_goal.double(), b.double()
    if p > n:
        # Wide B (a CNN's flattened maps): B^T B / n and the Gram matrix G = B B^T / n share
        # their non-zero eigenvalues, and V^T B (B^T B)^+ = V^T G^+ B / n: decompose (n, n).
        gram = b64 @ b64.T / n  # (n, n)
        return ((v64.T @ pinv_psd(gram, rtol)) @ b64 / n).to(v_goal.dtype)  # (d, p)
    s = b64.T @ b64 / n  # (p, p)
    dw = (v64.T @ b64 / n) @ pinv_psd(s, rtol)  # (d, p)
    return dw.to(v_goal.dtype)


def svd_canonical(m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`torch.linalg.svd(m, full_matrices=False)` with each pair (u_k, v_k) signed so that
    v_k's largest entry (in magnitude) is positive.

    A singular pair is defined up to a joint sign, which LAPACK picks arbitrarily (MKL and
    OpenBLAS differ). The pair becomes a neuron (alpha_k, omega_k), and with an activation
    that is not odd, sigma(-a x) (-w) != sigma(a x) w: the sign changes the grown network.
    Fixing it makes a job's result the same on every machine.
    """
    u, values, vh = torch.linalg.svd(m, full_matrices=False)  # (r, m), (m,), (m, d)
    if vh.numel():
        largest = vh.abs().argmax(dim=1, keepdim=True)  # (m, 1)
        signs = torch.sign(vh.gather(1, largest)).squeeze(1)  # (m,)
        signs[signs == 0] = 1.0
        u, vh = u * signs, vh * signs[:, None]
    return u, values, vh


def optimal_neurons(b: torch.Tensor, v_goal_proj: torch.Tensor, rtol: float = 1e-7) -> Neurons:
    """All R optimal neurons (Prop. 3.2) for inputs B (n, p) and remaining goal V (n, d)."""
    assert b.shape[0] == v_goal_proj.shape[0], "B and V_goal_proj must share samples"
    n = b.shape[0]
    # Products in the input precision (the cost is there), decompositions in float64.
    s = (b.T @ b / n).double()  # (p, p)
    big_n = (b.T @ v_goal_proj / n).double()  # (p, d)
    # S^{-1/2} = Q E^{-1/2} Q^T on range(S); working in the r-dim eigenbasis avoids the
    # (p, p) products: S^{-1/2} N = Q (E^{-1/2} Q^T N) has the same singular values, its
    # left singular vectors are Q u', and alpha = S^{-1/2} Q u' = Q E^{-1/2} u'.
    values, vectors = eigh_psd(s, rtol)  # (r,), (p, r)
    scaled = vectors / values.sqrt()  # (p, r) = Q E^{-1/2}
    u, lambdas, vh = svd_canonical(scaled.T @ big_n)  # (r, m), (m,), (m, d)
    keep = lambdas > lambdas.max() * 1e-10 if lambdas.numel() else lambdas.bool()
    u, lambdas, v = u[:, keep], lambdas[keep], vh[keep].T  # (r, R), (R,), (d, R)
    root = lambdas.sqrt()
    alpha = (scaled @ u) * root  # (p, R)
    omega = v * root  # (d, R)
    dtype = b.dtype
    return Neurons(
        alpha.T.to(dtype).contiguous(), omega.to(dtype), lambdas.to(dtype), values.numel()
    )


def select(neurons: Neurons, max_count: int, rel_threshold: float, abs_threshold: float) -> Neurons:
    """Keep the top neurons with lambda_k^2 >= rel * lambda_1^2 and >= abs (section 3.2)."""
    lam2 = neurons.lambdas.square()
    if lam2.numel() == 0:
        return neurons
    ok = (lam2 >= rel_threshold * lam2[0]) & (lam2 >= abs_threshold)
    count = min(max_count, int(ok.sum().item()))
    return Neurons(
        neurons.in_weights[:count],
        neurons.out_weights[:, :count],
        neurons.lambdas,
        neurons.directions,
    )


def random_like(neurons: Neurons, generator: torch.Generator) -> Neurons:
    """Random directions with the same count and per-neuron norms (appendix C.4 baseline)."""
    k, p = neurons.in_weights.shape
    d = neurons.out_weights.shape[0]
    # Drawn on the CPU generator (reproducible on any device), then moved beside the model.
    device = neurons.in_weights.device
    alpha = torch.randn(k, p, generator=generator, dtype=neurons.in_weights.dtype).to(device)
    omega = torch.randn(d, k, generator=generator, dtype=neurons.out_weights.dtype).to(device)
    alpha *= neurons.in_weights.norm(dim=1, keepdim=True) / alpha.norm(dim=1, keepdim=True)
    omega *= neurons.out_weights.norm(dim=0, keepdim=True) / omega.norm(dim=0, keepdim=True)
    return Neurons(alpha, omega, neurons.lambdas, neurons.directions)
