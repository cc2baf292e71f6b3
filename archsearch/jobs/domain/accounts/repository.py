"""All SQL of teams, users and tokens."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts.tables import ApiToken, SignedOutSession, Team, User
from archsearch.jobs.domain.base import utcnow
from archsearch.jobs.domain.errors import NotFound


def create_team(session: Session, name: str, max_running: int | None) -> Team:
    team = Team(id=uuid.uuid4(), name=name, max_running=max_running)
    session.add(team)
    session.flush()
    return team


def team_by_name(session: Session, name: str) -> Team:
    team = session.scalars(select(Team).where(Team.name == name)).one_or_none()
    if team is None:
        raise NotFound(f"no team {name!r}")
    return team


def set_weekly_device_hours(session: Session, team: Team, hours: float | None) -> None:
    """The team's quota of device-hours per rolling 7 days (None: no limit)."""
    if hours is not None and hours < 0:
        raise ValueError(f"weekly device-hours must be 0 or more, not {hours:g}")
    team.weekly_device_hours = hours
    session.flush()


def create_user(
    session: Session, team: Team, name: str, is_admin: bool, max_running: int | None
) -> User:
    user = User(
        id=uuid.uuid4(), team_id=team.id, name=name, is_admin=is_admin, max_running=max_running
    )
    session.add(user)
    session.flush()
    return user


def user_by_name(session: Session, name: str) -> User:
    user = session.scalars(select(User).where(User.name == name)).one_or_none()
    if user is None:
        raise NotFound(f"no user {name!r}")
    return user


def add_token(
    session: Session, user: User, digest: str, prefix: str, scope: str, expires_at: datetime | None
) -> ApiToken:
    token = ApiToken(
        id=uuid.uuid4(),
        user_id=user.id,
        token_sha256=digest,
        prefix=prefix,
        scope=scope,
        expires_at=expires_at,
    )
    session.add(token)
    session.flush()
    return token


def token_with_user(session: Session, digest: str) -> tuple[ApiToken, User] | None:
    row = session.execute(
        select(ApiToken, User)
        .join(User, User.id == ApiToken.user_id)
        .where(ApiToken.token_sha256 == digest)
    ).one_or_none()
    return None if row is None else (row[0], row[1])


def tokens_of(session: Session, user: User) -> list[ApiToken]:
    return list(
        session.scalars(
            select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.created_at)
        )
    )


def token_by_prefix(session: Session, prefix: str) -> ApiToken:
    tokens = list(session.scalars(select(ApiToken).where(ApiToken.prefix == prefix)))
    if len(tokens) != 1:
        raise NotFound(f"no single token starts with {prefix!r}")
    return tokens[0]


def user_names(session: Session, user_ids: Iterable[uuid.UUID | None]) -> dict[uuid.UUID, str]:
    """The names of these users (one query for a page of jobs); unknown ids are left out."""
    wanted = {user_id for user_id in user_ids if user_id is not None}
    if not wanted:
        return {}
    rows = session.execute(select(User.id, User.name).where(User.id.in_(wanted)))
    return {user_id: name for user_id, name in rows}


def sign_out_session(session: Session, session_digest: str, expires_at: datetime) -> None:
    """Remember a signed-out session; expired entries go at the same time (a cookie past
    its age is refused by its signature alone)."""
    session.execute(delete(SignedOutSession).where(SignedOutSession.expires_at < utcnow()))
    if session.get(SignedOutSession, session_digest) is None:
        session.add(SignedOutSession(session_digest=session_digest, expires_at=expires_at))
    session.flush()


def is_signed_out(session: Session, session_digest: str) -> bool:
    return session.get(SignedOutSession, session_digest) is not None
