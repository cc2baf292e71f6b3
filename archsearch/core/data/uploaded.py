"""Uploaded datasets as the engine's `Dataset`: validated numpy arrays plus the statistics
stored with them at upload time (per-channel mean and std of the training split).

No file or database access here: the service layer reads the stored arrays and passes them in.
Images (N, C, H, W) are normalised per channel, feature tables (N, F) per feature, exactly as
the built-in datasets are normalised with their catalogued mean and std.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from archsearch.core.data.catalog import DatasetInfo
from archsearch.core.data.inputs import Inputs
from archsearch.core.data.loaders import Dataset, training_subset
from archsearch.specs.common import DatasetRef

NORMALISE_ROWS = 4096  # samples normalised at a time


def uploaded_info(
    dataset_id: str,
    name: str,
    input_shape: Sequence[int],
    num_classes: int,
    train_size: int,
    test_size: int,
    mean: Sequence[float],
    std: Sequence[float],
) -> DatasetInfo:
    """The catalogue entry of an upload; `name` is its id so it names the same data everywhere."""
    channels = input_shape[0]
    assert len(mean) == len(std) == channels, (
        f"need {channels} means and stds, got {len(mean)}, {len(std)}"
    )
    assert all(s > 0 for s in std), "stored stds are positive (constant channels are stored as 1)"
    return DatasetInfo(
        name=dataset_id,
        description=name,
        input_shape=tuple(int(d) for d in input_shape),
        num_classes=int(num_classes),
        train_size=int(train_size),
        test_size=int(test_size),
        mean=tuple(float(m) for m in mean),
        std=tuple(float(s) for s in std),
    )


def normalise(x: np.ndarray, info: DatasetInfo) -> torch.Tensor:
    """(N, C, H, W) or (N, F) -> float32 tensor, centred and scaled per channel / feature."""
    assert tuple(x.shape[1:]) == info.input_shape, (
        f"arrays {x.shape[1:]} differ from info {info.input_shape}"
    )
    view = (1, -1, 1, 1) if x.ndim == 4 else (1, -1)
    mean = torch.tensor(info.mean, dtype=torch.float64).view(view)
    std = torch.tensor(info.std, dtype=torch.float64).view(view)
    out = torch.empty(x.shape, dtype=torch.float32)
    # float64 for the subtraction: raw pixel values (0..255) minus a mean lose digits in float32.
    # In row blocks: a float64 copy of the whole array would be twice the result's size.
    for start in range(0, len(x), NORMALISE_ROWS):
        part = torch.from_numpy(np.asarray(x[start : start + NORMALISE_ROWS])).to(torch.float64)
        out[start : start + NORMALISE_ROWS] = ((part - mean) / std).to(torch.float32)
    return out


def uploaded_dataset(
    info: DatasetInfo, arrays: dict[str, np.ndarray], ref: DatasetRef, seed: int = 0
) -> Dataset:
    """The engine's Dataset from stored arrays x, y, x_test, y_test; `ref` may ask a subset."""
    y_train = torch.from_numpy(arrays["y"].astype(np.int64))  # (N,)
    y_test = torch.from_numpy(arrays["y_test"].astype(np.int64))
    assert len(y_train) == info.train_size and len(y_test) == info.test_size, (
        "arrays differ from the stored sizes"
    )
    # Stored normalised (float32), unlike the built-in images: an upload's values may be any
    # numbers, normalised in float64 (`normalise`), which a per-batch step would redo.
    x_train, x_test = normalise(arrays["x"], info), normalise(arrays["x_test"], info)
    data = Dataset(info, Inputs.from_tensor(x_train), y_train, Inputs.from_tensor(x_test), y_test)
    return training_subset(data, ref, seed)
