"""Webhook signing secrets at rest, on SQLite: stored sealed and shown once, signed with
after opening, legacy clear rows (from before migration 0026) still signed with and sealed
by `archsearch admin rotate-webhook-secrets`, which is all or nothing; a delivery this
process cannot sign is held, not spent."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
from click.testing import CliRunner
from pydantic import SecretStr
from sqlalchemy import text

from archsearch.jobs.domain.accounts.service import LOCAL_USER
from archsearch.jobs.domain.webhooks import deliverer, repository, service
from archsearch.jobs.domain.webhooks.tables import Webhook, WebhookDelivery
from archsearch.jobs.platform.db import transaction
from archsearch.jobs.platform.migrate import upgrade
from archsearch.jobs.platform.secret_keys import KEY_FILE_NAME, new_key
from archsearch.jobs.platform.services import Services
from archsearch.jobs.platform.settings import Settings
from archsearch.schemas.webhooks import WebhookCreate
from archsearch.server.admin import admin

TARGET = "http://127.0.0.1:9/hook"  # loopback is allowed embedded; nothing listens on 9
CLEAR = "legacy-clear-secret-0123456789"


def keyed(services: Services, keys: str) -> Settings:
    return services.settings.model_copy(update={"secret_keys": SecretStr(keys)})


def create(services: Services, settings: Settings, secret: str | None = None) -> uuid.UUID:
    request = WebhookCreate(url=TARGET, events=["job.failed"], secret=secret)
    with services.sessions() as session:
        created = service.create_webhook(session, settings, LOCAL_USER, request)
    assert created.secret == (secret or created.secret) and len(created.secret) >= 16
    assert created.secret not in repr(created)
    return created.id


def stored(services: Services, webhook_id: uuid.UUID) -> Webhook:
    with services.sessions() as session:
        webhook = session.get(Webhook, webhook_id)
        assert webhook is not None
        session.expunge(webhook)
        return webhook


def add_legacy_row(services: Services) -> uuid.UUID:
    """A webhook as revision 0025 stored it: the secret in clear, nothing sealed."""
    webhook_id = uuid.uuid4()
    with transaction(services.sessions) as session:
        session.add(
            Webhook(
                id=webhook_id,
                team_key="",
                url=TARGET,
                events=["job.failed"],
                secret=CLEAR,
                body_format="json",
                active=True,
                created_by="local",
            )
        )
    return webhook_id


def rotate(services: Services, keys: str) -> tuple[int, str]:
    env = {
        "ARCHSEARCH_HOME": str(services.settings.home),
        "ARCHSEARCH_DATABASE_URL": services.settings.resolved_database_url,
        "ARCHSEARCH_SECRET_KEYS": keys,
    }
    result = CliRunner(env=env).invoke(admin, ["rotate-webhook-secrets"])
    return result.exit_code, " ".join(result.output.split())


def test_a_secret_is_stored_sealed_and_signs_once_opened(services: Services) -> None:
    settings = services.settings  # embedded: the key kept in its home
    webhook_id = create(services, settings, secret="s" * 32)
    row = stored(services, webhook_id)
    assert row.secret is None and row.secret_encrypted and "s" * 32 not in row.secret_encrypted
    assert deliverer.signing_secret(row, settings) == "s" * 32
    made = stored(services, create(services, settings))  # one the server made
    assert len(deliverer.signing_secret(made, settings)) == 64


def test_rotation_reseals_every_secret_and_seals_legacy_clear_ones(services: Services) -> None:
    old, new = new_key(), new_key()
    sealed_id = create(services, keyed(services, old), secret="o" * 32)
    legacy_id = add_legacy_row(services)
    # Before rotation the clear one still signs, as it did before the upgrade.
    assert deliverer.signing_secret(stored(services, legacy_id), services.settings) == CLEAR

    code, output = rotate(services, f"{new},{old}")
    assert code == 0, output
    assert "2 webhook secrets encrypted under the newest key" in output
    assert "(1 of them were stored in clear)" in output
    only_new = keyed(services, new)
    legacy = stored(services, legacy_id)
    assert legacy.secret is None and legacy.secret_encrypted is not None
    assert deliverer.signing_secret(legacy, only_new) == CLEAR
    assert deliverer.signing_secret(stored(services, sealed_id), only_new) == "o" * 32


def test_rotation_without_the_old_key_changes_nothing(services: Services) -> None:
    old = new_key()
    webhook_id = create(services, keyed(services, old), secret="o" * 32)
    before = stored(services, webhook_id).secret_encrypted
    code, output = rotate(services, new_key())
    assert code == 1
    assert f"webhook {webhook_id}'s secret" in output and "ARCHSEARCH_SECRET_KEYS" in output
    assert stored(services, webhook_id).secret_encrypted == before
    assert deliverer.signing_secret(stored(services, webhook_id), keyed(services, old))


def test_rotation_never_makes_a_key_of_its_own(tmp_path: Path) -> None:
    """From a shell without the servers' keys, a new key would seal the clear secrets so
    that no server could open them: the command refuses instead."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    upgrade(url)
    env = {"ARCHSEARCH_HOME": str(tmp_path), "ARCHSEARCH_DATABASE_URL": url}
    result = CliRunner(env=env).invoke(admin, ["rotate-webhook-secrets"])
    assert result.exit_code == 1 and "set ARCHSEARCH_SECRET_KEYS" in " ".join(result.output.split())
    assert not (tmp_path / KEY_FILE_NAME).exists()


def test_a_delivery_the_keys_cannot_sign_is_held_not_spent(services: Services) -> None:
    webhook_id = create(services, keyed(services, new_key()), secret="o" * 32)
    with transaction(services.sessions) as session:
        hook = repository.get_webhook(session, None, webhook_id)
        (delivery,) = repository.add_event(session, "ping", "webhook:x", {"event": "ping"}, [hook])
        delivery_id = delivery.id
    wrong = keyed(services, new_key())
    with httpx.Client() as client:
        assert deliverer.deliver_one(services.sessions, wrong, client, delivery_id) is None
    with services.sessions() as session:
        held = session.get(WebhookDelivery, delivery_id)
        assert held is not None
        assert (held.status, held.attempts) == ("pending", 0)
        assert held.last_error and "ARCHSEARCH_SECRET_KEYS" in held.last_error
        assert held.last_error.startswith("held, not sent")
        assert not repository.attempts_of(session, [delivery_id])


def test_migration_0026_keeps_clear_secrets_signing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    upgrade(url, "0025")
    services = Services.from_settings(Settings(home=tmp_path, database_url=url, broker_url=None))
    with transaction(services.sessions) as session:
        session.execute(
            text(
                "INSERT INTO webhooks (id, team_key, url, events, secret, body_format, active, "
                "created_by, created_at) VALUES (:id, '', :url, '[\"job.failed\"]', :secret, "
                "'json', 1, 'local', CURRENT_TIMESTAMP)"
            ),
            {"id": uuid.uuid4().hex, "url": TARGET, "secret": CLEAR},
        )
    upgrade(url)
    with services.sessions() as session:
        (row,) = repository.every_webhook(session)
        assert row.secret_encrypted is None
        assert deliverer.signing_secret(row, services.settings) == CLEAR
