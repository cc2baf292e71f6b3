"""ONNX export checked with onnxruntime for every static family; latency measurement shape."""

from __future__ import annotations

import subprocess
import sys

import onnx
import onnxruntime
import pytest
import torch

from archsearch.core.deploy.forms import SparseLinear, apply_forms, choose_forms
from archsearch.core.deploy.latency import MIN_REPEATS, interleaved_timings
from archsearch.core.deploy.onnx import (
    export_onnx,
    onnx_artifact,
    ort_call,
    ort_session,
)
from archsearch.core.models import Architecture, create_model
from archsearch.specs.graph_model_configs import NeuralGraphConfig
from archsearch.specs.model_configs import CNNConfig, MLPConfig
from archsearch.specs.prune_model_configs import MobileNetV1Config, VGGConfig

SHAPE = (1, 8, 8)
EXPORTABLE = [
    MLPConfig(hidden=(16,)),
    CNNConfig(channels=(4, 6), hidden=(8,)),
    VGGConfig(stages=((4,), (6, 6)), hidden=(8,)),
    MobileNetV1Config(stem=4, blocks=((8, 1), (8, 2))),
    NeuralGraphConfig(setting="static"),
    NeuralGraphConfig(setting="discrete"),
]


@pytest.mark.parametrize(
    "config", EXPORTABLE, ids=lambda c: f"{c.name}-{getattr(c, 'setting', '')}"
)
def test_onnx_outputs_equal_pytorch(config: object) -> None:
    arch = Architecture(config, SHAPE, 10)  # type: ignore[arg-type]
    torch.manual_seed(0)
    model = create_model(arch).eval()
    x = torch.randn(5, *SHAPE)
    data, record = onnx_artifact(model, arch, x)
    assert data is not None and record["exported"], record
    assert record["max_abs_diff"] < 1e-4
    # A batch size other than the traced one runs too (dynamic batch axis).
    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"input": torch.randn(3, *SHAPE).numpy()})
    assert out.shape == (3, 10)


def test_the_timed_onnxruntime_call_returns_what_session_run_returns() -> None:
    """Latency is measured through an IO binding into a preallocated array: the call must
    compute the logits a plain `run` does, for the input bound on every call."""
    arch = Architecture(CNNConfig(channels=(4, 6), hidden=(8,)), SHAPE, 10)
    torch.manual_seed(0)
    session = ort_session(export_onnx(create_model(arch).eval(), SHAPE))
    for batch in (1, 7):
        inputs = torch.randn(batch, *SHAPE).numpy()
        call = ort_call(session, inputs)
        (expected,) = session.run(None, {"input": inputs})
        torch.testing.assert_close(torch.from_numpy(call()), torch.from_numpy(expected))
        inputs[:] = 0  # a new request in the same buffer: bound again, not cached
        (zeros,) = session.run(None, {"input": inputs})
        torch.testing.assert_close(torch.from_numpy(call()), torch.from_numpy(zeros))


def test_continuous_graph_says_it_has_no_onnx_form() -> None:
    arch = Architecture(NeuralGraphConfig(setting="continuous"), SHAPE, 10)
    data, record = onnx_artifact(create_model(arch), arch, torch.randn(2, *SHAPE))
    assert data is None and not record["exported"]
    assert "continuous-time" in record["reason"] and "no static graph" in record["reason"]


def test_latency_repeats_are_interleaved_and_positive() -> None:
    calls: list[str] = []
    variants = {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c")}
    measured = interleaved_timings(variants, budget_s=0.0)
    assert all(
        m["cpu_s"] >= 0 and m["wall_median_s"] > 0 and m["repeats"] == MIN_REPEATS
        for m in measured.values()
    )
    rounds = [calls[i : i + 3] for i in range(0, len(calls), 3)]
    assert len(rounds) == MIN_REPEATS + 1  # no budget: one warm-up round, the minimum repeats
    assert all(sorted(r) == ["a", "b", "c"] for r in rounds)  # each repeat runs each variant
    assert len({r[0] for r in rounds}) == 3  # and no variant always goes first


@pytest.mark.parametrize("batch", [1, 5, 64])
def test_chosen_forms_compute_the_dense_outputs(batch: int) -> None:
    torch.manual_seed(0)
    arch = Architecture(MLPConfig(hidden=(64, 32)), SHAPE, 10)
    model = create_model(arch).eval()
    with torch.no_grad():
        for layer in model.layers:
            layer.weight.mul_(torch.rand_like(layer.weight) < 0.1)
    chosen, report = choose_forms(model, SHAPE, budget_s=0.05)
    assert [row["layer"] for row in report] == ["layers.0", "layers.1", "layers.2"]
    for row in report:
        assert {row["batch_1"], row["batch_64"]} <= {"dense", "sparse"}
        assert row["batch_1_timing"]["dense_s"] > 0 and row["batch_1_timing"]["repeats"] >= 5
    x = torch.randn(batch, *SHAPE)
    with torch.no_grad():
        torch.testing.assert_close(chosen(x), model(x), rtol=1e-5, atol=1e-5)
    for small, large in (("sparse", "sparse"), ("dense", "sparse"), ("sparse", "dense")):
        forms = [{"layer": row["layer"], "batch_1": small, "batch_64": large} for row in report]
        forced = apply_forms(model, forms)
        assert all(isinstance(layer, SparseLinear) for layer in forced.layers)
        with torch.no_grad():
            torch.testing.assert_close(forced(x), model(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("config", EXPORTABLE[:2], ids=lambda c: c.name)
def test_pruned_weights_are_sparse_initializers_and_the_file_shrinks(config: object) -> None:
    arch = Architecture(config, SHAPE, 10)  # type: ignore[arg-type]
    torch.manual_seed(0)
    model = create_model(arch).eval()
    x = torch.randn(5, *SHAPE)
    dense_bytes, _ = onnx_artifact(model, arch, x)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.Linear, torch.nn.Conv2d)):
                module.weight.mul_(torch.rand(module.weight.shape) < 0.1)
    data, record = onnx_artifact(model, arch, x)
    assert data is not None and dense_bytes is not None
    assert record["sparse_initializers"] >= 2 and record["max_abs_diff"] < 1e-5
    onnx.checker.check_model(onnx.load_from_string(data))  # standard ONNX, not an extension
    assert len(data) < 0.75 * len(dense_bytes)  # batch norm and biases stay dense
    assert record["latency"]["batch_1_s"] > 0 and record["latency"]["batch_64_s"] > 0
    assert "run_with_iobinding" in record["latency_call"]


FIRST_SESSION = """
import torch
from archsearch.core.deploy.onnx import export_onnx, ort_session
from archsearch.core.float_mode import flushes_subnormals
from archsearch.core.models import Architecture, create_model
from archsearch.specs.model_configs import MLPConfig
arch = Architecture(MLPConfig(hidden=(16,)), (1, 8, 8), 10)
data = export_onnx(create_model(arch).eval(), (1, 8, 8))
torch.set_flush_denormal({flushing})
assert flushes_subnormals() is {flushing}, "this CPU can flush subnormals"
ort_session(data)
print(flushes_subnormals())
"""


@pytest.mark.parametrize("flushing", [True, False])
def test_an_onnxruntime_session_leaves_the_threads_subnormal_mode_as_it_was(
    flushing: bool,
) -> None:
    """onnxruntime turns the calling thread's flush-to-zero off when it creates its first
    session in a process (hence a fresh interpreter here): a worker thread that flushes must
    still flush after the ONNX check, and one that does not must not start to."""
    code = FIRST_SESSION.format(flushing=flushing)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(flushing)
