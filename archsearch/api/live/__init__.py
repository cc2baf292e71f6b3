"""The live side of an API process: the one feed of job changes and what reacts to it.

`feed.py` is the feed (one listening connection per process on PostgreSQL, a timed check on
SQLite); `answers.py` keeps presented GET job answers fresh by it; `broadcast.py` and
`streaming.py` serve the live streams (SSE), their poller woken by it; the webhook sender is
nudged by it (`jobs/domain/webhooks/deliverer.py`). `LiveJobs` holds the three for the app.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from archsearch.api.live.answers import JobAnswers
from archsearch.api.live.broadcast import Broadcaster
from archsearch.api.live.feed import JobFeed, feed_for
from archsearch.jobs.platform.services import Services


@dataclass
class LiveJobs:
    feed: JobFeed
    answers: JobAnswers
    broadcaster: Broadcaster
    _feeding: asyncio.Task[None] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, services: Services) -> LiveJobs:
        feed = feed_for(services.settings.resolved_database_url)
        broadcaster = Broadcaster(services.async_reader, services.settings, feed)
        answers = JobAnswers(feed, progress_seconds=services.settings.progress_flush_seconds)
        return cls(feed, answers, broadcaster)

    def start(self) -> None:
        """On the serving event loop, at the app's start."""
        self.broadcaster.close_with_server()
        self._feeding = asyncio.create_task(self.feed.run(), name="job-feed")

    async def stop(self) -> None:
        if self._feeding is not None:
            self._feeding.cancel()
        await self.broadcaster.close()
