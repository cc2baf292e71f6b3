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
    counter = _MacCounter(nonzero_only)
    handles = [
        module.register_forward_hook(counter.hook)
        for module in model.modules()
        if isinstance(module, nn.Linear | nn.Conv2d)
    ]
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
    return counter.total


class _MacCounter:
    """Forward hooks adding each Linear / Conv2d call's multiply-adds to `total`."""

    def __init__(self, nonzero_only: bool) -> None:
        self.nonzero_only = nonzero_only
        self.total = 0

    def weight_count(self, module: nn.Module) -> int:
        weight = module.weight
        assert isinstance(weight, torch.Tensor), "linear and conv layers have a weight"
        return int((weight != 0).sum().item()) if self.nonzero_only else weight.numel()

    def hook(
        self, module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor
    ) -> None:
        if isinstance(module, nn.Conv2d):
            # Each output position applies every (out, in/groups, kh, kw) weight once.
            positions = output.shape[0] * output.shape[2] * output.shape[3]
        else:
            positions = output.numel() // output.shape[-1]  # where the layer is applied
        self.total += positions * self.weight_count(module)
