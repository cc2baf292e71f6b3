"""Decoding the PNG/JPEG entries of an image-folder upload into one (N, C, H, W) array.

Each image's header is read first: its real format must be the one its name claims, and its
pixel count must be under the limit before a single pixel is decoded (a 100 KB PNG can
decode to gigabytes). All images must share one size; grey images become one channel, and
if any image has colour, every image becomes RGB. The (N, C, H, W) array is allocated once,
charged to the upload's `MemoryBudget` before a pixel is decoded, and filled image by image.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import PurePosixPath

import numpy as np
from PIL import Image, UnidentifiedImageError

from archsearch.jobs.domain.datasets.archive import ByteBudget, MemoryBudget, read_entry
from archsearch.jobs.domain.datasets.options import UploadLimits
from archsearch.jobs.domain.errors import InvalidUpload, LimitExceeded

IMAGE_SUFFIXES = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG"}
GREY_MODES = {"1", "L", "LA", "I", "I;16", "F"}
# What decoding one image holds at its worst, per pixel: Pillow's decoded image (up to 4
# bytes a pixel: RGB is stored as RGBX, I and F as 32 bits), the converted copy (4 again)
# and the packed bytes numpy copies out of it (3). Checked against the budget from the
# header's width and height, before the decoder allocates any of it.
DECODE_BYTES_PER_PIXEL = 11


def _open_checked(data: bytes | bytearray, name: str, limits: UploadLimits) -> Image.Image:
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


def _pixels(image: Image.Image, name: str, memory: MemoryBudget) -> np.ndarray:
    grey = image.mode in GREY_MODES
    width, height = image.size
    memory.require_room(width * height * DECODE_BYTES_PER_PIXEL, f"image {name!r} decoded")
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
    memory: MemoryBudget,
) -> np.ndarray:
    """(N, C, H, W) uint8 pixels of every entry, in entry order. The array is charged and
    allocated from the first image's header, before any pixel is decoded."""
    images: np.ndarray | None = None
    first_size: tuple[str, tuple[int, int]] = ("", (0, 0))
    for i, info in enumerate(entries):
        data = read_entry(archive, info, budget, memory)
        image = _open_checked(data, info.filename, limits)
        colour = image.mode not in GREY_MODES
        if images is None:
            first_size = (info.filename, image.size)
            width, height = image.size
            images = _allocate(len(entries), 3 if colour else 1, (height, width), memory)
        elif image.size != first_size[1]:
            (w0, h0), (w1, h1) = first_size[1], image.size
            raise InvalidUpload(
                f"images differ in size: {first_size[0]!r} is {w0}x{h0} but {info.filename!r} is "
                f"{w1}x{h1}; resize them all to one size"
            )
        elif colour and images.shape[1] == 1:  # one colour image makes the dataset RGB
            images = _as_rgb(images, i, memory)
        pixels = _pixels(image, info.filename, memory)
        budget.spend(pixels.nbytes)  # decoded pixels count against the same budget
        images[i] = pixels.transpose(2, 0, 1) if pixels.ndim == 3 else pixels  # grey: all
        del data, image, pixels  # the next image's room is checked without these
    if images is None:
        raise InvalidUpload("the zip holds no images")
    return images


def _allocate(count: int, channels: int, size: tuple[int, ...], memory: MemoryBudget) -> np.ndarray:
    shape = (count, channels, *size)
    memory.spend(int(np.prod(shape)), "the decoded images")
    return np.empty(shape, dtype=np.uint8)


def _as_rgb(grey: np.ndarray, filled: int, memory: MemoryBudget) -> np.ndarray:
    rgb = _allocate(grey.shape[0], 3, grey.shape[2:], memory)
    rgb[:filled] = grey[:filled]  # the one channel broadcast to three
    return rgb
