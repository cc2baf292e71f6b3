"""Reading a live stream (Server-Sent Events) in a test, in the background or to its end."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import httpx

from archsearch.client.streams import ServerEvent, parse_events


class StreamReader(threading.Thread):
    """Reads one stream in a thread until the server ends it, `stop_when` holds for an
    event, or the test calls `close()`; the events (not the keep-alives) are in `events`."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        stop_when: Callable[[ServerEvent], bool] = lambda _: False,
    ) -> None:
        super().__init__(daemon=True)
        self.url, self.headers, self.stop_when = url, headers or {}, stop_when
        self.events: list[ServerEvent] = []
        self.status: int | None = None
        self.opened = threading.Event()
        self.error: BaseException | None = None
        self._closing = False

    def run(self) -> None:
        try:
            timeout = httpx.Timeout(10.0, read=60.0)
            with httpx.stream("GET", self.url, headers=self.headers, timeout=timeout) as response:
                self.status = response.status_code
                self.opened.set()
                for event in parse_events(response.iter_lines()):
                    if self._closing:
                        return
                    if event is not None:
                        self.events.append(event)
                        if self.stop_when(event):
                            return
        except BaseException as exc:  # noqa: BLE001 - reported by finish()
            self.error = exc
        finally:
            self.opened.set()

    def close(self) -> None:
        self._closing = True

    def finish(self, timeout: float) -> list[ServerEvent]:
        self.join(timeout)
        assert not self.is_alive(), f"the stream did not end within {timeout}s"
        if self.error is not None:
            raise self.error
        return self.events


def read_stream(url: str, headers: dict[str, str] | None = None, timeout: float = 120) -> Any:
    reader = StreamReader(url, headers)
    reader.start()
    return reader.finish(timeout)


def of_kind(events: list[ServerEvent], kind: str) -> list[dict[str, Any]]:
    return [json.loads(e.data) for e in events if e.event == kind]


def points(events: list[ServerEvent]) -> list[tuple[str, int, float]]:
    return [(p["name"], p["step"], p["value"]) for p in of_kind(events, "metric")]
