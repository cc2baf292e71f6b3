"""Adaptive studies: Optuna's ask/tell over declared knob ranges, driven from the database.

Optuna keeps its trials in our database (RDBStorage): on PostgreSQL in its own schema
(`archsearch_optuna`, so its `studies` and `alembic_version` tables never meet ours), on
SQLite in a file beside ours. No process keeps a loop: `advance` is called under the
study's row lock whenever one of its jobs ends and on the workers' periodic tick; it tells
Optuna the trials whose job has finished, then asks new ones up to `parallel` running.

Exactly once: a trial is asked by Optuna (its own commit) before our job row exists, so a
crash in between leaves a RUNNING trial without a job. The next `advance` gives that
trial its job instead of asking a new one; a trial is told only while Optuna still has it
RUNNING. So a restart of the API or a SIGKILL of every worker loses no trial and asks
none twice.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState
from sqlalchemy import create_engine, make_url, text

from archsearch.jobs.domain.studies.tables import Study
from archsearch.jobs.domain.tables import Job
from archsearch.schemas.jobs import JobStatus

OPTUNA_SCHEMA = "archsearch_optuna"
_storages: dict[str, Any] = {}
_storages_lock = threading.Lock()


def optuna_location(database_url: str) -> tuple[str, dict[str, Any]]:
    """(url, engine kwargs) of Optuna's storage for our database."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        database = url.database or ""
        stem = database.removesuffix(".db")
        return url.set(database=f"{stem}-optuna.db").render_as_string(False), {}
    if url.drivername == "postgresql":  # the driver the rest of the service uses
        url = url.set(drivername="postgresql+psycopg")
    options = {"connect_args": {"options": f"-csearch_path={OPTUNA_SCHEMA}"}}
    return url.render_as_string(hide_password=False), options


def _create_schema(url: str) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA IF NOT EXISTS {OPTUNA_SCHEMA}"))
    except Exception:  # a concurrent creator won the race; the schema is there
        pass
    finally:
        engine.dispose()


def storage(database_url: str) -> optuna.storages.RDBStorage:
    """One RDBStorage per database per process (building one creates or checks tables)."""
    with _storages_lock:
        if database_url not in _storages:
            url, kwargs = optuna_location(database_url)
            if kwargs:
                _create_schema(url)
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            _storages[database_url] = optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
        found: optuna.storages.RDBStorage = _storages[database_url]
        return found


def distributions(space: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, knob in space.items():
        if knob.get("choices") is not None:
            out[path] = CategoricalDistribution(knob["choices"])
        elif knob.get("integer"):
            out[path] = IntDistribution(int(knob["low"]), int(knob["high"]), log=knob["log"])
        else:
            out[path] = FloatDistribution(knob["low"], knob["high"], log=knob["log"])
    return out


def sampler_for(study: Study, seed: int) -> optuna.samplers.BaseSampler:
    """A fresh sampler per advance, seeded by how many trials exist (a sampler rebuilt with
    one fixed seed would propose the same point every time)."""
    space = study.config["space"]
    n_trials = study.n_trials or 1
    if study.sampler == "grid":
        grid = {
            path: knob.get("choices") or [knob["low"], knob["high"]] for path, knob in space.items()
        }
        return optuna.samplers.GridSampler(grid, seed=seed)
    if study.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if study.sampler == "nsga2":
        return optuna.samplers.NSGAIISampler(population_size=max(2, study.parallel or 2), seed=seed)
    startup = max(2, min(10, n_trials // 2))
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup)


def directions(study: Study) -> list[Literal["maximize", "minimize"]]:
    if study.config.get("objectives") == "accuracy":
        return ["maximize"]
    return ["maximize", "minimize"]


def open_optuna_study(study: Study, database_url: str) -> optuna.Study:
    return optuna.create_study(
        storage=storage(database_url),
        study_name=f"archsearch-{study.id.hex}",
        directions=directions(study),
        sampler=sampler_for(study, study.seeds[0] * 100_003 + study.trials_asked),
        load_if_exists=True,
    )


def objective_values(study: Study, job: Job) -> list[float] | None:
    """What Optuna is told of a finished job; None: the trial failed."""
    metrics = job.latest_metrics or {}
    # The sampler learns from the rows the trial held apart, never from the test split the
    # study reports (a job from before they were held apart: its test accuracy).
    accuracy = metrics.get("val_accuracy", metrics.get("test_accuracy"))
    if job.status is not JobStatus.succeeded or accuracy is None:
        return None
    if directions(study) == ["maximize"]:
        return [accuracy]
    if "parameters" not in metrics:
        return None
    return [accuracy, metrics["parameters"]]


@dataclass(frozen=True)
class Ask:
    """A trial that needs a job: its number and sampled knobs."""

    number: int
    params: dict[str, Any]


def tell_finished(ostudy: optuna.Study, study: Study, jobs: list[Job]) -> None:
    running = {t.number for t in ostudy.get_trials(deepcopy=False) if t.state == TrialState.RUNNING}
    for job in jobs:
        if job.study_trial in running and JobStatus(job.status).terminal:
            values = objective_values(study, job)
            # A pruned trial: the sampler learns it was stopped early, not that it broke.
            if JobStatus(job.status) is JobStatus.pruned:
                ostudy.tell(job.study_trial, state=TrialState.PRUNED)
            elif values is None:
                ostudy.tell(job.study_trial, state=TrialState.FAIL)
            else:
                ostudy.tell(job.study_trial, values)


def pending_asks(ostudy: optuna.Study, study: Study, jobs: list[Job]) -> list[Ask]:
    """Orphan trials first (asked, no job yet), then new asks while there is room."""
    with_job = {job.study_trial for job in jobs}
    trials = ostudy.get_trials(deepcopy=False)
    asks = [
        Ask(t.number, dict(t.params))
        for t in trials
        if t.state == TrialState.RUNNING and t.number not in with_job
    ]
    open_jobs = sum(not JobStatus(job.status).terminal for job in jobs)
    room = (study.parallel or 1) - open_jobs - len(asks)
    budget = (study.n_trials or 0) - len(trials)
    space = distributions(study.config["space"])
    for _ in range(max(0, min(room, budget))):
        trial = ostudy.ask(fixed_distributions=space)
        asks.append(Ask(trial.number, dict(trial.params)))
    return asks


def fail_trial(ostudy: optuna.Study, number: int) -> None:
    ostudy.tell(number, state=TrialState.FAIL)


def trial_count(ostudy: optuna.Study) -> int:
    return len(ostudy.get_trials(deepcopy=False))
