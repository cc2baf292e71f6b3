"""The rules of the API's kept GET job answers (api/live/answers.py) and of the job feed's
choice (api/live/feed.py), without a database: what is stored, what is refused, who is
shown what, and for how long."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from archsearch.api.live.answers import PROGRESS_SECONDS, Answer, JobAnswers
from archsearch.api.live.feed import EVERY_JOB, JobFeed, ListeningFeed, TimedFeed, feed_for

TEAM, OTHER_TEAM = uuid.uuid4(), uuid.uuid4()


class HandFeed(JobFeed):
    """A feed moved by hand: exact while `connected`, always caught up."""

    def __init__(self) -> None:
        super().__init__()
        self.connected = True

    @property
    def exact(self) -> bool:
        return self.connected

    async def caught_up(self) -> None:
        return None

    def disconnect(self) -> None:
        self.connected = False
        self.publish(EVERY_JOB)


def kept_answers() -> tuple[JobAnswers, HandFeed]:
    feed = HandFeed()
    return JobAnswers(feed, maxsize=4), feed


def test_an_answer_is_kept_and_shown_to_its_team_and_admins_only() -> None:
    (answers, _), job = kept_answers(), uuid.uuid4()
    answers.store(job, answers.generation, Answer(b"{}", TEAM))
    assert answers.lookup(job, TEAM) == b"{}"
    assert answers.lookup(job, None) == b"{}"  # an admin
    assert answers.lookup(job, OTHER_TEAM) is None
    assert asyncio.run(answers.fresh(job, TEAM)) == b"{}"


def test_a_read_that_raced_a_change_is_not_stored() -> None:
    (answers, feed), job, other = kept_answers(), uuid.uuid4(), uuid.uuid4()
    read_at = answers.generation
    feed.publish(str(other))  # any change while the read was under way
    answers.store(job, read_at, Answer(b"old", TEAM))
    assert answers.lookup(job, TEAM) is None


def test_the_feed_forgets_its_job_and_the_wildcard_forgets_all() -> None:
    (answers, feed), one, two = kept_answers(), uuid.uuid4(), uuid.uuid4()
    for job in (one, two):
        answers.store(job, answers.generation, Answer(b"{}", TEAM))
    feed.publish(str(one))
    assert (answers.lookup(one, TEAM), answers.lookup(two, TEAM)) == (None, b"{}")
    feed.publish(EVERY_JOB)
    assert len(answers) == 0
    answers.store(one, answers.generation, Answer(b"{}", TEAM))
    feed.publish("not a job id")
    assert len(answers) == 0


def test_nothing_is_kept_or_shown_while_the_feed_is_not_exact() -> None:
    (answers, feed), job = kept_answers(), uuid.uuid4()
    answers.store(job, answers.generation, Answer(b"{}", TEAM))
    feed.disconnect()
    assert len(answers) == 0
    answers.store(job, answers.generation, Answer(b"{}", TEAM))
    assert answers.lookup(job, TEAM) is None
    assert asyncio.run(answers.fresh(job, TEAM)) is None


def test_a_running_jobs_answer_lasts_one_progress_interval() -> None:
    (answers, _), running, ended = kept_answers(), uuid.uuid4(), uuid.uuid4()
    answers.store(running, answers.generation, Answer(b"r", TEAM, running=True))
    answers.store(ended, answers.generation, Answer(b"e", TEAM))
    assert answers.lookup(running, TEAM) == b"r"
    time.sleep(PROGRESS_SECONDS + 0.01)
    assert answers.lookup(running, TEAM) is None
    assert answers.lookup(ended, TEAM) == b"e"


def test_a_timed_feed_is_never_exact() -> None:
    feed = TimedFeed(check_seconds=0.01)
    assert not feed.exact
    with pytest.raises(Exception, match="timed check"):
        asyncio.run(feed.caught_up())
    seen: list[str] = []
    feed.subscribe(seen.append)

    async def two_checks() -> None:
        task = asyncio.create_task(feed.run())
        await asyncio.sleep(0.05)
        task.cancel()

    asyncio.run(two_checks())
    assert seen and set(seen) == {EVERY_JOB}


def test_only_postgresql_is_listened_to() -> None:
    feed = feed_for("postgresql+psycopg://postgres:pw@127.0.0.1:5432/db")
    assert isinstance(feed, ListeningFeed) and not feed.exact  # until it connects
    assert isinstance(feed_for("sqlite:////tmp/archsearch.db"), TimedFeed)
