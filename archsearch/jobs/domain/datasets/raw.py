"""What a format reader hands to validation: arrays as the user gave them, not yet checked."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RawDataset:
    format: str  # npz | csv | idx | images
    x: np.ndarray
    y: np.ndarray
    x_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    class_names: tuple[str, ...] | None = None  # when labels were names (csv text, folders)
