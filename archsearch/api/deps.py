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

from archsearch.api.throttle import AuthThrottle
from archsearch.jobs.platform.broker import Enqueuer
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.platform.store import ArtifactStore


async def get_services(request: Request) -> Services:
    return request.app.state.services  # type: ignore[no-any-return]


async def get_enqueuer(request: Request) -> Enqueuer:
    return request.app.state.enqueuer  # type: ignore[no-any-return]


ServicesDep = Annotated[Services, Depends(get_services)]
EnqueuerDep = Annotated[Enqueuer, Depends(get_enqueuer)]


async def get_session(services: ServicesDep) -> AsyncIterator[Session]:
    # Creating a Session opens no connection; the handler's thread uses it, and closing
    # only hands the connection back to the pool.
    with services.sessions() as session:
        yield session


async def get_read_session(services: ServicesDep) -> AsyncIterator[AsyncSession]:
    # Reads run repository functions through `await session.run_sync(...)` on an async
    # autocommit connection: no thread pool hop and no transaction round trips.
    async with AsyncSession(services.async_reader, expire_on_commit=False) as session:
        yield session


async def get_settings(services: ServicesDep) -> Settings:
    return services.settings


async def get_store(services: ServicesDep) -> ArtifactStore:
    return services.store


async def get_auth_throttle(request: Request) -> AuthThrottle:
    return request.app.state.auth_throttle  # type: ignore[no-any-return]


AuthThrottleDep = Annotated[AuthThrottle, Depends(get_auth_throttle)]
SessionDep = Annotated[Session, Depends(get_session)]
ReadSessionDep = Annotated[AsyncSession, Depends(get_read_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[ArtifactStore, Depends(get_store)]
