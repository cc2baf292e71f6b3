"""The FastAPI application factory."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi_offline import FastAPIOffline

from archsearch.api.auth import api_principal, current_principal, new_token_cache
from archsearch.api.broadcast import Broadcaster
from archsearch.api.errors import ERROR_RESPONSES, install_error_handlers
from archsearch.api.limits import BodyLimit
from archsearch.api.observability import HttpFigures, HttpMetrics, metrics_registry
from archsearch.api.routes import (
    artifacts,
    datasets,
    health,
    jobs,
    logs,
    metrics,
    queue,
    streams,
    studies,
)
from archsearch.api.storable import reject_unstorable_text
from archsearch.api.web import pages
from archsearch.api.web.session import SessionSigner
from archsearch.jobs.platform.broker import Enqueuer
from archsearch.jobs.platform.migrate import ensure_schema_current
from archsearch.jobs.platform.services import Services


def create_app(services: Services, enqueuer: Enqueuer) -> FastAPI:
    """Build the app; it refuses to start against a database that is behind the code."""
    broadcaster = Broadcaster(services.async_reader, services.settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        ensure_schema_current(services.engine)
        # Short GIL hand-offs keep requests answering while an upload is parsed (see
        # datasets.GIL_SWITCH_INTERVAL); set by the process that serves, not at import.
        sys.setswitchinterval(datasets.GIL_SWITCH_INTERVAL)
        broadcaster.close_with_server()
        yield
        await broadcaster.close()  # live streams (api/broadcast.py)

    # /docs and /redoc with Swagger UI and ReDoc served from the package, not from a CDN.
    app = FastAPIOffline(
        title="archsearch",
        version="0.1.0",
        summary="Search, prune and grow neural architectures as jobs.",
        lifespan=lifespan,
    )
    app.state.services = services
    app.state.enqueuer = enqueuer
    app.state.token_cache = new_token_cache()
    app.state.broadcaster = broadcaster
    app.state.session_signer = SessionSigner(services.settings)
    install_error_handlers(app)

    settings = services.settings
    app.add_middleware(
        BodyLimit,
        upload_max_bytes=settings.upload_max_bytes,
        json_max_bytes=settings.json_max_bytes,
    )
    # Added last, so outermost: it also counts requests the body limit refuses.
    app.state.metrics_registry = metrics_registry(services)
    app.add_middleware(HttpMetrics, figures=HttpFigures(app.state.metrics_registry))
    # Every /v1 route authenticates (a no-op in embedded mode), then refuses text the
    # database cannot store (422, not a 500 from the driver); health checks do neither.
    v1_dependencies = [Depends(api_principal), Depends(reject_unstorable_text)]
    # streams first: its /v1/jobs/stream would otherwise match jobs' /v1/jobs/{job_id}.
    for module in (streams, jobs, artifacts, logs, datasets, queue, studies):
        app.include_router(module.router, dependencies=v1_dependencies, responses=ERROR_RESPONSES)
    app.include_router(health.router)
    # The dashboard (issue 13): pages at / and their assets, served by this process.
    pages.mount(app)
    # Authenticated, not under /v1: Prometheus scrapes /metrics with an admin user's
    # `metrics` token (or an `admin` one).
    app.include_router(
        metrics.router, dependencies=[Depends(current_principal)], responses=ERROR_RESPONSES
    )
    return app
