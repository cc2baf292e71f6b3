"""The typed Python client of the archsearch REST API; the CLI is built on it.

    from archsearch.client import ArchsearchClient
    from archsearch.specs import DatasetRef, TrainJob

    with ArchsearchClient("http://127.0.0.1:8000") as client:
        job = client.submit(TrainJob(dataset=DatasetRef(name="digits")))  # or its JSON
        job = client.wait(job.id)
        client.download_all(job.id, "out/")

Answers are the API's own pydantic models (`archsearch.schemas`); specs are
`archsearch.specs`. Needs only httpx and
pydantic: `pip install archsearch` brings no torch and no server.
"""

from archsearch.client.client import DEFAULT_URL, ArchsearchClient
from archsearch.client.errors import (
    AmbiguousJobId,
    ApiError,
    ClientError,
    ServerStoppedAnswering,
    ServerUnreachable,
)
from archsearch.schemas.jobs import TERMINAL_STATUSES, JobStatus
from archsearch.schemas.studies import ENDED_STUDY_STATUSES, StudyStatus

__all__ = [
    "DEFAULT_URL",
    "ENDED_STUDY_STATUSES",
    "TERMINAL_STATUSES",
    "JobStatus",
    "StudyStatus",
    "AmbiguousJobId",
    "ApiError",
    "ArchsearchClient",
    "ClientError",
    "ServerStoppedAnswering",
    "ServerUnreachable",
]
