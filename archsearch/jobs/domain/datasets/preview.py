"""A PNG grid of training samples, one row per class, for image datasets."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw

MAX_ROWS = 20  # classes shown
PER_CLASS = 8  # samples per class
MIN_CELL = 32  # small images are enlarged (nearest neighbour) to at least this many pixels
LABEL_WIDTH = 72


def _to_uint8(x: np.ndarray) -> np.ndarray:
    # One scale for the whole grid, from robust percentiles, so classes compare fairly.
    low, high = np.percentile(x, [0.5, 99.5])
    scaled = (x.astype(np.float64) - low) / max(high - low, 1e-12)
    pixels: np.ndarray = (np.clip(scaled, 0, 1) * 255).astype(np.uint8)
    return pixels


def _cell(image: np.ndarray, size: int) -> Image.Image:
    """(C, H, W) uint8 -> a PIL image of the grid cell."""
    pixels = image.transpose(1, 2, 0)  # (H, W, C)
    channels = pixels.shape[2]
    mode_pixels = pixels[:, :, 0] if channels != 3 else pixels  # other channel counts: the first
    cell = Image.fromarray(np.ascontiguousarray(mode_pixels))
    return cell.convert("RGB").resize(
        (size, round(size * image.shape[1] / image.shape[2])), Image.Resampling.NEAREST
    )


def preview_png(x: np.ndarray, y: np.ndarray, class_names: tuple[str, ...], seed: int = 0) -> bytes:
    """Up to PER_CLASS random samples of each of the first MAX_ROWS classes."""
    assert x.ndim == 4, f"previews are for images (N, C, H, W), got {x.shape}"
    rng = np.random.default_rng(seed)
    width = max(MIN_CELL, x.shape[3])
    height = round(width * x.shape[2] / x.shape[3])
    classes = list(range(min(len(class_names), MAX_ROWS)))
    canvas = Image.new(
        "RGB", (LABEL_WIDTH + PER_CLASS * (width + 2), len(classes) * (height + 2)), "white"
    )
    draw = ImageDraw.Draw(canvas)
    for row, cls in enumerate(classes):
        members = np.flatnonzero(y == cls)
        chosen = rng.choice(members, size=min(PER_CLASS, len(members)), replace=False)
        top = row * (height + 2)
        draw.text((4, top + height // 2 - 6), class_names[cls][:10], fill="black")
        for col, index in enumerate(sorted(chosen)):
            canvas.paste(_cell(_to_uint8(x[index]), width), (LABEL_WIDTH + col * (width + 2), top))
    out = io.BytesIO()
    canvas.save(out, format="PNG")
    return out.getvalue()
