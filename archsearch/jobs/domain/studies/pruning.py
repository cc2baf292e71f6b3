"""Study pruners: Optuna's MedianPruner or SuccessiveHalvingPruner stop hopeless trials early.

Every study with a pruner has a second, single-objective Optuna study beside its own
(`archsearch-<id>-pruning`, maximising validation accuracy) in the same RDBStorage: Optuna's
pruners judge one objective only, while an adaptive study may have two and a fixed (grid)
study has no Optuna study at all. Each job of the study gets one trial there (asked at its
first epoch, found again by the `job_id` user attribute after a restart), to which the
running job reports its validation accuracy after every epoch
(`trial.report(value, step=epoch)`) and asks `trial.should_prune()`: the decision is
Optuna's, nothing here re-implements it.
When the job ends its trial is told: COMPLETE with its final accuracy, PRUNED, or FAIL.

A study's arm is one configuration run once per seed, and its figures are means over its
seeds. So the pruner judges an arm by its first seed alone: that job asks Optuna; the arm's
other seeds report their values (Optuna's comparisons use them) and stop only when the first
seed was stopped, and those not started yet never start. An arm is then either every seed
run to the end or stopped as a whole: judging each seed apart would keep an arm's lucky seeds
and stop its unlucky ones, and its mean over the survivors would flatter it.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import TrialState

from archsearch.jobs.domain.studies.adaptive import storage
from archsearch.jobs.domain.tables import Job
from archsearch.schemas.jobs import JobStatus

JOB_ATTR = "job_id"
STOPPED_ARM_ATTR = "stopped-arm:"  # + the arm's label: a study attribute, the epoch it stopped at


def pruner_of(config: Mapping[str, Any]) -> optuna.pruners.BasePruner | None:
    """The Optuna pruner a study's `pruner` setting names; None: no pruning."""
    spec = config.get("pruner") or {"name": "none"}
    if spec["name"] == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=spec["startup_trials"], n_warmup_steps=spec["warmup_epochs"]
        )
    if spec["name"] == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=spec["min_epochs"], reduction_factor=spec["reduction_factor"]
        )
    return None


def open_pruning_study(
    study_id: uuid.UUID, pruner: optuna.pruners.BasePruner, database_url: str
) -> optuna.Study:
    return optuna.create_study(
        storage=storage(database_url),
        study_name=f"archsearch-{study_id.hex}-pruning",
        direction="maximize",
        pruner=pruner,
        load_if_exists=True,
    )


def find_trial(ostudy: optuna.Study, job_id: uuid.UUID) -> optuna.trial.FrozenTrial | None:
    return next(
        (t for t in ostudy.get_trials(deepcopy=False) if t.user_attrs.get(JOB_ATTR) == str(job_id)),
        None,
    )


@dataclass(frozen=True)
class Arm:
    """The study arm a job belongs to, and whether the job is its first seed (the one judged)."""

    label: str
    first_seed: bool


class TrialPruning:
    """The running job's question after each epoch: should this trial stop here?

    Built by the job runtime for a study job whose study has a pruner, and called by the
    engine through its run context (which keeps the engine free of any database)."""

    def __init__(
        self,
        job_id: uuid.UUID,
        study_id: uuid.UUID,
        config: Mapping[str, Any],
        url: str,
        arm: Arm | None = None,
    ) -> None:
        pruner = pruner_of(config)
        assert pruner is not None, "built only for a study with a pruner"
        self.job_id = job_id
        self.arm = arm or Arm(label=str(job_id), first_seed=True)
        self.ostudy = open_pruning_study(study_id, pruner, url)
        self._trial: optuna.Trial | None = None

    def trial(self) -> optuna.Trial:
        if self._trial is None:
            found = find_trial(self.ostudy, self.job_id)
            if found is None:  # the job's first epoch (a resumed attempt finds its trial)
                self._trial = self.ostudy.ask()
                self._trial.set_user_attr(JOB_ATTR, str(self.job_id))
            else:  # Optuna's way back to a live trial is its storage id (no public getter)
                self._trial = optuna.Trial(self.ostudy, found._trial_id)
        return self._trial

    def __call__(self, epoch: int, value: float) -> bool:
        trial = self.trial()
        if math.isfinite(value):
            trial.report(value, step=epoch)  # a step reported before (a resume) is kept
        if not self.arm.first_seed:
            return self.arm_stopped_at() is not None
        if trial.should_prune():
            self.ostudy.set_user_attr(STOPPED_ARM_ATTR + self.arm.label, epoch)
            return True
        return False

    def arm_stopped_at(self) -> int | None:
        """The epoch the arm's first seed was stopped at; None while it runs or if it ran
        to the end."""
        return self.ostudy.user_attrs.get(STOPPED_ARM_ATTR + self.arm.label)


def settle_trial(job: Job, config: Mapping[str, Any], database_url: str) -> None:
    """Tell the ended job's pruning trial how it ended (a no-op if it has none, or if it
    was told before: the job's end is processed at least once)."""
    pruner = pruner_of(config)
    if pruner is None or job.study_id is None:
        return
    ostudy = open_pruning_study(job.study_id, pruner, database_url)
    found = find_trial(ostudy, job.id)
    if found is None or found.state != TrialState.RUNNING:
        return
    # The pruners judge the validation values reported each epoch; this final value only
    # closes the trial's record (a job's final metrics may not repeat the validation pass).
    metrics = job.latest_metrics or {}
    accuracy = metrics.get("val_accuracy", metrics.get("test_accuracy"))
    status = JobStatus(job.status)
    try:
        if status is JobStatus.succeeded and accuracy is not None and math.isfinite(accuracy):
            ostudy.tell(found.number, accuracy)
        elif status is JobStatus.pruned:
            ostudy.tell(found.number, state=TrialState.PRUNED)
        else:
            ostudy.tell(found.number, state=TrialState.FAIL)
    except UpdateFinishedTrialError:  # another process settled it first
        pass
