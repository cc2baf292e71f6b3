"""Secrets at rest: the keys that encrypt stored secrets (webhook signing secrets), and the
box that seals and opens them.

Fernet (AES-128-CBC with HMAC-SHA256, from the maintained `cryptography` library) under a
`MultiFernet`: `ARCHSEARCH_SECRET_KEYS` lists keys newest first; the first seals, any of them
opens, so a new key is put in front while the old ones stay listed until
`archsearch admin rotate-webhook-secrets` has re-sealed every secret under the new one.

Embedded mode (one machine, one user) with no key set keeps one in `home`/secret.key,
made at first use with owner-only permissions. Team mode has no such fallback: each process
would make its own key and none could open another's secrets, so there a missing key is an
operator error (`NoSecretKeys`), answered 503 on webhook creation and holding deliveries.
"""

from __future__ import annotations

import functools
import os
import uuid
from pathlib import Path
from typing import Protocol

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from pydantic import SecretStr

KEY_FILE_NAME = "secret.key"
NEW_KEY_HINT = "`archsearch admin new-secret-key` prints a new key"


class SecretKeyProblem(Exception):
    """The keys of this process cannot seal or open a stored secret: an operator's fix."""


class NoSecretKeys(SecretKeyProblem):
    """Team mode without `ARCHSEARCH_SECRET_KEYS` (or a command that may not make a key)."""

    def __init__(self) -> None:
        super().__init__(
            "webhook signing secrets are stored encrypted and this process has no key: set "
            "ARCHSEARCH_SECRET_KEYS (the same comma-separated keys, newest first, on every API "
            f"and worker process; the embedded server keeps its own in {KEY_FILE_NAME} in its "
            f"data home); {NEW_KEY_HINT}"
        )


class WrongSecretKey(SecretKeyProblem):
    """None of the configured keys opens a stored secret."""


def split_keys(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def check_fernet_keys(text: str, source: str) -> None:
    """Raise ValueError naming `source` and the position of a malformed key (never its
    value: an error message is logged, the key must not be)."""
    keys = split_keys(text)
    if not keys:
        raise ValueError(f"{source} is empty; {NEW_KEY_HINT}")
    for position, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except ValueError:
            raise ValueError(
                f"key {position} of {len(keys)} in {source} is not a Fernet key (32 bytes, "
                f"url-safe base64, 44 characters); {NEW_KEY_HINT}"
            ) from None


def new_key() -> str:
    return Fernet.generate_key().decode()


class SecretBox:
    """Seals with the newest key, opens with any; its repr shows no key."""

    def __init__(self, keys: list[str], source: str) -> None:
        self._fernet = MultiFernet([Fernet(key) for key in keys])
        self.key_count = len(keys)
        self.source = source

    def __repr__(self) -> str:
        return f"SecretBox({self.key_count} keys from {self.source})"

    def seal(self, clear: str) -> str:
        return self._fernet.encrypt(clear.encode()).decode()

    def open(self, sealed: str, what: str) -> str:
        try:
            return self._fernet.decrypt(sealed.encode()).decode()
        except InvalidToken:
            raise self._wrong_key(what) from None

    def reseal(self, sealed: str, what: str) -> str:
        """The same secret sealed under the newest key (a no-op in meaning)."""
        try:
            return self._fernet.rotate(sealed.encode()).decode()
        except InvalidToken:
            raise self._wrong_key(what) from None

    def _wrong_key(self, what: str) -> WrongSecretKey:
        return WrongSecretKey(
            f"none of the {self.key_count} keys in {self.source} opens {what}: the key it was "
            "sealed with is missing (keep old keys listed after the new one until "
            "`archsearch admin rotate-webhook-secrets` has run)"
        )


class KeySettings(Protocol):
    """What `secret_box` reads of the process's Settings (which validate the keys with
    `check_fernet_keys`, so this module cannot import them)."""

    @property
    def secret_keys(self) -> SecretStr | None: ...

    @property
    def home(self) -> Path: ...

    @property
    def embedded(self) -> bool: ...


def secret_box(settings: KeySettings, *, make_key_file: bool = True) -> SecretBox:
    """This process's box: the configured keys, else (embedded only) the key file, made
    if missing unless `make_key_file` is False (a command run from an operator's shell,
    where a new key would seal secrets that no server can open)."""
    if settings.secret_keys is not None:
        return _box_of(settings.secret_keys.get_secret_value(), "ARCHSEARCH_SECRET_KEYS")
    key_file = settings.home / KEY_FILE_NAME
    if not settings.embedded or not (make_key_file or key_file.exists()):
        raise NoSecretKeys()
    return _box_of(_read_or_make_key_file(key_file), str(key_file))


@functools.lru_cache(maxsize=8)
def _box_of(keys: str, source: str) -> SecretBox:
    check_fernet_keys(keys, source)
    return SecretBox(split_keys(keys), source)


def _read_or_make_key_file(path: Path) -> str:
    """The key file's keys; made with one new key (mode 0600) when missing. Written aside,
    then linked into place: a reader never sees it half written, and of two processes
    making it at once the first one's key wins."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(new_key() + "\n")
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text()
