"""Celery configuration shared by the worker and by the API's enqueuer, so both agree."""

from __future__ import annotations

from typing import Any

from archsearch.jobs.platform.settings import Settings

RUN_JOB_TASK = "archsearch.run_job"


def celery_config(settings: Settings) -> dict[str, Any]:
    return {
        "broker_url": settings.broker_url,
        "task_default_queue": settings.queue_name,
        "task_serializer": "json",
        "accept_content": ["json"],
        # Long jobs: acknowledge after the task ends, so a lost worker's message comes back;
        # reject_on_worker_lost requeues it, bounded by the job's attempts counter.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "broker_transport_options": {"visibility_timeout": settings.visibility_timeout},
        "broker_connection_retry_on_startup": True,
        "task_ignore_result": True,
        "worker_hijack_root_logger": False,
    }
