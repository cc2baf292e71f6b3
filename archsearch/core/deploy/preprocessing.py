"""The preprocessing record of `architecture*.json`: how raw samples became model inputs."""

from __future__ import annotations

from archsearch.core.data.catalog import DatasetInfo
from archsearch.core.models.registry import Preprocessing


def preprocessing(info: DatasetInfo, input_shape: tuple[int, ...]) -> Preprocessing:
    """How raw samples of this dataset became the model's inputs (see `core.data.loaders`)."""
    if info.name == "digits":
        raw = "scikit-learn load_digits() images, values 0..16, split as archsearch does"
    elif info.needs_files:
        raw = "uint8 images of the IDX files (t10k-images-idx3-ubyte.gz for the test split)"
    else:
        raw = "the uploaded arrays, as uploaded"
    names = info.class_names or tuple(str(i) for i in range(info.num_classes))
    return Preprocessing(
        input_shape=tuple(input_shape),
        dtype="float32",
        scale=float(info.scale),
        mean=tuple(info.mean),
        std=tuple(info.std),
        class_names=tuple(names),
        raw=raw,
    )
