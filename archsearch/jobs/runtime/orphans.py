"""Removes objects of the store that nothing refers to any more.

A job that ended while the store was away could not delete its checkpoint, and an upload
cut off by an outage may have published part of its files before failing: such objects
would stay in the bucket forever. On its tick the reaper lists the store and deletes

    checkpoints/<job>.pt     of a job that is finished or does not exist
    jobs/<job>/<name>        of a job that does not exist, or finished without recording it
    datasets/<id>/...        of a dataset with no row, older than `orphan_grace_seconds`

Objects of live (queued, running) jobs are never touched, and a young object of a job or
dataset is spared for a grace period: its row may be being written.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from archsearch.jobs.domain.datasets import repository as datasets
from archsearch.jobs.domain.jobs import repository
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.objects import StoredObject
from archsearch.jobs.platform.services import Services
from archsearch.schemas.jobs import JobStatus

log = logging.getLogger(__name__)


def _job_of(key: str) -> uuid.UUID | None:
    """The job a `checkpoints/` or `jobs/` key belongs to (None: not such a key)."""
    top, _, rest = key.partition("/")
    hex_id = rest.removesuffix(".pt") if top == "checkpoints" else rest.partition("/")[0]
    try:
        return uuid.UUID(hex=hex_id) if top in ("checkpoints", "jobs") else None
    except ValueError:
        return None


def _job_orphans(services: Services, objects: list[StoredObject], grace: float) -> list[str]:
    owners = {o.key: job for o in objects if o.age_seconds >= grace and (job := _job_of(o.key))}
    with transaction(services.sessions) as session:
        known = repository.files_of_jobs(session, owners.values())
    orphans = []
    for key, job_id in owners.items():
        status, names = known.get(job_id, (None, set()))
        if status in (JobStatus.queued, JobStatus.running):
            continue
        recorded = key.startswith("jobs/") and key.rpartition("/")[2] in names
        if status is None or not recorded:
            orphans.append(key)
    return orphans


def _dataset_orphans(services: Services, objects: list[StoredObject], grace: float) -> set[str]:
    owners = {o.key: o.key.split("/")[1] for o in objects if o.age_seconds >= grace}
    with transaction(services.sessions) as session:
        known = datasets.existing_dataset_ids(session, set(owners.values()))
    return {f"datasets/{owner}/" for owner in owners.values() if owner not in known}


def _listed(services: Services, prefixes: Iterable[str]) -> list[StoredObject]:
    objects = services.store.objects
    return [o for prefix in prefixes for o in objects.list_objects(prefix)]


def sweep_orphans(services: Services) -> list[str]:
    """Delete the store's orphans; return their keys (a dataset's as its `datasets/<id>/`)."""
    settings = services.settings
    job_grace = 2 * settings.lease_seconds
    jobs = _job_orphans(services, _listed(services, ("checkpoints/", "jobs/")), job_grace)
    uploads = _listed(services, ("datasets/",))
    dataset_prefixes = _dataset_orphans(services, uploads, settings.orphan_grace_seconds)
    for key in jobs:
        services.store.objects.delete(key)
    for prefix in dataset_prefixes:
        services.store.objects.delete_prefix(prefix)
    removed = [*jobs, *sorted(dataset_prefixes)]
    if removed:
        log.warning("removed %d orphan objects: %s", len(removed), ", ".join(removed[:20]))
    return removed
