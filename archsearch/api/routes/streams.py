"""Live streams (Server-Sent Events) of one job and of the caller's visible jobs.

Team-scoped like every job route: another team's job answers 404 before any stream
starts. The frames come from the process's shared poller (`api/live/broadcast.py`); the
payloads are described in `archsearch.schemas.streams`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from archsearch.api.auth import CurrentUser
from archsearch.api.deps import BroadcasterDep, ServicesDep
from archsearch.api.live.streaming import RECENT_METRICS, metric_frames, sse_frame
from archsearch.api.params import JobId
from archsearch.api.presenters import job_with_queue_state
from archsearch.jobs.domain.errors import InvalidCursor
from archsearch.jobs.domain.jobs import repository, streams_repository
from archsearch.jobs.domain.jobs.streams_repository import MetricRow
from archsearch.schemas.jobs import JobStatus
from archsearch.schemas.streams import STREAM_POSITION_PATTERN, StreamPosition

router = APIRouter(prefix="/v1/jobs", tags=["streams"])

EVENT_STREAM = "text/event-stream"
# No caching, and no buffering by a proxy (nginx holds a response back without this).
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
STREAM_RESPONSES: dict[int | str, dict[str, object]] = {
    200: {"content": {EVENT_STREAM: {}}, "description": "a stream of Server-Sent Events"}
}
POSITION_HELP = "resume after this event id (`<metric seq>-<event id>`, as sent in `id:`)"
HISTORY_HELP = (
    "from the start, which metric points come first: the job's most recent "
    f"{RECENT_METRICS} (`recent`: a late client of a long job is live at once; the rest is "
    "at GET /v1/jobs/{id}/metrics) or all of them (`all`); ignored when resuming"
)


@router.get("/stream", response_class=StreamingResponse, responses=STREAM_RESPONSES)
async def stream_jobs(
    services: ServicesDep,
    principal: CurrentUser,
    broadcaster: BroadcasterDep,
    status_: Annotated[list[JobStatus], Query(alias="status")] = [],  # noqa: B006
    method: Annotated[list[str], Query()] = [],  # noqa: B006
) -> StreamingResponse:
    """`job` events (a JobPublic) as the caller's visible jobs are submitted, change state or
    progress (at most about once a second per job), filtered like `GET /v1/jobs`."""
    async with AsyncSession(services.async_reader) as session:
        await session.run_sync(streams_repository.latest_job_change, principal.team_filter)
    statuses = frozenset(s.value for s in status_)
    watch = broadcaster.watch_list(principal.team_filter, statuses, frozenset(method))
    return _response(broadcaster.frames(watch))


@router.get("/{job_id}/stream", response_class=StreamingResponse, responses=STREAM_RESPONSES)
async def stream_job(
    job_id: JobId,
    services: ServicesDep,
    principal: CurrentUser,
    broadcaster: BroadcasterDep,
    last_event_id_header: Annotated[
        str | None,
        Header(alias="Last-Event-ID", pattern=STREAM_POSITION_PATTERN, description=POSITION_HELP),
    ] = None,
    last_event_id: Annotated[
        str | None, Query(pattern=STREAM_POSITION_PATTERN, description=POSITION_HELP)
    ] = None,
    history: Annotated[Literal["recent", "all"], Query(description=HISTORY_HELP)] = "recent",
) -> StreamingResponse:
    """The job's `status` now, then its metric points (from the start: its last
    `RECENT_METRICS`, or all with `history=all`; resumed: those after the position) and its
    events, then each change as it happens, and `end` once it has finished."""
    # A browser's EventSource reconnects to the first URL with the header it last read:
    # the header is the newer of the two.
    resumed = last_event_id_header or last_event_id
    position = _position(resumed)
    async with AsyncSession(services.async_reader, expire_on_commit=False) as session:
        row = await session.run_sync(repository.read_job_row, job_id, principal.team_filter)
        public = await session.run_sync(job_with_queue_state, row, services.settings)
        recent: list[MetricRow] = []
        if not resumed and history == "recent":
            recent = await session.run_sync(
                streams_repository.recent_metrics, job_id, RECENT_METRICS
            )
    watch = broadcaster.watch_job(public, position)
    first = sse_frame("status", public.model_dump_json(), str(position))
    return _response(broadcaster.frames(watch, first + metric_frames(watch, recent)))


def _position(text: str | None) -> StreamPosition:
    try:
        return StreamPosition.parse(text)
    except ValidationError:
        raise InvalidCursor(
            "last_event_id is past any position this server issues; reconnect without it"
        ) from None


def _response(frames: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(frames, media_type=EVENT_STREAM, headers=STREAM_HEADERS)
