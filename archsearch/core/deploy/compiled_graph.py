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
  read them (the tensor folds in `core.deploy.norm_folding`). The compact model's offsets
  become the bias (a per-node map where padding makes them vary across positions).
- a conv graph's input nodes' batch norm folded into what computes their input (the stem,
  or the previous stage's output product), MobileNetV1-DNW's head norm into the last stage.
- after the product, the rest of the node op: instance norm (it depends on the sample, so it
  stays an op), the activation, the 3x3 depthwise conv (these layers: `core.deploy.graph_layers`).
- an MLP-style classifier compiles whole (`CompiledGraphClassifier`): its head (batch norm
  and FC) folded into the last product. One sample, and the ONNX export, run the static
  graph unrolled (`core.deploy.unrolled`): one product from the input nodes to every later
  node, then blocks - 1 rounds of h = act(a + U h) over all hidden nodes, one output product.
A discrete-time graph (eq. 11) gets one product per step, over only the nodes the result is
read from: at the last step the output nodes, at step l the sources of the nodes step l + 1
needs. Nodes other than the inputs start at 0, so their first op output is a constant,
folded into the first step's bias; a batch norm of the steps folds into the rows before it.
One sample runs one `addmv` per step (CSR where that product's chosen form is sparse).
Continuous-time graphs stay as they are.
For one sample on the small maps of a conv graph, the 1x1 products run as `addmm` over the
(channels, positions) states and small depthwise convs as CSR matrix-vector products
(`DepthwiseConv`): oneDNN's per-call set-up costs more than the arithmetic there, and
nn.Module's per-call machinery about as much as a small op, so the one-sample paths call
the ops themselves. Hidden conv blocks are padded
with zero channels to a multiple of 8, and the ONNX export sums one 1x1 Conv per source
block instead of concatenating: onnxruntime then keeps the whole graph in its NCHWc layout.

The compiled model computes the compact model's outputs up to float summation order, in
eval mode (batch norm from its running statistics): a deployment form, not for training.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.deploy.graph_layers import (
    NodeOp,
    NormRecord,
    Piece,
    Products,
    bias_map,
    product_layer,
)
from archsearch.core.deploy.norm_folding import (
    batch_affine,
    batch_norm_affine,
    fold_rows,
    fold_step_norms,
    folded_stem,
    input_scale_to_columns,
    scale_last_product,
    scaled_conv,
)
from archsearch.core.deploy.one_sample import GraphLinear, tracing
from archsearch.core.deploy.unrolled import (
    UnrolledPlan,
    sparse_if_small,
    unrolled_batch,
    unrolled_plan,
    unrolled_vector,
)
from archsearch.core.models.mobilenet_dnw import MaskedLinear, MobileNetDNW
from archsearch.core.models.neural_graph import NeuralGraphClassifier
from archsearch.core.nn.neural_graph import ACTIVATIONS, DynamicGraph, NodeOps, StaticGraph


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


CHANNEL_MULTIPLE = 8


def _pad_hidden_blocks(ops: list[nn.Module], pieces: list[Piece], widths: list[int]) -> None:
    """Pad each hidden conv block with zero channels (zero rows in the product computing it,
    zero columns where it is read, a zero kernel) to a multiple of 8: onnxruntime runs such
    convs in its blocked NCHWc layout, others in a generic kernel (measured on a 31-channel
    7x7 depthwise conv: 16 us, against 3 us for its 32-channel neighbours)."""
    for j in range(1, len(pieces)):  # pieces[j - 1] computes hidden block j
        pad = -widths[j] % CHANNEL_MULTIPLE
        op = ops[j]
        if pad == 0 or not isinstance(op, NodeOp):
            continue
        sources, weight, bias = pieces[j - 1]
        pieces[j - 1] = (sources, F.pad(weight, (0, 0, 0, pad)), F.pad(bias, (0, 0, 0, 0, 0, pad)))
        for k in range(j, len(pieces)):
            sources, weight, bias = pieces[k]
            if j in sources:
                end = sum(widths[i] for i in sources[: sources.index(j) + 1])
                zeros = weight.new_zeros(len(weight), pad)
                pieces[k] = (sources, torch.cat([weight[:, :end], zeros, weight[:, end:]], 1), bias)
        op.pad_channels(pad)
        widths[j] += pad


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
                    weight, bias = fold_rows(graph.ops, s[j], s[j + 1], weight, bias)
                ops.append(_node_op(graph.ops, torch.arange(s[j], s[j + 1]), fold))
            pieces.append((sources, weight, bias))
        widths = [s[i + 1] - s[i] for i in range(last + 1)]
        if self.spatial:
            _pad_hidden_blocks(ops, pieces, widths)  # widths padded too
        self.node_ops = nn.ModuleList(ops if self.spatial else [])
        self.products = Products(pieces, self.spatial)
        self.products.widths = widths if self.spatial else []
        # What the products are now, read per call without nn.Module's attribute lookup.
        self._layer_slots = self.products.layers._modules

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, n_0, H, W) input-node states -> (B, n_out, H', W')."""
        if not self.spatial:
            return self.forward_flat(x.flatten(1))[:, :, None, None]
        if x.shape[0] == 1 and not tracing():
            return self.forward_one(x)
        states = [self.node_ops[0](x)]
        last = len(self.products.layers) - 1
        for j in range(last):
            states.append(self.node_ops[j + 1](self.products.run(j, states)))
        return self.products.run(last, states)

    def forward_one(self, x: torch.Tensor) -> torch.Tensor:
        """Conv nodes, one sample: `forward`'s ops, each product one `addmm` over the
        (channels, positions) states and each node op's `forward` called directly. At
        batch 1 nn.Module's per-call machinery (hooks, scopes) costs about as much as a
        small op; measured in bench/deploy.py (graph_conv row)."""
        ops = [op.forward for op in self.node_ops]
        products = self.products
        states = [ops[0](x)]
        for j in range(len(ops) - 1):
            states.append(ops[j + 1](products.run_one(j, states)))
        return products.run_one(len(ops) - 1, states)

    def forward_flat(self, x: torch.Tensor) -> torch.Tensor:
        """MLP-style: (B, n_0) -> (B, n_out); the input nodes' norm is in the products."""
        act = self.act
        if tuple(self._layer_slots.values()) == self._plan_layers:  # the plan is current
            if tracing():  # the export: the transposed buffers, stored as initializers
                names = ("in_hidden", "in_out", "bias_hidden", "bias_out", "u", "out")
                plan = tuple(getattr(self, f"plan_{name}") for name in names)
                return unrolled_batch(plan, self._plan[4], act, x)
            if x.shape[0] == 1:
                return unrolled_vector(self.vector_plan(), act, x[0])[None]
        run = self.products.run
        states = [x]
        last = len(self.products.layers) - 1
        for j in range(last):
            states.append(act(run(j, states)))
        return run(last, states)

    @property
    def act(self) -> Callable[[torch.Tensor], torch.Tensor]:
        # torch.relu skips F.relu's Python wrapper: at batch 1 every call counts.
        return torch.relu if self.activation == "relu" else ACTIVATIONS[self.activation]

    _plan_layers: tuple[nn.Module | None, ...] = ()  # set by `build_plan`

    def build_plan(self) -> None:
        """Build the unrolled plan from the final (dense) products, used while they are the
        products (a sparse form chosen per batch regime replaces them, and runs itself).
        The export reads it transposed (x @ W: Gemm without a transpose the exporter would
        fold into a constant) from buffers, stored as initializers, not in the state dict;
        the input product in two, the hidden rows (mostly zero: stored sparse) and the
        output rows (dense once the head is folded in)."""
        layers = tuple(self._layer_slots.values())
        if self.spatial or not all(isinstance(layer, GraphLinear) for layer in layers):
            return
        linears = [layer for layer in layers if isinstance(layer, GraphLinear)]
        plan = unrolled_plan(linears, self.products.sources)
        w_in, bias, u, out, _ = plan
        hidden = len(u)
        export = {
            "in_hidden": w_in[:hidden].t(),
            "in_out": w_in[hidden:].t(),
            "bias_hidden": bias[:hidden],
            "bias_out": bias[hidden:],
            "u": u.t(),
            "out": out.t(),
        }
        for name, tensor in export.items():
            self.register_buffer(f"plan_{name}", tensor.contiguous(), persistent=False)
        self._plan = plan
        self._plan_layers = layers

    _vector_plan: UnrolledPlan | None = None

    def vector_plan(self) -> UnrolledPlan:
        """The plan for one sample: its input product sparse if mostly zero (built at the
        first call: a sparse tensor cannot be deep-copied, as `core.deploy.forms` does)."""
        if self._vector_plan is None:
            self._vector_plan = (sparse_if_small(self._plan[0]), *self._plan[1:])
        return self._vector_plan

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_vector_plan": None}  # a copy builds its own


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
        self.norm = ops.spec.effective_norm
        self.activation = ops.spec.activation if not self.spatial else "relu"
        a = graph.edges.matrix().detach()  # (N, N), built once
        needed = needed_per_step(a, graph.n_out, graph.steps)
        node_ops = [_node_op(ops, torch.arange(n_in), False)]
        bias = self._start_constants(ops, a[needed[1]], needed[0][needed[0] >= n_in], graph.hw)
        pieces: list[Piece] = [((0,), a[needed[1]][:, :n_in], bias)]
        for step in range(2, graph.steps + 1):
            node_ops.append(_node_op(ops, needed[step - 1], self.fold))
            weight = a[needed[step]][:, needed[step - 1]]
            pieces.append(((0,), weight, weight.new_zeros(len(weight), 1, 1)))
        if self.fold:
            fold_step_norms(ops, pieces, needed)
        if not self.spatial:
            input_scale_to_columns(node_ops[0], pieces)
        self.node_ops = nn.ModuleList(node_ops)
        self.products = Products(pieces, self.spatial)
        self._act = self.act  # a plain function, looked up once

    @property
    def fold(self) -> bool:
        """Whether the node ops' norm is a batch norm (affine in eval mode): MLP-style."""
        return self.norm == "batch"

    @property
    def act(self) -> Callable[[torch.Tensor], torch.Tensor]:
        # torch.relu skips F.relu's Python wrapper: at batch 1 every call counts.
        return torch.relu if self.activation == "relu" else ACTIVATIONS[self.activation]

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
        if not self.spatial:
            return self.forward_flat(x.flatten(1))[:, :, None, None]
        s = x
        for j, op in enumerate(self.node_ops):
            s = self.products.run(j, [op(s)])
        return s

    def forward_flat(self, x: torch.Tensor) -> torch.Tensor:
        """MLP-style: (B, n_in) -> (B, n_out); after the first step's op (the input nodes'
        norm and activation) every op is the activation alone (its norm folded)."""
        act = self.act
        if x.shape[0] == 1 and self.norm != "instance" and not tracing():
            return self.forward_vector(x[0])[None]
        s = self.products.run(0, [self.node_ops[0](x)])
        for j in range(1, len(self.node_ops)):
            s = self.products.run(j, [act(s) if self.fold else self.node_ops[j](s)])
        return s

    def forward_vector(self, x: torch.Tensor) -> torch.Tensor:
        """One sample (n_in,) -> (n_out,): one `addmv` per step (CSR where the product's
        chosen batch-1 form is sparse), without module calls, which cost as much as a
        step's product at batch 1 (measured in bench/deploy.py, graph_discrete row)."""
        act, forms = self._act, self.products.vector_forms()
        norm_kind, scale, shift = self._input_norm or self.input_norm()
        if norm_kind == "affine":  # the input nodes' batch norm: one fused op
            x = torch.addcmul(shift, x, scale)
        elif norm_kind == "shift":
            x = x + shift
        s = act(x)  # the input nodes' activation is the graph's (MLP-style node ops)
        for j, (matrix, bias) in enumerate(forms):
            s = torch.addmv(bias, matrix, s if j == 0 else act(s))
        return s

    _input_norm: tuple[str, torch.Tensor, torch.Tensor] | None = None

    def input_norm(self) -> tuple[str, torch.Tensor, torch.Tensor]:
        """The input nodes' norm kind and its (scale, shift) buffers (empty if none), kept
        for `forward_vector` (the buffers themselves: their in-place changes show)."""
        first = self.node_ops[0]
        assert isinstance(first, NodeOp), "the input nodes' op"
        none = torch.empty(0)
        kind = first.norm_kind
        norm = (kind, first.norm_weight, first.norm_bias) if kind != "none" else (kind, none, none)
        self._input_norm = norm
        return norm


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
