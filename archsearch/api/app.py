"""The FastAPI application factory: what one API process is made of.

The process state (`state.py`), the error handlers (`errors.py`), the middleware (body
limit, nosniff, request metrics), the routers (one per resource, `routes/`), the dashboard
(`web/`) and, for as long as it serves, the live side (`live/`: the job feed and what reacts
to it) and the webhook sender.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import Depends, FastAPI
from fastapi_offline import FastAPIOffline

from archsearch.api.auth import current_principal, new_token_cache
from archsearch.api.errors import ERROR_RESPONSES, install_error_handlers
from archsearch.api.headers import NoSniff
from archsearch.api.limits import BodyLimit
from archsearch.api.live import LiveJobs
from archsearch.api.observability import HttpFigures, HttpMetrics, metrics_registry
from archsearch.api.openapi import serve_portable_openapi
from archsearch.api.query_params import reject_unknown_query
from archsearch.api.routes import (
    artifacts,
    datasets,
    health,
    jobs,
    logs,
    metrics,
    models,
    queue,
    streams,
    studies,
    usage,
    webhooks,
)
from archsearch.api.served_files import RecentArtifacts
from archsearch.api.signing import SessionSigner
from archsearch.api.state import AppState
from archsearch.api.throttle import AuthThrottle
from archsearch.api.upload_slots import UploadSlots
from archsearch.api.v1_checks import checked_v1_request
from archsearch.api.web import pages
from archsearch.jobs.domain.webhooks.deliverer import start_deliverer
from archsearch.jobs.platform.broker import Enqueuer
from archsearch.jobs.platform.migrate import ensure_schema_current
from archsearch.jobs.platform.services import Services

# streams first: its /v1/jobs/stream would otherwise match jobs' /v1/jobs/{job_id}.
V1_ROUTERS = (streams, jobs, artifacts, logs, datasets, queue, studies, models, webhooks, usage)


def create_app(services: Services, enqueuer: Enqueuer) -> FastAPI:
    """Build the app; it refuses to start against a database that is behind the code."""
    state = new_state(services, enqueuer)
    # /docs and /redoc with Swagger UI and ReDoc served from the package, not from a CDN.
    app = FastAPIOffline(
        title="archsearch",
        version="0.1.0",
        summary="Search, prune and grow neural architectures as jobs.",
        lifespan=lifespan_of(state),
        # operationId = the handler's name (`create_job`, `read_job`): what a generated
        # client in any language calls its functions.
        generate_unique_id_function=lambda route: route.name,
    )
    app.state.archsearch = state
    install_error_handlers(app)
    serve_portable_openapi(app)
    add_middleware(app, state)
    include_routes(app)
    return app


def new_state(services: Services, enqueuer: Enqueuer) -> AppState:
    return AppState(
        services=services,
        enqueuer=enqueuer,
        live=LiveJobs.of(services),
        token_cache=new_token_cache(),
        session_signer=SessionSigner(services.settings),
        metrics_registry=metrics_registry(services),
        upload_slots=UploadSlots(services.settings),
        recent_artifacts=RecentArtifacts(),
        auth_throttle=AuthThrottle(services.settings.auth_failures_per_minute),
    )


def lifespan_of(state: AppState) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        ensure_schema_current(state.services.engine)
        # Short GIL hand-offs keep requests answering while an upload is parsed (see
        # datasets.GIL_SWITCH_INTERVAL); set by the process that serves, not at import.
        sys.setswitchinterval(datasets.GIL_SWITCH_INTERVAL)
        # Webhook deliveries from the outbox (every API and worker process sends them),
        # sent as soon as the feed reports the job change that queued them.
        deliverer = start_deliverer(state.services.sessions, state.services.settings)
        state.live.feed.subscribe(lambda _: deliverer.nudge())
        state.live.start()
        yield
        deliverer.stop()
        await state.live.stop()
        state.upload_slots.close()

    return lifespan


def include_routes(app: FastAPI) -> None:
    # Every /v1 route authenticates (a no-op in embedded mode), then refuses text the
    # database cannot store (422, not a 500 from the driver); health checks do neither.
    # A query parameter no route reads is refused (422) rather than silently ignored.
    v1_dependencies = [Depends(checked_v1_request)]
    for module in V1_ROUTERS:
        app.include_router(module.router, dependencies=v1_dependencies, responses=ERROR_RESPONSES)
    app.include_router(health.router, dependencies=[Depends(reject_unknown_query)])
    # The dashboard: pages at / and their assets, served by this process.
    pages.mount(app)
    # Authenticated, not under /v1: Prometheus scrapes /metrics with an admin user's
    # `metrics` token (or an `admin` one).
    app.include_router(
        metrics.router,
        dependencies=[Depends(current_principal), Depends(reject_unknown_query)],
        responses=ERROR_RESPONSES,
    )


def add_middleware(app: FastAPI, state: AppState) -> None:
    settings = state.services.settings
    app.add_middleware(
        BodyLimit,
        upload_max_bytes=settings.upload_max_bytes,
        json_max_bytes=settings.json_max_bytes,
    )
    app.add_middleware(NoSniff)
    # Added last, so outermost: it also counts requests the body limit refuses.
    app.add_middleware(HttpMetrics, figures=HttpFigures(state.metrics_registry))
