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

from archsearch.jobs.platform.broker import Enqueuer
from archsearch.jobs.platform.services import Runtime
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.platform.store import ArtifactStore


async def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime  # type: ignore[no-any-return]


async def get_enqueuer(request: Request) -> Enqueuer:
    return request.app.state.enqueuer  # type: ignore[no-any-return]


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
EnqueuerDep = Annotated[Enqueuer, Depends(get_enqueuer)]


async def get_session(runtime: RuntimeDep) -> AsyncIterator[Session]:
    # Creating a Session opens no connection; the handler's thread uses it, and closing
    # only hands the connection back to the pool.
    with runtime.sessions() as session:
        yield session


async def get_read_session(runtime: RuntimeDep) -> AsyncIterator[AsyncSession]:
    # Reads run repository functions through `await session.run_sync(...)` on an async
    # autocommit connection: no thread pool hop and no transaction round trips.
    async with AsyncSession(runtime.async_reader, expire_on_commit=False) as session:
        yield session


async def get_settings(runtime: RuntimeDep) -> Settings:
    return runtime.settings


async def get_store(runtime: RuntimeDep) -> ArtifactStore:
    return runtime.store


SessionDep = Annotated[Session, Depends(get_session)]
ReadSessionDep = Annotated[AsyncSession, Depends(get_read_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[ArtifactStore, Depends(get_store)]
