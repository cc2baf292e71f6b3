"""Decoding the PNG/JPEG entries of an image-folder upload into one (N, C, H, W) array.

Each image's header is read first: its real format must be the one its name claims, and its
pixel count must be under the limit before a single pixel is decoded (a 100 KB PNG can
decode to gigabytes). All images must share one size; grey images become one channel, and
if any image has colour, every image becomes RGB.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import PurePosixPath

import numpy as np
from PIL import Image, UnidentifiedImageError

from archsearch.jobs.domain.datasets.archive import ByteBudget, read_entry
from archsearch.jobs.domain.datasets.options import UploadLimits
from archsearch.jobs.domain.errors import InvalidUpload, LimitExceeded

IMAGE_SUFFIXES = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG"}
GREY_MODES = {"1", "L", "LA", "I", "I;16", "F"}


def _open_checked(data: bytes, name: str, limits: UploadLimits) -> Image.Image:
    claimed = IMAGE_SUFFIXES[PurePosixPath(name).suffix.lower()]
    try:
        image = Image.open(io.BytesIO(data), formats=("PNG", "JPEG", "GIF", "BMP", "TIFF", "WEBP"))
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
        raise InvalidUpload(f"{name!r} is not a readable {claimed} image ({exc})") from None
    if image.format != claimed:
        raise InvalidUpload(
            f"{name!r} is named as {claimed} but is {image.format}; convert it or rename it"
        )
    width, height = image.size
    if width * height > limits.max_image_pixels:
        raise LimitExceeded(
            f"image {name!r} ({width}x{height} pixels)",
            limits.max_image_pixels,
            "upload_max_image_pixels",
            "pixels",
        )
    return image


def _pixels(image: Image.Image, name: str) -> np.ndarray:
    grey = image.mode in GREY_MODES
    try:
        converted = image.convert("L" if grey else "RGB")
    except (OSError, ValueError) as exc:  # truncated or corrupt pixel data
        raise InvalidUpload(f"{name!r} could not be decoded ({exc})") from None
    return np.asarray(converted, dtype=np.uint8)  # (H, W) or (H, W, 3)


def decode_images(
    archive: zipfile.ZipFile,
    entries: list[zipfile.ZipInfo],
    budget: ByteBudget,
    limits: UploadLimits,
) -> np.ndarray:
    """(N, C, H, W) uint8 pixels of every entry, in entry order."""
    arrays: list[np.ndarray] = []
    first_size: tuple[str, tuple[int, int]] | None = None
    for info in entries:
        image = _open_checked(read_entry(archive, info, budget), info.filename, limits)
        if first_size is None:
            first_size = (info.filename, image.size)
        elif image.size != first_size[1]:
            (w0, h0), (w1, h1) = first_size[1], image.size
            raise InvalidUpload(
                f"images differ in size: {first_size[0]!r} is {w0}x{h0} but {info.filename!r} is "
                f"{w1}x{h1}; resize them all to one size"
            )
        pixels = _pixels(image, info.filename)
        budget.spend(pixels.nbytes)  # decoded pixels count against the same budget
        arrays.append(pixels)
    if any(a.ndim == 3 for a in arrays):  # one colour image makes the dataset RGB
        arrays = [a if a.ndim == 3 else np.repeat(a[:, :, None], 3, axis=2) for a in arrays]
        return np.stack(arrays).transpose(0, 3, 1, 2)  # (N, 3, H, W)
    return np.stack(arrays)[:, None]  # (N, 1, H, W)
