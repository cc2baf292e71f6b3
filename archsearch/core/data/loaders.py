"""Load a dataset as normalised float tensors, with optional seeded subsets.

Images come as (N, C, H, W) float32, normalised with the dataset's training-split mean and
std; labels as int64. Models that want flat vectors flatten themselves. The built-in images
are kept as raw uint8 pixels and normalised per batch, when rows are taken (`Inputs`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from archsearch.core.data.catalog import DatasetInfo, find_idx_files, require_available
from archsearch.core.data.idx import read_idx
from archsearch.core.data.inputs import Inputs
from archsearch.specs.common import DatasetRef

DIGITS_TEST_SIZE = 360
DIGITS_SPLIT_SEED = 0  # fixed, so every job on `digits` sees the same test split
VALIDATION_SPLIT_SEED = 0  # fixed, so every job holds the same validation rows apart
# Change with `raw_inputs` or `Inputs`: cached copies of older versions are not used.
NORMALISATION = "v2"  # v2: raw uint8 pixels, normalised per batch


@dataclass(frozen=True)
class Dataset:
    """One dataset on the CPU: inputs that index as normalised float32, int64 labels.

    A float tensor given for `x_train` / `x_test` is taken as already normalised (tests,
    in-memory data, `replace(data, x_test=data.x_test[:100])`).
    """

    info: DatasetInfo
    x_train: Inputs  # (N, C, H, W) or (N, F)
    y_train: torch.Tensor  # (N,)
    x_test: Inputs
    y_test: torch.Tensor
    # Rows held apart from the training set (`hold_out_validation`), measured every epoch.
    x_val: Inputs | None = None
    y_val: torch.Tensor | None = None

    def __post_init__(self) -> None:
        for name in ("x_train", "x_test", "x_val"):
            value = getattr(self, name)
            if isinstance(value, torch.Tensor):
                object.__setattr__(self, name, Inputs.from_tensor(value))

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])

    @property
    def num_classes(self) -> int:
        return self.info.num_classes


def hold_out_validation(data: Dataset, fraction: float) -> Dataset:
    """`data` with `fraction` of its training rows held apart as a validation split. The
    rows are drawn with a fixed seed, so every job on the same data holds the same ones
    apart: a study's pruner compares its trials on rows none of them trained on, and on
    none that its reports are measured on (the test split)."""
    n = len(data.y_train)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(VALIDATION_SPLIT_SEED))
    held = min(n - 1, max(1, round(n * fraction)))
    val, train = order[:held].sort().values, order[held:].sort().values
    return replace(
        data,
        x_train=data.x_train.subset(train),
        y_train=data.y_train[train],
        x_val=data.x_train.subset(val),
        y_val=data.y_train[val],
    )


def raw_inputs(pixels: np.ndarray, info: DatasetInfo) -> Inputs:
    """Raw integer pixels (N, C, H, W), normalised with `info` when rows are taken."""
    stored = np.require(pixels, np.uint8, ["C", "W"])  # uint8 IDX pixels: no copy
    if pixels.dtype != np.uint8:  # digits: float64 holding integers
        assert np.array_equal(stored, pixels), f"{info.name}: raw pixels are integers 0..255"
    return Inputs(torch.from_numpy(stored), info.scale, info.mean, info.std)


def _load_digits(info: DatasetInfo) -> Dataset:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = digits.images.reshape(-1, 1, 8, 8)  # float64 holding the integers 0..16
    x_tr, x_te, y_tr, y_te = train_test_split(
        images,
        digits.target,
        test_size=DIGITS_TEST_SIZE,
        random_state=DIGITS_SPLIT_SEED,
        stratify=digits.target,
    )
    return Dataset(
        info=info,
        x_train=raw_inputs(x_tr, info),
        y_train=torch.from_numpy(y_tr.astype(np.int64)),
        x_test=raw_inputs(x_te, info),
        y_test=torch.from_numpy(y_te.astype(np.int64)),
    )


def _load_idx_dataset(info: DatasetInfo, data_dirs: tuple[Path, ...]) -> Dataset:
    files = find_idx_files(info.name, data_dirs)
    assert files is not None, "require_available() has checked the files exist"
    arrays = {key: read_idx(path) for key, path in files.items()}
    return Dataset(
        info=info,
        x_train=raw_inputs(arrays["train_images"][:, None], info),
        y_train=torch.from_numpy(arrays["train_labels"].astype(np.int64)),
        x_test=raw_inputs(arrays["test_images"][:, None], info),
        y_test=torch.from_numpy(arrays["test_labels"].astype(np.int64)),
    )


def _subset_indices(labels: torch.Tensor, ref: DatasetRef, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(labels), generator=generator)
    if ref.samples_per_class is not None:
        # Few-shot: the first n shuffled samples of every class, in shuffled order.
        shuffled_labels = labels[order]
        keep = torch.zeros(len(labels), dtype=torch.bool)
        for cls in torch.unique(shuffled_labels):
            keep[(shuffled_labels == cls).nonzero().flatten()[: ref.samples_per_class]] = True
        order = order[keep]
    if ref.train_subset is not None:
        order = order[: ref.train_subset]
    return order


def load_dataset(ref: DatasetRef, data_dirs: tuple[Path, ...], seed: int = 0) -> Dataset:
    """Load a built-in dataset by name; `seed` picks the training subset, if one is asked."""
    if ref.name is None:
        raise NotImplementedError("uploaded datasets are resolved by the service layer")
    return training_subset(load_full(ref.name, data_dirs), ref, seed)


def load_full(name: str, data_dirs: tuple[Path, ...]) -> Dataset:
    """Every sample of a built-in dataset, raw pixels (what a cache keeps, before subsets)."""
    info = require_available(name, data_dirs)
    return _load_digits(info) if not info.needs_files else _load_idx_dataset(info, data_dirs)


def dataset_version(name: str, data_dirs: tuple[Path, ...]) -> str:
    """Changes whenever `load_full(name)` could: the source files (path, size, time), the
    statistics, or the code that normalises (`NORMALISATION`). A cache key, not a checksum."""
    info = require_available(name, data_dirs)
    parts = [NORMALISATION, repr((info.mean, info.std, info.input_shape))]
    if info.needs_files:
        files = find_idx_files(name, data_dirs)
        assert files is not None, "require_available() has checked the files exist"
        for key in sorted(files):
            stat = files[key].stat()
            parts.append(f"{files[key].resolve()}:{stat.st_size}:{stat.st_mtime_ns}")
    else:  # the version from the package's metadata: importing sklearn costs 72 MB resident
        sklearn = importlib.metadata.version("scikit-learn")
        parts.append(f"sklearn {sklearn}; split {DIGITS_TEST_SIZE}/{DIGITS_SPLIT_SEED}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def training_subset(data: Dataset, ref: DatasetRef, seed: int = 0) -> Dataset:
    """The training samples `ref` asks for (`train_subset`, `samples_per_class`), seeded."""
    if ref.train_subset is None and ref.samples_per_class is None:
        return data
    keep = _subset_indices(data.y_train, ref, seed)
    return replace(data, x_train=data.x_train.subset(keep), y_train=data.y_train[keep])
