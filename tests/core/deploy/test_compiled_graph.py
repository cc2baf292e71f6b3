"""Compiled neural graphs compute what the masked graphs compute, in torch and in ONNX."""

from __future__ import annotations

import copy
import json

import onnx
import pytest
import torch

from archsearch.core.deploy import load_deployed
from archsearch.core.deploy.compiled_dynamic import CompiledDynamicGraph, needed_per_step
from archsearch.core.deploy.compiled_graph import CompiledGraphClassifier, compile_graphs
from archsearch.core.deploy.compiled_static import CompiledStaticGraph
from archsearch.core.deploy.forms import SparseLinear, apply_forms, choose_forms
from archsearch.core.deploy.one_sample import DepthwiseConv, PointwiseConv
from archsearch.core.deploy.onnx import (
    export_onnx,
    onnx_max_abs_diff,
    ort_session,
    sparse_initializers,
)
from archsearch.core.export import model_to_bytes
from archsearch.core.models import Architecture, create_model
from archsearch.core.search.compact import compact_model
from archsearch.specs.graph_model_configs import MobileNetDNWConfig, NeuralGraphConfig

SHAPE = (1, 12, 12)
GRAPHS = {
    "static-conv": NeuralGraphConfig(
        hidden_blocks=(6, 6), input_nodes=4, output_nodes=5, density=0.12
    ),
    "static-instance": NeuralGraphConfig(
        hidden_blocks=(6, 6), input_nodes=4, output_nodes=5, density=0.12, norm="instance"
    ),
    "mlp-style": NeuralGraphConfig(
        node_op="act", hidden_blocks=(8, 8), output_nodes=6, density=0.05
    ),
    "mlp-style-tanh": NeuralGraphConfig(
        node_op="act", hidden_blocks=(8,), output_nodes=6, density=0.05, activation="tanh"
    ),
    "discrete": NeuralGraphConfig(
        setting="discrete", hidden_blocks=(6,), input_nodes=4, output_nodes=5, steps=3, k_edges=14
    ),
    "discrete-mlp-style": NeuralGraphConfig(
        setting="discrete", node_op="act", hidden_blocks=(6,), output_nodes=5, density=0.02
    ),
    "mobilenet-dnw": MobileNetDNWConfig(width=0.25, edge_width=0.0625, stage_layers=(1, 2, 2)),
    "mobilenet-dnw-small": MobileNetDNWConfig(
        width=0.25, edge_width=0.125, stage_layers=(1, 2), small=True
    ),
}


def _masked(config: object) -> tuple[torch.nn.Module, Architecture]:
    """A masked model with random node biases and batch-norm statistics (eval mode)."""
    torch.manual_seed(0)
    architecture = Architecture(config, SHAPE, 3)  # type: ignore[arg-type]
    model = create_model(architecture)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm_bias" in name:
                p.uniform_(-0.5, 0.5)
    model.train()
    model(torch.randn(8, *SHAPE))  # batch-norm running statistics
    return model.eval(), architecture


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_compiled_compact_graph_equals_the_masked_model(name: str) -> None:
    model, architecture = _masked(GRAPHS[name])
    compact, _ = compact_model(model, architecture)
    compiled = compile_graphs(compact, SHAPE)
    kinds = (CompiledStaticGraph, CompiledDynamicGraph, CompiledGraphClassifier)
    assert any(isinstance(m, kinds) for m in compiled.modules()), "the graphs were compiled"
    # Input nodes' batch norms are folded into what computes their input (stem, stage).
    for m in compiled.modules():
        if isinstance(m, CompiledStaticGraph) and m.spatial and name != "static-instance":
            assert m.node_ops[0].norm_kind == "none"
    # Nothing rebuilds an edge matrix at run time: the compiled model holds no edge list.
    assert not any(n.endswith("edges.weight") for n, _ in compiled.named_parameters())
    with torch.no_grad():
        for batch in (1, 5):  # batch 1 takes the one-sample path of MLP-style graphs
            x = torch.randn(batch, *SHAPE)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
        # The masked model (dead nodes still in) compiles to the same function too.
        x = torch.randn(4, *SHAPE)
        torch.testing.assert_close(compile_graphs(model, SHAPE)(x), model(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["mlp-style", "discrete-mlp-style"])
def test_sparse_forms_of_the_products_keep_the_outputs(name: str) -> None:
    model, architecture = _masked(GRAPHS[name])
    compiled = compile_graphs(compact_model(model, architecture)[0], SHAPE)
    names = [n for n, m in compiled.named_modules() if isinstance(m, torch.nn.Linear)]
    # The measured choice sees every product (the one-sample path calls no Linear module).
    _, report = choose_forms(compiled, SHAPE, budget_s=0.02)
    assert [row["layer"] for row in report] == names
    forms = [{"layer": n, "batch_1": "sparse", "batch_64": "sparse"} for n in names]
    sparse = apply_forms(compiled, forms)
    assert sum(isinstance(m, SparseLinear) for m in sparse.modules()) == len(names) > 1
    if name.startswith("discrete"):  # one sample: one CSR addmv per step, no module call
        assert isinstance(sparse, CompiledGraphClassifier) and sparse.one_sample is not None
        graph = sparse.graph
        assert all(m.layout == torch.sparse_csr for m, _ in graph.products.vector_forms()[:-1])
    with torch.no_grad():
        for batch in (1, 9):
            x = torch.randn(batch, *SHAPE)
            torch.testing.assert_close(sparse(x), model(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "name", ["static-conv", "mlp-style", "discrete", "discrete-mlp-style", "mobilenet-dnw"]
)
def test_onnx_of_the_compiled_graph_matches_torch(name: str) -> None:
    model, architecture = _masked(GRAPHS[name])
    compiled = compile_graphs(compact_model(model, architecture)[0], SHAPE)
    data = sparse_initializers(export_onnx(compiled, SHAPE))
    onnx.checker.check_model(onnx.load_from_string(data))
    x = torch.randn(3, *SHAPE)
    assert onnx_max_abs_diff(ort_session(data), compiled, x) < 1e-4
    assert onnx_max_abs_diff(ort_session(data), model, x) < 1e-4


def test_discrete_steps_read_only_the_nodes_the_outputs_need() -> None:
    # a[target, source]: 0 -> 1 -> 4 (the output), 3 -> 4, and 2 -> 2 that nothing reads.
    a = torch.zeros(5, 5)
    a[1, 0] = a[4, 1] = a[2, 2] = a[4, 3] = 1.0
    needed = needed_per_step(a, n_out=1, steps=2)
    assert [n.tolist() for n in needed] == [[0], [1, 3], [4]]


def test_load_deployed_compiles_only_what_ran_compiled() -> None:
    model, architecture = _masked(GRAPHS["static-conv"])
    compact, compact_arch = compact_model(model, architecture)
    weights, arch_json = model_to_bytes(compact), compact_arch.to_json()
    record = {"forms": [], "graph_form": {"compiled": True}}
    deployed = load_deployed(arch_json, weights, json.dumps(record))
    assert any(isinstance(m, CompiledStaticGraph) for m in deployed.modules())
    # deployment.json of a job from before compiled graphs: the graph loads as it ran.
    old = load_deployed(arch_json, weights, json.dumps({"forms": []}))
    assert not any(isinstance(m, CompiledStaticGraph) for m in old.modules())
    x = torch.randn(3, *SHAPE)
    with torch.no_grad():
        torch.testing.assert_close(deployed(x), model(x), rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(old(x), model(x), rtol=1e-4, atol=1e-5)


def _onnx_ops(model: torch.nn.Module) -> list[str]:
    graph = onnx.load_from_string(sparse_initializers(export_onnx(model, SHAPE))).graph
    return [node.op_type for node in graph.node]


def test_mlp_style_graph_runs_unrolled_for_one_sample_and_in_onnx() -> None:
    config = NeuralGraphConfig(node_op="act", hidden_blocks=(8, 8, 8), output_nodes=6)
    model, architecture = _masked(config)
    compiled = compile_graphs(compact_model(model, architecture)[0], SHAPE)
    assert isinstance(compiled, CompiledGraphClassifier)
    graph = compiled.graph
    assert isinstance(graph, CompiledStaticGraph)
    # One sample: the plan's GEMVs, not the products (their weights zeroed here to show it).
    with torch.no_grad():
        x = torch.randn(1, *SHAPE)
        expected = model(x)
        saved = [layer.weight.detach().clone() for layer in graph.products.layers]
        for layer in graph.products.layers:
            layer.weight.data.zero_()
        torch.testing.assert_close(compiled(x), expected, rtol=1e-4, atol=1e-5)
        for layer, weight in zip(graph.products.layers, saved, strict=True):
            layer.weight.data.copy_(weight)
    # The export: the input product (hidden rows, output rows), blocks - 1 rounds over the
    # hidden nodes, an output product; no concatenation or split. It computes what torch
    # computes, at any batch.
    ops = _onnx_ops(compiled)
    assert ops.count("Gemm") == 2 + 2 + 1 and "Concat" not in ops and "Split" not in ops
    data = sparse_initializers(export_onnx(compiled, SHAPE))
    assert onnx_max_abs_diff(ort_session(data), model, torch.randn(7, *SHAPE)) < 1e-4


def test_conv_graph_forms_for_one_sample_and_onnx() -> None:
    model, architecture = _masked(GRAPHS["static-conv"])  # hidden blocks of 6 nodes
    compiled = compile_graphs(compact_model(model, architecture)[0], SHAPE)
    graph = next(m for m in compiled.modules() if isinstance(m, CompiledStaticGraph))
    # Hidden blocks padded with zero channels to 8 (the input and output blocks are not).
    assert [op.conv.in_channels for op in graph.node_ops[1:]] == [8, 8]
    assert all(isinstance(op.conv, DepthwiseConv) for op in graph.node_ops)
    assert all(isinstance(layer, PointwiseConv) for layer in graph.products.layers)
    assert any(isinstance(m, PointwiseConv) for m in compiled.get_submodule("stem"))
    # Each form equals the plain conv it replaces, at batch 1 (its own path) and 3.
    with torch.no_grad():
        for form in (graph.node_ops[1].conv, graph.products.layers[1]):
            assert isinstance(form, torch.nn.Conv2d)
            for batch in (1, 3):
                x = torch.randn(batch, form.in_channels, 5, 5)
                plain = torch.nn.Conv2d.forward(form, x)
                torch.testing.assert_close(form(x), plain, rtol=1e-5, atol=1e-6)
    # The export sums one Conv per source block: no Concat.
    assert "Concat" not in _onnx_ops(compiled)


@pytest.mark.parametrize(("stride", "hw", "bias"), [(1, (7, 7), False), (2, (9, 6), True)])
def test_a_small_depthwise_conv_runs_one_sample_as_its_sparse_matrix(
    stride: int, hw: tuple[int, int], bias: bool
) -> None:
    conv = DepthwiseConv(6, 6, 3, stride, 1, groups=6, bias=bias)
    x = torch.randn(1, 6, *hw)
    with torch.no_grad():
        plain = torch.nn.Conv2d.forward(conv, x)
        torch.testing.assert_close(conv(x), plain, rtol=1e-5, atol=1e-6)
        matrix, _, out_hw = conv.sparse_form(*hw)
        assert out_hw == plain.shape[2:] and matrix.layout == torch.sparse_csr
        assert matrix.col_indices().dtype == torch.int32
        matrix.values().zero_()  # the cached matrix is what runs
        bias_only = conv.bias[:, None, None] if bias else 0.0
        torch.testing.assert_close(conv(x), torch.zeros_like(plain) + bias_only)
        copied = copy.deepcopy(conv)  # a copy rebuilds its own matrix
        torch.testing.assert_close(copied(x), plain, rtol=1e-5, atol=1e-6)
        conv.weight.mul_(2)  # a changed weight rebuilds it
        torch.testing.assert_close(conv(x), torch.nn.Conv2d.forward(conv, x), rtol=1e-5, atol=1e-6)
