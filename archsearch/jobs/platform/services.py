"""What a process needs to serve or run jobs, built once at the edge from Settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Engine
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import Session, sessionmaker

from archsearch.jobs.platform.db import make_async_reader, make_engine, make_session_factory
from archsearch.jobs.platform.objects import open_object_store
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.platform.stopping import StopRequest
from archsearch.jobs.platform.store import ArtifactStore


@dataclass
class Services:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    store: ArtifactStore
    async_reader: AsyncEngine
    # Asked by SIGTERM or a shutdown: running jobs go back to the queue at a checkpoint.
    stop: StopRequest = field(default_factory=StopRequest)

    @classmethod
    def from_settings(cls, settings: Settings) -> Services:
        settings.prepare_directories()
        engine = make_engine(settings.resolved_database_url)
        return cls(
            settings,
            engine,
            make_session_factory(engine),
            ArtifactStore(open_object_store(settings)),
            make_async_reader(settings.resolved_database_url),
        )
