"""Compiled neural graphs: a compact searched graph run as a few matrix products
(Discovering Neural Wirings, sections 2.1 and 2.4, eq. 11).

A compact `StaticGraph` (dead nodes removed and input-independent ones folded into offsets by
`core.search.compact`) still runs the way it is searched: every call rebuilds the N x N edge
matrix from the edge list and sends each block's states to all later blocks through it. Its
compiled form, built once from the eval-mode model:
- one product per destination block: its kept in-edges, the block pairs that hold an edge
  stacked column-wise, applied to the concatenated states of those source blocks (block
  pairs without an edge are left out). An `nn.Linear` for MLP-style nodes, a 1x1
  `nn.Conv2d` for conv nodes. One call per destination instead of one per block pair: at
  batch 1 the calls, not the arithmetic, cost most. The Linear products are ordinary layers,
  so `core.deploy.forms` times each one dense against int32 CSR and keeps the faster form
  per batch regime, and `model.onnx` stores mostly-zero products as sparse initializers.
- batch norm in eval mode (an affine map per node) folded into the product that feeds it:
  rows scaled, a bias added; the MLP-style input nodes' norm folded into the columns that
  read them. The compact model's offsets become the bias (a per-node map where padding
  makes them vary across positions).
- a conv graph's input nodes' batch norm folded into what computes their input (the stem,
  or the previous stage's output product), MobileNetV1-DNW's head norm into the last stage.
- after the product, the rest of the node op: instance norm (it depends on the sample, so it
  stays an op), the activation, the 3x3 depthwise conv.
- an MLP-style classifier compiles whole (`CompiledGraphClassifier`): its head (batch norm
  and FC) folded into the last product, and one sample runs as one GEMV per source block
  (its edges to every later block stacked, `source_plan`) while every product is dense:
  no concatenation, fewer and larger GEMVs.
A discrete-time graph (eq. 11) gets one product per step, over only the nodes the result is
read from: at the last step the output nodes, at step l the sources of the nodes step l + 1
needs. Nodes other than the inputs start at 0, so their first op output is a constant,
folded into the first step's bias. Continuous-time graphs stay as they are.

The compiled model computes the compact model's outputs up to float summation order, in
eval mode (batch norm from its running statistics): a deployment form, not for training.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.models.mobilenet_dnw import MaskedLinear, MobileNetDNW
from archsearch.core.models.neural_graph import NeuralGraphClassifier
from archsearch.core.nn.neural_graph import ACTIVATIONS, DynamicGraph, NodeOps, StaticGraph

NormRecord = tuple[Literal["affine", "instance"], torch.Tensor, torch.Tensor] | None
Piece = tuple[tuple[int, ...], torch.Tensor, torch.Tensor]  # sources, weight, bias (n, H, W)


def _tracing() -> bool:
    """Under the ONNX exporter's tracer: take the batch-general path, whatever the batch."""
    tracing: bool = torch.jit.is_tracing()  # type: ignore[attr-defined,no-untyped-call]
    return tracing


def _per_channel(v: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return v.view(-1, *([1] * (x.dim() - 2)))  # broadcast over (B, n, ...)


class NodeOp(nn.Module):
    """A block's node op after its product: [norm], activation, [3x3 depthwise conv].

    `norm` is None where a batch norm was folded into the product (or there is none);
    "affine" is an eval-mode batch norm that could not be folded (the input nodes).
    """

    norm_weight: torch.Tensor  # buffers when `norm` is given, declared for the type checker
    norm_bias: torch.Tensor

    def __init__(
        self, activation: str, norm: NormRecord, kernel: torch.Tensor | None, stride: int = 1
    ) -> None:
        super().__init__()
        self.activation = activation
        self.norm_kind = "none" if norm is None else norm[0]
        if norm is not None:
            self.register_buffer("norm_weight", norm[1].detach().clone())
            self.register_buffer("norm_bias", norm[2].detach().clone())
        self.conv: nn.Conv2d | None = None
        if kernel is not None:
            n = kernel.shape[0]
            self.conv = nn.Conv2d(n, n, 3, stride, 1, groups=n, bias=False)
            self.conv.weight.data.copy_(kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm_kind == "instance":
            x = F.instance_norm(x, weight=self.norm_weight, bias=self.norm_bias)
        elif self.norm_kind == "affine":
            x = x * _per_channel(self.norm_weight, x) + _per_channel(self.norm_bias, x)
        x = ACTIVATIONS[self.activation](x)
        return x if self.conv is None else self.conv(x)


class GraphLinear(nn.Linear):
    """A product of MLP-style node states: `torch.addmv` for one sample (measured 3.3 us
    against 7.4 us for an nn.Linear call with a 32 x 784 weight: the call costs most)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] == 1 and not _tracing():
            return torch.addmv(self.bias, self.weight, x[0]).unsqueeze(0)  # (1, out)
        return F.linear(x, self.weight, self.bias)


def product_layer(weight: torch.Tensor, bias: torch.Tensor, spatial: bool) -> nn.Module:
    """A destination's in-edges as one layer: a 1x1 conv (conv nodes) or a Linear, with the
    per-node part of `bias` (n, H, W) (`bias_map` is the part that varies by position)."""
    n, m = weight.shape
    layer = nn.Conv2d(m, n, 1) if spatial else GraphLinear(m, n)
    layer.weight.data.copy_(weight.reshape(layer.weight.shape))
    assert layer.bias is not None, "product layers have a bias"
    layer.bias.data.copy_(bias.flatten(1)[:, 0])
    return layer


def bias_map(bias: torch.Tensor) -> torch.Tensor | None:
    """What a bias (n, H, W) adds beyond its value at the first position; None if nothing."""
    rest = bias - bias.flatten(1)[:, :1, None]  # (n, H, W)
    return rest.clone() if bool(rest.any()) else None


class _Products(nn.Module):
    """Destination products of a compiled graph: `layers[j]` reads the concatenated states
    of `sources[j]`; the buffer `map{j}` (or None) is added where the bias varies."""

    def __init__(self, pieces: list[Piece], spatial: bool) -> None:
        super().__init__()
        self.sources = [sources for sources, _, _ in pieces]
        self.layers = nn.ModuleList(product_layer(w, b, spatial) for _, w, b in pieces)
        self.has_map = []
        for j, (_, _, bias) in enumerate(pieces):
            rest = bias_map(bias)
            self.register_buffer(f"map{j}", rest)
            self.has_map.append(rest is not None)

    def run(self, j: int, states: list[torch.Tensor]) -> torch.Tensor:
        sources = self.sources[j]
        x = states[sources[0]] if len(sources) == 1 else torch.cat([states[i] for i in sources], 1)
        y: torch.Tensor = self.layers[j](x)
        return y + getattr(self, f"map{j}") if self.has_map[j] else y

    def run_vector(self, j: int, states: list[torch.Tensor]) -> torch.Tensor:
        """`run` for one MLP-style sample kept 1-d: a dense product is one `addmv`, with no
        module call (the calls cost more than the arithmetic); a sparse one its module."""
        sources = self.sources[j]
        x = states[sources[0]] if len(sources) == 1 else torch.cat([states[i] for i in sources])
        layer = self.layers[j]
        if isinstance(layer, GraphLinear):
            return torch.addmv(layer.bias, layer.weight, x)  # (out,)
        out: torch.Tensor = layer(x[None])[0]
        return out


def batch_affine(ops: NodeOps, a: int, b: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Eval-mode batch norm of nodes a:b as x * scale + shift."""
    scale = ops.norm_weight[a:b] / torch.sqrt(ops.running_var[a:b] + 1e-5)
    return scale, ops.norm_bias[a:b] - ops.running_mean[a:b] * scale


def _norm_record(ops: NodeOps, index: torch.Tensor) -> NormRecord:
    """The unfolded norm of the nodes `index` (batch norm as an affine map)."""
    norm = ops.spec.effective_norm
    if norm == "none":
        return None
    if norm == "instance":
        return ("instance", ops.norm_weight[index], ops.norm_bias[index])
    scale, shift = batch_affine(ops, 0, ops.n)
    return ("affine", scale[index], shift[index])


def _node_op(ops: NodeOps, index: torch.Tensor, fold_norm: bool, stride: int = 1) -> NodeOp:
    spec = ops.spec
    norm = None if fold_norm else _norm_record(ops, index)
    kernel = ops.conv_weight[index].detach() if spec.kind == "conv" else None
    return NodeOp(spec.activation if spec.kind == "act" else "relu", norm, kernel, stride)


def _static_weight(
    graph: StaticGraph, w: torch.Tensor, j: int
) -> tuple[tuple[int, ...], torch.Tensor, torch.Tensor]:
    """Destination block j's source blocks, stacked in-edge weights and bias (n_j, H, W)."""
    s = graph.starts
    rows = w[s[j] : s[j + 1]]  # (n_j, N)
    sources = tuple(i for i in range(j) if bool(rows[:, s[i] : s[i + 1]].any())) or (0,)
    weight = torch.cat([rows[:, s[i] : s[i + 1]] for i in sources], dim=1)
    n = s[j + 1] - s[j]
    offsets = graph.offsets
    bias = offsets[s[j] : s[j + 1]] if offsets is not None else w.new_zeros(n, 1, 1)
    if (
        graph.ops.spec.kind == "act"
        and sources[0] == 0
        and graph.ops.spec.effective_norm == "batch"
    ):
        # MLP-style input nodes apply only their norm: W (a x + c) = (W a) x + W c.
        scale, shift = batch_affine(graph.ops, 0, s[1])
        head = weight[:, : s[1]]
        bias = bias + (head @ shift)[:, None, None]
        weight = torch.cat([head * scale, weight[:, s[1] :]], dim=1)
    return sources, weight, bias


def _fold_rows(
    ops: NodeOps, a: int, b: int, weight: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """BN(W z + c) = (scale W) z + scale c + shift, for the eval-mode batch norm of a:b."""
    scale, shift = batch_affine(ops, a, b)
    return weight * scale[:, None], bias * scale[:, None, None] + shift[:, None, None]


class CompiledStaticGraph(nn.Module):
    """A static graph (eval mode) as one product per destination block and the node ops;
    same input and output as the graph it was compiled from."""

    def __init__(self, graph: StaticGraph) -> None:
        super().__init__()
        spec, s, last = graph.ops.spec, graph.starts, len(graph.blocks) - 1
        self.spatial = spec.kind == "conv"
        # MLP-style nodes after a folded norm apply only their activation: no module call.
        self.activation = spec.activation if not self.spatial else ""
        w = graph.edges.matrix().detach()  # (N, N), built once
        fold = spec.effective_norm == "batch"
        ops: list[nn.Module] = [_node_op(graph.ops, torch.arange(s[1]), False, graph.input_stride)]
        pieces = []
        for j in range(1, last + 1):
            sources, weight, bias = _static_weight(graph, w, j)
            if j < last:
                if fold:
                    weight, bias = _fold_rows(graph.ops, s[j], s[j + 1], weight, bias)
                ops.append(_node_op(graph.ops, torch.arange(s[j], s[j + 1]), fold))
            pieces.append((sources, weight, bias))
        self.node_ops = nn.ModuleList(ops if self.spatial else [])
        self.products = _Products(pieces, self.spatial)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, n_0, H, W) input-node states -> (B, n_out, H', W')."""
        if not self.spatial:
            return self.forward_flat(x.flatten(1))[:, :, None, None]
        states = [self.node_ops[0](x)]
        last = len(self.products.layers) - 1
        for j in range(last):
            states.append(self.node_ops[j + 1](self.products.run(j, states)))
        return self.products.run(last, states)

    def forward_flat(self, x: torch.Tensor) -> torch.Tensor:
        """MLP-style: (B, n_0) -> (B, n_out); the input nodes' norm is in the products."""
        act = self.act
        vector = x.shape[0] == 1 and not _tracing()
        plan = self.vector_plan(x)
        if plan is not None:
            return _run_source_plan(plan, act, x[0])[None]
        run = self.products.run_vector if vector else self.products.run
        states = [x[0] if vector else x]
        last = len(self.products.layers) - 1
        for j in range(last):
            states.append(act(run(j, states)))
        out = run(last, states)
        return out[None] if vector else out

    @property
    def act(self) -> Callable[[torch.Tensor], torch.Tensor]:
        # torch.relu skips F.relu's Python wrapper: at batch 1 every call counts.
        return torch.relu if self.activation == "relu" else ACTIVATIONS[self.activation]

    def vector_plan(self, x: torch.Tensor) -> SourcePlan | None:
        """The source-block plan when `x` is one sample and every product is dense."""
        if x.shape[0] != 1 or _tracing():
            return None
        return self._source_plan()

    def _source_plan(self) -> SourcePlan | None:
        """The dense products regrouped by source block (built once, for one sample)."""
        layers = list(self.products.layers)
        key = tuple(id(layer) for layer in layers)
        if getattr(self, "_plan_key", None) != key:
            dense = all(isinstance(layer, GraphLinear) for layer in layers)
            self._plan = source_plan(self.products) if dense else None
            self._plan_key = key
        plan: SourcePlan | None = self._plan
        return plan


SourcePlan = tuple[torch.Tensor, list[torch.Tensor], list[int]]


def source_plan(products: _Products) -> SourcePlan:
    """(bias of every destination, per source block the stacked weights of its edges to all
    later blocks, each hidden block's width): one product per source block, no concatenation.
    At batch 1 this measured faster than the per-destination products (fewer, larger GEMVs)."""
    layers = [layer for layer in products.layers if isinstance(layer, nn.Linear)]
    widths = [layers[0].in_features] + [layer.out_features for layer in layers]
    stacked: list[torch.Tensor] = []
    for i in range(len(layers)):  # source block i feeds destinations i + 1 ...
        parts = []
        for j in range(i, len(layers)):  # product j computes destination block j + 1
            sources, weight = products.sources[j], layers[j].weight.detach()
            if i in sources:
                at = sum(widths[k] for k in sources[: sources.index(i)])
                parts.append(weight[:, at : at + widths[i]])
            else:
                parts.append(weight.new_zeros(weight.shape[0], widths[i]))
        stacked.append(torch.cat(parts).contiguous())
    bias = torch.cat([layer.bias.detach() for layer in layers])
    return bias, stacked, widths[1:-1]


def _run_source_plan(
    plan: SourcePlan, act: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor
) -> torch.Tensor:
    bias, stacked, widths = plan
    acc = torch.addmv(bias, stacked[0], x)  # every later node's input from the input nodes
    for weight, width in zip(stacked[1:], widths, strict=True):
        acc = torch.addmv(acc[width:], weight, act(acc[:width]))
    return acc  # (classes,)


class CompiledGraphClassifier(nn.Module):
    """An MLP-style neural-graph classifier compiled whole: the flattened input is the input
    nodes' states and the graph's last product computes the logits (head folded in)."""

    def __init__(self, graph: CompiledStaticGraph) -> None:
        super().__init__()
        self.graph = graph

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        plan = self.graph.vector_plan(x)
        if plan is not None:  # one sample, dense products: the fewest calls
            return _run_source_plan(plan, self.graph.act, x.reshape(-1))[None]
        return self.graph.forward_flat(x.flatten(1))  # (B, classes)


def needed_per_step(a: torch.Tensor, n_out: int, steps: int) -> list[torch.Tensor]:
    """Node indices whose state at step l (0..steps) is read by the outputs at the end."""
    n = a.shape[0]
    needed = [torch.arange(n - n_out, n)]
    for _ in range(steps):
        sources = (a[needed[0]] != 0).any(0).nonzero().flatten()
        needed.insert(0, sources if len(sources) else needed[0][:1])  # keep the step defined
    return needed


class CompiledDynamicGraph(nn.Module):
    """A discrete-time graph (eq. 11, eval mode) as one node op and one product per step,
    each over only the nodes its result is read from."""

    def __init__(self, graph: DynamicGraph) -> None:
        super().__init__()
        assert graph.time == "discrete", "an ODE solver's steps depend on the input"
        ops, n_in = graph.dynamics.ops, graph.n_in
        self.spatial = ops.spec.kind == "conv"
        a = graph.edges.matrix().detach()  # (N, N), built once
        needed = needed_per_step(a, graph.n_out, graph.steps)
        node_ops = [_node_op(ops, torch.arange(n_in), False)]
        bias = self._start_constants(ops, a[needed[1]], needed[0][needed[0] >= n_in], graph.hw)
        pieces: list[Piece] = [((0,), a[needed[1]][:, :n_in], bias)]
        for step in range(2, graph.steps + 1):
            node_ops.append(_node_op(ops, needed[step - 1], False))
            weight = a[needed[step]][:, needed[step - 1]]
            pieces.append(((0,), weight, weight.new_zeros(len(weight), 1, 1)))
        self.node_ops = nn.ModuleList(node_ops)
        self.products = _Products(pieces, self.spatial)

    def _start_constants(
        self, ops: NodeOps, rows: torch.Tensor, constant: torch.Tensor, hw: tuple[int, int]
    ) -> torch.Tensor:
        """Step 1's bias: what nodes that start at 0 send, op(0), a constant per node."""
        if len(constant) == 0:
            return rows.new_zeros(len(rows), 1, 1)
        op = _node_op(ops, constant, False).eval()
        zeros = rows.new_zeros(1, len(constant), *(hw if self.spatial else ()))
        sent: torch.Tensor = op(zeros)[0].reshape(len(constant), -1)  # (k, H * W)
        bias = rows[:, constant] @ sent  # (n, H * W)
        return bias.reshape(len(rows), *(hw if self.spatial else (1, 1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, n_in, H, W) -> (B, n_out, H, W), the output nodes after the last step."""
        s = x if self.spatial else x.flatten(1)
        for j, op in enumerate(self.node_ops):
            s = self.products.run(j, [op(s)])
        return s if self.spatial else s[:, :, None, None]


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
    if isinstance(compiled, NeuralGraphClassifier):
        _fold_head(compiled)
        graph = compiled.graphs[0]
        if isinstance(graph, CompiledStaticGraph) and not graph.spatial:
            return CompiledGraphClassifier(graph).eval()
    fc = getattr(compiled, "fc", None)
    if isinstance(fc, MaskedLinear):
        weight = fc.edges.matrix().detach()  # (classes, features)
        plain = nn.Linear(weight.shape[1], weight.shape[0])
        plain.weight.data.copy_(weight)
        plain.bias.data.copy_(fc.bias.detach())
        compiled.fc = plain
    return compiled.eval()


def _scale_last_product(products: _Products, scale: torch.Tensor, shift: torch.Tensor) -> None:
    """Make the last product compute scale * y + shift per node (a batch norm folded)."""
    last = len(products.layers) - 1
    layer = products.layers[last]
    assert isinstance(layer, nn.Conv2d) and layer.bias is not None, "a conv-node product"
    layer.weight.data.mul_(scale[:, None, None, None])
    layer.bias.data.mul_(scale).add_(shift)
    if products.has_map[last]:
        getattr(products, f"map{last}").mul_(scale[:, None, None])


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
            _scale_last_product(previous.products, op.norm_weight, op.norm_bias)
        elif isinstance(previous, nn.Sequential) and isinstance(previous[-1], nn.BatchNorm2d):
            previous[-1].weight.data.mul_(op.norm_weight)  # a (BN(x)) + c is a batch norm
            previous[-1].bias.data.mul_(op.norm_weight).add_(op.norm_bias)
        elif previous is stem and isinstance(previous, nn.Conv2d):
            model.stem = _scaled_conv(previous, op.norm_weight, op.norm_bias)
        else:
            continue
        op.norm_kind = "none"
    head = getattr(model, "head_norm", None)
    if isinstance(model, MobileNetDNW) and isinstance(head, nn.BatchNorm2d) and graphs:
        last = graphs[-1]
        if isinstance(last, CompiledStaticGraph):
            scale, shift = _batch_norm_affine(head)
            _scale_last_product(last.products, scale, shift)
            model.head_norm = nn.Identity()  # type: ignore[assignment]


def _scaled_conv(conv: nn.Conv2d, scale: torch.Tensor, shift: torch.Tensor) -> nn.Conv2d:
    """scale * conv(x) + shift per output channel, as one conv with a bias."""
    scaled = copy.deepcopy(conv)
    scaled.weight.data.mul_(scale[:, None, None, None])
    bias = shift.clone() if conv.bias is None else conv.bias.detach() * scale + shift
    scaled.bias = nn.Parameter(bias)
    return scaled


def _batch_norm_affine(norm: nn.BatchNorm2d) -> tuple[torch.Tensor, torch.Tensor]:
    assert norm.running_mean is not None and norm.running_var is not None
    scale = norm.weight.detach() / torch.sqrt(norm.running_var + norm.eps)
    return scale, norm.bias.detach() - norm.running_mean * scale


COMPILED_FORM = (
    "compiled neural graph: one product per destination block over only the kept nodes "
    "(batch norm and the classifier head folded in; MLP-style graphs at batch 1 one "
    "product per source block), built once at load by archsearch.core.deploy.load_deployed"
)


def compiled_record(model: nn.Module, runner: nn.Module) -> dict[str, object] | None:
    """What deployment.json says about a graph model's compiled form (None: not a graph)."""
    if runner is not model:
        products = [m for m in runner.modules() if isinstance(m, _Products)]
        return {
            "compiled": True,
            "form": COMPILED_FORM,
            "products": sum(len(p.layers) for p in products),
        }
    if isinstance(getattr(model, "graphs", None), nn.ModuleList):
        return {"compiled": False, "form": "as trained: continuous-time graphs are not compiled"}
    return None
