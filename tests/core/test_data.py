"""Datasets: the IDX reader, the built-in loaders and seeded subsets."""

from __future__ import annotations

import gzip
import hashlib
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from archsearch.core.data.catalog import (
    BUILTIN_DATASETS,
    IDX_FILES,
    available_datasets,
    require_available,
)
from archsearch.core.data.idx import parse_idx, read_idx
from archsearch.core.data.loaders import load_dataset
from archsearch.core.errors import DatasetUnavailableError, UnknownDatasetError
from archsearch.specs import DatasetRef
from tests.conftest import SUBSET_TEST, SUBSET_TRAIN, TEST_DATASETS


def idx_bytes(array: np.ndarray) -> bytes:
    header = b"\x00\x00\x08" + bytes([array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(np.uint8).tobytes()


def test_idx_round_trip_plain_and_gzip(tmp_path: Path) -> None:
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    np.testing.assert_array_equal(parse_idx(idx_bytes(array)), array)
    path = tmp_path / "x-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(idx_bytes(array)))
    np.testing.assert_array_equal(read_idx(path), array)


def test_idx_rejects_truncated_and_foreign_files() -> None:
    data = idx_bytes(np.zeros((4, 5), dtype=np.uint8))
    with pytest.raises(ValueError, match="declares shape"):
        parse_idx(data[:-3])
    with pytest.raises(ValueError, match="not an IDX file"):
        parse_idx(b"\x89PNG\r\n\x1a\n")


def test_idx_files_are_read_in_chunks_and_checked(tmp_path: Path) -> None:
    array = (np.arange(3 * 700 * 900) % 251).astype(np.uint8).reshape(3, 700, 900)  # > 1 chunk
    path = tmp_path / "x-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(idx_bytes(array)))
    read = read_idx(path)
    np.testing.assert_array_equal(read, array)
    assert read.flags.writeable, "torch takes the array without a copy"
    for name, data in (("short", idx_bytes(array)[:-3]), ("long", idx_bytes(array) + b"\0")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match="declares shape"):
            read_idx(tmp_path / name)


def test_mnist_matches_published_statistics(data_dirs: tuple[Path, ...]) -> None:
    data = load_dataset(DatasetRef(name="mnist"), data_dirs)
    shape = (1, 28, 28)
    assert data.x_train.shape == (SUBSET_TRAIN, *shape)
    assert data.x_test.shape == (SUBSET_TEST, *shape)
    assert torch.bincount(data.y_train).tolist() == [SUBSET_TRAIN // 10] * 10
    raw = data.x_train.normalised() * 0.3081 + 0.1307  # normalisation undone
    # The subset's first images of each class: their pixels within 0.001 of the whole set's.
    assert raw.mean().item() == pytest.approx(0.1307, abs=1e-3)
    assert raw.std().item() == pytest.approx(0.3081, abs=1e-3)


def test_fashion_mnist_is_balanced(data_dirs: tuple[Path, ...]) -> None:
    data = load_dataset(DatasetRef(name="fashion_mnist"), data_dirs)
    assert torch.bincount(data.y_train).tolist() == [SUBSET_TRAIN // 10] * 10
    assert torch.bincount(data.y_test).tolist() == [SUBSET_TEST // 10] * 10


@pytest.mark.parametrize("folder", ["mnist", "fashion-mnist"])
def test_the_shipped_subsets_are_the_files_their_sums_pin(folder: str) -> None:
    sums = (TEST_DATASETS / folder / "SHA256SUMS").read_text().splitlines()
    pinned = {name: digest for digest, name in (line.split() for line in sums)}
    assert sorted(pinned) == sorted(f"{stem}.gz" for stem in IDX_FILES.values())
    for name, digest in pinned.items():
        assert hashlib.sha256((TEST_DATASETS / folder / name).read_bytes()).hexdigest() == digest


def test_digits_split_is_fixed_and_stratified() -> None:
    first = load_dataset(DatasetRef(name="digits"), ())
    again = load_dataset(DatasetRef(name="digits"), (), seed=7)
    assert len(first.x_train) == 1437 and len(first.x_test) == 360
    assert torch.equal(first.x_test, again.x_test)  # the seed picks subsets, never the test split
    counts = torch.bincount(first.y_test)
    assert counts.min() >= 35 and counts.max() <= 37


def test_few_shot_subset_is_exact_and_seeded() -> None:
    ref = DatasetRef(name="digits", samples_per_class=5)
    a, b, c = (load_dataset(ref, (), seed=s) for s in (0, 0, 1))
    assert torch.bincount(a.y_train).tolist() == [5] * 10
    assert torch.equal(a.x_train, b.x_train)
    assert not torch.equal(a.x_train, c.x_train)
    assert len(load_dataset(DatasetRef(name="digits", train_subset=100), ()).x_train) == 100


def test_unknown_and_unavailable_datasets_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(UnknownDatasetError, match="available: digits, fashion_mnist, mnist"):
        require_available("minst", (tmp_path,))
    with pytest.raises(DatasetUnavailableError, match="ARCHSEARCH_DATA_DIR"):
        require_available("mnist", (tmp_path,))
    names = {info.name for info in available_datasets((tmp_path,))}
    assert "digits" in names and "mnist" not in names
    assert set(BUILTIN_DATASETS) == {"digits", "mnist", "fashion_mnist"}
