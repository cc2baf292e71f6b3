"""What a search returns besides the models: masks, graph.json and plots (DNW, section 2).

`graph.json` lists, per graph, its nodes and blocks, the real edges with their weights and
the dead nodes (no in- or out-edges); `adjacency.png` shows |w| of the real edges per graph;
`swaps.png` the edges that entered and left the real set per epoch.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from archsearch.core.export import figure_png, kept_figure, new_figure, tensors_to_bytes
from archsearch.core.nn.neural_graph import Graph, StaticGraph, model_graphs
from archsearch.core.search.strategies import searchable_edges


def mask_bytes(model: nn.Module) -> bytes:
    """Every real-edge mask, named like the model's `...edges.mask` buffers (safetensors)."""
    masks = {
        name: t.bool() for name, t in model.state_dict().items() if name.endswith("edges.mask")
    }
    return tensors_to_bytes(masks)


def _dead_nodes(graph: Graph, real: torch.Tensor) -> list[int]:
    has_in, has_out = real.any(1), real.any(0)
    n = real.shape[0]
    if isinstance(graph, StaticGraph):
        n_in, n_out = graph.blocks[0], graph.blocks[-1]
    else:
        n_in, n_out = graph.n_in, graph.n_out
    index = torch.arange(n)
    dead = ((~has_in) & (index >= n_in)) | ((~has_out) & (index < n - n_out))
    return dead.nonzero().flatten().tolist()


def graph_summary(graph: Graph, kept: torch.Tensor) -> dict[str, Any]:
    real = graph.edges.real()
    w = graph.edges.matrix().detach()
    pairs = real.nonzero()
    if isinstance(graph, StaticGraph):
        kind, blocks = "static", list(graph.blocks)
        n_in, n_out = graph.blocks[0], graph.blocks[-1]
    else:
        kind, blocks, n_in, n_out = graph.time, None, graph.n_in, graph.n_out
    return {
        "kind": kind,
        "nodes": int(real.shape[0]),
        "blocks": blocks,
        "input_nodes": n_in,
        "output_nodes": n_out,
        "real_edges": int(len(pairs)),
        "edges": [[int(s), int(t), float(w[t, s])] for t, s in pairs.tolist()],
        "edge_format": "[source, target, weight]",
        "dead_nodes": _dead_nodes(graph, real),
        "removed_nodes": (~kept).nonzero().flatten().tolist(),
    }


def graph_json(model: nn.Module, keeps: list[torch.Tensor], strategy: str) -> dict[str, Any]:
    budgets = [layer.num_real() for layer in searchable_edges(model)]
    return {
        "strategy": strategy,
        "budget_scope": "per graph (per stage for mobilenet_dnw)",
        "budgets": budgets,
        "graphs": [graph_summary(g, k) for g, k in zip(model_graphs(model), keeps, strict=True)],
    }


def adjacency_png(model: nn.Module) -> bytes:
    graphs = model_graphs(model)
    fig, axes = new_figure(ncols=len(graphs), width=4.2, height=4.0)
    for i, (graph, ax) in enumerate(zip(graphs, axes[0], strict=True)):
        w = graph.edges.matrix().detach().abs().cpu()
        real = w[graph.edges.real().cpu()]
        # Clip the colour scale at the 99th percentile: a few large edges would hide the rest.
        vmax = float(real.quantile(0.99)) if real.numel() else 1.0
        image = ax.imshow(w.numpy(), cmap="viridis", interpolation="nearest", vmin=0, vmax=vmax)
        if isinstance(graph, StaticGraph):
            for start in graph.starts[1:-1]:
                ax.axhline(start - 0.5, color="white", lw=0.4)
                ax.axvline(start - 0.5, color="white", lw=0.4)
        ax.set(title=f"graph {i}: |w| of real edges", xlabel="source node", ylabel="target node")
        fig.colorbar(image, ax=ax, fraction=0.046)
    return figure_png(fig)


def swaps_png(history: list[dict[str, float]], title: str) -> bytes:
    with kept_figure("swaps", ncols=2) as (fig, axes):
        return _draw_swaps(fig, axes, history, title)


def per_epoch(history: list[dict[str, float]], name: str) -> list[float]:
    """`name` at each epoch, NaN where the epoch has none (the dense epochs before a search
    count no swaps): matplotlib leaves a gap there, where 0 would draw a false flat line."""
    return [r.get(name, math.nan) for r in history]


def _draw_swaps(fig: Any, axes: Any, history: list[dict[str, float]], title: str) -> bytes:
    epochs = list(range(1, len(history) + 1))
    ax, ax2 = axes[0]
    ax.plot(epochs, per_epoch(history, "edges_entered"), marker="o", label="entered")
    ax.plot(epochs, per_epoch(history, "edges_left"), marker="x", label="left")
    ax.set(xlabel="epoch", ylabel="edges per epoch", title="real-edge swaps", yscale="symlog")
    ax.legend()
    ax2.plot(epochs, per_epoch(history, "real_edges"), marker="o", color="tab:green")
    ax2.set(xlabel="epoch", ylabel="real edges", title="real edges at epoch end")
    fig.suptitle(title)
    return figure_png(fig)
