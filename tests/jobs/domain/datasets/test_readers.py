"""Upload readers and validation without HTTP: real files of every format, generated here,
and the malformed ones the issue lists (built in `files.py`)."""

from __future__ import annotations

import gzip
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from archsearch.jobs.domain.datasets.archive import check_entry_name
from archsearch.jobs.domain.datasets.options import UploadLimits, UploadOptions, dataset_id_for
from archsearch.jobs.domain.datasets.service import build_dataset
from archsearch.jobs.domain.datasets.validate import stratified_split
from archsearch.jobs.domain.errors import InvalidUpload, LimitExceeded, UnsafeArchive
from tests.jobs.domain.datasets.files import (
    MALFORMED,
    blobs,
    csv_bytes,
    grey_images,
    idx_bytes,
    idx_zip_bytes,
    image_bytes,
    image_zip_bytes,
    npz_bytes,
    set_declared_size,
    zip_bytes,
)

LIMITS = UploadLimits(min_class_samples=5)
OPTIONS = UploadOptions()


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def build(
    tmp_path: Path,
    name: str,
    data: bytes,
    options: UploadOptions = OPTIONS,
    limits: UploadLimits = LIMITS,
):
    return build_dataset(write(tmp_path, name, data), name, options, limits)


# ---- formats -----------------------------------------------------------------------------


def test_npz_with_test_split_keeps_it_and_stats_match_numpy(tmp_path: Path) -> None:
    x, y = blobs(shape=(2, 4, 4))
    xt, yt = blobs(shape=(2, 4, 4), seed=1, per_class=6)
    valid = build(tmp_path, "d.npz", npz_bytes(x=x, y=y, x_test=xt, y_test=yt))
    assert valid.split == {"source": "upload"} and valid.kind == "images"
    assert valid.input_shape == (2, 4, 4) and valid.num_classes == 3
    np.testing.assert_array_equal(valid.x_test, xt)
    assert valid.class_counts() == {"train": [20, 20, 20], "test": [6, 6, 6]}
    mean, std = valid.channel_stats()
    for c in range(2):  # independent: every value of channel c, flattened
        values = x[:, c].astype(np.float64).ravel()
        assert mean[c] == pytest.approx(values.mean(), rel=1e-12)
        assert std[c] == pytest.approx(np.sqrt(((values - values.mean()) ** 2).mean()), rel=1e-12)


def test_missing_test_split_is_seeded_stratified_and_recorded(tmp_path: Path) -> None:
    x, y = blobs(classes=4, per_class=25)
    options = UploadOptions(test_fraction=0.2, split_seed=7)
    valid = build(tmp_path, "d.npz", npz_bytes(x=x, y=y), options)
    assert valid.split == {
        "source": "made",
        "method": "stratified",
        "test_fraction": 0.2,
        "seed": 7,
    }
    assert valid.class_counts() == {"train": [20] * 4, "test": [5] * 4}
    # Every sample lands in exactly one split, with its label.
    rows = {
        tuple(r): label
        for r, label in zip(
            np.concatenate([valid.x_train, valid.x_test]),
            np.concatenate([valid.y_train, valid.y_test]),
            strict=True,
        )
    }
    assert rows == {tuple(r): label for r, label in zip(x, y, strict=True)}
    again = build(tmp_path, "e.npz", npz_bytes(x=x, y=y), options)
    np.testing.assert_array_equal(again.x_test, valid.x_test)
    other = build(tmp_path, "f.npz", npz_bytes(x=x, y=y), UploadOptions(split_seed=8))
    assert not np.array_equal(other.x_test, valid.x_test)


def test_stratified_split_keeps_one_test_sample_and_one_train_sample_per_class() -> None:
    y = np.array([0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])
    train, test = stratified_split(y, 0.01, seed=0)
    assert sorted(np.bincount(y[test])) == [1, 1]
    train, test = stratified_split(y, 0.99, seed=0)
    assert np.bincount(y[train]).tolist() == [1, 1]
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(len(y)))


def test_csv_with_named_classes_and_label_column_anywhere(tmp_path: Path) -> None:
    x, y = blobs(classes=3, per_class=10, shape=(4,))
    names = np.array(["dog", "cat", "emu"])[y]
    valid = build(
        tmp_path, "t.csv", csv_bytes(x, names, "species"), UploadOptions(label_column="species")
    )
    assert valid.kind == "features" and valid.input_shape == (4,)
    assert valid.class_names == ("cat", "dog", "emu")
    all_x = np.concatenate([valid.x_train, valid.x_test])
    all_names = np.array(valid.class_names)[np.concatenate([valid.y_train, valid.y_test])]
    expected = {tuple(np.float32(r)): n for r, n in zip(x, names, strict=True)}
    assert {tuple(r): n for r, n in zip(all_x, all_names, strict=True)} == expected


def test_csv_without_the_label_column_names_the_columns(tmp_path: Path) -> None:
    x, y = blobs()
    with pytest.raises(InvalidUpload) as caught:
        build(tmp_path, "t.csv", csv_bytes(x, y, "target"))
    assert caught.value.field == "label_column"
    assert "no column 'label'" in str(caught.value) and "f0, target, f1" in str(caught.value)


@pytest.mark.parametrize("gz", [False, True])
def test_idx_zip_reads_the_four_files(tmp_path: Path, gz: bool) -> None:
    x, y = grey_images(classes=3, per_class=10, side=6)
    xt, yt = grey_images(classes=3, per_class=5, side=6, seed=1)
    valid = build(tmp_path, "m.zip", idx_zip_bytes(x, y, xt, yt, gz=gz))
    assert (
        valid.format == "idx"
        and valid.input_shape == (1, 6, 6)
        and valid.split == {"source": "upload"}
    )
    np.testing.assert_array_equal(valid.x_train[:, 0], x)
    np.testing.assert_array_equal(valid.y_test, yt)


def test_png_folder_zip_decodes_exact_pixels(tmp_path: Path) -> None:
    x, y = grey_images(classes=3, per_class=8, side=5)
    test = np.arange(len(y)) % 8 >= 6  # the last two of every class
    valid = build(tmp_path, "p.zip", image_zip_bytes(x, y, ["ant", "bee", "cow"], test=test))
    assert valid.format == "images" and valid.class_names == ("ant", "bee", "cow")
    assert valid.split == {"source": "upload"} and valid.class_counts() == {
        "train": [6] * 3,
        "test": [2] * 3,
    }
    np.testing.assert_array_equal(valid.x_train[:, 0], x[~test])  # lossless PNG, entry order kept
    np.testing.assert_array_equal(valid.y_train, y[~test])
    np.testing.assert_array_equal(valid.x_test[:, 0], x[test])


def test_jpeg_folder_zip_in_colour(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(2), 6)
    x = np.full((12, 16, 16, 3), 60, np.uint8)
    x[y == 1, :, :, 0] = 200  # class 1 is red
    x = np.clip(x + rng.integers(0, 10, x.shape), 0, 255).astype(np.uint8)
    valid = build(tmp_path, "j.zip", image_zip_bytes(x, y, ["grey", "red"], fmt="JPEG"))
    assert valid.input_shape == (3, 16, 16)
    red = np.concatenate([valid.x_train, valid.x_test])[:, 0].mean(axis=(1, 2))  # (N,)
    labels = np.concatenate([valid.y_train, valid.y_test])
    assert red[labels == 1].min() > 180 > 80 > red[labels == 0].max()  # lossy, but classes intact


# ---- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_uploads_are_refused_with_their_message(tmp_path: Path, case: str) -> None:
    name, make, error, words = MALFORMED[case]
    limits = UploadLimits(max_uncompressed_bytes=1 << 30)
    with pytest.raises(error) as caught:
        build(tmp_path, name, make(), limits=limits)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("d.npz", b"x,y\n1,2\n", "named .npz but is not one"),
        ("d.csv", zip_bytes({"a.txt": b"1"}), "holds binary data"),
        ("d.zip", b"label,f\n", "not a zip archive"),
        (
            "d.zip",
            zip_bytes({"a/1.png": image_bytes(np.zeros((4, 4), np.uint8), "JPEG")}),
            "named as PNG but is JPEG",
        ),
        ("d.zip", zip_bytes({"notes.txt": b"hello"}), "neither the four IDX files"),
        ("d.npy", b"\x93NUMPY", "upload an .npz"),
        ("d.parquet", b"PAR1", "unsupported file type '.parquet'"),
    ],
)
def test_a_file_that_claims_one_format_and_is_another_is_refused(
    tmp_path: Path, name: str, data: bytes, words: str
) -> None:
    with pytest.raises(InvalidUpload) as caught:
        build(tmp_path, name, data)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("arrays", "words"),
    [
        (
            {"x": np.zeros((30, 4, 4)), "y": np.zeros(30)},
            "x has 3 dimensions (30, 4, 4); expected (N, features) or (N, C, H, W)",
        ),
        ({"x": np.zeros((30, 8, 8, 3)), "y": np.zeros(30)}, "channels-last"),
        (
            {"x": np.full((30, 2), np.nan), "y": np.arange(30) % 2},
            "60 NaN value(s) (first in sample 0)",
        ),
        (
            {"x": np.where(np.arange(60).reshape(30, 2) == 9, np.inf, 0.0), "y": np.arange(30) % 2},
            "1 infinite value(s) (first in sample 4)",
        ),
        ({"x": np.full((30, 2), 1e300), "y": np.arange(30) % 2}, "fit in float32"),
        ({"x": np.zeros((30, 2)), "y": np.arange(30) % 2 - 1}, "holds label -1"),
        ({"x": np.zeros((30, 2)), "y": np.full(30, 0.5)}, "labels must be integers"),
        ({"x": np.zeros((30, 2)), "y": np.zeros(30)}, "a single class"),
        (
            {"x": np.zeros((30, 2)), "y": np.arange(30) % 2, "x_test": np.zeros((3, 2))},
            "x_test is given without y_test",
        ),
        (
            {
                "x": np.zeros((30, 2)),
                "y": np.arange(30) % 2,
                "x_test": np.zeros((3, 3)),
                "y_test": np.zeros(3),
            },
            "x_test samples have shape (3,)",
        ),
        (
            {"x": np.zeros((30, 2)), "y": np.arange(30) % 2, "labels": np.zeros(3)},
            "array named 'labels'",
        ),
        ({"x": np.zeros((30, 2))}, "no array 'y'"),
        (
            {"x": np.array([["a", "b"]] * 30), "y": np.arange(30) % 2},
            "dtype <U1; expected real numbers",
        ),
    ],
)
def test_invalid_arrays_say_what_is_wrong_and_what_is_expected(
    tmp_path: Path, arrays: dict, words: str
) -> None:
    with pytest.raises(InvalidUpload) as caught:
        build(tmp_path, "d.npz", npz_bytes(**arrays))
    assert words in str(caught.value)


def test_labels_out_of_range_of_the_given_class_count(tmp_path: Path) -> None:
    x, y = blobs(classes=4)
    with pytest.raises(
        InvalidUpload, match=r"label 3 is out of range: with 3 classes labels must be 0..2"
    ):
        build(tmp_path, "d.npz", npz_bytes(x=x, y=y), UploadOptions(num_classes=3))


def idx_entries_with(stem: str, data: bytes) -> dict[str, bytes]:
    """The four IDX files, small and valid, except `stem` (which comes first)."""
    x, y = grey_images()
    files = {
        "train-images-idx3-ubyte": idx_bytes(x),
        "train-labels-idx1-ubyte": idx_bytes(y.astype(np.uint8)),
        "t10k-images-idx3-ubyte": idx_bytes(x),
        "t10k-labels-idx1-ubyte": idx_bytes(y.astype(np.uint8)),
    }
    return {stem: data, **{k: v for k, v in files.items() if not stem.startswith(k)}}


def test_real_zip_bomb_stops_at_the_uncompressed_limit(tmp_path: Path) -> None:
    bomb = zip_bytes(idx_entries_with("train-images-idx3-ubyte", bytes(20 << 20)))
    assert len(bomb) < 100_000
    with pytest.raises(LimitExceeded, match="declared uncompressed size"):
        build(tmp_path, "b.zip", bomb, limits=UploadLimits(max_uncompressed_bytes=5 << 20))
    # Declared sizes that lie (small) do not let more bytes out: zipfile stops at them and the
    # CRC check fails, so the upload is refused as damaged without inflating 20 MB.
    with pytest.raises(InvalidUpload, match="damaged"):
        build(
            tmp_path,
            "b.zip",
            set_declared_size(bomb, 1000),
            limits=UploadLimits(max_uncompressed_bytes=5 << 20),
        )


def test_gzip_bomb_inside_the_zip_stops_at_the_budget(tmp_path: Path) -> None:
    bomb = zip_bytes(idx_entries_with("train-images-idx3-ubyte.gz", gzip.compress(bytes(20 << 20))))
    with pytest.raises(LimitExceeded, match="uncompressed size of the upload"):
        build(tmp_path, "g.zip", bomb, limits=UploadLimits(max_uncompressed_bytes=5 << 20))


def test_csv_lines_and_labels_are_charged_as_they_are_parsed(tmp_path: Path) -> None:
    small = UploadLimits(max_memory_bytes=1 << 20)
    wide = ("label" + ",a" * 100_000 + "\n").encode()  # 200 KB of text, ~13 MB parsed
    with pytest.raises(LimitExceeded, match="UPLOAD_MAX_MEMORY_BYTES"):
        build(tmp_path, "wide.csv", wide, limits=small)
    labels = "x,label\n" + "".join(f"{i},label-{i}\n" for i in range(10_000))
    with pytest.raises(LimitExceeded, match="UPLOAD_MAX_MEMORY_BYTES"):  # 10,000 x 256 bytes
        build(tmp_path, "labels.csv", labels.encode(), limits=small)


def test_an_npz_shape_too_large_for_int64_is_refused_not_wrapped(tmp_path: Path) -> None:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (1 << 32, 1 << 32)}
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("x.npy", header.getvalue() + bytes(64))
        archive.writestr("y.npy", header.getvalue() + bytes(64))
    with pytest.raises(InvalidUpload, match="truncated"):
        build(tmp_path, "wrap.npz", buffer.getvalue())


def test_entry_and_pixel_limits(tmp_path: Path) -> None:
    x, y = grey_images(classes=2, per_class=10, side=20)
    data = image_zip_bytes(x, y, ["a", "b"])
    with pytest.raises(
        LimitExceeded,
        match="20 entries is over the limit of 10 entries .ARCHSEARCH_UPLOAD_MAX_ENTRIES",
    ):
        build(tmp_path, "i.zip", data, limits=UploadLimits(max_entries=10))
    with pytest.raises(LimitExceeded, match=r"\(20x20 pixels\) is over the limit of 399 pixels"):
        build(tmp_path, "i.zip", data, limits=UploadLimits(max_image_pixels=399))
    assert build(
        tmp_path, "i.zip", data, limits=UploadLimits(max_image_pixels=400)
    ).input_shape == (1, 20, 20)


@pytest.mark.parametrize(
    "name", ["/etc/passwd", "\\windows\\x.png", "C:/x.png", "a/../../x.png", "a\\..\\x.png"]
)
def test_unsafe_entry_names(name: str) -> None:
    with pytest.raises(UnsafeArchive):
        check_entry_name(name)


def test_images_of_different_sizes_name_both(tmp_path: Path) -> None:
    entries = {f"a/{i}.png": image_bytes(np.zeros((8, 8), np.uint8)) for i in range(6)}
    entries["b/odd.png"] = image_bytes(np.zeros((9, 8), np.uint8))
    with pytest.raises(InvalidUpload, match=r"'a/0.png' is 8x8 but 'b/odd.png' is 8x9"):
        build(tmp_path, "s.zip", zip_bytes(entries))


def test_dataset_id_depends_on_content_and_options_not_on_the_name() -> None:
    a = dataset_id_for("ab" * 32, UploadOptions(name="one"))
    assert a == dataset_id_for("ab" * 32, UploadOptions(name="two"))
    assert a != dataset_id_for("ab" * 32, UploadOptions(split_seed=1))
    assert a != dataset_id_for("cd" * 32, UploadOptions())
