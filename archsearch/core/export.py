"""Everything a user downloads: safetensors weights, architectures, counts and plots.

No pickle anywhere: weights are safetensors, structure is JSON, plots are PNG.
Parameter and multiply-add counts follow the papers: FLOPs are counted as multiply-adds of
the linear and convolutional layers, and a masked weight that is zero costs nothing.
"""

from __future__ import annotations

import io
import json
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
    """Rebuild a model from `architecture.json` and `model.safetensors` alone."""
    from archsearch.core.models.registry import create_model

    model = create_model(Architecture.from_json(architecture_json))
    model.load_state_dict(tensors_from_bytes(weights))
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


def figure_png(fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buffer.getvalue()


def new_figure(ncols: int = 1, width: float = 5.0, height: float = 3.6) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")  # headless: workers have no display
    import matplotlib.pyplot as plt

    return plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)


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
