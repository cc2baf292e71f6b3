"""Compaction of a searched model: dead nodes and their ops removed (DNW, section 2.4).

"Neurons often die (have no output) and we may then skip the depthwise convolution."
A node is kept when it is reachable from the model's input AND can reach its output through
real edges. Removing a node that cannot reach the output changes nothing. A node that can
reach the output but not be reached from the input holds an input-independent state; its
contribution to each kept target is folded into that target's constant `offsets`, so the
compact model computes exactly what the masked model computes (in eval mode).

Static graphs are chained (MobileNetV1-DNW): the output block of graph s is the input block
of graph s + 1. The first graph's input nodes and the last graph's output nodes are kept.
Dynamic graphs drop only the nodes that cannot reach an output node (their cycles make
input-independent states time-varying, so nothing is folded there).
"""

from __future__ import annotations

import torch
from torch import nn

from archsearch.core.models.registry import Architecture, create_model
from archsearch.core.nn.neural_graph import DynamicGraph, Graph, StaticGraph, model_graphs
from archsearch.specs.graph_model_configs import CompactGraph


def _forward_reach(graph: StaticGraph, reach_in: torch.Tensor) -> torch.Tensor:
    real, s = graph.edges.real(), graph.starts
    reach = torch.zeros(s[-1], dtype=torch.bool)
    reach[: s[1]] = reach_in
    for j in range(1, len(graph.blocks)):
        reach[s[j] : s[j + 1]] = (real[s[j] : s[j + 1], : s[j]] & reach[None, : s[j]]).any(1)
    return reach  # (N,)


def _backward_live(graph: StaticGraph, live_out: torch.Tensor) -> torch.Tensor:
    real, s = graph.edges.real(), graph.starts
    live = torch.zeros(s[-1], dtype=torch.bool)
    live[s[-2] :] = live_out
    for j in range(len(graph.blocks) - 2, -1, -1):
        live[s[j] : s[j + 1]] = (real[s[j + 1] :, s[j] : s[j + 1]] & live[s[j + 1] :, None]).any(0)
    return live  # (N,)


def static_keep(chain: list[StaticGraph]) -> list[torch.Tensor]:
    """Kept-node masks per graph of a chain of static graphs."""
    reach, link = [], torch.ones(chain[0].blocks[0], dtype=torch.bool)
    for graph in chain:
        reach.append(_forward_reach(graph, link))
        link = reach[-1][graph.starts[-2] :]
    live: list[torch.Tensor] = []
    link = torch.ones(chain[-1].blocks[-1], dtype=torch.bool)
    for graph in reversed(chain):
        live.insert(0, _backward_live(graph, link))
        link = live[0][: graph.blocks[0]]
    keep = [r & lv for r, lv in zip(reach, live, strict=True)]
    keep[0][: chain[0].blocks[0]] = True
    keep[-1][chain[-1].starts[-2] :] = True
    for i in range(len(chain) - 1):  # one node, two roles: same decision on both sides
        shared = keep[i][chain[i].starts[-2] :] & keep[i + 1][: chain[i + 1].blocks[0]]
        keep[i][chain[i].starts[-2] :] = shared
        keep[i + 1][: chain[i + 1].blocks[0]] = shared
    return keep


def dynamic_keep(graph: DynamicGraph) -> torch.Tensor:
    real, n = graph.edges.real(), graph.edges.num_nodes
    live = torch.zeros(n, dtype=torch.bool)
    live[n - graph.n_out :] = True
    while True:
        grown = live | (real & live[:, None]).any(0)
        if bool((grown == live).all()):
            break
        live = grown
    live[: graph.n_in] = True
    return live


def _compact_spec(graph: Graph, keep: torch.Tensor, offsets: bool) -> CompactGraph:
    kept = keep.nonzero().flatten()
    new_id = torch.full((len(keep),), -1, dtype=torch.long)
    new_id[kept] = torch.arange(len(kept))
    real = graph.edges.real() & keep[:, None] & keep[None, :]
    pairs = real.nonzero()  # (E, 2) target, source in row-major order
    edges = tuple((int(new_id[t]), int(new_id[s])) for t, s in pairs.tolist())
    if isinstance(graph, StaticGraph):
        s = graph.starts
        blocks = [int(keep[s[j] : s[j + 1]].sum()) for j in range(len(graph.blocks))]
        assert blocks[0] > 0 and blocks[-1] > 0, "a graph lost all its input or output nodes"
        blocks = [blocks[0], *(b for b in blocks[1:-1] if b > 0), blocks[-1]]
    else:
        blocks = [graph.n_in, len(kept) - graph.n_in - graph.n_out, graph.n_out]
    return CompactGraph(
        blocks=tuple(blocks), edges=edges, kept=tuple(kept.tolist()), offsets=offsets
    )


def compact_architecture(
    model: nn.Module, architecture: Architecture
) -> tuple[Architecture, list[torch.Tensor]]:
    """The compact architecture of a masked model and the kept-node masks per graph."""
    graphs = model_graphs(model)
    static = [g for g in graphs if isinstance(g, StaticGraph)]
    dynamic = [g for g in graphs if isinstance(g, DynamicGraph)]
    if static:
        keeps = static_keep(static)
        specs = [_compact_spec(g, k, True) for g, k in zip(graphs, keeps, strict=True)]
    else:
        keeps = [dynamic_keep(g) for g in dynamic]
        specs = [_compact_spec(g, k, False) for g, k in zip(graphs, keeps, strict=True)]
    config = architecture.config
    compact = specs[0] if config.name == "neural_graph" else tuple(specs)
    return Architecture(
        config.model_copy(update={"compact": compact}),
        architecture.input_shape,
        architecture.num_classes,
    ), keeps


def _copy_ops(full: nn.Module, compact: nn.Module, index: torch.Tensor) -> None:
    for name, tensor in compact.named_parameters(recurse=False):
        tensor.copy_(getattr(full, name)[index])
    for name, buffer in compact.named_buffers(recurse=False):
        buffer.copy_(getattr(full, name)[index])


def _transfer_graph(graph: Graph, compact: Graph, keep: torch.Tensor) -> None:
    w = graph.edges.matrix().detach()  # (N, N) real edges only
    real = graph.edges.real() & keep[:, None] & keep[None, :]
    pairs = real.nonzero()  # same order as _compact_spec
    compact.edges.weight.copy_(w[pairs[:, 0], pairs[:, 1]])
    kept = keep.nonzero().flatten()
    if isinstance(graph, StaticGraph) and isinstance(compact, StaticGraph):
        n_op = graph.ops.n
        _copy_ops(graph.ops, compact.ops, kept[kept < n_op])
        if compact.offsets is not None:
            assert graph.states is not None, "record the node states first"
            removed = (~keep[:n_op]).to(w.dtype)  # (N_op,)
            folded = torch.einsum("tu,uhw->thw", w[:, :n_op] * removed, graph.states[0])
            compact.offsets.copy_(folded[kept])
    elif isinstance(graph, DynamicGraph) and isinstance(compact, DynamicGraph):
        _copy_ops(graph.dynamics.ops, compact.dynamics.ops, kept)


@torch.no_grad()
def compact_model(model: nn.Module, architecture: Architecture) -> tuple[nn.Module, Architecture]:
    """The compact model (dead nodes removed) and its architecture; same outputs in eval."""
    arch, keeps = compact_architecture(model, architecture)
    compact = create_model(arch).to(next(model.parameters()).device)
    rest = {k: v for k, v in model.state_dict().items() if not k.startswith("graphs.")}
    result = compact.load_state_dict(rest, strict=False)
    assert not result.unexpected_keys, f"unexpected {result.unexpected_keys}"
    assert all(k.startswith("graphs.") for k in result.missing_keys), (
        f"missing {result.missing_keys}"
    )
    was_training = model.training
    model.eval()
    for graph in model_graphs(model):
        graph.record_states = True
    # Removed constant nodes have the same state for any input: a zero image will do.
    model(torch.zeros(1, *architecture.input_shape, device=next(model.parameters()).device))
    for graph, small, keep in zip(model_graphs(model), model_graphs(compact), keeps, strict=True):
        graph.record_states = False
        _transfer_graph(graph, small, keep)
        graph.states = None
    model.train(was_training)
    return compact.eval(), arch


def model_macs(model: nn.Module, input_shape: tuple[int, ...]) -> int:
    """Multiply-adds per sample as the paper counts FLOPs: stem, real edges, node convs, FC."""
    from archsearch.core.export import count_macs

    total = count_macs(model, input_shape)  # nn.Conv2d / nn.Linear; also sets each graph's hw
    total += sum(graph.macs() for graph in model_graphs(model))
    fc_macs = getattr(model.fc, "macs", None)
    return total + (fc_macs() if fc_macs else 0)
