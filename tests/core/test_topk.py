"""Straight-through top-k over admissible entries (DNW, section 2.2, Algorithm 1 line 5)."""

from __future__ import annotations

import pytest
import torch

from archsearch.core.nn.topk import straight_through, topk_mask, topk_select


def _reference_mask(scores: torch.Tensor, admissible: torch.Tensor, k: int) -> torch.Tensor:
    """Independent reference: a stable full sort by (-score, index) over admissible entries."""
    flat, adm = scores.reshape(-1).tolist(), admissible.reshape(-1).tolist()
    order = sorted((i for i in range(len(flat)) if adm[i]), key=lambda i: (-flat[i], i))
    mask = torch.zeros(len(flat), dtype=torch.bool)
    mask[order[:k]] = True
    return mask.view_as(scores)


@pytest.mark.parametrize("seed", range(5))
def test_topk_matches_sorted_reference_and_respects_admissibility(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(13, 17, generator=g)
    admissible = torch.rand(13, 17, generator=g) < 0.4
    # Inadmissible entries get the largest scores: they must still never be chosen.
    scores = torch.where(admissible, scores, scores + 10)
    for k in (1, 7, int(admissible.sum()) // 2, int(admissible.sum())):
        mask = topk_mask(scores, admissible, k)
        assert int(mask.sum()) == k
        assert not bool((mask & ~admissible).any())
        assert torch.equal(mask, _reference_mask(scores, admissible, k))


def test_threshold_is_the_smallest_selected_score_and_a_valid_hint() -> None:
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(40, 40, generator=g)
    admissible = torch.rand(40, 40, generator=g) < 0.5
    mask, threshold = topk_select(scores, admissible, 100)
    assert threshold == float(scores[mask].min())
    # Any hint (too high, too low) gives the same selection as none.
    for hint in (0.5 * threshold, 0.99 * threshold, threshold, 1.01 * threshold, 2.0):
        assert torch.equal(topk_select(scores, admissible, 100, hint)[0], mask)
    assert topk_select(scores, admissible, 0)[1] is None
    assert topk_select(scores, admissible, int(admissible.sum()))[1] is None


def test_ties_are_broken_by_lowest_index() -> None:
    scores = torch.tensor([0.5, 0.9, 0.5, 0.5, 0.1, 0.5])
    admissible = torch.tensor([True, True, False, True, True, True])
    mask = topk_mask(scores, admissible, 3)
    # 0.9 first, then the two lowest admissible indices among the tied 0.5 entries: 0 and 3.
    assert mask.tolist() == [True, True, False, True, False, False]
    assert torch.equal(mask, topk_mask(scores.clone(), admissible, 3))


def test_straight_through_gradient_reaches_gate_not_mask() -> None:
    torch.manual_seed(0)
    w = torch.randn(4, 5, requires_grad=True)
    mask = torch.zeros(4, 5, dtype=torch.bool)
    mask[0, 1] = mask[2, 3] = True
    admissible = torch.ones(4, 5, dtype=torch.bool)
    admissible[3] = False
    upstream = torch.randn(4, 5)
    out = straight_through(w, mask, admissible)
    assert torch.equal(out, w.detach() * mask)
    torch.autograd.backward((out * upstream).sum())
    assert w.grad is not None and torch.equal(w.grad, upstream * admissible)  # every admissible
    w.grad = None
    torch.autograd.backward((straight_through(w, mask, mask) * upstream).sum())
    grad: torch.Tensor | None = w.grad
    assert grad is not None and torch.equal(grad, upstream * mask)  # "no update": real edges
