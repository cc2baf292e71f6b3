"""The built-in datasets and where their files are found. Torch-free: the API lists and
checks datasets with this module without importing the engine.

Built in: `digits` (shipped inside scikit-learn, no files), `mnist` and `fashion_mnist`
(the four standard IDX files, gzip-compressed or not, in a data directory: the layout of
`../shared/datasets`, of torchvision's `ROOT/MNIST/raw`, or of Debian's
`/usr/share/datasets/fashion-mnist`). Which directories are searched is the caller's choice
(`data_dirs`, from the service's settings); the engine itself knows no system path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from archsearch.core.errors import DatasetUnavailableError, UnknownDatasetError

IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


@dataclass(frozen=True)
class DatasetInfo:
    """What a job needs to know about a dataset before loading it."""

    name: str
    description: str
    input_shape: tuple[int, ...]
    num_classes: int
    train_size: int
    test_size: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    folder_names: tuple[str, ...] = field(default=())
    # Raw values are divided by `scale` before normalising (a downloaded model
    # says how its inputs were made); output i of a model is `class_names[i]`.
    scale: float = 1.0
    class_names: tuple[str, ...] = field(default=())

    @property
    def needs_files(self) -> bool:
        return bool(self.folder_names)


DIGIT_NAMES = tuple(str(d) for d in range(10))
FASHION_NAMES = (  # Zalando's label order
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)

BUILTIN_DATASETS: dict[str, DatasetInfo] = {
    info.name: info
    for info in (
        DatasetInfo(
            name="digits",
            description="scikit-learn's 8x8 handwritten digits (1,797 images), no files needed",
            input_shape=(1, 8, 8),
            num_classes=10,
            train_size=1437,
            test_size=360,
            mean=(0.3054,),  # of pixel/16 over the training split (seed 0)
            std=(0.3761,),
            scale=16.0,
            class_names=DIGIT_NAMES,
        ),
        DatasetInfo(
            name="mnist",
            description="MNIST handwritten digits, 28x28, 60,000 train / 10,000 test",
            input_shape=(1, 28, 28),
            num_classes=10,
            train_size=60_000,
            test_size=10_000,
            mean=(0.1307,),
            std=(0.3081,),
            folder_names=("mnist", "MNIST/raw", "MNIST"),
            scale=255.0,
            class_names=DIGIT_NAMES,
        ),
        DatasetInfo(
            name="fashion_mnist",
            description="Fashion-MNIST (Zalando) clothing images, 28x28, 60,000 / 10,000",
            input_shape=(1, 28, 28),
            num_classes=10,
            train_size=60_000,
            test_size=10_000,
            mean=(0.2860,),
            std=(0.3530,),
            folder_names=("fashion-mnist", "fashion_mnist", "FashionMNIST/raw", "FashionMNIST"),
            scale=255.0,
            class_names=FASHION_NAMES,
        ),
    )
}


def dataset_info(name: str) -> DatasetInfo:
    try:
        return BUILTIN_DATASETS[name]
    except KeyError:
        raise UnknownDatasetError(name, sorted(BUILTIN_DATASETS)) from None


def _idx_file(folder: Path, stem: str) -> Path | None:
    for candidate in (folder / f"{stem}.gz", folder / stem):
        if candidate.is_file():
            return candidate
    return None


def find_idx_files(name: str, data_dirs: tuple[Path, ...]) -> dict[str, Path] | None:
    """The four IDX files of `name` in the first data directory that has all of them."""
    info = dataset_info(name)
    for root in data_dirs:
        for folder_name in info.folder_names:
            found = {key: _idx_file(root / folder_name, stem) for key, stem in IDX_FILES.items()}
            if all(found.values()):
                return {key: path for key, path in found.items() if path is not None}
    return None


def is_available(name: str, data_dirs: tuple[Path, ...]) -> bool:
    info = dataset_info(name)
    return not info.needs_files or find_idx_files(name, data_dirs) is not None


def available_datasets(data_dirs: tuple[Path, ...]) -> list[DatasetInfo]:
    """The built-in datasets this machine can train on now."""
    return [info for info in BUILTIN_DATASETS.values() if is_available(info.name, data_dirs)]


def require_available(name: str, data_dirs: tuple[Path, ...]) -> DatasetInfo:
    """The dataset's info, or an error listing what this machine can train on."""
    info = dataset_info(name)
    if not is_available(name, data_dirs):
        usable = [i.name for i in available_datasets(data_dirs)]
        searched = ", ".join(str(d) for d in data_dirs)
        raise DatasetUnavailableError(
            f"dataset {name!r} is known but its IDX files are not in the data directory "
            f"(searched {searched}); put them in <data_dir>/{info.folder_names[0]}/ or set "
            f"ARCHSEARCH_DATA_DIR. Available here: {', '.join(usable)}"
        )
    return info
