"""Mixed precision for training forward passes: `training.precision` (fp32 | bf16 | auto).

bf16 autocast runs the matrix products of the forward pass (and so of its backward) in
bfloat16 while the weights, the optimiser state and the loss reduction stay float32, so no
loss scaling is needed (bf16 has float32's exponent range). `auto` is bf16 on a CUDA device
that supports it and fp32 elsewhere: on a CPU, even one with bf16 matrix units (AMX), autocast
measured no consistent win over fp32, and slower for most methods (`bench/precision.py`,
`docs/gpu.md`).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Literal

import torch

Precision = Literal["fp32", "bf16"]


def resolve_precision(precision: str, device: torch.device) -> Precision:
    """The precision a job asking for `precision` trains in on `device`."""
    if precision == "auto":
        return "bf16" if _cuda_bf16(device) else "fp32"
    assert precision in ("fp32", "bf16"), f"unknown precision {precision!r}"
    return "bf16" if precision == "bf16" else "fp32"


def _cuda_bf16(device: torch.device) -> bool:
    # The CUDA branch is reached only where torch sees a GPU; on a CPU machine it is False.
    return device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def autocast(precision: str, device: torch.device) -> AbstractContextManager[object]:
    """A context in which forward passes run in the resolved precision on `device`."""
    if resolve_precision(precision, device) == "fp32":
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
