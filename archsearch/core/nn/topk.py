"""Straight-through top-k over admissible edges (Discovering Neural Wirings, section 2.2).

Algorithm 1 chooses the real edge set as the k admissible edges of largest |w| (line 5) and
then updates *every* edge weight with <Z_u, -alpha dL/dI_v> (line 10). In autograd terms the
forward pass uses `w * mask`; the backward pass hands the gradient of the masked weight to
every admissible entry of `w` (Figure 3: the gradient flows *to* hallucinated edges) while the
gradient to the node states upstream only goes through the masked weight (never *through* a
hallucinated edge), which the caller's matmul with `w * mask` already guarantees.
"""

from __future__ import annotations

import torch


def kth_largest(values: torch.Tensor, k: int, lower_bound: float | None = None) -> torch.Tensor:
    """The k-th largest entry of a 1-d tensor, with `topk` (no full sort).

    `lower_bound` (e.g. slightly below the previous step's threshold: only a few edges swap
    per step) restricts the search to the candidates above it, which is much cheaper; when
    fewer than k candidates pass, the full search runs. The answer is the same either way.
    """
    if lower_bound is not None:
        candidates = values[values >= lower_bound]
        surplus = candidates.numel() - k
        if 0 <= surplus < k:
            return torch.topk(candidates, surplus + 1, largest=False, sorted=False).values.max()
    return torch.topk(values, k, sorted=False).values.min()


def topk_mask(
    scores: torch.Tensor,
    admissible: torch.Tensor,
    k: int,
    lower_bound: float | None = None,
    n_admissible: int | None = None,
) -> torch.Tensor:
    """Boolean mask of the `k` admissible entries of largest `scores`.

    Inadmissible entries are never selected and never count toward `k`. Ties at the
    threshold are broken deterministically: the lowest flat indices win.

    Args:
        scores: any shape, usually |w|.
        admissible: bool, same shape as `scores`.
        k: number of entries to select, 0 <= k <= admissible.sum().
        lower_bound: optional hint, a value believed to lie below the k-th largest score.
        n_admissible: `admissible.sum()` if the caller knows it (saves a reduction).
    """
    return topk_select(scores, admissible, k, lower_bound, n_admissible)[0]


def topk_select(
    scores: torch.Tensor,
    admissible: torch.Tensor,
    k: int,
    lower_bound: float | None = None,
    n_admissible: int | None = None,
) -> tuple[torch.Tensor, float | None]:
    """`topk_mask` and its threshold, the k-th largest admissible score (the smallest
    selected one; None when k is 0 or every admissible entry), a hint for the next call."""
    assert scores.shape == admissible.shape, "scores and admissible must have one shape"
    flat_scores = scores.detach().reshape(-1)
    flat_adm = admissible.reshape(-1)
    n_adm = int(flat_adm.sum()) if n_admissible is None else n_admissible
    assert 0 <= k <= n_adm, f"k={k} must lie in [0, {n_adm}] (admissible entries)"
    if k == 0:
        return torch.zeros_like(admissible), None
    if k == n_adm:
        return admissible.clone(), None
    masked = torch.where(flat_adm, flat_scores, torch.full_like(flat_scores, float("-inf")))
    threshold = kth_largest(masked, k, lower_bound)
    mask = masked >= threshold
    if int(mask.sum()) != k:
        # Entries equal to the threshold fill the remaining places in index order.
        mask = masked > threshold
        ties = (masked == threshold).nonzero().flatten()[: k - int(mask.sum())]
        mask[ties] = True
    return mask.view_as(admissible), float(threshold)


class _StraightThroughMask(torch.autograd.Function):
    """forward: w * mask; backward: grad * gate (gate = admissible for DNW, mask otherwise)."""

    @staticmethod
    def forward(
        ctx: torch.autograd.function.FunctionCtx,
        weight: torch.Tensor,
        mask: torch.Tensor,
        gate: torch.Tensor,
    ) -> torch.Tensor:
        ctx.save_for_backward(gate)
        return weight * mask

    @staticmethod
    def backward(
        ctx: torch.autograd.function.FunctionCtx,
        grad: torch.Tensor,
    ) -> tuple[torch.Tensor, None, None]:
        (gate,) = ctx.saved_tensors  # type: ignore[attr-defined]
        return grad * gate, None, None


def straight_through(weight: torch.Tensor, mask: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """`weight * mask` whose gradient reaches `weight` wherever `gate` is 1.

    With gate = admissible this is DNW's update rule: dL/dw_uv = <Z_u, dL/dI_v> for real and
    hallucinated edges alike. With gate = mask the gradient only reaches real edges (the
    "no update rule" ablation, and ordinary masked training).
    """
    # torch leaves Function.apply untyped; its result here is one tensor.
    masked: torch.Tensor = _StraightThroughMask.apply(  # type: ignore[no-untyped-call]
        weight, mask.to(weight.dtype), gate.to(weight.dtype)
    )
    return masked
