"""Upload files of every format built in memory, and malformed ones an upload must refuse: shared
by the readers' tests and the service tests that upload through the API."""

from __future__ import annotations

import gzip
import io
import struct
import zipfile

import numpy as np
from PIL import Image

from archsearch.jobs.domain.errors import InvalidUpload, LimitExceeded, UnsafeArchive


def blobs(
    classes: int = 3,
    per_class: int = 20,
    shape: tuple[int, ...] = (6,),
    seed: int = 0,
    spread: float = 3.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Separable data: class c is centred at c * spread in every coordinate."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(classes), per_class)
    x = rng.normal(size=(len(y), *shape)) + spread * y.reshape(-1, *([1] * len(shape)))
    order = rng.permutation(len(y))
    return x[order].astype(np.float32), y[order]


def npz_bytes(**arrays: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def csv_bytes(x: np.ndarray, labels: list[str] | np.ndarray, label_column: str = "label") -> bytes:
    header = [f"f{i}" for i in range(x.shape[1])]
    lines = [",".join(header[:1] + [label_column] + header[1:])]  # the label is not the last column
    for row, label in zip(x, labels, strict=True):
        values = [repr(float(v)) for v in row]
        lines.append(",".join(values[:1] + [str(label)] + values[1:]))
    return ("\n".join(lines) + "\n").encode()


def idx_bytes(array: np.ndarray) -> bytes:
    assert array.dtype == np.uint8
    return (
        struct.pack(">BBBB", 0, 0, 0x08, array.ndim)
        + struct.pack(f">{array.ndim}I", *array.shape)
        + array.tobytes()
    )


def zip_bytes(entries: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, data in entries.items():
            archive.writestr(zipfile.ZipInfo(name), data, compress_type=compression)
    return out.getvalue()


def idx_zip_bytes(
    x: np.ndarray, y: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, gz: bool = False
) -> bytes:
    files = {
        "train-images-idx3-ubyte": x,
        "train-labels-idx1-ubyte": y,
        "t10k-images-idx3-ubyte": x_test,
        "t10k-labels-idx1-ubyte": y_test,
    }
    entries = {}
    for stem, array in files.items():
        data = idx_bytes(array.astype(np.uint8))
        entries[f"mnistlike/{stem}{'.gz' if gz else ''}"] = gzip.compress(data) if gz else data
    return zip_bytes(entries)


def image_bytes(pixels: np.ndarray, fmt: str = "PNG") -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format=fmt, **({"quality": 95} if fmt == "JPEG" else {}))
    return out.getvalue()


def image_zip_bytes(
    images: np.ndarray,
    labels: np.ndarray,
    names: list[str],
    fmt: str = "PNG",
    root: str = "pets/",
    test: np.ndarray | None = None,
) -> bytes:
    """One folder per class (grey (N, H, W) or RGB (N, H, W, 3) uint8); with a `test` mask,
    those samples go to test/<class>/ and the others to train/<class>/."""
    suffix = ".png" if fmt == "PNG" else ".jpg"
    entries = {}
    for i, (pixels, label) in enumerate(zip(images, labels, strict=True)):
        split = "" if test is None else ("test/" if test[i] else "train/")
        entries[f"{root}{split}{names[label]}/{i:04d}{suffix}"] = image_bytes(pixels, fmt)
    return zip_bytes(entries, zipfile.ZIP_STORED)


def grey_images(
    classes: int = 3, per_class: int = 10, side: int = 8, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """uint8 (N, side, side) images whose brightness depends on the class."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(classes), per_class)
    base = (40 + 170 * y / max(classes - 1, 1)).reshape(-1, 1, 1)
    x = np.clip(base + rng.normal(0, 20, size=(len(y), side, side)), 0, 255).astype(np.uint8)
    return x, y


def set_declared_size(data: bytes, size: int) -> bytes:
    """Rewrite every entry's declared uncompressed size (local and central headers)."""
    raw = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = raw.find(signature)
        while start != -1:
            raw[start + offset : start + offset + 4] = struct.pack("<I", size)
            start = raw.find(signature, start + 4)
    return bytes(raw)


def zip_bomb(declared: int = 0xFFFF_FFF0) -> bytes:
    """A small file whose one entry declares a huge uncompressed size."""
    return set_declared_size(zip_bytes({"train-images-idx3-ubyte": b"\x00" * 1000}), declared)


def traversal_zip() -> bytes:
    x, y = grey_images()
    return zip_bytes(
        {
            "../../evil/0.png": image_bytes(x[0]),
            **{f"c{y[i]}/{i}.png": image_bytes(x[i]) for i in range(1, 30)},
        }
    )


def pickled_npz() -> bytes:
    x, _ = blobs()
    return npz_bytes(x=x, y=np.array([{"label": i} for i in range(len(x))], dtype=object))


def text_in_numeric_csv() -> bytes:
    x, y = blobs()
    rows = csv_bytes(x, y).decode().splitlines()
    cells = rows[4].split(",")
    cells[2] = "abc"
    rows[4] = ",".join(cells)
    return ("\n".join(rows) + "\n").encode()


def one_class_empty_npz() -> bytes:
    x, y = blobs(classes=10, per_class=8)
    keep = y != 7
    return npz_bytes(x=x[keep], y=y[keep], x_test=x[:5], y_test=np.array([0, 1, 2, 9, 9]))


def mismatched_npz() -> bytes:
    x, y = blobs()
    return npz_bytes(x=x, y=y[:-1])


def truncated_zip() -> bytes:
    x, y = grey_images()
    data = image_zip_bytes(x, y, ["a", "b", "c"])
    return data[: len(data) // 2]


# (file name, bytes, expected error type, words in the message): the malformed files.
MALFORMED = {
    "truncated_zip": ("pets.zip", truncated_zip, InvalidUpload, "truncated or damaged"),
    "zip_bomb": ("bomb.zip", zip_bomb, LimitExceeded, "ARCHSEARCH_UPLOAD_MAX_UNCOMPRESSED_BYTES"),
    "path_traversal": ("evil.zip", traversal_zip, UnsafeArchive, "'..'"),
    "pickled_npz": ("objects.npz", pickled_npz, InvalidUpload, "pickle"),
    "text_in_numeric_csv": (
        "table.csv",
        text_in_numeric_csv,
        InvalidUpload,
        "'abc' is not a number",
    ),
    "one_class_empty": ("ten.npz", one_class_empty_npz, InvalidUpload, "class 7 has 0"),
    "mismatched_lengths": (
        "short.npz",
        mismatched_npz,
        InvalidUpload,
        "x has 60 samples but y has 59 labels",
    ),
}
