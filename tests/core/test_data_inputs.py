"""Raw pixels normalised per batch: the built-in images are stored as uint8, every batch
taken from them is bit-identical to the same rows of the whole normalised split, and within
2 units in the last place of the whole-array float32 normalisation the loaders did before
(`(x / scale - mean) / std` per channel): rows are `x * a + b`, one multiply-add."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from archsearch.core.data.catalog import find_idx_files
from archsearch.core.data.idx import read_idx
from archsearch.core.data.inputs import Inputs
from archsearch.core.data.loaders import (
    DIGITS_SPLIT_SEED,
    DIGITS_TEST_SIZE,
    Dataset,
    load_dataset,
)
from archsearch.specs import DatasetRef


def whole_array_normalise(x: np.ndarray, scale: float, mean: float, std: float) -> torch.Tensor:
    """The loaders' earlier normalisation, as it was (an independent reference)."""
    values = x.astype(np.float32)
    np.divide(values, np.float32(scale), out=values)
    mean_t = torch.tensor((mean,)).view(1, -1, 1, 1)
    std_t = torch.tensor((std,)).view(1, -1, 1, 1)
    return torch.from_numpy(values).sub_(mean_t).div_(std_t)


# Two units in the last place of a float32 in [2, 4): every normalised MNIST or digits value
# lies below 2.9 ((1 - 0.1307) / 0.3081 at most).
TWO_ULPS = 2 * 2.0**-22


def multiply_add(x: np.ndarray, scale: float, mean: float, std: float) -> torch.Tensor:
    """x * a + b in float32, a = 1 / (scale * std) and b = -mean / std from the float32
    statistics in float64, rounded once: the formula `Inputs` applies, computed by numpy."""
    mean64, std64 = float(np.float32(mean)), float(np.float32(std))
    factor, offset = np.float32(1.0 / (scale * std64)), np.float32(-mean64 / std64)
    return torch.from_numpy(x.astype(np.float32) * factor + offset)


def digits_reference() -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x_tr, x_te, _, _ = train_test_split(
        digits.images.reshape(-1, 1, 8, 8),
        digits.target,
        test_size=DIGITS_TEST_SIZE,
        random_state=DIGITS_SPLIT_SEED,
        stratify=digits.target,
    )
    return (
        whole_array_normalise(x_tr, 16.0, 0.3054, 0.3761),
        whole_array_normalise(x_te, 16.0, 0.3054, 0.3761),
    )


def mnist_reference(data_dirs: tuple[Path, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    files = find_idx_files("mnist", data_dirs)
    assert files is not None
    return (
        whole_array_normalise(read_idx(files["train_images"])[:, None], 255.0, 0.1307, 0.3081),
        whole_array_normalise(read_idx(files["test_images"])[:, None], 255.0, 0.1307, 0.3081),
    )


def assert_batches_equal(inputs: Inputs, reference: torch.Tensor) -> None:
    assert inputs.stored.dtype == torch.uint8, "built-in images are kept as raw pixels"
    assert inputs.shape == reference.shape and inputs.dtype == torch.float32
    whole = inputs.normalised()
    assert torch.allclose(whole, reference, rtol=0.0, atol=TWO_ULPS)
    assert not torch.equal(whole, reference), "a multiply-add, not the three-step formula"
    generator = torch.Generator().manual_seed(0)
    for index in torch.randperm(len(reference), generator=generator).split(128)[:20]:
        assert torch.equal(inputs[index], whole[index])  # bit-identical, not close
    assert torch.equal(inputs[5:300], whole[5:300])
    assert torch.equal(inputs[len(reference) - 1], whole[-1])  # one sample (C, H, W)


def test_digits_batches_equal_the_whole_array_normalisation() -> None:
    data = load_dataset(DatasetRef(name="digits"), ())
    x_train, x_test = digits_reference()
    assert_batches_equal(data.x_train, x_train)
    assert_batches_equal(data.x_test, x_test)


def test_mnist_batches_equal_the_whole_array_normalisation(
    data_dirs: tuple[Path, ...],
) -> None:
    data = load_dataset(DatasetRef(name="mnist"), data_dirs)
    x_train, x_test = mnist_reference(data_dirs)
    assert_batches_equal(data.x_train, x_train)
    assert_batches_equal(data.x_test, x_test)


def test_subsets_and_repeats_stay_raw_and_equal_the_rows() -> None:
    data = load_dataset(DatasetRef(name="digits"), ())
    full = data.x_train.normalised()
    index = torch.tensor([7, 3, 1000, 3])
    part = data.x_train.subset(index)
    assert part.stored.dtype == torch.uint8 and torch.equal(part[:], full[index])
    few = load_dataset(DatasetRef(name="digits", samples_per_class=2), ())
    tiled = few.x_train.repeat(3)
    assert len(tiled) == 60 and torch.equal(tiled[40:60], few.x_train[0:20])


def test_a_float_tensor_is_kept_as_given() -> None:
    x = torch.randn(10, 1, 4, 4)
    inputs = Inputs.from_tensor(x)
    assert inputs.stored is x and inputs[2:5].data_ptr() == x[2:5].data_ptr()  # no copy
    data = Dataset(load_dataset(DatasetRef(name="digits"), ()).info, x, torch.zeros(10), x, x)
    assert isinstance(data.x_train, Inputs) and data.input_shape == (1, 4, 4)


def test_whole_split_uses_behave_as_the_normalised_tensor() -> None:
    # Tests and notebooks pass a whole split to torch (`model(data.x_test)`); the engine
    # itself takes rows.
    data = load_dataset(DatasetRef(name="digits"), ())
    full = data.x_test.normalised()
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
    assert torch.equal(model(data.x_test), model(full))
    assert torch.equal(data.x_test, full) and data.x_test.mean().item() == full.mean().item()
    with pytest.raises(TypeError, match="indexed by sample"):
        data.x_test[:, 0]


def test_rows_are_float32_whatever_is_stored_or_the_default_dtype() -> None:
    pixels = torch.arange(48, dtype=torch.uint8).view(3, 1, 4, 4)
    reference = multiply_add(pixels.numpy(), 16.0, 0.3, 0.4)
    old_formula = whole_array_normalise(pixels.numpy(), 16.0, 0.3, 0.4)
    assert torch.allclose(reference, old_formula, rtol=0.0, atol=TWO_ULPS)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        for stored in (pixels, pixels.to(torch.float64)):
            inputs = Inputs(stored, 16.0, (0.3,), (0.4,))
            assert inputs[torch.tensor([2, 0])].dtype == torch.float32
            assert torch.equal(inputs[torch.tensor([2, 0])], reference[[2, 0]])
            assert torch.equal(inputs[1], reference[1])  # one sample: (C, H, W)
    finally:
        torch.set_default_dtype(previous)
    assert torch.equal(pixels, torch.arange(48, dtype=torch.uint8).view(3, 1, 4, 4))
