"""Format readers of uploads: `.npz`, `.csv`, and zips of IDX files or of an image folder.

The file name claims a format; the bytes must agree (a `.npz` must be a zip of `.npy`
arrays, a `.csv` must be UTF-8 text), otherwise the upload is refused. `.npz` arrays are read
with `allow_pickle=False` after their headers were checked: an object array is refused before
numpy would try to unpickle it.
"""

from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from archsearch.jobs.domain.datasets.archive import DAMAGED, is_zip, open_archive
from archsearch.jobs.domain.datasets.options import UploadLimits, UploadOptions
from archsearch.jobs.domain.datasets.raw import RawDataset
from archsearch.jobs.domain.datasets.zips import read_zip
from archsearch.jobs.domain.errors import InvalidUpload

NPZ_ARRAYS = ("x", "y", "x_test", "y_test")
SUPPORTED = (
    ".npz (arrays x, y and optionally x_test, y_test), .csv (with a label column) or .zip "
    "(the four IDX files, or one folder of PNG/JPEG images per class)"
)


def read_upload(
    path: Path, filename: str, options: UploadOptions, limits: UploadLimits
) -> RawDataset:
    """Read the upload at `path`, whose original name was `filename`."""
    suffix = Path(filename).suffix.lower()
    if suffix == ".npz":
        return read_npz(path, limits)
    if suffix == ".csv":
        return read_csv(path, options)
    if suffix == ".zip":
        return read_zip(path, limits)
    if suffix == ".npy":
        raise InvalidUpload("a .npy file holds a single array; upload an .npz holding x and y")
    raise InvalidUpload(
        f"unsupported file type {suffix or '(none)'!r} ({filename!r}); upload {SUPPORTED}"
    )


# ---- .npz ------------------------------------------------------------------------------


def _npy_header(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo
) -> tuple[tuple[int, ...], np.dtype]:
    try:
        with archive.open(info) as handle:
            version = np.lib.format.read_magic(handle)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
            else:
                shape, _, dtype = np.lib.format._read_array_header(handle, version)  # type: ignore[attr-defined]  # noqa: SLF001
    except (ValueError, *DAMAGED) as exc:
        raise InvalidUpload(
            f"{info.filename!r} in the .npz is not a valid .npy array ({exc})"
        ) from None
    return tuple(shape), dtype


def _check_npz_entries(archive: zipfile.ZipFile, entries: list[zipfile.ZipInfo]) -> list[str]:
    keys = []
    for info in entries:
        key = info.filename.removesuffix(".npy")
        if key not in NPZ_ARRAYS or not info.filename.endswith(".npy"):
            raise InvalidUpload(
                f"the .npz holds an array named {key!r}; "
                "expected x, y and optionally x_test, y_test"
            )
        shape, dtype = _npy_header(archive, info)
        if dtype.hasobject:
            raise InvalidUpload(
                f"array {key!r} holds Python objects (dtype {dtype}), which only pickle can load; "
                "pickled data is never loaded: save numeric arrays, e.g. x.astype('float32')"
            )
        if int(np.prod(shape)) * dtype.itemsize > info.file_size:
            raise InvalidUpload(f"array {key!r} declares shape {shape} but its data is truncated")
        keys.append(key)
    return keys


def read_npz(path: Path, limits: UploadLimits) -> RawDataset:
    if not is_zip(path):
        raise InvalidUpload(
            "the file is named .npz but is not one "
            "(an .npz is a zip of .npy arrays, as np.savez writes)"
        )
    with open_archive(path, limits, ".npz") as (archive, entries):
        # Declared sizes are bounded by now, and zipfile never reads an entry past its declared
        # size (a lying entry fails its CRC check), so np.load below is bounded too.
        keys = _check_npz_entries(archive, entries)
    for needed in ("x", "y"):
        if needed not in keys:
            raise InvalidUpload(
                f"the .npz has no array {needed!r}; it holds {', '.join(keys) or 'nothing'}"
            )
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in keys}
    except (ValueError, *DAMAGED) as exc:
        raise InvalidUpload(f"the .npz could not be read ({exc})") from None
    return RawDataset("npz", arrays["x"], arrays["y"], arrays.get("x_test"), arrays.get("y_test"))


# ---- .csv ------------------------------------------------------------------------------


def _text_lines(path: Path) -> io.TextIOWrapper:
    with open(path, "rb") as handle:
        head = handle.read(1 << 16)
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06") or b"\x00" in head:
        raise InvalidUpload(
            "the file is named .csv but holds binary data; a .csv must be UTF-8 text"
        )
    return open(path, encoding="utf-8-sig", newline="")


def _parse_value(value: str, row: int, column: str, label_column: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise InvalidUpload(
            f"row {row}, column {column!r}: {value!r} is not a number; every column except the "
            f"label column {label_column!r} must be numeric"
        ) from None


def _labels(texts: list[str]) -> tuple[np.ndarray, tuple[str, ...] | None]:
    """Integer labels stay integers; any other text is a class name (sorted, then numbered)."""
    try:
        return np.array([int(t) for t in texts], dtype=np.int64), None
    except ValueError:
        names = tuple(sorted(set(texts)))
        index = {name: i for i, name in enumerate(names)}
        return np.array([index[t] for t in texts], dtype=np.int64), names


def read_csv(path: Path, options: UploadOptions) -> RawDataset:
    label_column = options.label_column
    try:
        with _text_lines(path) as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if not header:
                raise InvalidUpload(
                    "the .csv is empty; expected a header row, then one row per sample"
                )
            if label_column not in header:
                raise InvalidUpload(
                    f"the .csv has no column {label_column!r}; "
                    f"its columns are {', '.join(header[:20])}. "
                    "Name the label column with label_column",
                    field="label_column",
                )
            at = header.index(label_column)
            rows, labels = _csv_rows(reader, header, at, label_column)
    except UnicodeDecodeError as exc:
        raise InvalidUpload(f"the .csv is not UTF-8 text ({exc})") from None
    if not rows:
        raise InvalidUpload("the .csv has a header but no rows")
    y, names = _labels(labels)
    return RawDataset("csv", np.array(rows, dtype=np.float64), y, class_names=names)


def _csv_rows(
    reader: Iterator[list[str]], header: list[str], at: int, label_column: str
) -> tuple[list[list[float]], list[str]]:
    rows: list[list[float]] = []
    labels: list[str] = []
    columns = [c for i, c in enumerate(header) if i != at]
    for number, row in enumerate(reader, start=2):
        if not row:
            continue  # a blank line
        if len(row) != len(header):
            raise InvalidUpload(
                f"row {number} has {len(row)} values; the header has {len(header)} columns"
            )
        labels.append(row[at].strip())
        values = row[:at] + row[at + 1 :]
        rows.append(
            [_parse_value(v, number, c, label_column) for v, c in zip(values, columns, strict=True)]
        )
    return rows, labels
