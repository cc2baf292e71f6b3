"""Format readers of uploads: `.npz`, `.csv`, and zips of IDX files or of an image folder.

The file name claims a format; the bytes must agree (a `.npz` must be a zip of `.npy`
arrays, a `.csv` must be UTF-8 text), otherwise the upload is refused. `.npz` arrays are read
with `allow_pickle=False` after their headers were checked: an object array is refused before
numpy would try to unpickle it.

Memory: every reader charges the arrays it builds to the upload's `MemoryBudget`
before or while it fills them. A `.npz` is charged from its array headers before np.load; a
`.csv` is parsed row by row into float32 blocks of `CSV_BLOCK_ROWS` rows (a list of Python
floats costs 32 bytes a value, a float32 block 4) with labels kept as small integer codes;
each line is bounded and checked for room before the csv module splits it into Python
strings, and each distinct label is charged as it first appears.
"""

from __future__ import annotations

import csv
import io
import math
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from archsearch.jobs.domain.datasets.archive import DAMAGED, MemoryBudget, is_zip, open_archive
from archsearch.jobs.domain.datasets.options import UploadLimits, UploadOptions
from archsearch.jobs.domain.datasets.raw import RawDataset
from archsearch.jobs.domain.datasets.zips import read_zip
from archsearch.jobs.domain.errors import InvalidUpload, LimitExceeded

NPZ_ARRAYS = ("x", "y", "x_test", "y_test")
SUPPORTED = (
    ".npz (arrays x, y and optionally x_test, y_test), .csv (with a label column) or .zip "
    "(the four IDX files, or one folder of PNG/JPEG images per class)"
)
CSV_BLOCK_ROWS = 4096
# What one parsed field costs at its worst while its row is handled: a pointer in the
# csv row, in the copy without the label and in the list of floats (8 each), a float (24)
# and the field's string (49 and up).
CSV_BYTES_PER_FIELD = 128
# A distinct label text is kept once as a dict key, then once more sorted as a class name.
CSV_BYTES_PER_LABEL = 256


def read_upload(
    path: Path,
    filename: str,
    options: UploadOptions,
    limits: UploadLimits,
    memory: MemoryBudget | None = None,
) -> RawDataset:
    """Read the upload at `path`, whose original name was `filename`."""
    memory = memory or MemoryBudget(limits)
    suffix = Path(filename).suffix.lower()
    if suffix == ".npz":
        return read_npz(path, limits, memory)
    if suffix == ".csv":
        return read_csv(path, options, memory)
    if suffix == ".zip":
        return read_zip(path, limits, memory)
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


def _check_npz_entries(
    archive: zipfile.ZipFile, entries: list[zipfile.ZipInfo], memory: MemoryBudget
) -> list[str]:
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
        size = math.prod(shape) * dtype.itemsize  # Python ints: a huge shape cannot wrap
        if size > info.file_size:
            raise InvalidUpload(f"array {key!r} declares shape {shape} but its data is truncated")
        memory.spend(size, f"array {key!r} of the .npz")
        keys.append(key)
    return keys


def read_npz(path: Path, limits: UploadLimits, memory: MemoryBudget) -> RawDataset:
    if not is_zip(path):
        raise InvalidUpload(
            "the file is named .npz but is not one "
            "(an .npz is a zip of .npy arrays, as np.savez writes)"
        )
    with open_archive(path, limits, ".npz") as (archive, entries):
        # Declared sizes are bounded by now, and zipfile never reads an entry past its declared
        # size (a lying entry fails its CRC check), so np.load below is bounded too.
        keys = _check_npz_entries(archive, entries, memory)
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


def _bounded_lines(handle: io.TextIOWrapper, memory: MemoryBudget) -> Iterator[str]:
    """The file's lines, each checked before the csv module parses it: a line is read at
    most up to what its parsed form could fit in the budget, and its parsed form (a list of
    one Python string per field, then one float per value) is checked against the room left.
    A single line of millions of fields cannot cost gigabytes of Python objects."""
    longest = max(memory.limit // CSV_BYTES_PER_FIELD, 1)
    while line := handle.readline(longest + 1):
        if len(line) > longest and not line.endswith("\n"):
            raise LimitExceeded(
                f"a line of the .csv longer than {longest:,} characters",
                memory.limit,
                "upload_max_memory_bytes",
            )
        memory.require_room((line.count(",") + 1) * CSV_BYTES_PER_FIELD, "a parsed .csv line")
        yield line


def _parse_value(value: str, row: int, column: str, label_column: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise InvalidUpload(
            f"row {row}, column {column!r}: {value!r} is not a number; every column except the "
            f"label column {label_column!r} must be numeric"
        ) from None


def read_csv(path: Path, options: UploadOptions, memory: MemoryBudget) -> RawDataset:
    label_column = options.label_column
    try:
        with _text_lines(path) as handle:
            reader = csv.reader(_bounded_lines(handle, memory))
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
            rows = _CsvRows(header, header.index(label_column), label_column, memory)
            rows.read(reader)
    except UnicodeDecodeError as exc:
        raise InvalidUpload(f"the .csv is not UTF-8 text ({exc})") from None
    except csv.Error as exc:  # e.g. a field over the csv module's size limit
        raise InvalidUpload(f"the .csv could not be parsed ({exc})") from None
    if not rows.count:
        raise InvalidUpload("the .csv has a header but no rows")
    x, y, names = rows.arrays()
    return RawDataset("csv", x, y, class_names=names)


class _CsvRows:
    """Rows parsed into float32 blocks and labels into integer codes (one per distinct
    label text), each block charged to the memory budget before it is filled."""

    def __init__(self, header: list[str], at: int, label_column: str, memory: MemoryBudget) -> None:
        self.header, self.at, self.label_column, self.memory = header, at, label_column, memory
        self.columns = [c for i, c in enumerate(header) if i != at]
        self.blocks: list[np.ndarray] = []
        self.codes: list[np.ndarray] = []
        self.label_code: dict[str, int] = {}
        self.count = 0

    def read(self, reader: Iterator[list[str]]) -> None:
        for number, row in enumerate(reader, start=2):
            if row:  # a blank line is skipped
                self._add(number, row)

    def _add(self, number: int, row: list[str]) -> None:
        if len(row) != len(self.header):
            raise InvalidUpload(
                f"row {number} has {len(row)} values; the header has {len(self.header)} columns"
            )
        at_block = self.count % CSV_BLOCK_ROWS
        if at_block == 0:
            self.memory.spend(CSV_BLOCK_ROWS * (len(self.columns) * 4 + 4), "the .csv's rows")
            self.blocks.append(np.empty((CSV_BLOCK_ROWS, len(self.columns)), dtype=np.float32))
            self.codes.append(np.empty(CSV_BLOCK_ROWS, dtype=np.int32))
        label = row[self.at].strip()
        if label not in self.label_code:
            self.memory.spend(CSV_BYTES_PER_LABEL + len(label), "the .csv's distinct labels")
            self.label_code[label] = len(self.label_code)
        self.codes[-1][at_block] = self.label_code[label]
        values = row[: self.at] + row[self.at + 1 :]
        with np.errstate(over="ignore"):  # overflow becomes inf, refused by validation
            self.blocks[-1][at_block] = [
                _parse_value(v, number, c, self.label_column)
                for v, c in zip(values, self.columns, strict=True)
            ]
        self.count += 1

    def arrays(self) -> tuple[np.ndarray, np.ndarray, tuple[str, ...] | None]:
        """x (float32), y and the class names; the blocks are released as x is filled."""
        x = np.empty((self.count, len(self.columns)), dtype=np.float32)
        codes = np.empty(self.count, dtype=np.int64)
        for i in range(len(self.blocks)):
            start = i * CSV_BLOCK_ROWS
            n = min(CSV_BLOCK_ROWS, self.count - start)
            x[start : start + n] = self.blocks[i][:n]
            codes[start : start + n] = self.codes[i][:n]
            self.blocks[i] = self.codes[i] = np.empty(0)  # x grows as the blocks go
        y, names = _labels(self.label_code)
        return x, y[codes], names


def _labels(label_code: dict[str, int]) -> tuple[np.ndarray, tuple[str, ...] | None]:
    """Per label code, its label: integer texts stay integers; any other text is a class name
    (sorted, then numbered)."""
    texts = list(label_code)  # in code order
    try:
        return np.array([int(t) for t in texts], dtype=np.int64), None
    except ValueError:
        names = tuple(sorted(texts))
        index = {name: i for i, name in enumerate(names)}
        return np.array([index[t] for t in texts], dtype=np.int64), names
