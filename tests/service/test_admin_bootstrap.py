"""`archsearch admin bootstrap` (the compose `bootstrap` service) makes the first admin token of
a fresh database, once (a fresh stack answered 401 to everything)."""

from __future__ import annotations

import uuid

from click.testing import CliRunner
from sqlalchemy.orm import Session, sessionmaker

from archsearch.cli.main import main
from archsearch.jobs.domain.accounts.service import authenticate


def test_bootstrap_prints_one_admin_token_then_nothing(
    pg_url: str, sessions: sessionmaker[Session]
) -> None:
    runner = CliRunner(env={"ARCHSEARCH_DATABASE_URL": pg_url})
    user = f"boot-{uuid.uuid4().hex[:8]}"
    args = ["admin", "bootstrap", "--team", f"team-{user}", "--user", user]

    first = runner.invoke(main, args)
    assert first.exit_code == 0, first.output
    token = first.output.strip()
    with sessions() as session:
        principal = authenticate(session, f"Bearer {token}")
    assert principal.is_admin and principal.scope == "admin" and principal.name == user

    again = runner.invoke(main, args)
    assert again.exit_code == 0, again.output
    assert token not in again.output and "exists already" in again.output
