"""Registered DNW model families and their compaction (sections 2.4, 3.1, Table 4)."""

from __future__ import annotations

import pytest
import torch

from archsearch.core.export import count_parameters, load_model, model_to_bytes
from archsearch.core.models import Architecture, create_model
from archsearch.core.nn.graph_edges import GraphEdges
from archsearch.core.nn.neural_graph import model_graphs
from archsearch.core.search.compact import compact_model, model_macs
from archsearch.specs.graph_model_configs import MobileNetDNWConfig, NeuralGraphConfig

SHAPE = (1, 12, 12)
CONFIGS = {
    "static": NeuralGraphConfig(hidden_blocks=(6, 6), input_nodes=4, output_nodes=5, density=0.3),
    "static-batchnorm": NeuralGraphConfig(
        hidden_blocks=(6,), input_nodes=4, output_nodes=5, norm="batch", k_edges=20
    ),
    "discrete": NeuralGraphConfig(
        setting="discrete", hidden_blocks=(6,), input_nodes=4, output_nodes=5, steps=3, density=0.2
    ),
    "continuous": NeuralGraphConfig(
        setting="continuous",
        hidden_blocks=(4,),
        input_nodes=3,
        output_nodes=3,
        density=0.3,
        ode_tol=1e-2,
    ),
    "mlp-style": NeuralGraphConfig(
        node_op="act", hidden_blocks=(8, 8), output_nodes=6, density=0.05
    ),
    "mobilenet": MobileNetDNWConfig(width=0.125, stage_layers=(1, 2, 2)),
    "mobilenet-small": MobileNetDNWConfig(
        width=0.25, edge_width=0.125, stage_layers=(1, 2), small=True
    ),
}


def _build(config: object, seed: int = 0) -> tuple[torch.nn.Module, Architecture]:
    torch.manual_seed(seed)
    architecture = Architecture(config, SHAPE, 3)  # type: ignore[arg-type]
    return create_model(architecture), architecture


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_family_output_shape_finite_and_gradient_on_every_parameter(name: str) -> None:
    model, _ = _build(CONFIGS[name])
    x = torch.randn(4, *SHAPE)
    out = model(x)
    assert out.shape == (4, 3)
    assert bool(torch.isfinite(out).all())
    out.square().sum().backward()
    for pname, p in model.named_parameters():
        assert p.grad is not None, f"{pname} got no gradient"
        assert bool(torch.isfinite(p.grad).all()), pname
        assert bool((p.grad != 0).any()), f"{pname} gradient is all zero"


def test_edge_budgets_follow_the_config() -> None:
    model, _ = _build(CONFIGS["static"])
    config = CONFIGS["static"]
    assert isinstance(config, NeuralGraphConfig)
    assert (
        model_graphs(model)[0].edges.num_real()
        == config.edge_budget(SHAPE)
        == round(0.3 * config.admissible_edges(SHAPE))
    )
    mobile, _ = _build(MobileNetDNWConfig(width=0.5, edge_width=0.25, stage_layers=(1, 2)))
    # MobileNetV1 x 0.25 pointwise edges: stage 1: 8 * 16; stage 2: 16 * 32 + 32 * 32.
    assert [g.edges.num_real() for g in model_graphs(mobile)] == [8 * 16, 16 * 32 + 32 * 32]
    assert [g.blocks for g in model_graphs(mobile)] == [(16, 32), (32, 64, 64)]


def _randomise(model: torch.nn.Module, sparsity_seed: int) -> None:
    """Make the masked model non-trivial: random node biases and many dead ends."""
    g = torch.Generator().manual_seed(sparsity_seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm_bias" in name:
                p.uniform_(-0.5, 0.5, generator=g)
    model.train()
    model(torch.randn(8, *SHAPE, generator=g))  # batch-norm running statistics
    model.eval()


SPARSE = {
    "static": NeuralGraphConfig(hidden_blocks=(6, 6), input_nodes=4, output_nodes=5, density=0.12),
    "static-batchnorm": NeuralGraphConfig(
        hidden_blocks=(6,), input_nodes=4, output_nodes=5, norm="batch", k_edges=12
    ),
    "discrete": NeuralGraphConfig(
        setting="discrete", hidden_blocks=(6,), input_nodes=4, output_nodes=5, steps=3, k_edges=14
    ),
    "mlp-style": CONFIGS["mlp-style"],
    "mobilenet": MobileNetDNWConfig(width=0.25, edge_width=0.0625, stage_layers=(1, 2, 2)),
    "mobilenet-small": CONFIGS["mobilenet-small"],
}


@pytest.mark.parametrize("name", sorted(SPARSE))
def test_compact_model_matches_masked_model_and_costs_less(name: str) -> None:
    model, architecture = _build(SPARSE[name])
    _randomise(model, 1)
    compact, compact_arch = compact_model(model, architecture)
    x = torch.randn(6, *SHAPE)
    torch.testing.assert_close(compact(x), model(x), rtol=1e-4, atol=1e-5)
    assert model_macs(compact, SHAPE) < model_macs(model, SHAPE)
    assert count_parameters(compact) < count_parameters(model)
    # The compact architecture alone rebuilds the model through the registry.
    rebuilt = load_model(compact_arch.to_json(), model_to_bytes(compact))
    torch.testing.assert_close(rebuilt(x), model(x), rtol=1e-4, atol=1e-5)
    removed = sum(g.edges.num_nodes for g in model_graphs(model)) - sum(
        g.edges.num_nodes for g in model_graphs(compact)
    )
    assert removed > 0, "this sparse random wiring has dead nodes to remove"


def test_compaction_removes_exactly_the_dead_nodes_of_a_hand_made_graph() -> None:
    """blocks (2, 3, 2): node 2 has no in-edge (its constant output is folded into node 6),
    node 4 has no out-edge; both go, with their ops; the result is unchanged."""
    config = NeuralGraphConfig(input_nodes=2, hidden_blocks=(3,), output_nodes=2, k_edges=5)
    model, architecture = _build(config)
    edges = model_graphs(model)[0].edges
    assert isinstance(edges, GraphEdges)
    mask = torch.zeros(7, 7, dtype=torch.bool)
    for target, source in [(3, 0), (4, 1), (5, 3), (6, 2), (6, 3)]:
        mask[target, source] = True
    edges.set_mask(mask)
    _randomise(model, 2)
    compact, compact_arch = compact_model(model, architecture)
    assert isinstance(compact_arch.config, NeuralGraphConfig)
    assert compact_arch.config.compact is not None
    assert compact_arch.config.compact.kept == (0, 1, 3, 5, 6)
    assert compact_arch.config.compact.blocks == (2, 1, 2)
    x = torch.randn(5, *SHAPE)
    torch.testing.assert_close(compact(x), model(x), rtol=1e-4, atol=1e-5)
    offsets = model_graphs(compact)[0].offsets
    assert isinstance(offsets, torch.Tensor), "a compact static graph folds offsets"
    assert float(offsets[-1].abs().sum()) > 0, "node 2's output was folded"


def test_mlp_style_graph_is_invariant_to_the_scale_of_its_edges() -> None:
    """Every MLP-style node normalises its input and h normalises the output nodes, so the
    forward pass (training mode) cannot blow up with the edge weights: the mechanism by which
    the unnormalised graph diverged at the search defaults (SGD lr 0.1)."""
    model, _ = _build(CONFIGS["mlp-style"])
    x = torch.randn(16, *SHAPE)
    before = model(x)
    with torch.no_grad():
        for graph in model_graphs(model):
            graph.edges.weight.mul_(100.0)
    torch.testing.assert_close(model(x), before, rtol=1e-3, atol=1e-3)
