"""The client's study methods, mixed into `ArchsearchClient`."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from archsearch.client.ids import resolve_id
from archsearch.schemas.studies import StudiesPublic, StudyDetail, StudyPlan, StudyPublic

StudyRef = str | uuid.UUID
Model = TypeVar("Model", bound=BaseModel)


class StudiesMixin:
    """Needs the host class's `_send` and `_get` (see `ArchsearchClient`)."""

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def _get(self, model: type[Model], path: str, **kwargs: Any) -> Model:
        raise NotImplementedError

    def submit_study(self, request: Mapping[str, Any]) -> StudyPublic:
        """Submit a study; sent once, never retried (a lost answer may hide its jobs)."""
        response = self._send("POST", "/v1/studies", json=dict(request))
        return StudyPublic.model_validate_json(response.content)

    def plan_study(self, request: Mapping[str, Any]) -> StudyPlan:
        """A study's dry run: its jobs and their optimizer steps; nothing is queued."""
        response = self._send("POST", "/v1/studies", json=dict(request), params={"dry_run": True})
        return StudyPlan.model_validate_json(response.content)

    def list_studies(self, limit: int = 100, id_prefix: str | None = None) -> list[StudyPublic]:
        params: dict[str, Any] = {"limit": limit}
        if id_prefix:
            params["id_prefix"] = id_prefix
        return self._get(StudiesPublic, "/v1/studies", params=params).data

    def resolve_study_id(self, id_or_prefix: StudyRef) -> uuid.UUID:
        """The full id of the caller's one study whose id starts with `id_or_prefix`, as
        `resolve_job_id` does for jobs (a full id is taken as is, without a request)."""
        return resolve_id(id_or_prefix, "study", self._study_ids_starting)

    def _study_ids_starting(self, hex_digits: str) -> list[uuid.UUID]:
        return [study.id for study in self.list_studies(limit=5, id_prefix=hex_digits)]

    def get_study(self, study_id: StudyRef) -> StudyDetail:
        return self._get(StudyDetail, f"/v1/studies/{self.resolve_study_id(study_id)}")

    def cancel_study(self, study_id: StudyRef) -> StudyPublic:
        response = self._send("POST", f"/v1/studies/{self.resolve_study_id(study_id)}/cancel")
        return StudyPublic.model_validate_json(response.content)

    def study_artifact(self, study_id: StudyRef, name: str) -> bytes:
        full_id = self.resolve_study_id(study_id)
        return self._send("GET", f"/v1/studies/{full_id}/artifacts/{name}").content

    def download_study(self, study_id: StudyRef, folder: str | Path) -> list[Path]:
        """Every artifact of an ended study into `folder`."""
        target = Path(folder)
        target.mkdir(parents=True, exist_ok=True)
        study_id = self.resolve_study_id(study_id)
        paths = []
        for name in self.get_study(study_id).artifacts:
            path = target / name
            path.write_bytes(self.study_artifact(study_id, name))
            paths.append(path)
        return paths

    def wait_study(
        self, study_id: StudyRef, timeout: float | None = None, poll: float = 1.0
    ) -> StudyDetail:
        """Poll until the study ended and its artifacts are built (or `timeout` seconds)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        study_id = self.resolve_study_id(study_id)
        while True:
            study = self.get_study(study_id)
            if study.status.ended and study.artifacts:
                return study
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(
                    f"study {study_id} is still {study.status} ({study.counts}) after {timeout}s"
                )
            time.sleep(poll)
