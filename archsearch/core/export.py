"""Everything a user downloads: safetensors weights, architectures, counts and plots.

No pickle anywhere: weights are safetensors, structure is JSON, plots are PNG.
Sparse weights (issue 14): a weight of two or more dimensions, viewed as a matrix (rows = its
first dimension), may be stored as CSR: `NAME.values`, `NAME.col_indices`, `NAME.crow_indices`
(the layout of `torch.Tensor.to_sparse_csr`), indices in the smallest integer type that holds
them (int16 below 32,768 columns), and only when that is smaller than the dense tensor. The
file's metadata names the format and each sparse tensor's dense shape, so plain safetensors +
torch rebuild every tensor (the README shows how); `load_model` reads either kind of file.

Parameter and multiply-add counts follow the papers: FLOPs are counted as multiply-adds of
the linear and convolutional layers, and a masked weight that is zero costs nothing.
"""

from __future__ import annotations

import io
import json
import warnings
from typing import Any

import torch
from safetensors.torch import load as safetensors_load
from safetensors.torch import save as safetensors_save
from torch import nn

from archsearch.core.context import RunContext
from archsearch.core.models.registry import Architecture


def tensors_to_bytes(
    tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None
) -> bytes:
    # safetensors refuses shared or non-contiguous storage; every tensor gets its own copy.
    owned = {name: t.detach().cpu().contiguous().clone() for name, t in tensors.items()}
    return safetensors_save(owned, metadata=metadata)


def tensors_from_bytes(data: bytes) -> dict[str, torch.Tensor]:
    return safetensors_load(data)


def model_to_bytes(model: nn.Module) -> bytes:
    return tensors_to_bytes(model.state_dict())


def load_model(architecture_json: str | bytes, weights: bytes) -> nn.Module:
    """Rebuild a model from `architecture.json` and `model.safetensors` (or the sparse file)."""
    from archsearch.core.models.registry import create_model

    model = create_model(Architecture.from_json(architecture_json))
    # `model-sparse.safetensors` (CSR weights) loads as well as a dense file.
    model.load_state_dict(load_state(weights))
    return model.eval()


def save_model(
    ctx: RunContext, model: nn.Module, architecture: Architecture, suffix: str = ""
) -> None:
    """Write `model{suffix}.safetensors` and `architecture{suffix}.json`."""
    ctx.save_artifact(
        f"architecture{suffix}.json", architecture.to_json().encode(), "application/json"
    )
    ctx.save_artifact(
        f"model{suffix}.safetensors", model_to_bytes(model), "application/octet-stream"
    )


FORMAT = "archsearch-csr-v1"
PARTS = ("values", "col_indices", "crow_indices")
State = dict[str, torch.Tensor]


def _index_dtype(limit: int) -> torch.dtype:
    return torch.int16 if limit < 2**15 else torch.int32 if limit < 2**31 else torch.int64


def _csr_parts(tensor: torch.Tensor) -> dict[str, torch.Tensor]:
    matrix = tensor.detach().cpu().reshape(tensor.shape[0], -1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "CSR support is in beta": the layout is stable
        csr = matrix.to_sparse_csr()
    return {
        "values": csr.values(),
        "col_indices": csr.col_indices().to(_index_dtype(matrix.shape[1])),
        "crow_indices": csr.crow_indices().to(_index_dtype(int(csr.values().numel()) + 1)),
    }


def _nbytes(tensors: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())


def sparse_state_bytes(state: State) -> bytes:
    """The state dict as safetensors, each tensor in CSR form when that is smaller."""
    out: State = {}
    shapes: dict[str, list[int]] = {}
    for name, tensor in state.items():
        if tensor.dim() >= 2 and tensor.is_floating_point():
            parts = _csr_parts(tensor)
            if _nbytes(parts) < tensor.numel() * tensor.element_size():
                out.update({f"{name}.{part}": parts[part] for part in PARTS})
                shapes[name] = list(tensor.shape)
                continue
        out[name] = tensor
    metadata = {"format": FORMAT, "sparse": json.dumps(shapes)}
    return tensors_to_bytes(out, metadata=metadata)


def is_sparse_file(data: bytes) -> bool:
    return _metadata(data).get("format") == FORMAT


def _metadata(data: bytes) -> dict[str, str]:
    # safetensors: 8-byte little-endian header length, then the JSON header.
    length = int.from_bytes(data[:8], "little")
    meta: dict[str, str] = json.loads(data[8 : 8 + length]).get("__metadata__", {}) or {}
    return meta


def _dense_tensor(parts: dict[str, torch.Tensor], shape: list[int]) -> torch.Tensor:
    """The dense tensor of one stored CSR triple."""
    rows = shape[0]
    cols = 1
    for dim in shape[1:]:
        cols *= dim
    matrix = torch.sparse_csr_tensor(
        parts["crow_indices"].long(),
        parts["col_indices"].long(),
        parts["values"],
        (rows, cols),
        check_invariants=True,  # a damaged file fails here, not with a crash later
    )
    return matrix.to_dense().reshape(shape)


def load_state(data: bytes) -> State:
    """The dense state dict of a weights file, plain or written by `sparse_state_bytes`."""
    tensors = tensors_from_bytes(data)
    shapes: dict[str, list[int]] = json.loads(_metadata(data).get("sparse", "{}"))
    csr_parts = {f"{name}.{part}" for name in shapes for part in PARTS}
    state = {name: t for name, t in tensors.items() if name not in csr_parts}
    for name, shape in shapes.items():
        state[name] = _dense_tensor({part: tensors[f"{name}.{part}"] for part in PARTS}, shape)
    return state


def json_bytes(payload: Any) -> bytes:
    return json.dumps(payload, indent=2, sort_keys=True, default=float).encode()


def count_parameters(model: nn.Module, nonzero_only: bool = False) -> int:
    if nonzero_only:
        return int(sum((p != 0).sum().item() for p in model.parameters()))
    return int(sum(p.numel() for p in model.parameters()))


def count_macs(model: nn.Module, input_shape: tuple[int, ...], nonzero_only: bool = True) -> int:
    """Multiply-adds of one forward pass on one sample, over Linear and Conv layers.

    With `nonzero_only`, a zero weight costs nothing (a masked model's true cost after
    compaction into sparse kernels); otherwise the dense cost is counted.
    """
    total = 0

    def weight_count(module: nn.Module) -> int:
        weight = module.weight
        assert isinstance(weight, torch.Tensor), "linear and conv layers have a weight"
        return int((weight != 0).sum().item()) if nonzero_only else weight.numel()

    def on_linear(
        module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor
    ) -> None:
        nonlocal total
        rows = output.numel() // output.shape[-1]  # positions the layer is applied at
        total += rows * weight_count(module)

    def on_conv(module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        nonlocal total
        # Each output position applies every (out, in/groups, kh, kw) weight once.
        total += output.shape[0] * output.shape[2] * output.shape[3] * weight_count(module)

    handles = []
    for module in model.modules():
        if isinstance(module, nn.Linear):
            handles.append(module.register_forward_hook(on_linear))
        elif isinstance(module, nn.Conv2d):
            handles.append(module.register_forward_hook(on_conv))
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        with torch.no_grad():
            model(torch.zeros(1, *input_shape, device=device))
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    return total


# Margins of a `new_figure` in inches: room for tick labels, axis labels, axis titles and a
# suptitle. Fixed margins replace `bbox_inches="tight"`, which lays every figure out twice
# (issue 16, measured for curves + mask-logits: 0.28-0.31 s CPU instead of 0.44 s); the
# alternatives save little (`tight_layout` 0.42 s, constrained layout 0.43 s).
MARGINS_IN = {"left": 1.0, "right": 0.2, "bottom": 0.55, "top": 0.65}
GAP_IN = 1.05  # between two panels: the right one's tick labels and y label


def figure_png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    # Axes added after `new_figure` (a colorbar) were not planned for by its fixed margins.
    planned = getattr(fig, "archsearch_axes", None) == len(fig.axes)
    fig.savefig(buffer, format="png", dpi=110, bbox_inches=None if planned else "tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buffer.getvalue()


def new_figure(ncols: int = 1, width: float = 5.0, height: float = 3.6) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")  # headless: workers have no display
    import matplotlib.pyplot as plt

    total = width * ncols
    fig: Any  # carries `archsearch_axes`, the axes its margins were planned for
    fig, axes = plt.subplots(1, ncols, figsize=(total, height), squeeze=False)
    panel = (total - MARGINS_IN["left"] - MARGINS_IN["right"] - GAP_IN * (ncols - 1)) / ncols
    fig.subplots_adjust(
        left=MARGINS_IN["left"] / total,
        right=1 - MARGINS_IN["right"] / total,
        bottom=MARGINS_IN["bottom"] / height,
        top=1 - MARGINS_IN["top"] / height,
        wspace=GAP_IN / panel,
    )
    fig.archsearch_axes = ncols
    return fig, axes


def curves_png(history: list[dict[str, float]], title: str = "") -> bytes:
    """Loss and accuracy per epoch: `curves.png`."""
    fig, axes = new_figure(ncols=2)
    epochs = [row["epoch"] for row in history]
    loss_ax, acc_ax = axes[0]
    loss_ax.plot(epochs, [r["train_loss"] for r in history], marker="o", label="train")
    loss_ax.plot(epochs, [r["test_loss"] for r in history], marker="o", label="test")
    loss_ax.set(xlabel="epoch", ylabel="cross-entropy", title="loss")
    loss_ax.legend()
    acc_ax.plot(epochs, [r["test_accuracy"] for r in history], marker="o", color="tab:green")
    acc_ax.set(xlabel="epoch", ylabel="accuracy", title="test accuracy")
    if title:
        fig.suptitle(title)
    return figure_png(fig)
