"""Checking an uploaded dataset and computing what jobs need from it.

Every refusal says what is wrong and what is expected. A dataset without a test split gets a
seeded, stratified one (recorded with the dataset). Statistics (samples per split, class
counts, input shape, per-channel mean and std of the training split) are computed here and
stored, so the worker normalises with them instead of recomputing.

Memory: the features are converted to float32 once, in row chunks, into an array
charged to the upload's `MemoryBudget` before it is filled (no float32 copy at all when the
reader already produced float32); NaN/inf checks, the split and the statistics then work on
row chunks of about `ROWS_CHUNK_BYTES`, so validation adds little more than the test split's
copy to what the reader decoded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from archsearch.jobs.domain.datasets.archive import MemoryBudget
from archsearch.jobs.domain.datasets.options import UploadLimits, UploadOptions
from archsearch.jobs.domain.datasets.raw import RawDataset
from archsearch.jobs.domain.errors import InvalidUpload

SHAPES = "(N, features) or (N, C, H, W)"
ROWS_CHUNK_BYTES = 4 << 20


def row_chunks(x: np.ndarray) -> list[slice]:
    """Slices of about ROWS_CHUNK_BYTES of float32 rows each, covering x's first axis."""
    row_bytes = max(1, (x[0].size if len(x) else 1) * 4)
    step = max(1, ROWS_CHUNK_BYTES // row_bytes)
    return [slice(i, min(i + step, len(x))) for i in range(0, len(x), step)]


@dataclass(frozen=True)
class ValidDataset:
    """Checked arrays (x float32, y int64) and their statistics."""

    format: str
    x_train: np.ndarray  # (N, F) or (N, C, H, W)
    y_train: np.ndarray  # (N,)
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    class_names: tuple[str, ...]
    split: dict[str, Any]

    @property
    def kind(self) -> str:
        return "images" if self.x_train.ndim == 4 else "features"

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.x_train.shape[1:])

    def class_counts(self) -> dict[str, list[int]]:
        k = self.num_classes
        return {
            "train": np.bincount(self.y_train, minlength=k).tolist(),
            "test": np.bincount(self.y_test, minlength=k).tolist(),
        }

    def channel_stats(self) -> tuple[list[float], list[float]]:
        """Per-channel (images) or per-feature (tables) mean and std of the training split,
        accumulated in float64 over row chunks (a float64 copy of x would double its size)."""
        axes = (0, 2, 3) if self.x_train.ndim == 4 else (0,)
        total = np.zeros(self.x_train.shape[1], dtype=np.float64)
        squares = np.zeros_like(total)
        for rows in row_chunks(self.x_train):
            chunk = self.x_train[rows].astype(np.float64)
            total += chunk.sum(axis=axes)
            squares += np.square(chunk).sum(axis=axes)
        count = self.x_train.size // self.x_train.shape[1]
        mean = total / count
        std = np.sqrt(np.maximum(squares / count - np.square(mean), 0.0))
        std = np.where(std > 0, std, 1.0)  # a constant channel is centred, not divided by zero
        return mean.tolist(), std.tolist()

    def arrays(self) -> dict[str, np.ndarray]:
        return {"x": self.x_train, "y": self.y_train, "x_test": self.x_test, "y_test": self.y_test}


def check_features(name: str, x: np.ndarray, memory: MemoryBudget) -> np.ndarray:
    """x as float32 (x itself when it already is), after every check."""
    if x.ndim not in (2, 4):
        hint = " (grey images? add a channel axis: x[:, None])" if x.ndim == 3 else ""
        raise InvalidUpload(
            f"{name} has {x.ndim} dimensions {tuple(x.shape)}; expected {SHAPES}{hint}"
        )
    if x.ndim == 4 and x.shape[3] in (1, 3) and x.shape[1] not in (1, 3):
        raise InvalidUpload(
            f"{name} {tuple(x.shape)} looks channels-last; transpose it to (N, C, H, W)"
        )
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_) or np.iscomplexobj(x):
        raise InvalidUpload(f"{name} has dtype {x.dtype}; expected real numbers (float or int)")
    if x.shape[0] == 0 or x[0].size == 0:
        raise InvalidUpload(f"{name} {tuple(x.shape)} is empty")
    values = _as_float32(name, x, memory)
    for check, what in ((np.isnan, "NaN"), (np.isinf, "infinite")):
        _refuse_any(name, values, check, what)
    return values


def _as_float32(name: str, x: np.ndarray, memory: MemoryBudget) -> np.ndarray:
    if x.dtype == np.float32 and x.flags.c_contiguous:
        return x
    memory.spend(x.size * 4, f"{name} as float32")  # charged before a byte is written
    values = np.empty(x.shape, dtype=np.float32)
    with np.errstate(over="ignore"):  # overflow becomes inf, reported by _refuse_any
        for rows in row_chunks(values):
            values[rows] = x[rows]
    return values


def _refuse_any(
    name: str, values: np.ndarray, check: Callable[[np.ndarray], np.ndarray], what: str
) -> None:
    """Count the values `check` finds, chunk by chunk (a whole-array mask is a quarter of x)."""
    count, first = 0, -1
    for rows in row_chunks(values):
        bad = check(values[rows])
        found = int(bad.sum())
        if found and first < 0:
            first = rows.start + int(np.argwhere(bad)[0][0])
        count += found
    if count:
        raise InvalidUpload(
            f"{name} holds {count} {what} value(s) (first in sample {first}); remove or "
            "impute them (values must also fit in float32)"
        )


def check_labels(name: str, y: np.ndarray, samples: int, x_name: str) -> np.ndarray:
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise InvalidUpload(
            f"{name} has shape {tuple(y.shape)}; expected one integer label per sample (N,)"
        )
    if len(y) != samples:
        raise InvalidUpload(
            f"{x_name} has {samples} samples but {name} has {len(y)} labels; they must match"
        )
    if y.dtype.kind == "f" and np.isfinite(y).all() and (y == np.round(y)).all():
        y = y.astype(np.int64)  # 3.0 is label 3
    if y.dtype.kind not in "iub":
        raise InvalidUpload(f"{name} has dtype {y.dtype}; labels must be integers 0..K-1")
    if len(y) and y.min() < 0:
        raise InvalidUpload(f"{name} holds label {int(y.min())}; labels must be integers 0..K-1")
    return y.astype(np.int64)


def check_classes(
    y_all: np.ndarray,
    y_train_pool: np.ndarray,
    options: UploadOptions,
    limits: UploadLimits,
    names: tuple[str, ...] | None,
) -> int:
    """The number of classes K; every class 0..K-1 must have enough samples."""
    largest = int(y_all.max())
    k = options.num_classes or (len(names) if names else largest + 1)
    if largest >= k:
        raise InvalidUpload(
            f"label {largest} is out of range: with {k} classes labels must be 0..{k - 1}"
        )
    if k < 2:
        raise InvalidUpload("the labels hold a single class; a classifier needs at least 2")
    counts = np.bincount(y_train_pool, minlength=k)
    few = [(c, int(n)) for c, n in enumerate(counts) if n < limits.min_class_samples]
    if few:
        listed = ", ".join(f"class {c} has {n}" for c, n in few[:5])
        raise InvalidUpload(
            f"{len(few)} of {k} classes have too few training samples ({listed}); "
            f"every class 0..{k - 1} "
            f"needs at least {limits.min_class_samples} (ARCHSEARCH_DATASET_MIN_CLASS_SAMPLES)"
        )
    return k


def stratified_split(y: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Train and test indices: `fraction` of every class (at least 1, never all) goes to test."""
    rng = np.random.default_rng(seed)
    test: list[np.ndarray] = []
    for cls in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == cls))
        n_test = min(max(1, round(fraction * len(members))), len(members) - 1)
        test.append(members[:n_test])
    is_test = np.zeros(len(y), dtype=bool)
    is_test[np.concatenate(test)] = True
    return np.flatnonzero(~is_test), np.flatnonzero(is_test)


def validate(
    raw: RawDataset,
    options: UploadOptions,
    limits: UploadLimits,
    memory: MemoryBudget | None = None,
) -> ValidDataset:
    memory = memory or MemoryBudget(limits)
    x = check_features("x", raw.x, memory)
    y = check_labels("y", raw.y, len(x), "x")
    if (raw.x_test is None) != (raw.y_test is None):
        given, missing = ("x_test", "y_test") if raw.y_test is None else ("y_test", "x_test")
        raise InvalidUpload(
            f"{given} is given without {missing}; give both or neither (a split is then made)"
        )
    if raw.x_test is None or raw.y_test is None:
        return _with_made_split(raw, x, y, options, limits, memory)
    x_test = check_features("x_test", raw.x_test, memory)
    if x_test.shape[1:] != x.shape[1:]:
        raise InvalidUpload(
            f"x_test samples have shape {x_test.shape[1:]} but x samples {x.shape[1:]}; "
            "they must match"
        )
    y_test = check_labels("y_test", raw.y_test, len(x_test), "x_test")
    k = check_classes(np.concatenate([y, y_test]), y, options, limits, raw.class_names)
    split = {"source": "upload"}
    return ValidDataset(raw.format, x, y, x_test, y_test, k, _names(raw, k), split)


def _with_made_split(
    raw: RawDataset,
    x: np.ndarray,
    y: np.ndarray,
    options: UploadOptions,
    limits: UploadLimits,
    memory: MemoryBudget,
) -> ValidDataset:
    k = check_classes(y, y, options, limits, raw.class_names)
    train, test = stratified_split(y, options.test_fraction, options.split_seed)
    split = {
        "source": "made",
        "method": "stratified",
        "test_fraction": options.test_fraction,
        "seed": options.split_seed,
    }
    memory.spend(len(test) * x[0].nbytes, "the test split")
    x_test = x[test]
    if not x.flags.writeable:  # a read-only float32 buffer from a reader: the one copy
        memory.spend(x.nbytes, "x as a writeable array")
        x = x.copy()
    # Validation owns the reader's arrays: x may be raw.x itself, compacted in place.
    x_train = _keep_rows(x, train)
    return ValidDataset(raw.format, x_train, y[train], x_test, y[test], k, _names(raw, k), split)


def _keep_rows(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """x[rows] for ascending `rows`, moved to the front of x in place (no second copy of x).
    Safe chunk by chunk: rows[i] >= i, so a chunk never reads a row an earlier one wrote."""
    for part in row_chunks(x[: len(rows)]):
        x[part] = x[rows[part]]
    return x[: len(rows)]


def _names(raw: RawDataset, k: int) -> tuple[str, ...]:
    return (
        raw.class_names
        if raw.class_names and len(raw.class_names) == k
        else tuple(str(i) for i in range(k))
    )
