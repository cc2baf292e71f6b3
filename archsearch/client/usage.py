"""The client's usage report, mixed into `ArchsearchClient`: device time by user, team or
method over a period (`GET /v1/usage`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from archsearch.schemas.usage import UsageGroup, UsagePublic

Model = TypeVar("Model", bound=BaseModel)


class UsageMixin:
    """Needs the host class's `_get` (see `ArchsearchClient`)."""

    def _get(self, model: type[Model], path: str, **kwargs: Any) -> Model:
        raise NotImplementedError

    def usage(
        self,
        start: datetime | None = None,
        end: datetime | None = None,
        group_by: UsageGroup = "team",
    ) -> UsagePublic:
        """Device time in [start, end): both, or neither for the server's default window (the
        last seven days up to now, the window a team's weekly quota counts)."""
        params: dict[str, str] = {"group_by": group_by}
        if start is not None:
            params["from"] = start.isoformat()
        if end is not None:
            params["to"] = end.isoformat()
        return self._get(UsagePublic, "/v1/usage", params=params)
