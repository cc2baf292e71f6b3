"""Sparse storage: round trip, size bound, and compact == masked for every family."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from archsearch.core.deploy import pruned_deployable, registry_deployable
from archsearch.core.export import (
    is_sparse_file,
    load_model,
    load_state,
    model_to_bytes,
    sparse_state_bytes,
    tensors_to_bytes,
)
from archsearch.core.export.sparse import pack_bits, unpack_bits
from archsearch.core.models import Architecture, create_model
from archsearch.core.models.registry import Preprocessing
from archsearch.core.nn.masked_model import mask_model, set_masks
from archsearch.core.search.compact import compact_model as compact_graph
from archsearch.specs.graph_model_configs import NeuralGraphConfig
from archsearch.specs.model_configs import CNNConfig, MLPConfig
from archsearch.specs.prune_model_configs import MobileNetV1Config, VGGConfig

SHAPE = (1, 8, 8)


def _random_masks(model: nn.Module, density: float, seed: int) -> dict[str, torch.Tensor]:
    """Unstructured masks, plus whole dead units, so that structure is removed too."""
    generator = torch.Generator().manual_seed(seed)
    masks = {}
    for name, logits in model.named_parameters():
        if name.endswith("mask_logits"):
            mask = torch.rand(logits.shape, generator=generator) < density
            mask[:2] = False  # two outputs of every layer lose all their inputs
            masks[name.removesuffix(".mask_logits")] = mask
    return masks


def _masked(config: object, density: float = 0.3) -> tuple[nn.Module, Architecture]:
    arch = Architecture(config, SHAPE, 10)  # type: ignore[arg-type]
    torch.manual_seed(0)
    model = create_model(arch)
    with torch.no_grad():  # trained batch-norm statistics, so folded constants are nonzero
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.5, 0.5)
    mask_model(model, binary_forward=True)
    set_masks(model, _random_masks(model, density, 0))
    return model.eval(), arch


@pytest.mark.parametrize(("density", "bound"), [(0.1, 0.14), (0.05, 0.09)])
def test_round_trip_is_exact_and_size_follows_density(density: float, bound: float) -> None:
    torch.manual_seed(0)
    weight = torch.randn(512, 784) * (torch.rand(512, 784) < density)
    state = {"w": weight, "b": torch.randn(512), "steps": torch.tensor(3)}
    data = sparse_state_bytes(state)
    assert is_sparse_file(data)
    loaded = load_state(data)
    assert set(loaded) == set(state)
    assert all(torch.equal(loaded[k], v) for k, v in state.items())
    dense = model_to_bytes(nn.Linear(784, 512))
    assert len(data) <= bound * len(dense)
    assert len(data) > density * len(dense)  # values alone take that much: nothing was lost


def test_bits_pack_and_unpack_as_documented() -> None:
    mask = torch.tensor([True, False, False, True, False, False, False, False, True, True])
    packed = pack_bits(mask)
    assert packed.tolist() == [0b1001, 0b11]  # entry i is bit i % 8 of byte i // 8
    assert torch.equal(unpack_bits(packed, 10), mask)


def test_files_of_the_earlier_csr_format_still_load() -> None:
    torch.manual_seed(0)
    weight = torch.randn(6, 9) * (torch.rand(6, 9) < 0.3)
    csr = weight.to_sparse_csr()
    parts = {
        "w.values": csr.values(),
        "w.col_indices": csr.col_indices().to(torch.int16),
        "w.crow_indices": csr.crow_indices().to(torch.int16),
    }
    meta = {"format": "archsearch-csr-v1", "sparse": json.dumps({"w": [6, 9]})}
    data = tensors_to_bytes(parts, metadata=meta)
    assert is_sparse_file(data)
    assert torch.equal(load_state(data)["w"], weight)


def test_dense_tensors_stay_dense() -> None:
    state = {"w": torch.randn(20, 30)}
    data = sparse_state_bytes(state)
    assert set(load_state(data)) == {"w"}
    assert len(data) < len(sparse_state_bytes({"w": state["w"] * 0})) * 10
    assert not is_sparse_file(model_to_bytes(nn.Linear(2, 2)))


@pytest.mark.parametrize(
    "config",
    [
        MLPConfig(hidden=(32, 16)),
        CNNConfig(channels=(6, 8), hidden=(10,)),
        VGGConfig(stages=((6,), (8, 8)), hidden=(10,)),
        MobileNetV1Config(stem=4, blocks=((8, 1), (8, 2))),
    ],
    ids=lambda c: c.name,
)
def test_pruned_compact_sparse_file_gives_the_masked_outputs(config: object) -> None:
    model, arch = _masked(config)
    deployable = pruned_deployable(model, arch, accuracy=0.0)
    data = sparse_state_bytes(deployable.model.state_dict())
    loaded = load_model(deployable.architecture.to_json(), data)
    x = torch.randn(7, *SHAPE)
    with torch.no_grad():
        expected = model(x)
        torch.testing.assert_close(loaded(x), expected, rtol=1e-5, atol=1e-5)
    dense_params = sum(p.numel() for p in deployable.parent.parameters())
    assert sum(p.numel() for p in deployable.model.parameters()) < dense_params


@pytest.mark.parametrize("setting", ["static", "discrete"])
def test_searched_graph_compact_sparse_file_gives_the_masked_outputs(setting: str) -> None:
    arch = Architecture(NeuralGraphConfig(setting=setting), SHAPE, 10)
    torch.manual_seed(0)
    model = create_model(arch).eval()
    compact, compact_arch = compact_graph(model, arch)
    loaded = load_model(compact_arch.to_json(), sparse_state_bytes(compact.state_dict()))
    x = torch.randn(5, *SHAPE)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "config",
    [
        MLPConfig(hidden=(12, 9)),
        CNNConfig(channels=(4, 5), hidden=(6,), batch_norm=False),
        CNNConfig(channels=(4, 5), hidden=(6,), batch_norm=False, pool=False),  # as grow builds
    ],
    ids=["mlp", "cnn", "grown-cnn"],
)
def test_grown_network_with_dead_units_is_compacted(config: object) -> None:
    """A grown net is saved as a registry mlp/cnn; units it never connected are removed."""
    arch = Architecture(config, SHAPE, 10)  # type: ignore[arg-type]
    torch.manual_seed(0)
    model = create_model(arch).eval()
    layers = [m for m in model.modules() if isinstance(m, nn.Linear | nn.Conv2d)]
    with torch.no_grad():
        for layer in layers[:-1]:  # every layer but the classifier gets a unit ...
            layer.weight[0] = 0  # ... without inputs ...
            layer.bias[0] = -1.0  # ... whose constant output relu(-1) = 0 can go
    deployable = registry_deployable(model, arch, accuracy=0.0)
    assert deployable.suffix == "-compact" and deployable.save_files
    loaded = load_model(
        deployable.architecture.to_json(), sparse_state_bytes(deployable.model.state_dict())
    )
    x = torch.randn(4, *SHAPE)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), rtol=1e-5, atol=1e-5)


def test_old_architecture_files_still_load() -> None:
    arch = Architecture(MLPConfig(hidden=(4,)), SHAPE, 3)
    assert Architecture.from_json(arch.to_json()).preprocessing is None
    pre = Preprocessing(SHAPE, "float32", 16.0, (0.3,), (0.4,), ("a", "b", "c"), "raw")
    with_pre = Architecture(arch.config, SHAPE, 3, pre)
    assert Architecture.from_json(with_pre.to_json()) == with_pre
