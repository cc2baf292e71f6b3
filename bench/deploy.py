"""Deployable models: size, multiply-adds and latency in PyTorch and onnxruntime, vs dense.

Cases (MNIST input shape; masks drawn at the stated density, not trained: size and speed do
not depend on what the weights learned, and a whole table then runs in a few minutes):
- mlp / mlp1024: the default MLP [256, 128] and a [1024, 1024] MLP at weight density 0.1
  and 0.05 (random connections) and at unit density 0.25 (random units, every layer keeps
  a quarter: `granularity: unit`);
- cnn, vgg, mobilenet_v1 at unit density 0.25 (vgg on a 3x32x32 input);
- searched graphs (DNW; wiring random at the default density, compacted, then compiled as
  deployed: `core.deploy.compiled_graph`), each against the dense network of its kind whose
  weight count is closest to the compact graph's real (nonzero) weights: graph_mlp (the
  MLP-style static graph) and graph_discrete (MLP-style, discrete time) against MLPs [h];
  graph_conv (the default conv-node graph, the one a default search job trains) against
  CNNs; dnw_conv (MobileNetV1-DNW) against MobileNetV1 at a width multiplier. Their rows
  also give the uncompiled compact graph's PyTorch latency (`uncompiled`) in the same
  interleaving, and a second line against the dense network of their kind whose
  multiply-adds are closest to the graph's real ones (a discrete-time graph applies its
  edges at every step: at equal weights it does several times the arithmetic).

Each case is a deployed model (compact model; Linear layers in the per-layer form that
measured faster, `core.deploy.forms`) against its dense reference, measured side by side:
file bytes (safetensors: dense reference vs sparse file; ONNX: dense reference vs compact
ONNX with sparse initializers), multiply-adds, and latency at batch 1 and 64 in PyTorch and
in onnxruntime (one thread each; `ort` called through an IO binding as deployment.json
measures it, `run()` the plain `session.run(feed)` call; the one-op floor is a Flatten-only
model called the same way: what any model costs per call), medians of interleaved repeats
with their min-max spread, printed as ratios deployed / dense. CPU only: no GPU here, so no
GPU table.

Goals (unit density 0.25 on the CNN and on the [1024, 1024] MLP): MACs <= 0.3x, ONNX bytes
<= 0.3x, onnxruntime batch-1 latency <= 0.5x dense. Searched graphs: batch-1 CPU latency
<= 2x the dense network with the same real weights (discrete-time graphs: with the same
multiply-adds, the equal-weights ratio printed next to it).

Run: OMP_NUM_THREADS=1 python bench/deploy.py [--budget 1.5] [--cases mlp1024@unit0.25,cnn]
[--graphs] (only the searched-graph rows)
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from archsearch.core.deploy.compiled_graph import compile_graphs
from archsearch.core.deploy.forms import choose_forms
from archsearch.core.deploy.onnx import export_onnx, ort_call, ort_session, sparse_initializers
from archsearch.core.export import count_macs, model_to_bytes, sparse_state_bytes
from archsearch.core.float_mode import flush_denormals
from archsearch.core.models import Architecture, create_model
from archsearch.core.nn.masked_model import hard_masks, mask_model, set_masks
from archsearch.core.nn.neural_graph import DynamicGraph, StaticGraph
from archsearch.core.pruning.build import plain_model
from archsearch.core.pruning.compact import compact_model
from archsearch.core.pruning.units import unit_plan
from archsearch.core.search.compact import compact_model as compact_graph
from archsearch.core.search.compact import model_macs
from archsearch.specs.graph_model_configs import MobileNetDNWConfig, NeuralGraphConfig
from archsearch.specs.model_configs import CNNConfig, MLPConfig
from archsearch.specs.prune_model_configs import MobileNetV1Config, VGGConfig

MNIST = (1, 28, 28)
Case = tuple[nn.Module, Architecture, nn.Module, Architecture]  # deployed, its arch, dense, its


def _pruned(config: Any, shape: tuple[int, ...], granularity: str, density: float) -> Case:
    arch = Architecture(config, shape, 10)
    torch.manual_seed(0)
    model = create_model(arch).eval()
    units = unit_plan(arch) if granularity == "unit" else None
    mask_model(model, units=units, binary_forward=True)
    generator = torch.Generator().manual_seed(0)
    masks = {}
    for name, like in hard_masks(model).items():
        score = torch.rand(like.shape, generator=generator).flatten()
        keep = torch.zeros_like(score, dtype=torch.bool)
        keep[score.topk(max(1, round(density * score.numel()))).indices] = True
        masks[name] = keep.view(like.shape)
    set_masks(model, masks)
    plain = plain_model(model, arch)
    compacted = compact_model(plain.state_dict(), arch)
    assert compacted is not None, "every pruned family compacts"
    return compacted[0], compacted[1], create_model(arch).eval(), arch


# Per compiled graph (by id): the compact graph it was compiled from (timed as `uncompiled`)
# and that graph's real weights (the compiled products hold folded copies of them).
UNCOMPILED: dict[int, tuple[nn.Module, int]] = {}


def _graph(config: Any, references: list[Any]) -> Case:
    """The compiled compact searched graph and, of `references`, the dense network whose
    weight count is closest to the compact graph's real (nonzero) weights."""
    arch = Architecture(config, MNIST, 10)
    torch.manual_seed(0)
    masked = create_model(arch)
    masked.train()
    masked(torch.randn(64, *MNIST))  # batch-norm statistics of a trained-like model
    compact, compact_arch = compact_graph(masked.eval(), arch)
    compiled = compile_graphs(compact, MNIST)
    real = _real(compact)
    UNCOMPILED[id(compiled)] = (compact.eval(), real)
    dense_archs = [Architecture(c, MNIST, 10) for c in references]
    dense_arch = min(dense_archs, key=lambda a: abs(_real(create_model(a)) - real))
    macs = _macs(compact, MNIST, True)
    macs_arch = min(dense_archs, key=lambda a: abs(_macs(create_model(a), MNIST, False) - macs))
    EQUAL_MACS[id(compiled)] = create_model(macs_arch).eval()
    return compiled, compact_arch, create_model(dense_arch).eval(), dense_arch


# Per compiled graph (by id): the dense network of its kind whose multiply-adds are closest to
# the compact graph's real ones (a discrete-time graph applies its edges at every step, so at
# equal weights it does several times the arithmetic of the network it is compared with).
EQUAL_MACS: dict[int, nn.Module] = {}


def cases() -> dict[str, Callable[[], Case]]:
    out: dict[str, Callable[[], Case]] = {}
    for label, hidden in (("mlp", (256, 128)), ("mlp1024", (1024, 1024))):
        for granularity, density in (("weight", 0.1), ("weight", 0.05), ("unit", 0.25)):
            name = f"{label}@{granularity}{density}"
            out[name] = lambda h=hidden, g=granularity, d=density: _pruned(
                MLPConfig(hidden=h), MNIST, g, d
            )
    out["cnn@unit0.25"] = lambda: _pruned(CNNConfig(), MNIST, "unit", 0.25)
    out["vgg@unit0.25"] = lambda: _pruned(VGGConfig(), (3, 32, 32), "unit", 0.25)
    out["mobilenet@unit0.25"] = lambda: _pruned(MobileNetV1Config(), MNIST, "unit", 0.25)
    out.update(graph_cases())
    return out


def graph_cases() -> dict[str, Callable[[], Case]]:
    """Searched graphs against dense references with about their real weights (printed)."""
    mlps = [MLPConfig(hidden=(h,)) for h in range(1, 257)]
    cnns = [CNNConfig(channels=(c, 2 * c), hidden=(h,)) for c in range(1, 9) for h in (4, 8, 16)]
    mobilenets = [MobileNetV1Config(width_multiplier=w / 8) for w in range(1, 33)]
    return {
        "graph_mlp": lambda: _graph(NeuralGraphConfig(node_op="act"), mlps),
        "graph_discrete": lambda: _graph(
            NeuralGraphConfig(node_op="act", setting="discrete", density=0.02), mlps
        ),
        "graph_conv": lambda: _graph(NeuralGraphConfig(), cnns),
        "dnw_conv": lambda: _graph(MobileNetDNWConfig(), mobilenets),
    }


def interleaved(variants: dict[str, Callable[[], object]], budget_s: float) -> dict[str, Any]:
    """Per variant: all seconds of one call, repeats interleaved in a rotated order.

    Called per runtime: a deployment runs one, and a torch call between two onnxruntime
    calls evicts their caches (measured on the CNN at batch 1: onnxruntime 29.6 / 14.8 us
    dense / compact among themselves, 46.8 / 19.2 us with torch calls in between)."""
    names, times = list(variants), {name: [] for name in variants}
    for name in names:
        variants[name]()  # warm-up
    start, repeat = time.perf_counter(), 0
    while repeat < 7 or (time.perf_counter() - start < budget_s and repeat < 400):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            t0 = time.perf_counter()
            variants[name]()
            times[name].append(time.perf_counter() - t0)
        repeat += 1
    return times


def ratio(times: dict[str, list[float]], ours: str, ref: str) -> str:
    """median(ours) / median(ref), with the spread of per-repeat ratios (min-max)."""
    pairs = [a / b for a, b in zip(times[ours], times[ref], strict=True)]
    med = statistics.median(times[ours]) / statistics.median(times[ref])
    return f"{med:.2f}x [{min(pairs):.2f}-{max(pairs):.2f}]"


def measure(case: Case, budget: float) -> dict[str, Any]:
    deployed, arch, dense, dense_arch = case
    shape = arch.input_shape
    chosen, _ = choose_forms(deployed, shape, 0.3)
    onnx_dense = export_onnx(dense, shape)
    onnx_ours = sparse_initializers(export_onnx(deployed, shape))
    sessions = {
        "ours": ort_session(onnx_ours),
        "dense": ort_session(onnx_dense),
        "floor": ort_session(export_onnx(nn.Flatten(), shape)),
    }
    uncompiled = UNCOMPILED.get(id(deployed))
    equal_macs = EQUAL_MACS.get(id(deployed))
    if equal_macs is not None:
        sessions["macs"] = ort_session(export_onnx(equal_macs, shape))
    row: dict[str, Any] = {
        "weights": (uncompiled[1] if uncompiled else _real(deployed), _real(dense)),
        "st": len(sparse_state_bytes(deployed.state_dict())) / len(model_to_bytes(dense)),
        "onnx": len(onnx_ours) / len(onnx_dense),
        # A graph's real multiply-adds: its compact form's edges and node convs.
        "macs": _macs(uncompiled[0] if uncompiled else deployed, shape, True)
        / _macs(dense, shape, False),
    }
    for batch in (1, 64):
        x = torch.randn(batch, *shape)
        variants = _variants(chosen, dense, sessions, x)
        if equal_macs is not None:
            variants["torch_macs"] = lambda m=equal_macs, x=x: m(x)
            variants["ort_macs"] = ort_call(sessions["macs"], x.numpy())
        if uncompiled is not None:
            # Beside the dense network in a rotation of its own: its calls (hundreds of us,
            # N x N matrices rebuilt) would evict the compiled graph's weights from cache.
            variants["uncompiled_graph"] = lambda m=uncompiled[0], x=x: m(x)
            variants["uncompiled_dense"] = variants["torch_dense"]
        times: dict[str, list[float]] = {}
        with torch.inference_mode():  # each runtime among its own: see `interleaved`
            for runtime in ("torch_", "ort", "uncompiled_"):
                own = {k: v for k, v in variants.items() if k.startswith(runtime)}
                if own:
                    times.update(interleaved(own, budget / 4))
        row[f"b{batch}"] = {
            "uncompiled": ratio(times, "uncompiled_graph", "uncompiled_dense")
            if uncompiled
            else "",
            "torch": ratio(times, "torch_ours", "torch_dense"),
            "ort": ratio(times, "ort_ours", "ort_dense"),
            "ortrun": ratio(times, "ortrun_ours", "ortrun_dense"),
            "dense_ms": statistics.median(times["torch_dense"]) * 1e3,
            "ort_dense_ms": statistics.median(times["ort_dense"]) * 1e3,
            "ort_ours_ms": statistics.median(times["ort_ours"]) * 1e3,
            "ort_floor_ms": statistics.median(times["ort_floor"]) * 1e3,
            "repeats": len(times["torch_ours"]),
            "macs": f"torch {ratio(times, 'torch_ours', 'torch_macs')} ort "
            f"{ratio(times, 'ort_ours', 'ort_macs')}"
            if equal_macs is not None
            else "",
        }
    if equal_macs is not None:
        row["macs_ref"] = (_macs(equal_macs, shape, False), _real(equal_macs))
    return row


def _variants(
    chosen: nn.Module, dense: nn.Module, sessions: dict[str, Any], x: torch.Tensor
) -> dict[str, Callable[[], object]]:
    feed = {"input": x.numpy()}
    return {
        "torch_ours": lambda: chosen(x),
        "torch_dense": lambda: dense(x),
        "ort_ours": ort_call(sessions["ours"], x.numpy()),
        "ort_dense": ort_call(sessions["dense"], x.numpy()),
        "ortrun_ours": lambda: sessions["ours"].run(None, feed),
        "ortrun_dense": lambda: sessions["dense"].run(None, feed),
        "ort_floor": ort_call(sessions["floor"], x.numpy()),
    }


def _macs(model: nn.Module, shape: tuple[int, ...], nonzero_only: bool) -> int:
    """Multiply-adds; a searched graph's through its own counter (its edges are no Linear)."""
    if any(isinstance(m, (StaticGraph, DynamicGraph)) for m in model.modules()):
        return model_macs(model, shape)
    return count_macs(model, shape, nonzero_only=nonzero_only)


def _real(model: nn.Module) -> int:
    return int(sum(int((p != 0).sum()) for p in model.parameters()))


def report(name: str, row: dict[str, Any]) -> None:
    b1, b64 = row["b1"], row["b64"]
    ours, dense = row["weights"]
    if b1["uncompiled"]:
        name = f"{name} (uncompiled b1 {b1['uncompiled']}, b64 {b64['uncompiled']})\n{'':22}"
    print(
        f"{name:22} weights {ours:>9,}/{dense:>9,} | bytes st {row['st']:.3f}x onnx "
        f"{row['onnx']:.3f}x | MACs {row['macs']:.3f}x | b1 torch {b1['torch']} ort {b1['ort']}"
        f" (run() {b1['ortrun']}) | b64 torch {b64['torch']} ort {b64['ort']} (run() "
        f"{b64['ortrun']}) | dense b1 {b1['dense_ms']:.3f} ms "
        f"(ort {b1['ort_dense_ms'] * 1e3:.1f} us, ours {b1['ort_ours_ms'] * 1e3:.1f}, one-op "
        f"floor {b1['ort_floor_ms'] * 1e3:.1f}) | repeats {b1['repeats']}/{b64['repeats']}"
    )
    if "macs_ref" in row:
        macs, weights = row["macs_ref"]
        print(
            f"{'':22} vs the dense network of equal MACs ({macs:,} MACs, {weights:,} weights):"
            f" b1 {b1['macs']} | b64 {b64['macs']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=1.5, help="seconds of timing per case")
    parser.add_argument("--cases", default="", help="comma-separated case names (default all)")
    parser.add_argument("--graphs", action="store_true", help="only the searched-graph rows")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    flush_denormals()  # as every thread that runs jobs does
    np.random.seed(0)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread, CPU; ratios deployed / "
        "dense reference: median [min-max of per-repeat ratios]"
    )
    wanted = set(filter(None, args.cases.split(","))) or (
        set(graph_cases()) if args.graphs else set()
    )
    for name, build in cases().items():
        if not wanted or name in wanted:
            report(name, measure(build(), args.budget))


if __name__ == "__main__":
    main()
