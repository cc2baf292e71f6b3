"""The client's model registry methods, mixed into `ArchsearchClient`.

A version is referred to by its number or by an alias: `ref` 3 or "production".
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from archsearch.schemas.models import ModelDetail, ModelPublic, ModelsPublic, ModelVersionPublic

Model = TypeVar("Model", bound=BaseModel)
VersionRef = int | str


def version_path(name: str, ref: VersionRef) -> str:
    """`/v1/models/<name>/versions/<n>` for a number, `.../aliases/<alias>` for an alias."""
    text = str(ref)
    kind = "versions" if text.isdigit() else "aliases"
    return f"/v1/models/{name}/{kind}/{text}"


def parse_model_ref(ref: str) -> tuple[str, str]:
    """`name@alias` or `name@3` into its two parts; a bare name means its latest version."""
    name, _, version = ref.partition("@")
    return name, version


class ModelsMixin:
    """Needs the host class's `_send`, `_get` and `_stream_to` (see `ArchsearchClient`)."""

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def _get(self, model: type[Model], path: str, **kwargs: Any) -> Model:
        raise NotImplementedError

    def _stream_to(self, path: str, name: str, destination: Path) -> Path:
        raise NotImplementedError

    def list_models(self) -> list[ModelPublic]:
        return self._get(ModelsPublic, "/v1/models").data

    def get_model(self, name: str) -> ModelDetail:
        return self._get(ModelDetail, f"/v1/models/{name}")

    def model_version(self, name: str, ref: VersionRef | None = None) -> ModelVersionPublic:
        """A version by number or alias; None: the latest version."""
        if ref is None or ref == "":
            ref = self.get_model(name).latest_version
        return self._get(ModelVersionPublic, version_path(name, ref))

    def promote(
        self, name: str, job_id: uuid.UUID | str, description: str = ""
    ) -> ModelVersionPublic:
        """The job's artifacts become the next version of `name`; sent once, never retried."""
        body = {"job_id": str(job_id), "description": description}
        response = self._send("POST", f"/v1/models/{name}/versions", json=body)
        return ModelVersionPublic.model_validate_json(response.content)

    def set_alias(self, name: str, alias: str, version: int) -> ModelDetail:
        response = self._send(
            "PUT", f"/v1/models/{name}/aliases/{alias}", json={"version": version}
        )
        return ModelDetail.model_validate_json(response.content)

    def remove_alias(self, name: str, alias: str) -> ModelDetail:
        response = self._send("DELETE", f"/v1/models/{name}/aliases/{alias}")
        return ModelDetail.model_validate_json(response.content)

    def archive_version(self, name: str, version: int, archived: bool = True) -> ModelVersionPublic:
        """Archive a version (its files stay downloadable), or restore it with False."""
        body = {"archived": archived}
        response = self._send("PATCH", f"/v1/models/{name}/versions/{version}", json=body)
        return ModelVersionPublic.model_validate_json(response.content)

    def download_model(self, name: str, ref: VersionRef | None, folder: str | Path) -> list[Path]:
        """Every file of a version (number, alias, or None for the latest) into `folder`,
        each checked against its sha256."""
        # By number once resolved: an alias moved meanwhile cannot mix two versions' files.
        version = self.model_version(name, ref)
        path = version_path(name, version.version)
        target = Path(folder)
        return [
            self._stream_to(f"{path}/artifacts/{f.name}", f.name, target / f.name)
            for f in version.files
        ]
