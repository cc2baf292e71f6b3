"""Adaptive studies through real workers: a TPE study of a few trials, and the durable
driver surviving an API restart and a SIGKILL of every worker with no trial lost or asked
twice (Optuna's trials in our PostgreSQL database, in its own schema)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from sqlalchemy import inspect, text

from archsearch.client import ArchsearchClient
from archsearch.jobs.domain.studies import adaptive
from archsearch.jobs.platform.db import make_engine
from archsearch.jobs.platform.migrate import upgrade
from tests.conftest import TEST_DATASETS
from tests.service import procs
from tests.service.test_schema import model_migration_drift

pytestmark = pytest.mark.service


def adaptive_request(n_trials: int, parallel: int, steps: int) -> dict[str, object]:
    return {
        "name": "tpe",
        "dataset": {"name": "digits", "train_subset": 400},
        "base": {
            "method": "prune",
            "model": {"name": "mlp", "hidden": [32]},
            "training": {"batch_size": 100},
        },
        "budget": {"steps": steps},
        "sampler": "tpe",
        "space": {
            "density": {"low": 0.05, "high": 0.5, "log": True},
            "training.optimizer.lr": {"low": 1e-3, "high": 1e-2, "log": True},
        },
        "n_trials": n_trials,
        "parallel": parallel,
        "seeds": [0],
    }


def optuna_trials(database_url: str, study_id: uuid.UUID) -> list[optuna.trial.FrozenTrial]:
    loaded = optuna.load_study(
        study_name=f"archsearch-{study_id.hex}", storage=adaptive.storage(database_url)
    )
    return loaded.get_trials(deepcopy=False)


def test_a_tpe_study_runs_its_trials_through_workers(client: ArchsearchClient, pg_url: str) -> None:
    submitted = client.submit_study(adaptive_request(n_trials=4, parallel=2, steps=8))
    assert submitted.counts == {"queued": 2} and submitted.trials_asked == 2
    study = client.wait_study(submitted.id, timeout=150)
    assert (study.status, study.counts, study.trials_asked) == ("finished", {"succeeded": 4}, 4)
    assert {arm.label for arm in study.arms} == {f"trial-{n}" for n in range(4)}
    for arm in study.arms:
        assert 0.05 <= arm.params["density"] <= 0.5 and arm.test_accuracy is not None
    assert study.pareto and all(p.label.startswith("trial-") for p in study.pareto)
    trials = optuna_trials(pg_url, study.id)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    by_label = {arm.label: arm for arm in study.arms}
    for trial in trials:  # Optuna was told what the job measured on its held-out rows
        arm = by_label[f"trial-{trial.number}"]
        assert arm.val_accuracy is not None and arm.parameters is not None
        assert trial.values == [arm.val_accuracy.mean, arm.parameters.mean]


@pytest.fixture()
def own_service(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A database and queue of its own: every worker of it can be killed."""
    name = f"archsearch_adaptive_{uuid.uuid4().hex[:8]}"
    url = procs.create_database(name)
    upgrade(url)
    env = {
        "ARCHSEARCH_DATABASE_URL": url,
        "ARCHSEARCH_BROKER_URL": procs.REDIS_URL,
        "ARCHSEARCH_QUEUE_NAME": f"adaptive-{name}",
        "ARCHSEARCH_HOME": str(tmp_path),
        "ARCHSEARCH_DATA_DIR": str(TEST_DATASETS),
        "ARCHSEARCH_LEASE_SECONDS": "3",
        "ARCHSEARCH_AUTH": "token",
    }
    yield url, env
    procs.drop_database(name)


def start_api(env: dict[str, str], port: int, log_dir: Path) -> procs.Proc:
    api = procs.start("api", ["api", "--port", str(port)], env, log_dir)
    procs.wait_http(f"http://127.0.0.1:{port}/healthz", api)
    return api


def start_worker(env: dict[str, str], log_dir: Path) -> procs.Proc:
    worker = procs.start("worker", ["worker", "-n", f"a-{uuid.uuid4().hex[:6]}@%h"], env, log_dir)
    procs.wait_log(worker, "ready.", timeout=90)
    return worker


@pytest.mark.slow
def test_restarts_and_sigkill_lose_no_trial_and_ask_none_twice(
    own_service: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    url, env = own_service
    token = procs.user_with_token(url, "kim")
    port = procs.free_port()
    api, worker = start_api(env, port, tmp_path), start_worker(env, tmp_path)
    try:
        with ArchsearchClient(f"http://127.0.0.1:{port}", token=token) as client:
            study = client.submit_study(adaptive_request(n_trials=4, parallel=2, steps=16))
            deadline = time.monotonic() + 90
            while not mid_study(client.get_study(study.id).counts):
                assert time.monotonic() < deadline, "never one trial done and one running"
                time.sleep(0.2)
        worker.kill()  # SIGKILL of every worker (and its pool), mid-trial
        api.kill()
        api.replace_with(start_api(env, port, tmp_path))
        worker.replace_with(start_worker(env, tmp_path))
        with ArchsearchClient(f"http://127.0.0.1:{port}", token=token) as client:
            ended = client.wait_study(study.id, timeout=180)
    finally:
        worker.stop()
        api.stop()
    assert ended.status == "finished" and ended.trials_asked == 4
    assert ended.counts == {"succeeded": 4}
    assert sorted(arm.label for arm in ended.arms) == [f"trial-{n}" for n in range(4)]
    assert all(arm.jobs == 1 for arm in ended.arms)  # one job per trial, none twice
    assert [t.state for t in optuna_trials(url, study.id)] == [TrialState.COMPLETE] * 4
    assert requeued_after_lease_loss(url, study.id)  # the killed run really was resumed


def mid_study(counts: dict[str, int]) -> bool:
    return counts.get("succeeded", 0) >= 1 and counts.get("running", 0) >= 1


def requeued_after_lease_loss(url: str, study_id: uuid.UUID) -> bool:
    """A job of the study ran twice: the run the SIGKILL cut, then its resumption."""
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            attempts = connection.execute(
                text("SELECT max(attempts) FROM jobs WHERE study_id = :study"),
                {"study": study_id},
            ).scalar_one()
            return int(attempts) >= 2
    finally:
        engine.dispose()


def test_optunas_tables_stay_out_of_our_schema(pg_url: str) -> None:
    """Optuna has its own `studies` and `alembic_version` tables: they live in their own
    PostgreSQL schema, so ours are untouched and the drift check sees only ours."""
    adaptive.storage(pg_url)
    engine = make_engine(pg_url)
    try:
        tables = set(inspect(engine).get_table_names())
        optuna_tables = set(inspect(engine).get_table_names(schema=adaptive.OPTUNA_SCHEMA))
    finally:
        engine.dispose()
    assert {"trials", "studies", "alembic_version"} <= optuna_tables
    assert "trials" not in tables and "trial_values" not in tables
    assert model_migration_drift(pg_url) == []
