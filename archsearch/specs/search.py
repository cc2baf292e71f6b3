"""The `search` job: Discovering Neural Wirings (learn the wiring together with the weights).

`search.strategy` picks the method of finding a k-edge graph; the edge budget k itself is
part of the model config (`density` or `k_edges` per graph; per stage for MobileNetV1-DNW).
Defaults follow the paper's small-scale setting (SGD, momentum 0.9, lr 0.1, weight decay
1e-4, cosine schedule) at a size that trains on digits in seconds.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from archsearch.specs.budget import DENSE_FIRST, split_epochs
from archsearch.specs.common import Frozen, OptimizerSpec, TrainingSpec
from archsearch.specs.graph_model_configs import MobileNetDNWConfig, NeuralGraphConfig
from archsearch.specs.train import JobBase

Strategy = Literal[
    "dnw",
    "random_graph",
    "no_update",
    "l1_anneal",
    "targeted_dropout",
    "lottery_one_shot",
    "fine_tune",
    "complete",
]

GraphModelConfig = Annotated[NeuralGraphConfig | MobileNetDNWConfig, Field(discriminator="name")]


class SearchSpec(Frozen):
    """How the k real edges are found (section 3.3's comparison set).

    - dnw: top-k of |w| every step, gradient to every admissible edge (Algorithm 1).
    - random_graph: the top-k of the random init, fixed (the paper's RG baseline).
    - no_update: top-k recomputed every step, gradient only to real edges.
    - l1_anneal: dense start, magnitude pruning annealed to k, plus an L1 term.
    - targeted_dropout: dense training; the bottom (1 - k/admissible) fraction of edges by
      |w| is dropped with probability `drop_rate` (weights keep their sign, no rescaling);
      pruned to the top-k at the end.
    - lottery_one_shot: dense training, keep top-k, rewind to the init, retrain.
    - fine_tune: dense training, keep top-k, continue at `fine_tune_lr`.
    - complete: every admissible edge (the dense graph).
    """

    strategy: Strategy = "dnw"
    dense_epochs: int | None = Field(
        default=None,
        ge=1,
        description="lottery_one_shot/fine_tune: dense epochs (default: training.epochs)",
    )
    fine_tune_lr: float | None = Field(
        default=None, gt=0, description="fine_tune: lr of the sparse phase (default: lr / 10)"
    )
    l1: float = Field(default=1e-5, ge=0, description="l1_anneal: L1 coefficient on edge weights")
    anneal_fraction: float = Field(
        default=0.5, gt=0, le=1, description="l1_anneal: fraction of training spent annealing to k"
    )
    drop_rate: float = Field(default=0.9, ge=0, le=1, description="targeted_dropout: rho")


class SearchJob(JobBase):
    paper: ClassVar[str] = "Discovering Neural Wirings (Wortsman et al., 2019)"
    budget_knobs: ClassVar[str] = "training.epochs / search.dense_epochs"
    method: Literal["search"] = "search"
    model: GraphModelConfig = NeuralGraphConfig()
    search: SearchSpec = SearchSpec()
    training: TrainingSpec = TrainingSpec(
        epochs=8,
        batch_size=64,
        optimizer=OptimizerSpec(name="sgd", lr=0.1, momentum=0.9, weight_decay=1e-4),
    )

    def planned_epochs(self) -> int:
        epochs = int(self.training.epochs)
        if self.search.strategy in DENSE_FIRST:  # the baseline's dense phase, then sparse
            return epochs + int(self.search.dense_epochs or epochs)
        return epochs

    def epochs_fitted(self, epochs: int) -> dict[str, Any]:
        if self.search.strategy not in DENSE_FIRST:
            return {"training.epochs": epochs}
        dense = self.search.dense_epochs or self.training.epochs
        sparse, dense = split_epochs(epochs, 1, self.training.epochs, dense)
        return {"training.epochs": sparse, "search.dense_epochs": dense or None}
