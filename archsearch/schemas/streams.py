"""Live streams (Server-Sent Events): the payloads of `GET /v1/jobs/{id}/stream` and
`GET /v1/jobs/stream`, and the stream position a client resumes from.

A job's stream sends, each with `id:` its position:
- `status`: the job (`JobPublic`, as `GET /v1/jobs/{id}` answers) when its state changes;
- `progress`: `StreamProgress` when its step changes;
- `metric`: one `StreamMetric` per new metric point;
- `event`: one `EventPublic` (a timeline entry, as `GET /v1/jobs/{id}/events`);
- `end`: the finished job, after which the server closes the stream.
The jobs stream sends `job` (`JobPublic`) when a visible job is submitted, changes state or
progresses (at most about once a second per job). Comment lines (`: ping`) keep idle
connections open through proxies.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

# A stream position, `<metric seq>-<event id>`: both parts only grow. Send it back as the
# Last-Event-ID header (or `?last_event_id=`) to resume with no gap and no duplicate.
STREAM_POSITION_PATTERN = r"^[0-9]{1,19}-[0-9]{1,19}$"


class StreamProgress(BaseModel):
    step: int
    total: int
    metrics: dict[str, float] = Field(description="the latest value of each metric")


class StreamMetric(BaseModel):
    step: int
    name: str
    value: float


class StreamPosition(BaseModel):
    """How far a client has read a job's stream: the last metric row and the last event."""

    metric_seq: int = Field(default=0, ge=0, le=2**63 - 1)
    event_id: int = Field(default=0, ge=0, le=2**63 - 1)

    @classmethod
    def parse(cls, text: str | None) -> StreamPosition:
        """`<metric seq>-<event id>` (as sent in `id:`); None or empty: the start."""
        if not text:
            return cls()
        metric_seq, event_id = text.split("-", 1)
        return cls(metric_seq=int(metric_seq), event_id=int(event_id))

    def __str__(self) -> str:
        return f"{self.metric_seq}-{self.event_id}"
