"""Zip uploads: the four standard IDX files (MNIST layout), or an image folder with one
sub-folder per class (`cat/001.png`), optionally split as `train/<class>/...` and
`test/<class>/...`. Entries are read into memory one by one under the upload's byte budget
(see `archive`); nothing is extracted to disk. The arrays built are charged to the
upload's `MemoryBudget` before they are filled.
"""

from __future__ import annotations

import zipfile
from pathlib import Path, PurePosixPath

import numpy as np

from archsearch.core.data.catalog import IDX_FILES
from archsearch.core.data.idx import parse_idx
from archsearch.jobs.domain.datasets.archive import (
    ByteBudget,
    MemoryBudget,
    gunzip,
    is_zip,
    open_archive,
    read_entry,
)
from archsearch.jobs.domain.datasets.images import IMAGE_SUFFIXES, decode_images
from archsearch.jobs.domain.datasets.options import UploadLimits
from archsearch.jobs.domain.datasets.raw import RawDataset
from archsearch.jobs.domain.errors import InvalidUpload

IDX_STEMS = {stem: key for key, stem in IDX_FILES.items()}
SPLIT_FOLDERS = {"train", "test"}


def _is_junk(name: str) -> bool:
    # Finder and Explorer leave these behind; they are not data.
    parts = PurePosixPath(name).parts
    return parts[0] == "__MACOSX" or parts[-1].startswith(".") or parts[-1] == "Thumbs.db"


def _idx_stem(name: str) -> str:
    base = PurePosixPath(name).name.removesuffix(".gz")
    return base.replace(".", "-")  # 'train-images.idx3-ubyte' is a common spelling too


def read_zip(path: Path, limits: UploadLimits, memory: MemoryBudget) -> RawDataset:
    if not is_zip(path):
        raise InvalidUpload("the file is named .zip but is not a zip archive")
    with open_archive(path, limits) as (archive, entries):
        entries = [e for e in entries if not _is_junk(e.filename)]
        budget = ByteBudget(limits)
        if any("idx" in _idx_stem(e.filename) for e in entries):
            return _read_idx_zip(archive, entries, budget, memory)
        if entries and all(
            PurePosixPath(e.filename).suffix.lower() in IMAGE_SUFFIXES for e in entries
        ):
            return _read_image_zip(archive, entries, budget, limits, memory)
    others = sorted({PurePosixPath(e.filename).suffix.lower() or e.filename for e in entries})[:5]
    raise InvalidUpload(
        "the zip holds neither the four IDX files (train-images-idx3-ubyte, ...) nor only "
        f"PNG/JPEG images in class folders; it holds {', '.join(others) or 'no files'}"
    )


# ---- IDX -------------------------------------------------------------------------------


def _read_idx_zip(
    archive: zipfile.ZipFile,
    entries: list[zipfile.ZipInfo],
    budget: ByteBudget,
    memory: MemoryBudget,
) -> RawDataset:
    found: dict[str, zipfile.ZipInfo] = {}
    for info in entries:
        key = IDX_STEMS.get(_idx_stem(info.filename))
        if key is None:
            raise InvalidUpload(
                f"{info.filename!r} is not one of the four IDX files: {', '.join(IDX_STEMS)}"
            )
        found[key] = info
    missing = [IDX_FILES[k] for k in IDX_FILES if k not in found]
    if missing:
        raise InvalidUpload(f"the zip of IDX files lacks {', '.join(missing)}; all four are needed")
    arrays = {key: _read_idx(archive, info, budget, memory) for key, info in found.items()}
    x, x_test = arrays["train_images"], arrays["test_images"]
    if x.ndim == 3 and x_test.ndim == 3:  # (N, H, W) grey images: one channel
        x, x_test = x[:, None], x_test[:, None]  # (N, 1, H, W)
    return RawDataset("idx", x, arrays["train_labels"], x_test, arrays["test_labels"])


def _read_idx(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: ByteBudget, memory: MemoryBudget
) -> np.ndarray:
    # zipfile never reads an entry past its declared size, so that size is what it costs.
    data = read_entry(archive, info, budget, memory)
    memory.spend(info.file_size, f"zip entry {info.filename!r}")
    if info.filename.endswith(".gz"):
        data = gunzip(data, info.filename, budget, memory)
    try:
        return parse_idx(data, info.filename)
    except (ValueError, TypeError) as exc:  # struct errors on a short header are ValueErrors too
        raise InvalidUpload(f"{exc}; expected an IDX file as MNIST ships them") from None


# ---- image folders ---------------------------------------------------------------------


def _strip_common_root(parts: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    # 'mydata/cat/1.png' and 'cat/1.png' mean the same: a single top folder is dropped.
    while all(len(p) > 2 for p in parts) and len({p[0] for p in parts}) == 1:
        parts = [p[1:] for p in parts]
    return parts


def _layout(entries: list[zipfile.ZipInfo]) -> list[tuple[str, str]]:
    """(split, class name) of each entry, in entry order; split is 'train' or 'test'."""
    parts = _strip_common_root([PurePosixPath(e.filename).parts for e in entries])
    split = {p[0] for p in parts} <= SPLIT_FOLDERS and all(len(p) == 3 for p in parts)
    layout = []
    for entry, p in zip(entries, parts, strict=True):
        if split:
            layout.append((p[0], p[1]))
        elif len(p) == 2:
            layout.append(("train", p[0]))
        else:
            raise InvalidUpload(
                f"image {entry.filename!r} is not directly inside a class folder; expected "
                "<class>/<image>.png (or train/<class>/... and test/<class>/...)"
            )
    return layout


def _read_image_zip(
    archive: zipfile.ZipFile,
    entries: list[zipfile.ZipInfo],
    budget: ByteBudget,
    limits: UploadLimits,
    memory: MemoryBudget,
) -> RawDataset:
    layout = _layout(entries)
    names = tuple(sorted({cls for split, cls in layout if split == "train"}))
    unknown = sorted({cls for split, cls in layout if split == "test"} - set(names))
    if unknown:
        raise InvalidUpload(
            f"test folder(s) {', '.join(unknown)} have no training folder of the same name"
        )
    index = {name: i for i, name in enumerate(names)}
    images = decode_images(archive, entries, budget, limits, memory)  # (N, C, H, W)
    labels = np.array([index[cls] for _, cls in layout], dtype=np.int64)
    is_test = np.array([split == "test" for split, _ in layout], dtype=bool)
    if not is_test.any():
        return RawDataset("images", images, labels, class_names=names)
    memory.spend(images.nbytes, "the images split into train and test")
    return RawDataset(
        "images", images[~is_test], labels[~is_test], images[is_test], labels[is_test], names
    )
