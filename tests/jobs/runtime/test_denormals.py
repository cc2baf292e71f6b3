"""A thread that runs jobs flushes subnormal floats to zero: while prune masks are soft,
`weight * sigmoid(t_hard * w)` of negative logits falls below float32's smallest normal
number, and x86 matrix kernels slow down sharply on such operands (a default prune job cost
5x plain training). The flag is per thread, so the test trains in a new thread, as the
embedded runner does, with one and two intra-op threads. Each training sets it again:
onnxruntime's first session in a process (a job's deployment check) clears it in its thread."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import torch

from archsearch.core.context import InMemoryContext
from archsearch.core.data.catalog import DatasetInfo
from archsearch.core.data.inputs import Inputs
from archsearch.core.data.loaders import Dataset
from archsearch.core.methods.prune import mask_schedule
from archsearch.core.models import Architecture
from archsearch.core.nn.masked import MaskedLinear
from archsearch.core.pruning.build import build_masked_model, weight_params
from archsearch.core.pruning.trainer import MaskTrainer
from archsearch.core.training import fit, seed_everything
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.device import prepare_training_thread
from archsearch.jobs.runtime.warmup import thaw_heap, warm_up
from archsearch.specs import parse_job_spec
from archsearch.specs.prune import PruneJob


def subnormal_count(tensor: torch.Tensor) -> int:
    """Subnormal float32 entries, read from the bits (a comparison would see them as zero
    once the thread treats subnormal inputs as zero)."""
    bits = tensor.detach().contiguous().view(torch.int32)
    return int((((bits & 0x7F800000) == 0) & ((bits & 0x007FFFFF) != 0)).sum())


def mnist_shaped(n: int = 512) -> Dataset:
    info = DatasetInfo("mnist-shaped", "random images", (1, 28, 28), 10, n, n, (0.0,), (1.0,))
    generator = torch.Generator().manual_seed(0)
    inputs = Inputs.from_tensor(torch.randn(n, 1, 28, 28, generator=generator))
    labels = torch.arange(n) % 10
    return Dataset(info, inputs, labels, inputs, labels)


def prune_steps_subnormals(unflushed: bool = False) -> int:
    """The default MNIST prune job's training steps (its model, masks, optimisers and
    penalty), from logits spread as a long job leaves them (down to -1.2: sigmoid(100 w)
    reaches 1e-52); the most subnormal masked weights seen after any step. `unflushed`:
    the flag cleared after each step, under `fit`'s feet (the control)."""
    spec = parse_job_spec({"method": "prune", "dataset": {"name": "mnist"}})
    assert isinstance(spec, PruneJob)
    spec = spec.model_copy(update={"training": spec.training.model_copy(update={"epochs": 1})})
    data = mnist_shaped()
    seed_everything(0)
    model = build_masked_model(spec, Architecture(spec.model, data.input_shape, 10))
    layers = [m for m in model.modules() if isinstance(m, MaskedLinear)]
    with torch.no_grad():
        for layer in layers:
            spread = torch.linspace(-1.2, spec.logit_init, layer.mask_logits.numel())
            layer.mask_logits.copy_(spread.view_as(layer.mask_logits))
    trainer = MaskTrainer(model, mask_schedule(spec, data))
    hooks, counts = trainer.hooks(), []
    inner = hooks.after_step
    assert inner is not None

    def after_step(step: int) -> dict[str, float] | None:
        if unflushed:
            torch.set_flush_denormal(False)
        with torch.no_grad():
            counts.append(sum(subnormal_count(layer.masked_weight()) for layer in layers))
        return inner(step)

    hooks.after_step = after_step
    fit(model, data, spec.training, InMemoryContext(), params=weight_params(model), hooks=hooks)
    assert counts, "the job trained"
    return max(counts)


def in_new_thread(prepare: Callable[[], object], unflushed: bool = False) -> int:
    result: list[int] = []

    def work() -> None:
        prepare()
        result.append(prune_steps_subnormals(unflushed))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert result, "the training thread failed"
    return result[0]


@pytest.mark.parametrize("threads", [1, 2])
def test_a_prepared_training_thread_has_no_subnormal_masked_weights(threads: int) -> None:
    before = torch.get_num_threads()
    try:
        assert in_new_thread(lambda: prepare_training_thread(Settings(torch_threads=threads))) == 0
        # The same steps with the flag cleared do produce them: the setting of this test
        # is one where the flush matters.
        assert in_new_thread(lambda: torch.set_num_threads(threads), unflushed=True) > 1000
    finally:
        torch.set_num_threads(before)


def prepared_then_cleared() -> None:
    """A prepared thread whose flag something cleared before the job trains: onnxruntime
    does, when the first session of the process is made in it (a job's deployment check),
    so every later job of that pool process trained on subnormals. Cleared by hand here:
    whether this process already made a session depends on the tests run before."""
    prepare_training_thread(Settings(torch_threads=1))
    torch.set_flush_denormal(False)


def test_training_flushes_again_in_a_thread_whose_flag_was_cleared() -> None:
    before = torch.get_num_threads()
    try:
        assert in_new_thread(prepared_then_cleared) == 0
    finally:
        torch.set_num_threads(before)


def test_a_warmed_up_training_thread_still_flushes_subnormals() -> None:
    """A pool process prepares its thread, then warms up with a whole train job, whose
    deployment checks the ONNX export with onnxruntime: creating that session turned the
    thread's flush-to-zero off, and every later prune job ran at subnormal speed."""
    before = torch.get_num_threads()

    def prepare_and_warm_up() -> None:
        prepare_training_thread(Settings(torch_threads=1))
        warm_up(torch.device("cpu"))

    try:
        assert in_new_thread(prepare_and_warm_up) == 0
    finally:
        torch.set_num_threads(before)
        thaw_heap()  # warm-up froze this test process's heap, as a worker's
