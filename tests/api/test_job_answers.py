"""The rules of the API's kept GET job answers (api/job_answers.py), without a database:
what is stored, what is refused, and who is shown what."""

from __future__ import annotations

import uuid

from archsearch.api.job_answers import EVERY_JOB, Answer, JobAnswers, listen_url

TEAM, OTHER_TEAM = uuid.uuid4(), uuid.uuid4()


class NoRoundTrip:
    """The barrier, without a database: these tests never wait on it."""

    async def wait(self) -> None:
        return None


def listening_answers() -> JobAnswers:
    answers = JobAnswers(maxsize=4)
    answers.start_listening(NoRoundTrip())
    return answers


def test_an_answer_is_kept_and_shown_to_its_team_and_admins_only() -> None:
    answers, job = listening_answers(), uuid.uuid4()
    answers.store(job, answers.generation, Answer(b"{}", TEAM))
    assert answers.lookup(job, TEAM) == b"{}"
    assert answers.lookup(job, None) == b"{}"  # an admin
    assert answers.lookup(job, OTHER_TEAM) is None


def test_a_read_that_raced_an_invalidation_is_not_stored() -> None:
    answers, job, other = listening_answers(), uuid.uuid4(), uuid.uuid4()
    read_at = answers.generation
    answers.forget(str(other))  # any change while the read was under way
    answers.store(job, read_at, Answer(b"old", TEAM))
    assert answers.lookup(job, TEAM) is None


def test_a_notification_forgets_its_job_and_the_wildcard_forgets_all() -> None:
    answers, one, two = listening_answers(), uuid.uuid4(), uuid.uuid4()
    for job in (one, two):
        answers.store(job, answers.generation, Answer(b"{}", TEAM))
    answers.forget(str(one))
    assert (answers.lookup(one, TEAM), answers.lookup(two, TEAM)) == (None, b"{}")
    answers.forget(EVERY_JOB)
    assert len(answers) == 0
    answers.store(one, answers.generation, Answer(b"{}", TEAM))
    answers.forget("not a job id")
    assert len(answers) == 0


def test_nothing_is_kept_or_shown_while_nobody_listens() -> None:
    answers, job = listening_answers(), uuid.uuid4()
    answers.store(job, answers.generation, Answer(b"{}", TEAM))
    answers.stop_listening()
    assert len(answers) == 0
    answers.store(job, answers.generation, Answer(b"{}", TEAM))
    assert answers.lookup(job, TEAM) is None


def test_only_postgresql_is_listened_to() -> None:
    url = listen_url("postgresql+psycopg://postgres:pw@127.0.0.1:5432/db")
    assert url == "postgresql://postgres:pw@127.0.0.1:5432/db"
    assert listen_url("sqlite:////tmp/archsearch.db") is None
