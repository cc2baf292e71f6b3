"""Shared fixtures and paths.

MNIST and Fashion-MNIST come from the small real subsets that ship in `tests/data` (see its
README), always: a fresh clone tests with nothing beside it, and CI tests exactly what a fresh
clone runs. A test that needs many images asks for a `train_subset` within SUBSET_TRAIN.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
TEST_DATASETS = REPO_ROOT / "tests" / "data"  # mnist/ and fashion-mnist/, four IDX files each
SUBSET_TRAIN = 4000  # training images per shipped dataset (400 of each class)
SUBSET_TEST = 1000  # test images per shipped dataset (100 of each class)


@pytest.fixture(scope="session")
def data_dirs() -> tuple[Path, ...]:
    """Data directories holding mnist/ and fashion-mnist/: the shipped subsets."""
    for folder in ("mnist", "fashion-mnist"):
        assert (TEST_DATASETS / folder).is_dir(), f"missing {TEST_DATASETS / folder}"
    return (TEST_DATASETS,)
