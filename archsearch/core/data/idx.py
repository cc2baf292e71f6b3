"""Reader of the IDX format of MNIST and Fashion-MNIST (plain or gzip-compressed).

The header is two zero bytes, a type byte, the number of dimensions, then each dimension as
a big-endian uint32; the data follow in C order.
"""

from __future__ import annotations

import gzip
import io
import struct
from pathlib import Path

import numpy as np

_IDX_DTYPES: dict[int, np.dtype] = {
    code: np.dtype(name)
    for code, name in {
        0x08: "u1",
        0x09: "i1",
        0x0B: ">i2",
        0x0C: ">i4",
        0x0D: ">f4",
        0x0E: ">f8",
    }.items()
}
READ_CHUNK = 1 << 20  # bytes decompressed at a time into the array


def _header(magic: bytes, source: str) -> tuple[np.dtype, int]:
    """The element type and the number of dimensions, from the first four bytes."""
    if len(magic) < 4 or magic[0] != 0 or magic[1] != 0:
        raise ValueError(f"{source}: not an IDX file (the first two bytes must be zero)")
    type_code, ndim = magic[2], magic[3]
    if type_code not in _IDX_DTYPES:
        raise ValueError(f"{source}: unknown IDX element type 0x{type_code:02x}")
    return _IDX_DTYPES[type_code], ndim


def _size_error(source: str, shape: tuple[int, ...], expected: int, held: str) -> ValueError:
    return ValueError(
        f"{source}: header declares shape {shape} ({expected} bytes) but the file holds "
        f"{held} bytes of data"
    )


def parse_idx(raw: bytes | bytearray, source: str = "<bytes>") -> np.ndarray:
    """Decode the bytes of one IDX file into an array of its declared shape."""
    dtype, ndim = _header(bytes(raw[:4]), source)
    header_end = 4 + 4 * ndim
    shape = struct.unpack(f">{ndim}I", raw[4:header_end])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header_end != expected:
        raise _size_error(source, shape, expected, str(len(raw) - header_end))
    return np.frombuffer(raw, dtype=dtype, offset=header_end).reshape(shape)


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file; `.gz` files are decompressed transparently.

    Streamed into the array in chunks: one copy of the data in memory (a whole `read()`
    held the decompressed chunks and their joined bytes at once, twice the array), and the
    array is writable, so torch takes it without another copy.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        return _stream_idx(handle, str(path))


def _stream_idx(handle: io.BufferedIOBase, source: str) -> np.ndarray:
    dtype, ndim = _header(handle.read(4), source)
    shape = struct.unpack(f">{ndim}I", handle.read(4 * ndim))
    array = np.empty(shape, dtype=dtype)
    view, filled = array.reshape(-1).view(np.uint8).data, 0
    while filled < len(view):
        got = handle.readinto(view[filled : filled + READ_CHUNK])
        if not got:
            raise _size_error(source, shape, len(view), f"only {filled}")
        filled += got
    if handle.read(1):
        raise _size_error(source, shape, len(view), "more")
    return array
