"""The keys of secrets at rest: sealing under the newest key, opening with any listed one,
refusing malformed keys by position (never echoing them), the embedded key file, and team
mode's refusal to invent a key."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from pydantic import ValidationError

from archsearch.jobs.platform.secret_keys import (
    KEY_FILE_NAME,
    NoSecretKeys,
    SecretBox,
    WrongSecretKey,
    new_key,
    secret_box,
)
from archsearch.jobs.platform.settings import Settings


def test_the_newest_key_seals_and_any_listed_key_opens() -> None:
    old, new = new_key(), new_key()
    sealed_old = SecretBox([old], "test").seal("hush-0123456789abcdef")
    both = SecretBox([new, old], "test")
    assert "hush" not in sealed_old
    assert both.open(sealed_old, "a secret") == "hush-0123456789abcdef"
    resealed = both.reseal(sealed_old, "a secret")
    # Sealed under the new key alone: a box without the old key opens it.
    assert SecretBox([new], "test").open(resealed, "a secret") == "hush-0123456789abcdef"
    assert Fernet(new.encode()).decrypt(both.seal("x").encode()) == b"x"


def test_a_secret_no_key_opens_names_the_setting_and_never_the_key() -> None:
    key = new_key()
    sealed = SecretBox([new_key()], "test").seal("hush")
    box = SecretBox([key], "ARCHSEARCH_SECRET_KEYS")
    with pytest.raises(WrongSecretKey) as caught:
        box.open(sealed, "webhook w1's secret")
    message = str(caught.value)
    assert "ARCHSEARCH_SECRET_KEYS" in message and "webhook w1's secret" in message
    assert key not in message and key not in repr(box)


def test_a_malformed_key_is_refused_at_start_by_its_position(tmp_path: Path) -> None:
    good = new_key()
    with pytest.raises(ValidationError) as caught:
        Settings(home=tmp_path, secret_keys=f"{good},not-a-key-at-all")
    message = str(caught.value)
    assert "key 2 of 2 in ARCHSEARCH_SECRET_KEYS" in message
    assert "not-a-key-at-all" not in message and good not in message  # never echoed


def test_embedded_mode_keeps_one_key_in_its_home(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, broker_url=None)
    sealed = secret_box(settings).seal("hush")
    key_file = tmp_path / KEY_FILE_NAME
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    # Another process of the same home (a restart) reads the same key.
    again = Settings(home=tmp_path, broker_url=None)
    assert secret_box(again).open(sealed, "a secret") == "hush"
    assert [p.name for p in tmp_path.iterdir()] == [KEY_FILE_NAME]


def test_team_mode_without_keys_is_an_operator_error(tmp_path: Path) -> None:
    team = Settings(home=tmp_path, broker_url="redis://127.0.0.1:6379/0")
    with pytest.raises(NoSecretKeys, match="set ARCHSEARCH_SECRET_KEYS"):
        secret_box(team)
    assert not (tmp_path / KEY_FILE_NAME).exists()
    keyed = Settings(home=tmp_path, broker_url="redis://x", secret_keys=new_key())
    assert secret_box(keyed).key_count == 1
