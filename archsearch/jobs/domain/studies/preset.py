"""The `best-small-model` preset: the standard comparison of methods at equal budget.

- `train`: the dense MLP at a few widths (the reference every method must beat per size);
- `prune`: the MLP of PRUNE_WIDTH pruned to each density ("Differentiable Architecture
  Pruning", section 2.2); `prune-units`: the same MLP pruned at unit granularity (whole
  hidden neurons), at the unit density whose compact MLP has the weight-pruned one's
  parameter count: a small dense MLP, the form every runtime runs fast;
- `search`: Discovering Neural Wirings (MLP-style graph, `node_op: act`) at the same edge
  fractions, with the two baselines of its section 3.3 that need no other job: the random
  graph (`random_graph`, the random baseline) and dense training, top-k by magnitude, then
  fine-tuning (`fine_tune`, the magnitude baseline; its dense phase is charged to its budget).
  The prune job's own `baselines` only save masks (evaluated by `transfer` jobs, which need
  the prune job first), so they are not arms here;
- `rigl`: the same MLP trained sparse from the first step at each density by RigL (Evci et
  al., 2020; `prune` with `algorithm: rigl`), the dynamic sparse training baseline;
- `grow`: grown from one hidden neuron until it reaches the parameter count of the pruned
  MLP at each density ("Spotting expressivity bottlenecks", stop rule `max_parameters`).

Every arm is an MLP family on flattened inputs, so parameters compare like with like.
"""

from __future__ import annotations

from typing import Any

from archsearch.schemas.studies import StudyArm

WIDTHS = (32, 128, 512)
DENSITIES = (0.5, 0.2, 0.1, 0.05)
PRUNE_WIDTH = 256
SEARCH_GRAPH: dict[str, Any] = {
    "name": "neural_graph",
    "node_op": "act",
    "hidden_blocks": (64, 64),
    "output_nodes": 32,
}


def mlp_parameters(n_features: int, hidden: int, n_classes: int, density: float = 1.0) -> int:
    """Parameters of a one-hidden-layer MLP whose weights are kept at `density` (biases all)."""
    weights = n_features * hidden + hidden * n_classes
    return round(density * weights) + hidden + n_classes


def matching_unit_density(n_features: int, n_classes: int, density: float) -> float:
    """The unit density of the PRUNE_WIDTH MLP whose compact form (k hidden neurons:
    k * (n_features + 1 + n_classes) + n_classes parameters) is closest in size to the MLP
    pruned at weight `density`; a multiple of 1 / PRUNE_WIDTH, so the trainer keeps k."""
    size = mlp_parameters(n_features, PRUNE_WIDTH, n_classes, density)
    units = round((size - n_classes) / (n_features + 1 + n_classes))
    return min(PRUNE_WIDTH, max(1, units)) / PRUNE_WIDTH


def _train_arms(widths: tuple[int, ...]) -> list[StudyArm]:
    return [
        StudyArm(
            label=f"train-w{w}", spec={"method": "train", "model": {"name": "mlp", "hidden": [w]}}
        )
        for w in widths
    ]


def _prune_arm(density: float) -> StudyArm:
    spec = {
        "method": "prune",
        "model": {"name": "mlp", "hidden": [PRUNE_WIDTH]},
        "density": density,
    }
    return StudyArm(label=f"prune-d{density:g}", spec=spec)


def _rigl_arm(density: float) -> StudyArm:
    spec = {
        "method": "prune",
        "algorithm": "rigl",
        "model": {"name": "mlp", "hidden": [PRUNE_WIDTH]},
        "density": density,
    }
    return StudyArm(label=f"rigl-d{density:g}", spec=spec)


def _unit_prune_arm(density: float, n_features: int, n_classes: int) -> StudyArm:
    spec = {
        "method": "prune",
        "model": {"name": "mlp", "hidden": [PRUNE_WIDTH]},
        "granularity": "unit",
        "density": matching_unit_density(n_features, n_classes, density),
    }
    return StudyArm(label=f"prune-units-d{density:g}", spec=spec)


def _search_arm(density: float, strategy: str) -> StudyArm:
    spec = {
        "method": "search",
        "model": {**SEARCH_GRAPH, "density": density},
        "search": {"strategy": strategy},
    }
    name = {"dnw": "search", "fine_tune": "magnitude"}.get(strategy, strategy)
    return StudyArm(label=f"{name}-d{density:g}", spec=spec)


def _grow_arm(density: float, n_features: int, n_classes: int) -> StudyArm:
    size = mlp_parameters(n_features, PRUNE_WIDTH, n_classes, density)
    spec = {
        "method": "grow",
        "growth": {"initial_hidden": [1], "max_parameters": size, "baseline": False},
    }
    return StudyArm(label=f"grow-p{size}", spec=spec)


def best_small_model(
    n_features: int,
    n_classes: int,
    densities: tuple[float, ...] = DENSITIES,
    widths: tuple[int, ...] = WIDTHS,
) -> list[StudyArm]:
    arms = _train_arms(widths)
    for density in densities:
        arms += [
            _prune_arm(density),
            _unit_prune_arm(density, n_features, n_classes),
            _rigl_arm(density),
            _search_arm(density, "dnw"),
            _search_arm(density, "random_graph"),
            _search_arm(density, "fine_tune"),
            _grow_arm(density, n_features, n_classes),
        ]
    return arms
