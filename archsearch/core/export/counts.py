"""Parameter and multiply-add counts, as the papers count them.

FLOPs are counted as multiply-adds of the linear and convolutional layers, and a masked
weight that is zero costs nothing.
"""

from __future__ import annotations

import torch
from torch import nn


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
