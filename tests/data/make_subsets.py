"""Cut the small MNIST and Fashion-MNIST subsets that the tests read from the full sets.

The tests run on a fresh clone with nothing beside it, so the repository carries real images
of both datasets, a few MB in all: the first TRAIN_PER_CLASS training and TEST_PER_CLASS test
images of every class, in the files' own order (balanced classes, no random draw to
reproduce). The output is the four standard gzipped IDX files per dataset, written with gzip
mtime 0 and no file name, so a rerun gives the same bytes.

The tests never run this script: its outputs are committed data, and this is how they were
made. Run from the repository root, with the full sets in their usual layout:

    python tests/data/make_subsets.py /path/to/datasets

Each source file is checked against the sha256 in its folder's SHA256SUMS (and against the
sums below, the files these subsets were cut from) before anything is written.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import struct
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent
TRAIN_PER_CLASS = 400  # 4,000 training images per dataset
TEST_PER_CLASS = 100  # 1,000 test images per dataset
SPLITS = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", TRAIN_PER_CLASS)}
SPLITS["t10k"] = ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", TEST_PER_CLASS)
# The gzipped source files the committed subsets were cut from, as their SHA256SUMS list them.
SOURCE_SHA256SUMS = {
    "mnist": """
1a1a05eab793c14bb050b398624a11b0ffd1a2953baed553b1b9bd079e2a20be  t10k-images-idx3-ubyte.gz
b91679a0acfe4ba0e50a2437a903084cba1f5f92592b016a25a7dfd00455798b  t10k-labels-idx1-ubyte.gz
0b367032e93c5d0cea0925647cfdb18614af8ee15f83e6f2fc2ad904a6835971  train-images-idx3-ubyte.gz
1787548bbe0bff1ec2ecdc0ef292b02df999e2d1a6002d27500982c652b17203  train-labels-idx1-ubyte.gz
""",
    "fashion-mnist": """
cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa  t10k-images-idx3-ubyte.gz
8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05  t10k-labels-idx1-ubyte.gz
b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7  train-images-idx3-ubyte.gz
0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056  train-labels-idx1-ubyte.gz
""",
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def parse_sums(text: str) -> dict[str, str]:
    """File name -> sha256, from the lines of a SHA256SUMS file."""
    return {name: digest for digest, name in (line.split() for line in text.splitlines() if line)}


def check_sources(folder: Path, pinned: str) -> None:
    """Refuse to cut from files other than the pinned ones (their SHA256SUMS agreeing)."""
    expected, listed = parse_sums(pinned), parse_sums((folder / "SHA256SUMS").read_text())
    for name, digest in expected.items():
        actual = sha256(folder / name)
        if actual != digest or listed.get(name) != digest:
            sys.exit(f"{folder / name}: sha256 {actual}, expected {digest} (and in SHA256SUMS)")


def read_idx(path: Path) -> np.ndarray:
    raw = gzip.decompress(path.read_bytes())
    ndim = raw[3]
    assert raw[:3] == b"\x00\x00\x08", f"{path}: expected an IDX file of uint8"
    shape = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def write_idx(path: Path, array: np.ndarray) -> None:
    """An IDX file of uint8, gzipped without a time stamp or a name: the same bytes each run."""
    header = b"\x00\x00\x08" + bytes([array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    with path.open("wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as handle:
        handle.write(header + np.ascontiguousarray(array, np.uint8).tobytes())


def first_per_class(labels: np.ndarray, per_class: int) -> np.ndarray:
    """Indices of the first `per_class` samples of every class, in the file's order."""
    keep = np.concatenate([np.flatnonzero(labels == c)[:per_class] for c in np.unique(labels)])
    return np.sort(keep)


def cut(source: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for images_stem, labels_stem, per_class in SPLITS.values():
        images = read_idx(source / f"{images_stem}.gz")
        labels = read_idx(source / f"{labels_stem}.gz")
        keep = first_per_class(labels, per_class)
        write_idx(target / f"{images_stem}.gz", images[keep])
        write_idx(target / f"{labels_stem}.gz", labels[keep])
        print(f"{target.name}/{images_stem}: {len(keep)} of {len(labels)} images")


def write_sums(target: Path) -> None:
    lines = [f"{sha256(p)}  {p.name}\n" for p in sorted(target.glob("*.gz"))]
    (target / "SHA256SUMS").write_text("".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", type=Path, help="folder holding mnist/ and fashion-mnist/")
    args = parser.parse_args()
    for folder, pinned in SOURCE_SHA256SUMS.items():
        check_sources(args.datasets / folder, pinned)
        cut(args.datasets / folder, OUT / folder)
        write_sums(OUT / folder)


if __name__ == "__main__":
    main()
