"""Prometheus metrics of the API (`GET /metrics`, prometheus-client).

Two sources. HTTP figures are counted in this process by an ASGI middleware, labelled with
the route's template (`/v1/jobs/{job_id}`, never the concrete path, so the label set stays
small) and measured until the last byte of the body is sent. Job and worker figures are
read from the database at scrape time by `JobsCollector`: workers write their jobs' rows
and heartbeats there, so the API reports them without any shared filesystem and without
an endpoint on each worker. Several API replicas therefore report the same job figures;
sum only the `archsearch_http_*` series across them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.jobs import metrics_repository
from archsearch.jobs.domain.usage import repository as usage_repository
from archsearch.jobs.platform.services import Services

# Job durations span seconds (digits) to days (a search on a GPU).
RUN_SECONDS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)
# The devices a job may ask for (`resources.device`): each has a queue sample, 0 when empty.
JOB_DEVICES = ("auto", "cpu", "cuda")
CLAIM_SECONDS = (0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 1800.0, 3600.0)
# A run's peak memory (`jobs/runtime/figures.py`): 64 MiB to 128 GiB.
PEAK_MEMORY_BYTES = tuple(float(2**power) for power in range(26, 38))
# A run's utilisation: a GPU's mean busy fraction (<= 1), a CPU process's cores kept busy.
UTILIZATION = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0)


class HttpFigures:
    """The request counter and latency histogram, registered once per app."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "archsearch_http_requests",
            "HTTP requests answered",
            ("method", "route", "status"),
            registry=registry,
        )
        self.latency = Histogram(
            "archsearch_http_request_duration_seconds",
            "time from request to the last byte of the response",
            ("method", "route"),
            registry=registry,
        )
        # The series of each (method, route, status) seen, kept: prometheus-client's
        # `labels()` validates and locks on every call, which costs more than counting.
        self._series: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def count(self, method: str, route: str, status: int, seconds: float) -> None:
        """One answered request: counted, and its latency observed."""
        key = (method, route, status)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = (
                self.requests.labels(method, route, str(status)),
                self.latency.labels(method, route),
            )
        series[0].inc()
        series[1].observe(seconds)


class HttpMetrics:
    """ASGI middleware counting requests and their latency by method, route and status."""

    def __init__(self, app: ASGIApp, figures: HttpFigures) -> None:
        self.app = app
        self.figures = figures

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500

        async def send_counting(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_counting)
        finally:
            # The router writes the matched route into the shared scope on its way in.
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            elapsed = time.perf_counter() - started
            self.figures.count(method_label(scope["method"]), route, status, elapsed)


# HTTP's own methods; anything else a client sends is counted as "other": a label per
# made-up method would let any caller grow the series without bound.
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def method_label(method: str) -> str:
    return method if method in HTTP_METHODS else "other"


class JobsCollector(Collector):
    """Job, queue and worker figures, read from the database on every scrape."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def collect(self) -> Iterable[Metric]:
        now = utcnow()
        cutoff = metrics_repository.heartbeat_cutoff(now, self.services.settings.lease_seconds)
        with self.services.sessions() as session:
            jobs = metrics_repository.jobs_by_status_and_method(session)
            queued = metrics_repository.queued_by_device(session)
            workers = metrics_repository.live_workers_by_device(session, cutoff)
            failures = metrics_repository.failures_by_reason(session)
            run = metrics_repository.run_seconds_by_method(session, RUN_SECONDS)
            claim = metrics_repository.claim_seconds_by_method(session, CLAIM_SECONDS)
        yield _gauge("archsearch_jobs", "jobs by status and method", ("status", "method"), jobs)
        yield from _queue_gauges(now, queued)
        yield _gauge(
            "archsearch_workers_live",
            "worker processes seen within one lease, by device",
            ("device",),
            list(workers.items()),
        )
        yield _failures(failures)
        yield self._device_seconds()
        yield _histogram(
            "archsearch_job_run_seconds",
            "run time of finished jobs (finished_at - started_at), by method",
            RUN_SECONDS,
            run,
        )
        yield _histogram(
            "archsearch_job_claim_seconds",
            "wait from submit to the latest claim by a worker (started_at - created_at)",
            CLAIM_SECONDS,
            claim,
        )
        yield from self._run_figures()

    def _run_figures(self) -> Iterable[Metric]:
        with self.services.sessions() as session:
            peak = metrics_repository.figure_by_method(
                session, "device_peak_memory_mb", PEAK_MEMORY_BYTES, scale=2**20
            )
            busy = metrics_repository.figure_by_method(session, "device_utilization", UTILIZATION)
        yield _histogram(
            "archsearch_job_peak_memory_bytes",
            "peak memory of succeeded jobs' last runs (CUDA: allocated; CPU: resident), by method",
            PEAK_MEMORY_BYTES,
            peak,
        )
        yield _histogram(
            "archsearch_job_device_utilization",
            "utilisation of succeeded jobs' last runs (GPU: mean busy fraction by NVML; CPU: "
            "cores busy, CPU time / wall time), by method",
            UTILIZATION,
            busy,
        )

    def _device_seconds(self) -> CounterMetricFamily:
        with self.services.sessions() as session:
            rows = usage_repository.seconds_by_team_and_device(session)
        return _counter(
            "archsearch_device_seconds",
            "device time charged to job runs (claim to end, times the device share they held)",
            ("team", "device"),
            rows,
        )


def _queue_gauges(now: datetime, queued: dict[str, tuple[int, datetime]]) -> Iterable[Metric]:
    """Depth and oldest age by device; a device nobody waits for reads 0, not no sample,
    so an alert on the age sees the queue drain instead of a series that vanished."""
    devices = sorted({*JOB_DEVICES, *queued})
    depth = [(d, queued[d][0] if d in queued else 0) for d in devices]
    yield _gauge("archsearch_queue_depth", "queued jobs by device", ("device",), depth)
    ages = [(d, (now - queued[d][1]).total_seconds() if d in queued else 0.0) for d in devices]
    yield _gauge(
        "archsearch_oldest_queued_age_seconds",
        "age of the oldest queued job by device (0: none waits)",
        ("device",),
        ages,
    )


def _gauge(
    name: str, documentation: str, labels: tuple[str, ...], rows: Iterable[tuple[Any, ...]]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for *values, number in rows:
        family.add_metric([str(v) for v in values], float(number))
    return family


def _counter(
    name: str, documentation: str, labels: tuple[str, ...], rows: Iterable[tuple[Any, ...]]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=labels)
    for *values, number in rows:
        family.add_metric([str(v) for v in values], float(number))
    return family


def _failures(counts: dict[str, int]) -> CounterMetricFamily:
    family = CounterMetricFamily(
        "archsearch_job_failures", "failed jobs by reason class", labels=("reason",)
    )
    for reason in (*metrics_repository.FAILURE_REASONS, "other"):
        family.add_metric([reason], counts.get(reason, 0))
    return family


def _histogram(
    name: str,
    documentation: str,
    bounds: tuple[float, ...],
    rows: list[metrics_repository.Histogram],
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation, labels=("method",))
    for row in rows:
        edges = [*(str(b) for b in bounds), "+Inf"]
        family.add_metric([row.label], list(zip(edges, row.bucket_counts, strict=True)), row.total)
    return family


def metrics_registry(services: Services) -> CollectorRegistry:
    """A registry of this app's own (not the process-global one: tests build many apps)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobsCollector(services))
    return registry
