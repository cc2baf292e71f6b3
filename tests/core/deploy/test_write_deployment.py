"""Each method's result is deployable: its deployment files, consistent with each other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import Dataset, load_dataset
from archsearch.core.deploy import load_deployed
from archsearch.core.deploy.compiled_static import CompiledStaticGraph
from archsearch.core.export import load_model
from archsearch.core.methods import get_method
from archsearch.core.models import Architecture
from archsearch.specs import parse_job_spec

DEPLOYMENT_FILES = {"deployment.json", "model-card.md", "model-sparse.safetensors", "model.onnx"}


@pytest.fixture(scope="module")
def digits(data_dirs: tuple[Path, ...]) -> Dataset:
    ref = parse_job_spec({"method": "train", "dataset": {"name": "digits"}}).dataset
    return load_dataset(ref, data_dirs)


@pytest.mark.parametrize(
    "body",
    [
        {"method": "train"},
        {"method": "prune", "density": 0.1},
        {"method": "search"},
        {"method": "grow", "growth": {"max_growth_steps": 1}},
        {"method": "grow", "growth": {"family": "cnn", "max_growth_steps": 1}},
    ],
    ids=["train", "prune", "search", "grow-mlp", "grow-cnn"],
)
def test_job_writes_a_deployable_model(digits: Dataset, body: dict[str, object]) -> None:
    spec = parse_job_spec({**body, "dataset": {"name": "digits"}, "training": {"epochs": 1}})
    ctx = InMemoryContext()
    result = get_method(str(body["method"]))(spec, digits, ctx)
    assert DEPLOYMENT_FILES <= set(ctx.artifacts)
    deployment = json.loads(ctx.artifacts["deployment.json"])
    files = deployment["files"]
    arch = Architecture.from_json(ctx.artifacts[files["architecture"]])
    pre = arch.preprocessing
    assert pre is not None and pre.scale == 16.0 and pre.class_names[3] == "3"
    assert pre.mean == digits.info.mean and pre.input_shape == (1, 8, 8)
    assert Architecture.from_json(ctx.artifacts["architecture.json"]).preprocessing == pre
    # The sparse file and the dense file of the deployed model compute the same outputs.
    dense = load_model(ctx.artifacts[files["architecture"]], ctx.artifacts[files["weights"]])
    sparse = load_model(
        ctx.artifacts[files["architecture"]], ctx.artifacts["model-sparse.safetensors"]
    )
    deployed = load_deployed(
        ctx.artifacts[files["architecture"]],
        ctx.artifacts["model-sparse.safetensors"],
        ctx.artifacts["deployment.json"],
    )
    # A searched graph runs compiled (its products folded: float summation order differs).
    compiled = any(isinstance(m, CompiledStaticGraph) for m in deployed.modules())
    assert compiled == (body["method"] == "search")
    assert deployment.get("graph_form", {}).get("compiled", False) == compiled
    tolerance = 1e-4 if compiled else 1e-5
    with torch.no_grad():
        torch.testing.assert_close(sparse(digits.x_test[:20]), dense(digits.x_test[:20]))
        for batch in (1, 20):  # both batch regimes of the chosen forms
            x = digits.x_test[:batch]
            torch.testing.assert_close(deployed(x), dense(x), rtol=tolerance, atol=tolerance)
        accuracy = (dense(digits.x_test).argmax(1) == digits.y_test).float().mean().item()
    assert accuracy == pytest.approx(deployment["test_accuracy"], abs=1e-6)
    metrics = result.metrics
    for batch in (1, 64):
        for form in ("dense", "compact", "sparse"):
            assert metrics[f"latency_batch_{batch}_{form}_ms"] > 0
            assert metrics[f"latency_batch_{batch}_{form}_wall_ms"] > 0
        assert metrics[f"latency_batch_{batch}_repeats"] >= 5
    calls = min(int(row["repeats"]) for row in deployment["latency"].values())
    assert deployment["threads"] == 1
    assert deployment["measure"] == f"thread CPU time, fastest of {calls} calls"
    assert "CPU time per call, 1 thread" in ctx.artifacts["model-card.md"].decode()
    assert deployment["onnx"]["exported"] and deployment["onnx"]["max_abs_diff"] < 1e-4
    card = ctx.artifacts["model-card.md"].decode()
    assert f"trained by `{body['method']}` on `digits`" in card and "Seed: 0" in card
    assert f"{deployment['size']['bytes_sparse']:,}" in card


def test_pruned_file_is_proportional_to_density(digits: Dataset) -> None:
    spec = parse_job_spec(
        {
            "method": "prune",
            "dataset": {"name": "digits"},
            "model": {"name": "mlp", "hidden": [256, 256]},
            "density": 0.1,
            "training": {"epochs": 1},
        }
    )
    ctx = InMemoryContext()
    metrics = get_method("prune")(spec, digits, ctx).metrics
    assert metrics["bytes_sparse"] <= 0.2 * metrics["bytes_dense"]
    size = json.loads(ctx.artifacts["deployment.json"])["size"]
    assert size["nonzero_compact"] <= size["nonzero_dense"]
