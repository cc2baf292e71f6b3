"""The random baselines draw one layout per seed whatever order the masks arrive in (a
safetensors file's tensors come back in a different order on every load), and keep what
each baseline promises: the global count, each layer's count, each layer's units."""

from __future__ import annotations

import itertools

import torch

from archsearch.core.export import tensors_from_bytes, tensors_to_bytes
from archsearch.core.pruning.baselines import random_masks, random_unit_masks, reshuffle_masks

SHAPES = {"layers.0.weight": (16, 20), "layers.2.weight": (8, 16), "layers.10.weight": (3, 8)}


def learned_masks(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {name: torch.rand(shape, generator=generator) < 0.3 for name, shape in SHAPES.items()}


def draws(masks: dict[str, torch.Tensor], seed: int) -> list[dict[str, torch.Tensor]]:
    return [
        draw(masks, torch.Generator().manual_seed(seed))
        for draw in (
            lambda m, g: random_masks(m, 0.2, g),
            lambda m, g: random_unit_masks(m, 0.5, g),
            reshuffle_masks,
        )
    ]


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_seed_draws_one_layout_in_any_order_of_the_layers() -> None:
    masks = learned_masks(0)
    expected = draws(masks, seed=7)
    for order in itertools.permutations(masks):
        got = draws({name: masks[name] for name in order}, seed=7)
        assert all(same(e, g) for e, g in zip(expected, got, strict=True)), order
    loaded = tensors_from_bytes(tensors_to_bytes(masks))  # the transfer job's way in
    assert all(same(e, g) for e, g in zip(expected, draws(loaded, 7), strict=True))
    assert not same(expected[2], draws(masks, seed=8)[2])  # the seed still matters


def test_each_draw_keeps_its_counts() -> None:
    masks = learned_masks(1)
    everywhere, per_layer, reshuffled = draws(masks, seed=3)
    total = sum(m.numel() for m in masks.values())
    assert sum(int(m.sum()) for m in everywhere.values()) == round(0.2 * total)
    for name, mask in masks.items():
        assert int(per_layer[name].sum()) == round(0.5 * mask.numel())
        assert int(reshuffled[name].sum()) == int(mask.sum())
        assert reshuffled[name].shape == mask.shape
