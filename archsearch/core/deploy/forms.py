"""Per layer, the faster form of a pruned linear layer: dense GEMM or CSR sparse kernel.

A sparse weight only pays off where the kernel for it is faster on this device.
Each `nn.Linear` of the compact model is timed on its real input width, dense
(`F.linear`) against CSR with int32 indices (`torch.addmv` at batch 1, `torch.sparse.addmm`
above), interleaved
(`latency.interleaved_timings`), at batch 1 and batch 64; the layer is replaced by a
`SparseLinear` that uses, for each batch regime, the form that measured faster. Outputs are
those of the dense layer up to float summation order.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from archsearch.core.deploy.latency import interleaved_timings

SMALL_BATCH = 8  # batches up to this size use the batch-1 choice, larger ones the batch-64 one
MAX_DENSITY = 0.6  # above this a CSR kernel cannot win (twice the memory traffic per weight)


class SparseLinear(nn.Module):
    """A Linear layer with its weight kept as CSR, and the form to use per batch regime."""

    def __init__(self, layer: nn.Linear, sparse_small: bool, sparse_large: bool) -> None:
        super().__init__()
        weight = layer.weight.detach()
        self.sparse_small, self.sparse_large = sparse_small, sparse_large
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "CSR support is in beta"
            csr = weight.to_sparse_csr()
            # int32 indices: MKL's kernels take them as they are (int64 ones are converted on
            # every call), and they halve the index traffic (measured 0.42x vs 0.64x of dense).
            self.csr = torch.sparse_csr_tensor(
                csr.crow_indices().int(), csr.col_indices().int(), csr.values(), csr.shape
            )
        # The dense copy is only kept when a regime uses it.
        self.dense = weight.clone() if not (sparse_small and sparse_large) else None
        self.bias = layer.bias.detach().clone() if layer.bias is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        small = x.shape[0] <= SMALL_BATCH
        if not (self.sparse_small if small else self.sparse_large):
            assert self.dense is not None, "a dense regime keeps its dense weight"
            return F.linear(x, self.dense, self.bias)
        if x.shape[0] == 1:
            bias = self.bias if self.bias is not None else x.new_zeros(self.csr.shape[0])
            return torch.addmv(bias, self.csr, x[0]).unsqueeze(0)  # (1, out)
        bias2d = (self.bias if self.bias is not None else x.new_zeros(self.csr.shape[0]))[:, None]
        # A contiguous (in, B) operand: the strided view x.T measured several times slower.
        out: torch.Tensor = torch.sparse.addmm(bias2d, self.csr, x.T.contiguous())  # (out, B)
        return out.T


def _layer_inputs(model: nn.Module, input_shape: tuple[int, ...]) -> dict[str, int]:
    """The input width of each Linear layer (by module name), from one forward pass."""
    widths: dict[str, int] = {}

    def record(name: str) -> Any:
        def hook(module: nn.Module, inputs: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
            widths.setdefault(name, int(inputs[0].shape[-1]))

        return hook

    handles = [
        module.register_forward_hook(record(name))
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear)
    ]
    try:
        with torch.inference_mode():
            # Two samples: a compiled graph's one-sample path calls no Linear module.
            model(torch.zeros(2, *input_shape))
    finally:
        for handle in handles:
            handle.remove()
    return widths


def _time_layer(layer: nn.Linear, width: int, batch: int, budget_s: float) -> dict[str, float]:
    x = torch.randn(batch, width)
    dense = SparseLinear(layer, False, False)
    sparse = SparseLinear(layer, True, True)
    measured = interleaved_timings(
        {"dense": lambda: dense(x), "sparse": lambda: sparse(x)}, budget_s
    )
    return {
        "dense_s": measured["dense"]["cpu_s"],
        "sparse_s": measured["sparse"]["cpu_s"],
        "repeats": measured["dense"]["repeats"],
    }


def _measure(layer: nn.Linear, width: int, budget_s: float) -> dict[str, Any]:
    """One layer's report row: density, timings and the form picked per batch regime."""
    density = float((layer.weight != 0).float().mean())
    row: dict[str, Any] = {"density": density, "shape": list(layer.weight.shape)}
    if density > MAX_DENSITY:
        row.update(batch_1="dense", batch_64="dense", reason=f"density > {MAX_DENSITY}")
        return row
    for batch in (1, 64):
        timing = _time_layer(layer, width, batch, budget_s / 2)
        row[f"batch_{batch}_timing"] = timing
        row[f"batch_{batch}"] = "sparse" if timing["sparse_s"] < timing["dense_s"] else "dense"
    return row


def apply_forms(model: nn.Module, forms: list[dict[str, Any]]) -> nn.Module:
    """A copy of `model` with the Linear layers that `forms` (deployment.json's record) runs
    sparse in some batch regime replaced by `SparseLinear`: the deployed model, rebuilt."""
    chosen = copy.deepcopy(model).eval()
    for row in forms:
        small, large = row["batch_1"] == "sparse", row["batch_64"] == "sparse"
        if not (small or large):
            continue
        layer = chosen.get_submodule(row["layer"])
        assert isinstance(layer, nn.Linear), f"{row['layer']} is a Linear layer"
        parent_name, _, child = row["layer"].rpartition(".")
        setattr(chosen.get_submodule(parent_name), child, SparseLinear(layer, small, large))
    return chosen


def choose_forms(
    model: nn.Module, input_shape: tuple[int, ...], budget_s: float
) -> tuple[nn.Module, list[dict[str, Any]]]:
    """A copy of `model` with each sparse-enough Linear in its faster form per batch regime,
    and the per-layer report (density, measured times, the form picked at batch 1 and 64)."""
    widths = _layer_inputs(model, input_shape)
    layers = [
        (name, m)
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear) and name in widths
    ]
    per_layer = budget_s / max(1, len(layers))
    report = [{"layer": name, **_measure(m, widths[name], per_layer)} for name, m in layers]
    return apply_forms(model, report), report
