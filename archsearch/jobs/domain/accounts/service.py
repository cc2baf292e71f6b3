"""Who is calling: authentication of bearer tokens, and the bootstrap of teams and users."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from archsearch.jobs.domain.accounts import repository
from archsearch.jobs.domain.accounts.tokens import (
    METRICS_SCOPE,
    TOKEN_SCOPES,
    looks_like_token,
    new_token,
    scope_covers,
    token_digest,
)
from archsearch.jobs.domain.base import as_utc
from archsearch.jobs.domain.errors import Forbidden, Unauthenticated


@dataclass(frozen=True)
class Principal:
    """The caller of a request. `team_id` None with `is_admin` sees every team."""

    name: str
    scope: str
    is_admin: bool
    user_id: uuid.UUID | None = None
    team_id: uuid.UUID | None = None

    @property
    def team_filter(self) -> uuid.UUID | None:
        """The team whose jobs this caller may see, or None for all (admins)."""
        return None if self.is_admin else self.team_id

    def require(self, scope: str) -> None:
        if not scope_covers(self.scope, scope):
            raise Forbidden(f"this token's scope is {self.scope!r}; this action needs {scope!r}")


# Embedded single-user mode: no tokens, bound to localhost, the local user may do anything.
LOCAL_USER = Principal(name="local", scope="admin", is_admin=True)


def authenticate(session: Session, authorization: str | None) -> Principal:
    if not authorization:
        raise Unauthenticated("missing token: send 'Authorization: Bearer <token>'")
    kind, _, value = authorization.partition(" ")
    if kind.lower() != "bearer" or not looks_like_token(value.strip()):
        raise Unauthenticated("malformed Authorization header: expected 'Bearer ast_...'")
    return principal_for_digest(
        session,
        token_digest(value.strip()),
        unknown="unknown token",
        renew="ask an admin for a new one",
    )


def principal_for_digest(session: Session, digest: str, *, unknown: str, renew: str) -> Principal:
    """The owner of the token with this digest, if it is neither revoked nor expired: the one
    check behind a bearer token and a dashboard session. `unknown` is the message when no
    token has the digest; `renew` says how to get a new one."""
    found = repository.token_with_user(session, digest)
    if found is None:
        raise Unauthenticated(unknown)
    token, user = found
    if token.revoked_at is not None:
        raise Unauthenticated(f"token {token.prefix}… was revoked; {renew}")
    if token.expires_at is not None and as_utc(token.expires_at) <= datetime.now(UTC):
        raise Unauthenticated(
            f"token {token.prefix}… expired at {token.expires_at.isoformat()}; {renew}"
        )
    return Principal(
        name=user.name,
        scope=token.scope,
        is_admin=user.is_admin and token.scope == "admin",
        user_id=user.id,
        team_id=user.team_id,
    )


def issue_token(session: Session, user_name: str, scope: str, expires_in_days: float | None) -> str:
    """Create a token and return it; only its hash is stored, so this is the one chance to
    see it."""
    if scope not in TOKEN_SCOPES:
        raise ValueError(f"scope must be one of {', '.join(TOKEN_SCOPES)}")
    user = repository.user_by_name(session, user_name)
    if scope in ("admin", METRICS_SCOPE) and not user.is_admin:
        # /metrics counts every team's jobs: its token belongs to an admin user too.
        raise Forbidden(
            f"user {user_name!r} is not an admin; a {scope!r} token is for admin users "
            "(give them 'read' or 'submit')"
        )
    token = new_token()
    expires = (
        None if expires_in_days is None else datetime.now(UTC) + timedelta(days=expires_in_days)
    )
    repository.add_token(session, user, token_digest(token), token[:12], scope, expires)
    return token


def revoke_token(session: Session, prefix: str) -> None:
    repository.token_by_prefix(session, prefix).revoked_at = datetime.now(UTC)
