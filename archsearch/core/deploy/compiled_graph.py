"""Compiled neural graphs: a compact searched graph run as a few matrix products
(Discovering Neural Wirings, sections 2.1 and 2.4, eq. 11).

A compact searched graph still runs the way it is searched: every call rebuilds the N x N
edge matrix from the edge list and sends each block's states to all later blocks through
it. `compile_graphs` makes a copy of a DNW model in eval mode whose graphs run compiled:
- a static graph as one product per destination block over the concatenated states of its
  source blocks, batch norm folded in (`core.deploy.compiled_static`);
- a discrete-time graph (eq. 11) as one product per step over only the nodes the result is
  read from (`core.deploy.compiled_dynamic`);
- a conv graph's input nodes' batch norm folded into what computes their input (the stem,
  or the previous stage's output product), MobileNetV1-DNW's head norm into the last stage;
- an MLP-style classifier compiles whole (`CompiledGraphClassifier`): its head (batch norm
  and FC) folded into the last product. One sample, and the ONNX export, run its static
  graph unrolled (`core.deploy.unrolled`); one sample runs a discrete-time one as one
  `addmv` per step.
Continuous-time graphs stay as they are. `compiled_record` is what deployment.json says of
the compiled form.

The compiled model computes the compact model's outputs up to float summation order, in
eval mode (batch norm from its running statistics): a deployment form, not for training.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn

from archsearch.core.deploy.compiled_dynamic import CompiledDynamicGraph
from archsearch.core.deploy.compiled_static import CompiledStaticGraph
from archsearch.core.deploy.graph_layers import NodeOp, Products, bias_map, product_layer
from archsearch.core.deploy.norm_folding import (
    batch_norm_affine,
    folded_stem,
    scale_last_product,
    scaled_conv,
)
from archsearch.core.deploy.one_sample import tracing
from archsearch.core.models.mobilenet_dnw import MaskedLinear, MobileNetDNW
from archsearch.core.models.neural_graph import NeuralGraphClassifier
from archsearch.core.nn.neural_graph import DynamicGraph, StaticGraph


class CompiledGraphClassifier(nn.Module):
    """An MLP-style neural-graph classifier compiled whole: the flattened input is the input
    nodes' states and the graph's last product computes the logits (head folded in)."""

    def __init__(self, graph: CompiledStaticGraph | CompiledDynamicGraph) -> None:
        super().__init__()
        self.graph = graph
        # One sample straight to a discrete-time graph's `forward_vector` (a bound method,
        # not a submodule): at batch 1 each attribute lookup and call on the way counts.
        self.one_sample: Callable[[torch.Tensor], torch.Tensor] | None = None
        if isinstance(graph, CompiledDynamicGraph) and graph.norm != "instance":
            self.one_sample = graph.forward_vector

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        one_sample = self.one_sample
        if one_sample is not None and x.shape[0] == 1 and not tracing():
            return one_sample(x.reshape(-1))[None]
        return self.graph.forward_flat(x.flatten(1))  # (B, classes)


CompiledGraph = CompiledStaticGraph | CompiledDynamicGraph


def _fold_head(model: NeuralGraphClassifier) -> None:
    """fc(head_norm(mean(o))) is affine in the output nodes o: fold it into the product that
    computes them (the mean over positions commutes with a per-position linear map), so
    the graph computes the logits itself (10 rows instead of the output nodes)."""
    graph = model.graphs[0]
    if not isinstance(graph, CompiledGraph) or not isinstance(model.fc, nn.Linear):
        return
    head = model.fc.weight.detach()  # (classes, n_out)
    shift = model.fc.bias.detach()
    if isinstance(model.head_norm, nn.BatchNorm1d):
        norm = model.head_norm
        assert norm.running_var is not None and norm.running_mean is not None
        scale = norm.weight.detach() / torch.sqrt(norm.running_var + norm.eps)
        shift = shift + head @ (norm.bias.detach() - norm.running_mean * scale)
        head = head * scale
    products = graph.products
    last = len(products.layers) - 1
    layer = products.layers[last]
    assert isinstance(layer, nn.Linear | nn.Conv2d) and layer.bias is not None
    weight = layer.weight.detach().flatten(1)  # (n_out, m)
    bias = layer.bias.detach()[:, None, None]
    if products.has_map[last]:
        bias = bias + getattr(products, f"map{last}")
    folded = torch.einsum("co,ohw->chw", head, bias) + shift[:, None, None]
    products.layers[last] = product_layer(head @ weight, folded, graph.spatial)
    products.register_buffer(f"map{last}", bias_map(folded))
    products.has_map[last] = getattr(products, f"map{last}") is not None
    for name in ("head_norm", "fc"):
        setattr(model, name, nn.Identity())


def _compiled(graph: nn.Module) -> nn.Module:
    if isinstance(graph, StaticGraph):
        return CompiledStaticGraph(graph)
    if isinstance(graph, DynamicGraph) and graph.time == "discrete":
        return CompiledDynamicGraph(graph)
    return graph


def compilable(model: nn.Module) -> bool:
    """Whether `model` has neural graphs that `compile_graphs` compiles."""
    graphs = getattr(model, "graphs", None)
    return isinstance(graphs, nn.ModuleList) and any(
        isinstance(g, StaticGraph) or (isinstance(g, DynamicGraph) and g.time == "discrete")
        for g in graphs
    )


@torch.no_grad()
def compile_graphs(model: nn.Module, input_shape: tuple[int, ...]) -> nn.Module:
    """A copy of a DNW model in eval mode whose static and discrete-time graphs run compiled
    (and a "-Small" top-k FC as a plain Linear); any other model is returned as it is."""
    if not compilable(model):
        return model
    compiled = copy.deepcopy(model).cpu().eval()
    compiled(torch.zeros(1, *input_shape))  # records each graph's node resolution (hw)
    graphs = compiled.get_submodule("graphs")
    assert isinstance(graphs, nn.ModuleList), "a DNW model keeps its graphs in a ModuleList"
    for i, graph in enumerate(list(graphs)):
        graphs[i] = _compiled(graph)
    _fold_input_norms(compiled, list(graphs))
    stem = getattr(compiled, "stem", None)
    if isinstance(stem, nn.Sequential):
        compiled.stem = folded_stem(stem)
    if isinstance(compiled, NeuralGraphClassifier):
        _fold_head(compiled)
        graph = compiled.graphs[0]
        if isinstance(graph, CompiledStaticGraph) and not graph.spatial:
            graph.build_plan()
        if isinstance(graph, CompiledGraph) and not graph.spatial:
            return CompiledGraphClassifier(graph).eval()
    fc = getattr(compiled, "fc", None)
    if isinstance(fc, MaskedLinear):
        weight = fc.edges.matrix().detach()  # (classes, features)
        plain = nn.Linear(weight.shape[1], weight.shape[0])
        plain.weight.data.copy_(weight)
        plain.bias.data.copy_(fc.bias.detach())
        compiled.fc = plain
    return compiled.eval()


def _fold_input_norms(model: nn.Module, graphs: list[nn.Module]) -> None:
    """The eval-mode batch norm of each conv graph's input nodes folded into what computes
    their input: the previous stage's output product (MobileNetV1-DNW, whose head norm
    folds into the last stage the same way) or the stem's closing batch norm."""
    stem = getattr(model, "stem", None)
    for previous, graph in zip([stem, *graphs[:-1]], graphs, strict=True):
        spatial = isinstance(graph, CompiledStaticGraph) and graph.spatial
        op = graph.get_submodule("node_ops.0") if spatial else None
        if not isinstance(op, NodeOp) or op.norm_kind != "affine":
            continue
        if isinstance(previous, CompiledStaticGraph):
            scale_last_product(previous.products, op.norm_weight, op.norm_bias)
        elif isinstance(previous, nn.Sequential) and isinstance(previous[-1], nn.BatchNorm2d):
            previous[-1].weight.data.mul_(op.norm_weight)  # a (BN(x)) + c is a batch norm
            previous[-1].bias.data.mul_(op.norm_weight).add_(op.norm_bias)
        elif previous is stem and isinstance(previous, nn.Conv2d):
            model.stem = scaled_conv(previous, op.norm_weight, op.norm_bias)
        else:
            continue
        op.norm_kind = "none"
    head = getattr(model, "head_norm", None)
    if isinstance(model, MobileNetDNW) and isinstance(head, nn.BatchNorm2d) and graphs:
        last = graphs[-1]
        if isinstance(last, CompiledStaticGraph):
            scale, shift = batch_norm_affine(head)
            scale_last_product(last.products, scale, shift)
            model.head_norm = nn.Identity()  # type: ignore[assignment]


COMPILED_FORM = (
    "compiled neural graph: one product per destination block (a discrete-time graph: per "
    "step) over only the kept nodes, batch norm and the classifier head folded in; at batch "
    "1 an MLP-style static graph runs unrolled as a few matrix-vector products, a "
    "discrete-time one as one per step, a conv graph's small depthwise convs as sparse "
    "ones; built once at load by archsearch.core.deploy.load_deployed"
)


def compiled_record(model: nn.Module, runner: nn.Module) -> dict[str, object] | None:
    """What deployment.json says about a graph model's compiled form (None: not a graph)."""
    if runner is not model:
        products = [m for m in runner.modules() if isinstance(m, Products)]
        return {
            "compiled": True,
            "form": COMPILED_FORM,
            "products": sum(len(p.layers) for p in products),
        }
    if isinstance(getattr(model, "graphs", None), nn.ModuleList):
        return {"compiled": False, "form": "as trained: continuous-time graphs are not compiled"}
    return None
