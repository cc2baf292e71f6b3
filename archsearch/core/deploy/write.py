"""`write_deployment`: every deployment file of a job, and the metrics it adds.

It writes `model-sparse.safetensors` (`core.export.sparse`), `model.onnx` (`deploy.onnx`),
`deployment.json` (sizes, per-layer forms, latencies, ONNX check, files), `model-card.md`
(`deploy.card`), and rewrites the architecture files with the dataset's preprocessing record.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from pydantic import BaseModel
from torch import nn

from archsearch.core.context import RunContext
from archsearch.core.data.loaders import Dataset
from archsearch.core.deploy.card import model_card
from archsearch.core.deploy.compiled_graph import compile_graphs, compiled_record
from archsearch.core.deploy.deployable import Deployable
from archsearch.core.deploy.forms import choose_forms
from archsearch.core.deploy.latency import THREADS as LATENCY_THREADS
from archsearch.core.deploy.latency import model_latencies
from archsearch.core.deploy.onnx import onnx_artifact
from archsearch.core.deploy.preprocessing import preprocessing
from archsearch.core.export import (
    count_macs,
    count_parameters,
    json_bytes,
    model_to_bytes,
    save_model,
    sparse_state_bytes,
)
from archsearch.core.models.registry import Preprocessing

BATCHES = (1, 64)
VARIANTS = ("dense", "compact", "sparse")
FORMS_BUDGET_S = 0.4
LATENCY_BUDGET_S = 0.8
ONNX_CHECK_SAMPLES = 16


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
    """`latency_batch_1_compact_ms` (thread CPU time per call, one thread) and, beside it,
    `latency_batch_1_compact_wall_ms` (the same calls' wall clock), ..."""
    out: dict[str, float] = {}
    for key, row in latency.items():
        for name in VARIANTS:
            out[f"latency_{key}_{name}_ms"] = row[f"{name}_s"] * 1e3
            out[f"latency_{key}_{name}_wall_ms"] = row[f"{name}_wall_s"] * 1e3
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
    # What runs (forms, latency, ONNX): a searched graph compiled, others as they are.
    runner = compile_graphs(model, shape)
    chosen, forms = choose_forms(runner, shape, FORMS_BUDGET_S)
    variants = {"dense": parent, "compact": runner, "sparse": chosen}
    same = same_networks(compacted, forms)
    measured = {name: m for name, m in variants.items() if name not in same}
    latency = model_latencies(measured, shape, BATCHES, LATENCY_BUDGET_S)
    _fill_same(latency, same)
    onnx_bytes, onnx_record = onnx_artifact(
        runner, deployable.architecture, data.x_test[:ONNX_CHECK_SAMPLES], ctx.should_stop
    )
    if onnx_bytes is not None:
        ctx.save_artifact("model.onnx", onnx_bytes, "application/octet-stream")
    record = _record(
        deployable, data, method, spec, pre, len(sparse), forms, (latency, same), onnx_record
    )
    _note_graph_form(record, model, runner)
    ctx.save_artifact("deployment.json", json_bytes(record), "application/json")
    spec_json = spec.model_dump(mode="json")
    ctx.save_artifact("model-card.md", model_card(record, spec_json).encode(), "text/markdown")
    return _deployment_metrics(record, latency, onnx_record if onnx_bytes is not None else None)


def _fill_same(latency: dict[str, dict[str, float]], same: dict[str, str]) -> None:
    """Each variant measured as another network (`same_networks`) gets that one's figures."""
    for row in latency.values():
        for name, measured_as in same.items():
            for figure in ("_s", "_wall_s"):
                row[name + figure] = row[measured_as + figure]


def _note_graph_form(record: dict[str, Any], model: nn.Module, runner: nn.Module) -> None:
    """A graph model's `graph_form`: compiled or not, and so the form of `model.onnx`."""
    graph_form = compiled_record(model, runner)
    if graph_form is None:
        return
    record["graph_form"] = graph_form
    onnx_record = record["onnx"]
    if graph_form["compiled"] and onnx_record["exported"]:
        onnx_record["form"] = f"the compiled neural graph; {onnx_record['form']}"


def _deployment_metrics(
    record: dict[str, Any], latency: dict[str, Any], onnx_record: dict[str, Any] | None
) -> dict[str, float]:
    size = record["size"]
    return {
        **_latency_metrics(latency),
        "bytes_dense": float(size["bytes_dense"]),
        "bytes_sparse": float(size["bytes_sparse"]),
        **({"onnx_max_abs_diff": onnx_record["max_abs_diff"]} if onnx_record is not None else {}),
    }


def latency_measure(latency: dict[str, dict[str, float]]) -> str:
    """deployment.json's `measure`: what the latency figures are, with their fewest calls."""
    calls = min((int(row["repeats"]) for row in latency.values()), default=0)
    return f"thread CPU time, fastest of {calls} calls"


def same_networks(compacted: bool, forms: list[dict[str, Any]]) -> dict[str, str]:
    """Latency variants that are the very network of another, measured once (a
    `train` job timed its one network three times): without compaction the compact model is
    the dense parent; with every layer in its dense form the sparse model is the compact."""
    same = {} if compacted else {"compact": "dense"}
    if all(row["batch_1"] == "dense" and row["batch_64"] == "dense" for row in forms):
        same["sparse"] = same.get("compact", "compact")
    return same


LATENCY_NOTE = (
    "`<variant>_s`: thread CPU time of one call (time.thread_time_ns), the fastest of the "
    f"calls, torch on {LATENCY_THREADS} thread, on the worker's CPU: other work on the machine "
    "only slows a call, so the fastest is the undisturbed cost; `<variant>_wall_s`: the same "
    "calls' median wall clock; variants interleaved, order rotated per repeat; a variant that "
    "is the same network as another is measured once (`same_network`); GPU latency is not "
    "measured"
)


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
        "threads": LATENCY_THREADS,
        "measure": latency_measure(latency),
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
        "latency_note": LATENCY_NOTE,
        "same_network": same,
        "onnx": onnx_record,
    }
