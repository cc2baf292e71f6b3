"""Webhook secrets at rest in team mode: shown once and stored sealed (never in a read, a
log line or the database in clear); an API without keys refuses to create one (503 naming
the setting) and holds, never spends, a delivery it cannot sign. The CLI's
`archsearch webhooks` commands over the same API."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy.orm import Session, sessionmaker

from archsearch.cli.main import main
from archsearch.jobs.domain.webhooks.tables import Webhook
from tests.service import procs
from tests.service.conftest import Accounts
from tests.service.test_webhooks import bearer, subscribe, wait_for
from tests.service.webhook_receiver import Receiver

pytestmark = pytest.mark.service


@pytest.fixture()
def receiver() -> Iterator[Receiver]:
    started = Receiver()
    started.start()
    yield started
    started.stop()


@pytest.fixture()
def keyless_api(service_env: dict[str, str], log_dir: Path) -> Iterator[str]:
    """A team API process without ARCHSEARCH_SECRET_KEYS, alive for one test only (its
    deliverer holds every delivery it claims meanwhile)."""
    env = {k: v for k, v in service_env.items() if k != "ARCHSEARCH_SECRET_KEYS"}
    port = procs.free_port()
    proc = procs.start("api-keyless", ["api", "--port", str(port)], env, log_dir)
    url = f"http://127.0.0.1:{port}"
    procs.wait_http(f"{url}/healthz", proc)
    yield url
    proc.stop()


def test_the_secret_is_shown_once_and_stored_sealed(
    api_url: str,
    accounts: Accounts,
    receiver: Receiver,
    sessions: sessionmaker[Session],
    log_dir: Path,
) -> None:
    secret = f"once-{uuid.uuid4().hex}"
    alice = bearer(accounts, "alice")
    created = subscribe(api_url, alice, receiver.url, ["job.failed"], secret=secret)
    assert created["secret"] == secret
    path = f"{api_url}/v1/webhooks/{created['id']}"
    httpx.post(f"{path}/test", headers=alice).raise_for_status()
    assert receiver.received[0].signed_by(secret)
    reads = [path, f"{api_url}/v1/webhooks", f"{path}/deliveries"]
    for answer in [httpx.get(url, headers=alice) for url in reads]:
        assert answer.status_code == 200 and secret not in answer.text
    with sessions() as session:
        row = session.get(Webhook, uuid.UUID(created["id"]))
        assert row is not None and row.secret is None
        assert row.secret_encrypted and secret not in row.secret_encrypted
    assert not [p.name for p in log_dir.glob("*.log") if secret in p.read_text(errors="replace")]
    long_secret = "x" * 201
    refused = httpx.post(
        f"{api_url}/v1/webhooks",
        json={"url": receiver.url, "events": ["job.failed"], "secret": long_secret},
        headers=alice,
    )
    assert refused.status_code == 422 and refused.json()["detail"][0]["field"] == "secret"
    assert long_secret not in refused.text
    httpx.delete(path, headers=alice)


def test_without_keys_creation_is_refused_and_deliveries_are_held(
    api_url: str, keyless_api: str, accounts: Accounts, receiver: Receiver
) -> None:
    alice = bearer(accounts, "alice")
    body = {"url": receiver.url, "events": ["job.failed"], "secret": "k" * 32}
    refused = httpx.post(f"{keyless_api}/v1/webhooks", json=body, headers=alice)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"] == "secret_keys_missing"
    assert "ARCHSEARCH_SECRET_KEYS" in refused.json()["detail"] and "k" * 32 not in refused.text
    listed = httpx.get(f"{api_url}/v1/webhooks", headers=alice).json()["data"]
    assert receiver.url not in [w["url"] for w in listed]  # nothing was stored

    created = subscribe(api_url, alice, receiver.url, ["job.failed"])
    held = httpx.post(f"{keyless_api}/v1/webhooks/{created['id']}/test", headers=alice)
    assert held.status_code == 200, held.text
    delivery = held.json()
    assert (delivery["status"], delivery["attempts"], delivery["attempt_log"]) == ("pending", 0, [])
    assert "ARCHSEARCH_SECRET_KEYS" in delivery["last_error"]
    assert receiver.received == []
    httpx.delete(f"{api_url}/v1/webhooks/{created['id']}", headers=alice)


def test_the_webhooks_commands(
    api_url: str, accounts: Accounts, receiver: Receiver, tmp_path: Path
) -> None:
    env = {"ARCHSEARCH_TOKEN": accounts.tokens["bob"], "ARCHSEARCH_URL": api_url}
    runner = CliRunner(env=env)
    secret_file = tmp_path / "secret"
    secret_file.write_text(f"cli-{uuid.uuid4().hex}\n")
    secret = secret_file.read_text().strip()
    args = ["webhooks", "create", receiver.url, "--event", "job.failed", "--event", "job.warning"]
    made = runner.invoke(main, [*args, "--secret-file", str(secret_file)])
    assert made.exit_code == 0, made.output
    assert f"signing secret (shown this once): {secret}" in made.output
    webhook_id = made.output.split()[1]
    prefix = webhook_id[:8]

    listing = runner.invoke(main, ["webhooks", "list", "--json"])
    (mine,) = [w for w in json.loads(listing.output)["data"] if w["id"] == webhook_id]
    assert mine["events"] == ["job.failed", "job.warning"] and secret not in listing.output
    shown = runner.invoke(main, ["webhooks", "show", prefix, "--json"])
    assert json.loads(shown.output)["url"] == receiver.url and secret not in shown.output

    tested = runner.invoke(main, ["webhooks", "test", prefix, "--json"])
    assert tested.exit_code == 0 and json.loads(tested.output)["status"] == "delivered"
    wait_for(lambda: len(receiver.received) == 1)
    assert receiver.received[0].signed_by(secret)
    log = runner.invoke(main, ["webhooks", "deliveries", prefix, "--json"])
    assert [d["event"] for d in json.loads(log.output)["data"]] == ["ping"]
    receiver.status = 500
    refused = runner.invoke(main, ["webhooks", "test", prefix, "--json"])
    assert refused.exit_code == 1 and json.loads(refused.output)["last_status_code"] == 500
    table = runner.invoke(main, ["webhooks", "show", prefix])
    assert table.exit_code == 0 and "ping" in table.output and secret not in table.output

    admin = CliRunner(env={**env, "ARCHSEARCH_TOKEN": accounts.admin_token})
    every = json.loads(admin.invoke(main, ["webhooks", "list", "--json"]).output)["data"]
    assert webhook_id in [w["id"] for w in every]

    gone = runner.invoke(main, ["webhooks", "delete", prefix])
    assert gone.exit_code == 0 and f"webhook {webhook_id} deleted" in gone.output
    missing = runner.invoke(main, ["webhooks", "show", prefix])
    assert missing.exit_code == 1 and "no webhook id starts with" in missing.output
