"""Deployable job results (issue 14): sparse storage, measured latency, ONNX, a model card.

Every method calls `write_deployment` once, where it has saved its final (compact) model.
It writes `model-sparse.safetensors` (CSR where smaller, `core.export`), `model.onnx`
(`deploy.onnx`), `deployment.json` (sizes, per-layer forms, latencies, ONNX check, files),
`model-card.md` (`deploy.card`), and rewrites the architecture files with the dataset's
preprocessing record. It returns the metrics the method adds to `metrics.json`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import torch
from pydantic import BaseModel
from torch import nn

from archsearch.core.context import RunContext
from archsearch.core.data.catalog import DatasetInfo
from archsearch.core.data.loaders import Dataset
from archsearch.core.deploy.card import model_card
from archsearch.core.deploy.forms import apply_forms, choose_forms
from archsearch.core.deploy.latency import model_latencies
from archsearch.core.deploy.onnx import onnx_artifact
from archsearch.core.export import (
    count_macs,
    count_parameters,
    json_bytes,
    load_model,
    model_to_bytes,
    save_model,
    sparse_state_bytes,
)
from archsearch.core.models.registry import Architecture, Preprocessing, create_model
from archsearch.core.pruning.build import plain_model
from archsearch.core.pruning.compact import compact_model

BATCHES = (1, 64)
FORMS_BUDGET_S = 0.4
LATENCY_BUDGET_S = 0.8
ONNX_CHECK_SAMPLES = 16


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
    sparse file), each Linear layer in the form `deployment.json` records for it."""
    return apply_forms(load_model(architecture_json, weights), json.loads(deployment_json)["forms"])


def preprocessing(info: DatasetInfo, input_shape: tuple[int, ...]) -> Preprocessing:
    """How raw samples of this dataset became the model's inputs (see `core.data.loaders`)."""
    if info.name == "digits":
        raw = "scikit-learn load_digits() images, values 0..16, split as archsearch does"
    elif info.needs_files:
        raw = "uint8 images of the IDX files (t10k-images-idx3-ubyte.gz for the test split)"
    else:
        raw = "the uploaded arrays, as uploaded"
    names = info.class_names or tuple(str(i) for i in range(info.num_classes))
    return Preprocessing(
        input_shape=tuple(input_shape),
        dtype="float32",
        scale=float(info.scale),
        mean=tuple(info.mean),
        std=tuple(info.std),
        class_names=tuple(names),
        raw=raw,
    )


def _size(deployable: Deployable, sparse_bytes: int) -> dict[str, int]:
    shape = deployable.architecture.input_shape
    model, parent = deployable.model, deployable.parent
    return {
        "parameters_dense": count_parameters(parent),
        "nonzero_dense": count_parameters(parent, nonzero_only=True),
        "macs_dense": count_macs(parent, shape, nonzero_only=False),
        "bytes_dense": len(model_to_bytes(parent)),
        "parameters_compact": count_parameters(model),
        "nonzero_compact": count_parameters(model, nonzero_only=True),
        "macs_compact": count_macs(model, shape, nonzero_only=True),
        "bytes_compact": len(model_to_bytes(model)),
        "bytes_sparse": sparse_bytes,
    }


def _latency_metrics(latency: dict[str, dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, row in latency.items():
        for name in ("dense", "compact", "sparse"):
            out[f"latency_{key}_{name}_ms"] = row[f"{name}_s"] * 1e3
        out[f"latency_{key}_repeats"] = row["repeats"]
    return out


def _save_architectures(ctx: RunContext, deployable: Deployable, pre: Preprocessing) -> None:
    files = {"": deployable.parent_architecture, deployable.suffix: deployable.architecture}
    for suffix, arch in files.items():
        with_pre = dataclasses.replace(arch, preprocessing=pre)
        ctx.save_artifact(
            f"architecture{suffix}.json", with_pre.to_json().encode(), "application/json"
        )


def write_deployment(
    ctx: RunContext, data: Dataset, deployable: Deployable, method: str, spec: BaseModel
) -> dict[str, float]:
    """Write the deployment artifacts; return the metrics to add to `metrics.json`."""
    compacted = deployable.model is not deployable.parent
    # Copies: the method goes on using its models on its own device afterwards.
    model = copy.deepcopy(deployable.model).cpu().eval()
    parent = copy.deepcopy(deployable.parent).cpu().eval() if compacted else model
    deployable = dataclasses.replace(deployable, model=model, parent=parent)
    shape = deployable.architecture.input_shape
    pre = preprocessing(data.info, shape)
    if deployable.save_files:
        save_model(ctx, model, deployable.architecture, suffix=deployable.suffix)
    _save_architectures(ctx, deployable, pre)
    sparse = sparse_state_bytes(model.state_dict())
    ctx.save_artifact("model-sparse.safetensors", sparse, "application/octet-stream")
    chosen, forms = choose_forms(model, shape, FORMS_BUDGET_S)
    variants = {"dense": parent, "compact": model, "sparse": chosen}
    same = same_networks(compacted, forms)
    measured = {name: m for name, m in variants.items() if name not in same}
    latency = model_latencies(measured, shape, BATCHES, LATENCY_BUDGET_S)
    for row in latency.values():
        row.update({f"{name}_s": row[f"{same[name]}_s"] for name in same})
    onnx_bytes, onnx_record = onnx_artifact(
        model, deployable.architecture, data.x_test[:ONNX_CHECK_SAMPLES]
    )
    if onnx_bytes is not None:
        ctx.save_artifact("model.onnx", onnx_bytes, "application/octet-stream")
    record = _record(
        deployable, data, method, spec, pre, len(sparse), forms, (latency, same), onnx_record
    )
    ctx.save_artifact("deployment.json", json_bytes(record), "application/json")
    spec_json = spec.model_dump(mode="json")
    ctx.save_artifact("model-card.md", model_card(record, spec_json).encode(), "text/markdown")
    size = record["size"]
    return {
        **_latency_metrics(latency),
        "bytes_dense": float(size["bytes_dense"]),
        "bytes_sparse": float(size["bytes_sparse"]),
        **({"onnx_max_abs_diff": onnx_record["max_abs_diff"]} if onnx_bytes is not None else {}),
    }


def same_networks(compacted: bool, forms: list[dict[str, Any]]) -> dict[str, str]:
    """Latency variants that are the very network of another, measured once (issue 16: a
    `train` job timed its one network three times): without compaction the compact model is
    the dense parent; with every layer in its dense form the sparse model is the compact."""
    same = {} if compacted else {"compact": "dense"}
    if all(row["batch_1"] == "dense" and row["batch_64"] == "dense" for row in forms):
        same["sparse"] = same.get("compact", "compact")
    return same


def _record(
    deployable: Deployable,
    data: Dataset,
    method: str,
    spec: BaseModel,
    pre: Preprocessing,
    sparse_bytes: int,
    forms: list[dict[str, Any]],
    measured: tuple[dict[str, dict[str, float]], dict[str, str]],
    onnx_record: dict[str, Any],
) -> dict[str, Any]:
    latency, same = measured
    suffix = deployable.suffix
    training = getattr(spec, "training", None)
    return {
        "method": method,
        "dataset": data.info.name,
        "model": deployable.architecture.config.name,
        "seed": getattr(training, "seed", None),
        "test_accuracy": deployable.test_accuracy,
        "device": "cpu",
        "threads": torch.get_num_threads(),
        "preprocessing": dataclasses.asdict(pre),
        "files": {
            "architecture": f"architecture{suffix}.json",
            "weights": f"model{suffix}.safetensors",
            "weights_sparse": "model-sparse.safetensors",
            "onnx": "model.onnx" if onnx_record["exported"] else None,
        },
        "size": _size(deployable, sparse_bytes),
        "forms": forms,
        "latency": latency,
        "latency_note": (
            "median seconds per call on the worker's CPU; variants interleaved, order rotated "
            "per repeat; a variant that is the same network as another is measured once "
            "(`same_network`); GPU latency is not measured"
        ),
        "same_network": same,
        "onnx": onnx_record,
    }
