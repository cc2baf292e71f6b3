"""`training.precision`: bf16 autocast in the training loops (`core/precision.py`), checked
on CPU (bf16 autocast runs there too), and `auto`'s choice per device."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import Dataset, load_dataset
from archsearch.core.methods import get_method
from archsearch.core.models import Architecture, create_model
from archsearch.core.precision import resolve_precision
from archsearch.core.training import TrainHooks, cross_entropy, fit, seed_everything
from archsearch.specs import DatasetRef, MLPConfig, TrainingSpec, parse_job_spec

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def digits() -> Dataset:
    return load_dataset(DatasetRef(name="digits"), ())


def test_auto_is_fp32_on_cpu_and_an_explicit_choice_is_kept() -> None:
    assert resolve_precision("auto", CPU) == "fp32"
    assert resolve_precision("bf16", CPU) == "bf16"
    assert resolve_precision("fp32", CPU) == "fp32"
    assert TrainingSpec().precision == "auto"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_auto_is_bf16_on_a_cuda_device_that_supports_it() -> None:
    expected = "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    assert resolve_precision("auto", torch.device("cuda")) == expected


@pytest.mark.parametrize(
    ("precision", "dtype"), [("fp32", torch.float32), ("bf16", torch.bfloat16)]
)
def test_the_forward_pass_runs_in_the_precision_asked(
    digits: Dataset, precision: str, dtype: torch.dtype
) -> None:
    seen: set[torch.dtype] = set()

    def loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        seen.add(model(x).dtype)
        return cross_entropy(model, x, y)

    seed_everything(0)
    model = create_model(Architecture(MLPConfig(hidden=(16,)), digits.input_shape, 10))
    spec = TrainingSpec(epochs=1, batch_size=256, precision=precision)  # type: ignore[arg-type]
    fit(model, digits, spec, InMemoryContext(), hooks=TrainHooks(loss=loss))
    assert seen == {dtype}
    assert all(p.dtype == torch.float32 for p in model.parameters()), "weights stay float32"


def _default_train_accuracy(digits: Dataset, precision: str) -> float:
    spec = parse_job_spec(
        {"method": "train", "dataset": {"name": "digits"}, "training": {"precision": precision}}
    )
    seed_everything(0)
    return get_method("train")(spec, digits, InMemoryContext()).metrics["test_accuracy"]


def test_bf16_learns_digits_as_fp32_does(digits: Dataset) -> None:
    fp32 = _default_train_accuracy(digits, "fp32")
    bf16 = _default_train_accuracy(digits, "bf16")
    assert fp32 > 0.9
    assert abs(bf16 - fp32) <= 0.01, f"bf16 {bf16:.4f} against fp32 {fp32:.4f}"


def _dtypes_in_grow(digits: Dataset, precision: str) -> set[torch.dtype]:
    """Output dtypes of every Linear layer's forward pass during a small grow job (grow
    trains in its own loop, `core/growth/loop.py`)."""
    seen: set[torch.dtype] = set()

    def record(module: nn.Module, inputs: object, output: torch.Tensor) -> None:
        if isinstance(module, nn.Linear):
            seen.add(output.dtype)

    spec = parse_job_spec(
        {
            "method": "grow",
            "dataset": {"name": "digits"},
            "training": {"epochs": 1, "precision": precision},
            "growth": {"max_growth_steps": 1, "steps_between_growth": 5, "baseline": False},
        }
    )
    handle = torch.nn.modules.module.register_module_forward_hook(record)
    try:
        result = get_method("grow")(spec, digits, InMemoryContext())
    finally:
        handle.remove()
    assert result.metrics["test_accuracy"] > 0.2  # learns (chance: 0.1) in one short epoch
    return seen


def test_grow_trains_in_bf16_when_asked(digits: Dataset) -> None:
    assert torch.bfloat16 in _dtypes_in_grow(digits, "bf16")
    assert torch.bfloat16 not in _dtypes_in_grow(digits, "fp32")
