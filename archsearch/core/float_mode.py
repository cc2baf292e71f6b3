"""Subnormal floats flushed to zero while a job trains.

"Differentiable Architecture Pruning for Transfer Learning", section 3: the forward pass
multiplies each weight by the mask sigmoid(t_hard * w). While the masks are soft, the
sigmoids of negative logits and the products `weight * mask` fall below float32's smallest
normal number, and the CPU's matrix kernels slow down sharply on such operands. The flag
that flushes them is per thread (x86 MXCSR, ARM FPCR), which is why it is set per run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


def flush_denormals() -> bool:
    """Flush subnormal floats to zero in the calling thread (and the threads it starts
    afterwards, which inherit its floating-point state); False where the CPU cannot.

    While prune masks are soft, `sigmoid(t_hard * w)` of negative logits and the products
    `weight * mask` fall below float32's smallest normal number, and x86 matrix kernels slow
    down sharply on such operands: a default prune job cost 5.4x plain dense training. The
    flag is per thread (x86 MXCSR, ARM FPCR), so every thread that trains sets it, and `fit`
    sets it again for its own run (`subnormals_flushed`): onnxruntime clears it in the thread
    that makes the process's first session, so after the first job's deployment check every
    later prune job of that worker ran on subnormals (`bench/engine.py` here: 6.7x plain
    dense training, 1.8x with the flag set again).
    """
    return bool(torch.set_flush_denormal(True))


def flushes_subnormals() -> bool:
    """Whether this thread flushes subnormal floats to zero (`torch.set_flush_denormal`, a
    per-thread flag torch can set but not read): a subnormal times one comes out zero."""
    return bool((torch.tensor([1e-40]) * 1.0).item() == 0.0)


@contextmanager
def subnormals_flushed() -> Iterator[None]:
    """Subnormals flushed for the block, and the thread's own mode put back after it: a
    training flushes wherever it runs, and a caller's thread (a notebook, a test process, a
    library that needs IEEE subnormals) keeps the floating-point mode it had."""
    flushing = flushes_subnormals()
    flush_denormals()
    try:
        yield
    finally:
        torch.set_flush_denormal(flushing)
