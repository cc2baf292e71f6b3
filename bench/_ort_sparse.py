"""Does onnxruntime (CPU) run a sparse weight sparse at batch 1? One product y = W x + b with
W 912 x 784 at 2% density (the first step of bench/deploy.py's discrete-time graph), three
ways, interleaved, one thread:
- `SparseToDenseMatMul` (com.microsoft) with W a sparse initializer: onnxruntime converts
  sparse initializers to dense tensors at load, so the session is rejected (the op takes a
  sparse tensor only as a graph input, fed on every call); printed, not timed;
- a gather form (ELL: per row its nonzero columns padded to the longest row): Gather, Mul,
  ReduceSum, Add;
- the dense Gemm onnxruntime runs today.

Run: python bench/_ort_sparse.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROWS, COLUMNS, DENSITY = 912, 784, 0.02


def _session(nodes: list, inits: list, sparse: list | None = None) -> ort.InferenceSession:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, COLUMNS])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, ROWS])
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=inits, sparse_initializer=sparse)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    model = helper.make_model(graph, opset_imports=opsets).SerializeToString()
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _contrib(w: np.ndarray) -> str:
    flat = np.flatnonzero(w)
    values = numpy_helper.from_array(w.flat[flat].astype(np.float32), "w")
    sparse = helper.make_sparse_tensor(
        values, numpy_helper.from_array(flat.astype(np.int64), "w_idx"), list(w.T.shape)
    )
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"]),
        helper.make_node("SparseToDenseMatMul", ["w", "xt"], ["yt"], domain="com.microsoft"),
        helper.make_node("Transpose", ["yt"], ["y"]),
    ]
    try:
        _session(nodes, [], [sparse])
    except Exception as error:  # what onnxruntime says, printed
        return f"rejected: {str(error)[:160]}"
    return "accepted"


def _ell(w: np.ndarray, b: np.ndarray) -> ort.InferenceSession:
    width = int((w != 0).sum(1).max())
    index = np.zeros((ROWS, width), np.int64)
    values = np.zeros((ROWS, width), np.float32)
    for row in range(ROWS):
        columns = np.flatnonzero(w[row])
        index[row, : len(columns)], values[row, : len(columns)] = columns, w[row, columns]
    inits = [
        numpy_helper.from_array(index, "index"),
        numpy_helper.from_array(values, "values"),
        numpy_helper.from_array(b, "b"),
        numpy_helper.from_array(np.array([2], np.int64), "axis"),
    ]
    nodes = [
        helper.make_node("Gather", ["x", "index"], ["g"], axis=1),
        helper.make_node("Mul", ["g", "values"], ["p"]),
        helper.make_node("ReduceSum", ["p", "axis"], ["s"], keepdims=0),
        helper.make_node("Add", ["s", "b"], ["y"]),
    ]
    return _session(nodes, inits)


def _medians(calls: dict[str, Callable[[], object]], repeats: int = 2000) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) * 1e6 for name, t in times.items()}


def main() -> None:
    rng = np.random.default_rng(0)
    w = (rng.random((ROWS, COLUMNS)) < DENSITY) * rng.standard_normal((ROWS, COLUMNS))
    w, b = w.astype(np.float32), rng.standard_normal(ROWS).astype(np.float32)
    x = rng.standard_normal((1, COLUMNS)).astype(np.float32)
    print(f"SparseToDenseMatMul, sparse initializer: {_contrib(w.T.copy())}")
    ell = _ell(w, b)
    dense = _session(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    exact = float(np.abs(ell.run(None, {"x": x})[0] - (x @ w.T + b)).max())
    medians = _medians(
        {"ell": lambda: ell.run(None, {"x": x}), "dense": lambda: dense.run(None, {"x": x})}
    )
    print(
        f"{ROWS}x{COLUMNS} at density {DENSITY}, batch 1: gather (ELL) {medians['ell']:.1f} us, "
        f"dense Gemm {medians['dense']:.1f} us, ratio {medians['ell'] / medians['dense']:.2f}x "
        f"(max abs diff {exact:.1e})"
    )


if __name__ == "__main__":
    main()
