"""ONNX export of a deployable model, checked against PyTorch with onnxruntime.

The compact model is exported with its weights that are mostly zeros stored as ONNX sparse
initializers (`sparse_initializers`): the file shrinks with the density, and onnxruntime
densifies them once at load, so it runs the dense kernels (it has no portable sparse matmul:
the dense form is the one it runs fastest). Measured by bench/_ort_sparse.py (onnxruntime
1.32, CPU, batch 1): its contrib `SparseToDenseMatMul` takes a sparse tensor only as a graph
input, a sparse initializer reaches it densified and the session is rejected; a gather
(ELL) form of a 912 x 784 product at density 0.02 took 234 us against 44 us dense.
Indices are int64 flat positions, the only type the ONNX standard admits (`onnx.checker`
rejects int32; onnxruntime would take them, for a file 2/3 the size): a weight is stored
sparse when 12 bytes per nonzero beat 4 per entry, below density 1/3 (0.3x the dense bytes
at density 0.1, 0.15x at 0.05).

The TorchScript exporter (`dynamo=False`) is used: it handles the families' Python control
flow by tracing, with a dynamic batch axis. Continuous-time neural graphs call an adaptive
ODE solver whose step count depends on the input: they have no static graph to export. A
failed export never fails the job: the reason is recorded in `deployment.json`.

The export, onnxruntime's session, its outputs on the check samples and its latency run in a
child process forked for them (`deploy.forked`): the 40-50 MB they map and allocate die with
it, instead of raising a worker's peak resident memory for good (426 -> 380 MB on the MNIST
MLP job of `bench/worker_memory.py`). PyTorch's outputs of the check are computed here, on the
job's threads, so `max_abs_diff` is what it was in one process. A child that dies or hangs
is a failed export like any other (its reason in `deployment.json`, the job's other
artifacts kept); a cancelled job kills it.

onnxruntime sets the calling thread's floating-point mode when it creates its first session
in a process: it turns flush-to-zero off. A worker's threads flush subnormal floats
(`core.float_mode.flush_denormals`: soft prune masks ran 5x slower without), and the ONNX
check of the worker's warm-up silently undid it for every job after: a 2-epoch learned prune
job measured 6.2x plain training instead of 1.7x. `ort_session` puts the caller's mode back.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnxruntime  # type: ignore[import-untyped]  # ships no type information
import torch
from onnx import helper, numpy_helper
from torch import nn

from archsearch.core import runlog
from archsearch.core.deploy.forked import ForkedStepFailed, never, run_forked
from archsearch.core.deploy.latency import THREADS as LATENCY_THREADS
from archsearch.core.deploy.latency import interleaved_timings
from archsearch.core.float_mode import flushes_subnormals
from archsearch.core.models.registry import Architecture

try:
    # The TorchScript exporter's modules, imported with this module (in a worker: by `preload`,
    # before the pool forks) rather than by every job's export child: 30-40 ms of its CPU a
    # job, for 6 MB in the worker's main process that its pool processes share.
    import torch.onnx._internal.torchscript_exporter.utils  # noqa: F401
except ImportError:  # another torch's layout: the export imports what it needs itself
    pass

OPSET = 17
ORT_BUDGET_S = 0.2
# The export of the largest families takes seconds; a child past this is stuck, not slow.
EXPORT_TIMEOUT_S = 600.0


def no_onnx_reason(architecture: Architecture) -> str | None:
    """Why this family has no ONNX form, or None when it has one."""
    if getattr(architecture.config, "setting", None) == "continuous":
        return (
            "continuous-time neural graphs integrate an ODE with an input-dependent number of "
            "solver steps: there is no static graph to export; use model.safetensors with "
            "archsearch (load_model) instead"
        )
    return None


def export_onnx(model: nn.Module, input_shape: tuple[int, ...]) -> bytes:
    """The model as ONNX bytes (float32 input `input` of shape (batch, *input_shape))."""
    buffer = io.BytesIO()
    example = torch.zeros(2, *input_shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's tracer warnings are not the user's
        torch.onnx.export(
            model.eval(),
            (example,),
            buffer,  # type: ignore[arg-type]  # the TorchScript exporter writes to file objects
            input_names=["input"],
            output_names=["logits"],
            dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
            opset_version=OPSET,
            dynamo=False,
        )
    return buffer.getvalue()


def sparse_initializers(onnx_bytes: bytes) -> bytes:
    """The model with every float initializer of 2+ dims that is smaller as (int64 flat
    indices, values) moved to the graph's sparse initializers; lossless."""
    model = onnx.load_from_string(onnx_bytes)
    graph = model.graph
    _constants_to_initializers(graph)
    kept = []
    for tensor in graph.initializer:
        array = numpy_helper.to_array(tensor)
        flat = array.reshape(-1)
        positions = np.flatnonzero(flat)
        smaller = positions.size * (8 + array.itemsize) < array.nbytes
        if array.ndim < 2 or array.dtype != np.float32 or not smaller:
            kept.append(tensor)
            continue
        values = numpy_helper.from_array(flat[positions], tensor.name)
        indices = numpy_helper.from_array(positions.astype(np.int64), f"{tensor.name}.indices")
        graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, array.shape))
    del graph.initializer[:]
    graph.initializer.extend(kept)
    onnx.checker.check_model(model)
    data: bytes = model.SerializeToString()
    return data


def _constants_to_initializers(graph: onnx.GraphProto) -> None:
    """Constant nodes holding a float tensor of 2+ dims (what the exporter makes of tensors
    a model derives rather than registers, such as a compiled graph's plan) as initializers,
    so that `sparse_initializers` can store them sparse; one per distinct tensor (the
    exporter repeats a constant at every use)."""
    nodes: list[onnx.NodeProto] = []
    names: dict[tuple[object, ...], str] = {}
    same: dict[str, str] = {}
    for node in graph.node:
        value = node.attribute[0] if node.op_type == "Constant" and node.attribute else None
        if value is None or value.name != "value" or len(value.t.dims) < 2:
            nodes.append(node)
            continue
        key = (tuple(value.t.dims), value.t.data_type, value.t.raw_data or node.output[0])
        if key in names:
            same[node.output[0]] = names[key]
            continue
        names[key] = node.output[0]
        tensor = onnx.TensorProto()
        tensor.CopyFrom(value.t)
        tensor.name = node.output[0]
        graph.initializer.append(tensor)
    for node in nodes:
        for k, name in enumerate(node.input):
            node.input[k] = same.get(name, name)
    del graph.node[:]
    graph.node.extend(nodes)


def ort_session(onnx_bytes: bytes, threads: int | None = None) -> Any:
    """An onnxruntime CPU session on `threads` threads, by default as many as torch uses
    (comparable latencies).

    All graph optimizations (onnxruntime's default, stated so a reader need not know it):
    batch norm is already folded into the convolution at export, and at load onnxruntime
    fuses Conv+Relu and Gemm+Relu and runs the convolutions in its blocked NCHWc layout.
    Measured on the CNN at batch 1 (one thread): 34 us dense, 18 us compact, against 55 and
    20 us with the extended level only (no NCHWc layout) and 57 and 21 us at the basic level.
    """
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads or torch.get_num_threads()
    options.inter_op_num_threads = 1
    flushing = flushes_subnormals()
    try:
        return onnxruntime.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
    finally:
        torch.set_flush_denormal(flushing)  # see the module docstring


def ort_call(session: Any, inputs: np.ndarray) -> Callable[[], np.ndarray]:
    """One inference on `inputs` through an IO binding into a preallocated output array,
    the low-latency way to call onnxruntime from Python (as a server keeps one output buffer
    per batch size): the input is bound again on every call, the logits are written in place.

    `session.run(feed)` converts the feed dict and allocates and converts the outputs on
    every call, about 4 us here: a quarter of the compact CNN's whole batch-1 time (14.5 us
    bound, 18 us with `run`; the dense CNN 31 and 33 us), so it measures Python glue more
    than the model.
    """
    binding = session.io_binding()
    output = session.get_outputs()[0]
    logits = np.empty((inputs.shape[0], *output.shape[1:]), np.float32)
    binding.bind_ortvalue_output(output.name, onnxruntime.OrtValue.ortvalue_from_numpy(logits))
    name = session.get_inputs()[0].name

    def call() -> np.ndarray:
        binding.bind_cpu_input(name, inputs)
        session.run_with_iobinding(binding)
        return logits

    return call


def ort_latency(session: Any, input_shape: tuple[int, ...], budget_s: float) -> dict[str, float]:
    """Seconds of one onnxruntime call (`ort_call`) at batch 1 and 64: `batch_1_s` the
    fastest call's thread CPU time (the session runs on the calling thread:
    `LATENCY_THREADS`), `batch_1_wall_s` the calls' median wall clock, ..."""
    out: dict[str, float] = {}
    for batch in (1, 64):
        inputs = np.random.default_rng(0).standard_normal((batch, *input_shape), "f4")
        measured = interleaved_timings({"ort": ort_call(session, inputs)}, budget_s / 2)
        out[f"batch_{batch}_s"] = measured["ort"]["cpu_s"]
        out[f"batch_{batch}_wall_s"] = measured["ort"]["wall_median_s"]
    return out


def onnx_max_abs_diff(session: Any, model: nn.Module, inputs: torch.Tensor) -> float:
    """max |onnxruntime(x) - model(x)| over `inputs` (the exported model's check)."""
    (ort_out,) = session.run(None, {"input": inputs.numpy()})
    return _max_abs_diff(ort_out, model, inputs)


def _max_abs_diff(ort_out: np.ndarray, model: nn.Module, inputs: torch.Tensor) -> float:
    with torch.inference_mode():
        torch_out = model.eval()(inputs)
    return float((torch.from_numpy(ort_out) - torch_out).abs().max())


def sparse_count(onnx_bytes: bytes) -> int:
    return len(onnx.load_from_string(onnx_bytes).graph.sparse_initializer)


@dataclass(frozen=True)
class _Exported:
    """What the export's child process sends back."""

    data: bytes
    outputs: np.ndarray  # onnxruntime's logits on the check inputs
    latency: dict[str, float]
    sparse_initializers: int


def _export_and_run(
    model: nn.Module, input_shape: tuple[int, ...], inputs: torch.Tensor, threads: int
) -> _Exported | str:
    """In the child: the export, onnxruntime's outputs on `inputs` and its latency on
    `threads` threads; or why the export failed."""
    try:
        data = sparse_initializers(export_onnx(model, input_shape))
        session = ort_session(data, threads)  # one session (its load densifies): run, then timed
        (outputs,) = session.run(None, {"input": inputs.numpy()})
    except Exception as error:  # any exporter gap is a deployment note, not a failed job
        return f"{type(error).__name__}: {error}"[:500]
    latency = ort_latency(session, input_shape, ORT_BUDGET_S)
    return _Exported(data, outputs, latency, sparse_count(data))


def onnx_artifact(
    model: nn.Module,
    architecture: Architecture,
    inputs: torch.Tensor,
    should_stop: Callable[[], bool] = never,
) -> tuple[bytes | None, dict[str, Any]]:
    """`model.onnx` bytes (or None) and the record deployment.json keeps about it.

    The export and onnxruntime run in a child process (`forked`), so that their memory dies
    with it; PyTorch's side of the check runs here, as the model's other outputs do. Raises
    `JobCancelled` once `should_stop()` turns true while the child runs."""
    reason = no_onnx_reason(architecture)
    if reason is not None:
        return None, {"exported": False, "reason": reason}
    # One intra-op thread: onnxruntime then runs each call on the calling thread, whose CPU
    # time is the call's whole work (`deploy.latency`).
    threads, shape = LATENCY_THREADS, architecture.input_shape
    try:
        exported = run_forked(
            lambda: _export_and_run(model, shape, inputs, threads),
            should_stop,
            EXPORT_TIMEOUT_S,
            "the ONNX export",
        )
    except ForkedStepFailed as error:
        # As any failed export: the trained model is the job's result, not this one file
        # (a child the out-of-memory killer took leaves the job its other artifacts).
        runlog.phase_line("no model.onnx: %s", error)
        return None, {"exported": False, "reason": str(error)[:500]}
    if isinstance(exported, str):
        return None, {"exported": False, "reason": exported}
    try:
        diff = _max_abs_diff(exported.outputs, model, inputs)
    except Exception as error:
        return None, {"exported": False, "reason": f"{type(error).__name__}: {error}"[:500]}
    return exported.data, _record(exported, diff, len(inputs))


def _record(exported: _Exported, diff: float, checked: int) -> dict[str, Any]:
    return {
        "exported": True,
        "file": "model.onnx",
        "opset": OPSET,
        "form": "compact model; weights below density 1/3 stored as ONNX sparse initializers "
        "(int64 flat indices + float32 values), which onnxruntime densifies at load: it runs "
        "dense kernels at the speed in `latency`",
        "sparse_initializers": exported.sparse_initializers,
        "runtime": f"onnxruntime {onnxruntime.__version__}, CPUExecutionProvider",
        "latency_call": "InferenceSession.run_with_iobinding: input bound per call, logits "
        "written into a preallocated array",
        "latency": exported.latency,
        "checked_with": f"onnxruntime, {checked} test samples",
        "max_abs_diff": diff,
    }
