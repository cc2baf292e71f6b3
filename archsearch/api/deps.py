"""All dependency injection of the API, as `Annotated` aliases.

The cheap ones are `async def`: FastAPI runs sync dependencies in its thread pool, and a
thread hop per lookup of app state would cost more than the lookup itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session
from starlette.requests import HTTPConnection

from archsearch.api.live.broadcast import Broadcaster
from archsearch.api.state import AppState
from archsearch.api.throttle import AuthThrottle
from archsearch.jobs.platform.broker import Enqueuer
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.platform.store import ArtifactStore


def app_state(connection: HTTPConnection) -> AppState:
    """The process's state (`api/state.py`); the one reader of `app.state`."""
    state: AppState = connection.app.state.archsearch
    return state


async def get_services(request: Request) -> Services:
    return app_state(request).services


async def get_enqueuer(request: Request) -> Enqueuer:
    return app_state(request).enqueuer


async def get_broadcaster(request: Request) -> Broadcaster:
    return app_state(request).live.broadcaster


ServicesDep = Annotated[Services, Depends(get_services)]
EnqueuerDep = Annotated[Enqueuer, Depends(get_enqueuer)]
BroadcasterDep = Annotated[Broadcaster, Depends(get_broadcaster)]


async def get_session(services: ServicesDep) -> AsyncIterator[Session]:
    # Creating a Session opens no connection; the handler's thread uses it, and closing
    # only hands the connection back to the pool.
    with services.sessions() as session:
        yield session


def read_session(services: Services) -> AsyncSession:
    """A session for reads: repository functions run through `await session.run_sync(...)`
    on an async autocommit connection, with no thread pool hop and no transaction round
    trips."""
    return AsyncSession(services.async_reader, expire_on_commit=False)


async def get_read_session(services: ServicesDep) -> AsyncIterator[AsyncSession]:
    async with read_session(services) as session:
        yield session


async def get_settings(services: ServicesDep) -> Settings:
    return services.settings


async def get_store(services: ServicesDep) -> ArtifactStore:
    return services.store


async def get_auth_throttle(request: Request) -> AuthThrottle:
    return app_state(request).auth_throttle


AuthThrottleDep = Annotated[AuthThrottle, Depends(get_auth_throttle)]
SessionDep = Annotated[Session, Depends(get_session)]
ReadSessionDep = Annotated[AsyncSession, Depends(get_read_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[ArtifactStore, Depends(get_store)]
