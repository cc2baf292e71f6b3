"""A job's log capture keeps its own thread's records, warnings and tracebacks, stops at
its size limit (errors excepted), and goes on from what an earlier attempt stored."""

from __future__ import annotations

import logging
import sys
import threading
import uuid
import warnings
from pathlib import Path

import pytest

from archsearch.jobs.domain.joblogs import repository
from archsearch.jobs.domain.tables import Job
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.jobs.runtime.joblog import JobLog

METHOD_LOG = logging.getLogger("archsearch.core.methods.fake")


@pytest.fixture()
def services(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Services:
    caplog.set_level(logging.INFO, logger="archsearch")  # as the worker's --loglevel=INFO
    settings = Settings(home=tmp_path, broker_url=None, job_log_max_bytes=2048)
    upgrade(settings.resolved_database_url)
    return Services.from_settings(settings)


def new_job(services: Services) -> uuid.UUID:
    with transaction(services.sessions) as session:
        job = Job(method="train", spec={})
        session.add(job)
        session.flush()
        return job.id


def stored(services: Services, job_id: uuid.UUID) -> tuple[list[str], bool]:
    with services.sessions() as session:
        lines, truncated = repository.read_page(session, job_id, None, 0, 1000)
        return [line.message for line in lines], truncated


def test_keeps_the_jobs_records_warnings_and_traceback(services: Services) -> None:
    job_id = new_job(services)
    with JobLog(services, job_id):
        METHOD_LOG.info("epoch 1: loss 0.5")
        warnings.warn("learning rate looks high", UserWarning, stacklevel=1)
        logging.getLogger("celery.worker").warning("not the job's")
        other = threading.Thread(target=lambda: METHOD_LOG.warning("another thread"))
        other.start()
        other.join()
        try:
            raise ZeroDivisionError("boom")
        except ZeroDivisionError:
            logging.getLogger("archsearch.jobs.runtime.executor").exception("job crashed")
    messages, truncated = stored(services, job_id)
    assert messages[0] == "epoch 1: loss 0.5"
    assert "UserWarning: learning rate looks high" in messages[1]
    assert (
        messages[2].startswith("job crashed\nTraceback")
        and "ZeroDivisionError: boom" in (messages[2])
    )
    assert len(messages) == 3 and not truncated


def test_stops_at_the_limit_but_keeps_errors_and_resumes_from_the_count(
    services: Services,
) -> None:
    job_id = new_job(services)
    with JobLog(services, job_id):
        for step in range(100):
            METHOD_LOG.info("step %03d %s", step, "x" * 90)  # 100 bytes a line
    messages, truncated = stored(services, job_id)
    assert truncated and messages[-1] == repository.TRUNCATED
    assert len(messages) == 2048 // 100 + 1
    with JobLog(services, job_id):  # a second attempt: already at the limit
        METHOD_LOG.info("dropped")
        METHOD_LOG.error("kept: the reserve is for errors")
    messages, _ = stored(services, job_id)
    assert messages[-1] == "kept: the reserve is for errors" and "dropped" not in messages
    assert messages.count(repository.TRUNCATED) == 1


def test_keeps_what_the_jobs_thread_prints(
    services: Services, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = new_job(services)
    with JobLog(services, job_id):
        print("step 10: loss 0.25")
        print("half a line, ", end="")
        print("then its end")
        print("to stderr", file=sys.stderr)
        other = threading.Thread(target=lambda: print("another thread prints"))
        other.start()
        other.join()
    print("after the run")
    messages, _ = stored(services, job_id)
    assert messages == ["step 10: loss 0.25", "half a line, then its end", "to stderr"]
    with services.sessions() as session:
        lines, _ = repository.read_page(session, job_id, None, 0, 10)
    assert [(line.logger, line.level) for line in lines] == [
        ("stdout", "INFO"),
        ("stdout", "INFO"),
        ("stderr", "WARNING"),
    ]
    printed = capsys.readouterr()
    assert "step 10: loss 0.25" in printed.out and "another thread prints" in printed.out
    assert "to stderr" in printed.err  # every character still reaches the real stream
