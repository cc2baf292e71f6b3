"""Counting parameters and multiply-adds, and safetensors round trips."""

from __future__ import annotations

import torch
from torch import nn

from archsearch.core.export import (
    count_macs,
    count_parameters,
    tensors_from_bytes,
    tensors_to_bytes,
)
from archsearch.core.models import Architecture, create_model
from archsearch.core.spec import CNNConfig, MLPConfig


def test_mlp_macs_are_the_sum_of_weight_matrix_sizes() -> None:
    model = create_model(Architecture(MLPConfig(hidden=(30, 20)), (1, 8, 8), 10))
    assert count_macs(model, (1, 8, 8)) == 64 * 30 + 30 * 20 + 20 * 10
    assert count_parameters(model) == 64 * 30 + 30 + 30 * 20 + 20 + 20 * 10 + 10


def test_cnn_macs_by_hand() -> None:
    config = CNNConfig(channels=(4, 8), hidden=(16,), kernel_size=3)
    model = create_model(Architecture(config, (1, 28, 28), 10))
    conv1 = 28 * 28 * 4 * 1 * 9  # 'same' padding: every output pixel, every weight once
    conv2 = 14 * 14 * 8 * 4 * 9
    head = 8 * 7 * 7 * 16 + 16 * 10
    assert count_macs(model, (1, 28, 28)) == conv1 + conv2 + head


def test_zero_weights_cost_nothing_unless_asked() -> None:
    linear = nn.Linear(10, 4, bias=False)
    model = nn.Sequential(nn.Flatten(), linear)
    with torch.no_grad():
        linear.weight[:, :5] = 0
    assert count_macs(model, (10,)) == 20
    assert count_macs(model, (10,), nonzero_only=False) == 40
    assert count_parameters(model, nonzero_only=True) == 20


def test_safetensors_round_trip_copies_shared_storage() -> None:
    base = torch.randn(4, 4)
    tensors = {"a": base, "view": base[:, 1]}  # shared, non-contiguous
    loaded = tensors_from_bytes(tensors_to_bytes(tensors))
    torch.testing.assert_close(loaded["a"], base)
    torch.testing.assert_close(loaded["view"], base[:, 1])
