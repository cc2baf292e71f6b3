"""The `prune` job (two-temperature architecture pruning).

Papers: "Differentiable Architecture Pruning for Transfer Learning" (section 2.2, Algorithms
A.1 and A.3) and "Disentangling Neural Architectures and Weights" (section 4, Algorithm 1).
Torch-free: the API validates these without the engine.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from archsearch.specs.budget import (
    IMP_PRUNE_FRACTION,
    imp_schedule,
    split_epochs,
    steps_per_epoch,
)
from archsearch.specs.common import Frozen, TrainingSpec
from archsearch.specs.families import ModelConfig
from archsearch.specs.model_configs import MLPConfig
from archsearch.specs.train import JobBase

Baseline = Literal["random", "magnitude", "imp", "reshuffle", "rigl"]
Granularity = Literal["weight", "unit"]
# Families whose units (neurons, channels) can be masked and then removed by compaction.
UNIT_FAMILIES = ("mlp", "cnn", "vgg", "mobilenet_v1")


class TemperatureSpec(Frozen):
    """Inverse temperatures: forward uses sigmoid(t_hard w), the gradient sigmoid(t_soft w).

    Defaults of Algorithm A.1 (t_hard = 100, t_soft = t_hard / 10). The MNIST experiment
    of the pruning paper found t_soft = t_hard / 100 best at t_hard = 1000; the weight-free
    paper uses M_hard = 50, M_soft = 5.
    """

    t_hard: float = Field(default=100.0, gt=0)
    t_soft: float | None = Field(default=None, gt=0, description="default: t_hard / 10")

    @model_validator(mode="before")
    @classmethod
    def _effective_t_soft(cls, data: Any) -> Any:
        # The value that runs is the one recorded: spec.json shows t_soft, never null.
        if isinstance(data, dict) and data.get("t_soft") is None:
            t_hard = data.get("t_hard", 100.0)
            if isinstance(t_hard, int | float) and t_hard > 0:
                return {**data, "t_soft": t_hard / 10.0}
        return data

    @property
    def soft(self) -> float:
        return self.t_soft if self.t_soft is not None else self.t_hard / 10.0


class PenaltySpec(Frozen):
    """The penalty gamma * sum((1 + w)^2) that pulls mask logits toward -1 (appendix A.3).

    `adaptive` starts gamma where the pull equals a low quantile of the loss gradients, then
    raises it (by at most x `adapt_rate` a step) whenever the density lags behind a
    geometric path from 1 to the target, reached after `reach_fraction` of the training:
    the paper tunes gamma by hand "to reach the target sparsity in a similar number of
    epochs"; this does it for the user. `constant` keeps gamma fixed. `none`: no penalty,
    as in the weight-free paper's Algorithm 1 (the loss alone decides the architecture).
    """

    schedule: Literal["adaptive", "constant", "none"] = "adaptive"
    gamma: float = Field(default=1e-3, gt=0, description="initial (or constant) strength")
    reach_fraction: float = Field(default=0.6, gt=0, le=1)
    adapt_rate: float = Field(default=1.25, gt=1, le=10)


# The paper's update interval (Evci et al., 2020: delta T = 100 over ImageNet's tens of
# thousands of steps).
PAPER_UPDATE_INTERVAL = 100
# A job too short for the paper's interval still rewires: with no interval given, it is
# shortened so that at least this many drop/grow updates run before `end_fraction` (at 100,
# a 126-step study arm made none and was a static sparse network under RigL's name).
MIN_RIGL_UPDATES = 10


def rigl_updates(interval: int, end_fraction: float, total_steps: int) -> int:
    """Drop/grow updates a run makes: one after every `interval`-th step while fewer than
    `end_fraction` of `total_steps` are done (`core.pruning.rigl.RigL.after_step`)."""
    end = end_fraction * total_steps  # the float the schedule compares steps with
    updates = max(0, math.ceil(end / interval) - 1)
    # The division rounds: settle the count on the comparison the schedule makes.
    while (updates + 1) * interval < end:
        updates += 1
    while updates > 0 and updates * interval >= end:
        updates -= 1
    return updates


class RigLSpec(Frozen):
    """Dynamic sparse training, RigL ("Rigging the Lottery", Evci et al., 2020, section 3).

    Defaults of the paper: every `update_interval` steps drop the `drop_fraction` * cos-decayed
    smallest-magnitude active weights of each layer and grow as many inactive ones with the
    largest dense gradient (grown weights start at zero), until `end_fraction` of the
    training; layer densities by Erdos-Renyi-Kernel (`erk`) or the same in every layer.
    """

    update_interval: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description=f"steps between updates; null: the paper's {PAPER_UPDATE_INTERVAL}, "
        f"shortened so that at least {MIN_RIGL_UPDATES} updates run in the job's steps (the "
        "interval that ran is the metric `rigl_update_interval`)",
    )
    drop_fraction: float = Field(
        default=0.3, gt=0, lt=1, description="fraction of active weights swapped at step 0"
    )
    end_fraction: float = Field(
        default=0.75, gt=0, le=1, description="updates stop after this fraction of the steps"
    )
    distribution: Literal["erk", "uniform"] = Field(
        default="erk", description="per-layer densities: Erdos-Renyi-Kernel or uniform"
    )

    def interval_for(self, total_steps: int) -> int:
        """The interval that runs in `total_steps`: the one given, else the paper's, shortened
        to the largest that still makes MIN_RIGL_UPDATES updates (1 when none can)."""
        if self.update_interval is not None:
            return self.update_interval
        end = self.end_fraction * total_steps
        return max(1, min(PAPER_UPDATE_INTERVAL, math.ceil(end / MIN_RIGL_UPDATES) - 1))


# Defaults of `weights: free` ("Disentangling Neural Architectures and Weights"), measured on
# digits, MNIST, Fashion-MNIST and a breast_cancer table upload (docs/jobs.md): one hidden
# layer, because with links in {0, b} every unit of a deeper layer sums the same-signed
# weights of its inputs; ELU, because a unit must be able to say "less" as well as "more":
# with ReLU a {0, b} network's hidden units are >= 0 and the table task (standardised,
# correlated features) stays at 0.72 against 0.94 for `train`, with ELU 0.96 (the paper's
# network is tanh, which costs 4.5 points on MNIST; ELU also gains 4 on Fashion-MNIST);
# no density target and no penalty, as in Algorithm 1, because freezing a weight-free
# network at a target leaves nothing to train; the exact binary forward and random signed
# initial logits (half the links on), see `nn/masked.py`.
WEIGHT_FREE_DEFAULTS: dict[str, Any] = {
    "model": {"name": "mlp", "hidden": [128], "activation": "elu"},
    "density": None,
    "penalty": {"schedule": "none"},
    "forward": "binary",
    "mask_init": "normal",
}


class PruneJob(JobBase):
    """Learn a binary mask over a parent network's linear and conv weights."""

    paper: ClassVar[str] = (
        "Differentiable Architecture Pruning for Transfer Learning (two-temperature masks); "
        "Disentangling Neural Architectures and Weights (weight-free masks)"
    )
    budget_knobs: ClassVar[str] = "training.epochs / finetune_epochs"

    method: Literal["prune"] = "prune"
    model: ModelConfig = MLPConfig()
    training: TrainingSpec = TrainingSpec(epochs=10)
    density: float | None = Field(
        default=0.1,
        gt=0,
        le=1,
        description="target fraction of prunable weights kept; null: no target (penalty only)",
    )
    granularity: Granularity = Field(
        default="weight",
        description="weight: one mask per connection (the paper's masks); unit: one mask per "
        "output neuron / conv channel, so the compact model is a smaller dense network that "
        f"every runtime runs fast (families: {', '.join(UNIT_FAMILIES)}); density, the "
        "penalty and baselines then count units (magnitude: L1 norm of each filter/neuron). "
        "With weights 'free', the random initial weights stay fixed and only units are chosen",
    )
    weights: Literal["learned", "free"] = Field(
        default="learned",
        description="learned: weights and masks trained jointly; free: weights fixed to one, "
        "only masks are trained (a {0,1} network)",
    )
    algorithm: Literal["two_temperature", "rigl"] = Field(
        default="two_temperature",
        description="two_temperature: learn the masks (the paper's method); rigl: dynamic "
        "sparse training at `density` for the same epochs (the RigL baseline, see `rigl`)",
    )
    rigl: RigLSpec = RigLSpec()
    temperatures: TemperatureSpec = TemperatureSpec()
    penalty: PenaltySpec = PenaltySpec()
    logit_init: float = Field(default=0.05, gt=0, le=1, description="initial mask logit")
    mask_init: Literal["uniform", "half_normal", "normal"] = Field(
        default="uniform",
        description="initial logits: uniform in [logit_init/2, logit_init]; half_normal "
        "|N(0, logit_init)| (Algorithm A.1); normal N(0, logit_init), half the links on "
        "(weight-free Algorithm 1; the default for weights 'free')",
    )
    forward: Literal["relaxed", "binary"] = Field(
        default="relaxed",
        description="relaxed: sigmoid(t_hard w) forward; binary: the exact mask 1[w > 0] "
        "forward (t_hard = infinity) with the t_soft gradient (the default for weights "
        "'free', so the trained network is the returned one)",
    )
    cap_logits: bool = Field(
        default=True,
        description="with a density target, logits never rise above logit_init",
    )
    mask_lr: float = Field(
        default=0.01, gt=0, le=10, description="step size of the mask logits (alpha in eq. 15)"
    )
    mask_optimizer: Literal["adam", "sgd"] = "adam"
    keep_dense: tuple[str, ...] = Field(
        default=(), description="layers left unmasked: 'first', 'last' or a module name"
    )
    finetune_epochs: int = Field(
        default=0,
        ge=0,
        le=10_000,
        description="then train fresh real weights on the found support (bin -> real)",
    )
    baselines: tuple[Baseline, ...] = Field(
        default=(), description="also save mask-<baseline>.safetensors at the same density"
    )

    @model_validator(mode="before")
    @classmethod
    def _weight_free_defaults(cls, data: Any) -> Any:
        # A {0,1} network needs its own defaults to learn; fields the user gives win, and
        # spec.json records the values that ran.
        if isinstance(data, dict) and data.get("weights") == "free":
            return {**WEIGHT_FREE_DEFAULTS, **data}
        return data

    @model_validator(mode="after")
    def _baselines_need_density(self) -> PruneJob:
        if self.baselines and self.density is None:
            raise ValueError("baselines are pruned to the same density: set 'density'")
        return self

    @model_validator(mode="after")
    def _rigl_trains_weights_at_a_density(self) -> PruneJob:
        if self.algorithm != "rigl" and "rigl" not in self.baselines:
            return self
        if self.density is None:
            raise ValueError("density: rigl trains at a fixed density; set 'density'")
        if self.weights != "learned" or self.granularity != "weight":
            raise ValueError(
                "algorithm: rigl moves single weights; it needs weights 'learned' and "
                "granularity 'weight'"
            )
        return self

    @model_validator(mode="after")
    def _units_need_a_unit_family(self) -> PruneJob:
        if self.granularity == "unit" and self.model.name not in UNIT_FAMILIES:
            raise ValueError(
                f"granularity 'unit' prunes neurons and channels of {', '.join(UNIT_FAMILIES)};"
                f" model {self.model.name!r} has no units to remove: use granularity 'weight'"
            )
        return self

    def schedule_problems(self, n: int) -> dict[str, str]:
        """A `rigl.update_interval` the user fixed that makes no update in this job's steps
        would train a static sparse network under RigL's name: refused, naming the field."""
        interval = self.rigl.update_interval
        uses_rigl = self.algorithm == "rigl" or "rigl" in self.baselines
        if not uses_rigl or interval is None:
            return {}
        steps = int(self.training.epochs) * steps_per_epoch(n, self.training.batch_size)
        if rigl_updates(interval, self.rigl.end_fraction, steps) > 0:
            return {}
        return {
            "rigl.update_interval": f"{interval} steps make no RigL update in this job's "
            f"{steps} steps (updates stop after end_fraction {self.rigl.end_fraction:g} of "
            f"them); set it below {self.rigl.end_fraction * steps:g}, or leave it out to have "
            f"it shortened to make at least {MIN_RIGL_UPDATES} updates"
        }

    def training_rounds(self) -> int:
        """Mask training plus the IMP / magnitude / RigL baselines' rounds, each
        `training.epochs`."""
        rounds = 1 + ("rigl" in self.baselines)
        if "imp" in self.baselines:
            rounds += len(imp_schedule([self.density or 1.0], IMP_PRUNE_FRACTION))
        if "magnitude" in self.baselines:
            rounds += len(imp_schedule([self.density or 1.0], 1.0))
        return rounds

    def planned_epochs(self) -> int:
        return int(self.training.epochs) * self.training_rounds() + int(self.finetune_epochs)

    def epochs_fitted(self, epochs: int) -> dict[str, Any]:
        rounds = self.training_rounds()
        main, finetune = split_epochs(epochs, rounds, self.training.epochs, self.finetune_epochs)
        return {"training.epochs": main, "finetune_epochs": finetune}
