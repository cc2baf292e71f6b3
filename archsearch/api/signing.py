"""Signed session cookies: the dashboard's session names an API token's digest, signed with
`session_secret` so that no other site or user can forge or alter it (see web/session.py)."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeTimedSerializer

from archsearch.jobs.domain.accounts.tokens import token_digest
from archsearch.jobs.platform.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WebSession:
    token_digest: str
    csrf: str

    @property
    def principal_key(self) -> str:
        """This session's key in the process's cache of verified principals, shared by the
        API routes and the dashboard's pages (bearer tokens are keyed by their digest). One
        key per session, not per token: signing one session out leaves the others cached."""
        return token_digest(f"session {self.token_digest} {self.csrf}")

    @property
    def session_digest(self) -> str:
        """The key of this session once signed out (its random CSRF token is its id)."""
        return token_digest(f"signed out {self.csrf}")


def new_session(token: str) -> WebSession:
    return WebSession(token_digest(token.strip()), secrets.token_urlsafe(24))


class SessionSigner:
    """Signs and checks session cookies; one per API process."""

    def __init__(self, settings: Settings) -> None:
        if settings.session_secret is not None:
            secret = settings.session_secret.get_secret_value()
        else:
            # Sessions then end when this process restarts, and a second API process
            # would not accept this one's cookies: deployments set ARCHSEARCH_SESSION_SECRET.
            secret = secrets.token_urlsafe(32)
            if settings.tokens_required:
                log.warning(
                    "ARCHSEARCH_SESSION_SECRET is unset; dashboard sessions are per process"
                )
        self._serializer = URLSafeTimedSerializer(secret, salt="archsearch.web-session")
        self.max_age = settings.session_max_age_seconds

    def dumps(self, session: WebSession) -> str:
        return self._serializer.dumps([session.token_digest, session.csrf])

    def loads(self, value: str) -> WebSession | None:
        """The session, or None when the cookie is forged, altered or older than max_age."""
        try:
            digest, csrf = self._serializer.loads(value, max_age=self.max_age)
        except (BadSignature, ValueError, TypeError):
            return None
        return WebSession(str(digest), str(csrf))
