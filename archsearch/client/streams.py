"""Following a job's live stream (Server-Sent Events) on the light side: the few lines of
the event-stream format the server sends, parsed without a dependency, and the job as a
waiter sees it grow from `status`, `progress` and `end` events."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from archsearch.schemas.jobs import JobPublic
from archsearch.schemas.streams import StreamProgress

KEEP_ALIVE = None  # what `parse_events` yields for a comment line (the server's `: ping`)


@dataclass(frozen=True)
class ServerEvent:
    event: str
    data: str
    id: str | None  # the last id the stream sent (it carries over, as in a browser)


def parse_events(lines: Iterable[str]) -> Iterator[ServerEvent | None]:
    """Events from the lines of a text/event-stream body; None for each comment line, so a
    reader can check its clock while the stream is idle."""
    event, data, last_id = "message", list[str](), None
    for line in lines:
        if not line:  # a blank line ends an event
            if data:
                yield ServerEvent(event, "\n".join(data), last_id)
            event, data = "message", []
            continue
        if line.startswith(":"):
            yield KEEP_ALIVE
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
        elif name == "id":
            last_id = value


def apply_event(job: JobPublic | None, event: ServerEvent) -> JobPublic | None:
    """The job after `event`: a `status` or `end` replaces it, `progress` updates its step."""
    if event.event in ("status", "end"):
        return JobPublic.model_validate_json(event.data)
    if event.event == "progress" and job is not None:
        progress = StreamProgress.model_validate_json(event.data)
        share = progress.step / progress.total if progress.total else 0.0
        return job.model_copy(
            update={
                "step": progress.step,
                "total_steps": progress.total,
                "progress": share,
                "latest_metrics": progress.metrics,
            }
        )
    return job


class NoStreams(Exception):
    """The server has no live streams (an older version): wait() polls instead."""


class Follower:
    """What a waiter knows from the stream so far: the job, and the last event id."""

    def __init__(self, on_update: Callable[[JobPublic], None] | None) -> None:
        self.on_update = on_update
        self.job: JobPublic | None = None
        self.position: str | None = None

    def take(self, event: ServerEvent) -> JobPublic | None:
        """Note the event; the finished job when it is the stream's `end`."""
        self.position = event.id or self.position
        job = apply_event(self.job, event)
        if job is not None and job is not self.job:
            self.job = job
            if self.on_update:
                self.on_update(job)
        return job if event.event == "end" else None
