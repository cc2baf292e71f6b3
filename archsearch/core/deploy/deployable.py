"""What a method deploys: its final (compact) model and the dense parent it came from."""

from __future__ import annotations

import json
from dataclasses import dataclass

from torch import nn

from archsearch.core.deploy.compiled_graph import compile_graphs
from archsearch.core.deploy.forms import apply_forms
from archsearch.core.export import load_model
from archsearch.core.models.registry import Architecture, create_model
from archsearch.core.pruning.build import plain_model
from archsearch.core.pruning.compact import compact_model


@dataclass
class Deployable:
    """What a method deploys: the final model (compact when the method compacts) and the
    dense parent it came from (the same model for `train` and `grow`)."""

    model: nn.Module
    architecture: Architecture
    parent: nn.Module
    parent_architecture: Architecture
    test_accuracy: float
    suffix: str = ""  # "-compact": the deployed model's own model/architecture files
    save_files: bool = False  # the method has not saved the deployed model's files itself


def registry_deployable(
    model: nn.Module, architecture: Architecture, accuracy: float
) -> Deployable:
    """A model saved as plain registry weights (`train`, `grow`), with dead units removed
    where its family compacts (`pruning.compact`); the deployed model is the compact one."""
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    parent = create_model(architecture)
    parent.load_state_dict(state)
    compact = compact_model(state, architecture)
    if compact is None or compact[1].config == architecture.config:
        return Deployable(parent, architecture, parent, architecture, accuracy)
    return Deployable(compact[0], compact[1], parent, architecture, accuracy, "-compact", True)


def pruned_deployable(model: nn.Module, architecture: Architecture, accuracy: float) -> Deployable:
    """A masked model's plain weights as the parent, its compact model (saved by
    `save_pruned` as `*-compact`) as what is deployed."""
    plain = plain_model(model, architecture).cpu()
    compact = compact_model({k: v.cpu() for k, v in plain.state_dict().items()}, architecture)
    if compact is None:
        return Deployable(plain, architecture, plain, architecture, accuracy)
    return Deployable(compact[0], compact[1], plain, architecture, accuracy, "-compact")


def load_deployed(
    architecture_json: str | bytes, weights: bytes, deployment_json: str | bytes
) -> nn.Module:
    """The deployed model as its job measured it: the compact model's weights (dense or
    sparse file), a searched graph compiled when `deployment.json` says it ran so (files
    written before compiled graphs existed load as they ran), each Linear layer in the form
    `deployment.json` records for it."""
    deployment = json.loads(deployment_json)
    model = load_model(architecture_json, weights)
    if deployment.get("graph_form", {}).get("compiled"):
        shape = Architecture.from_json(architecture_json).input_shape
        model = compile_graphs(model, shape)
    return apply_forms(model, deployment["forms"])
