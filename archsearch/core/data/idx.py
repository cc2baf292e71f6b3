"""Reader of the IDX format of MNIST and Fashion-MNIST (plain or gzip-compressed).

The header is two zero bytes, a type byte, the number of dimensions, then each dimension as
a big-endian uint32; the data follow in C order.
"""

from __future__ import annotations

import gzip
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


def parse_idx(raw: bytes, source: str = "<bytes>") -> np.ndarray:
    """Decode the bytes of one IDX file into an array of its declared shape."""
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{source}: not an IDX file (the first two bytes must be zero)")
    type_code, ndim = raw[2], raw[3]
    if type_code not in _IDX_DTYPES:
        raise ValueError(f"{source}: unknown IDX element type 0x{type_code:02x}")
    header_end = 4 + 4 * ndim
    shape = struct.unpack(f">{ndim}I", raw[4:header_end])
    dtype = _IDX_DTYPES[type_code]
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header_end != expected:
        raise ValueError(
            f"{source}: header declares shape {shape} ({expected} bytes) but the file holds "
            f"{len(raw) - header_end} bytes of data"
        )
    return np.frombuffer(raw, dtype=dtype, offset=header_end).reshape(shape)


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file; `.gz` files are decompressed transparently."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        return parse_idx(handle.read(), str(path))
