"""What the uploader chooses (label column, split) and what the server allows (limits)."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import asdict, dataclass

from archsearch.jobs.platform.settings import Settings


@dataclass(frozen=True)
class UploadOptions:
    """Choices that change the dataset built from the same bytes (so they are part of its id),
    plus a display name that does not."""

    name: str | None = None
    label_column: str = "label"  # csv only
    test_fraction: float = 0.2  # used only when the upload has no test split
    split_seed: int = 0
    num_classes: int | None = None  # default: largest label + 1

    def identity(self) -> dict[str, object]:
        values = asdict(self)
        del values["name"]
        return values


def dataset_id_for(
    upload_sha256: str, options: UploadOptions, team_id: uuid.UUID | None = None
) -> str:
    """Same bytes and same choices give the same id: an upload is stored once per team (a
    shared id would tell one team what another uploaded)."""
    key = json.dumps(
        [upload_sha256, options.identity(), team_id.hex if team_id else None], sort_keys=True
    )
    return "ds-" + hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class UploadLimits:
    max_bytes: int = 256 << 20
    max_uncompressed_bytes: int = 1 << 30
    max_entries: int = 100_000
    max_image_pixels: int = 4096 * 4096
    min_class_samples: int = 5
    max_memory_bytes: int = 512 << 20

    @classmethod
    def from_settings(cls, settings: Settings) -> UploadLimits:
        return cls(
            max_bytes=settings.upload_max_bytes,
            max_uncompressed_bytes=settings.upload_max_uncompressed_bytes,
            max_entries=settings.upload_max_entries,
            max_image_pixels=settings.upload_max_image_pixels,
            min_class_samples=settings.dataset_min_class_samples,
            max_memory_bytes=settings.upload_max_memory_bytes,
        )
