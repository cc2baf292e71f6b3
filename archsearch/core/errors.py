"""Domain errors of the engine, with messages that tell the user what to do.

The service maps these to HTTP statuses in `api/errors.py`; the executor turns them into
a `failed` job with the message as its error.
"""

from __future__ import annotations


class ArchsearchError(Exception):
    """Base class of every error the engine raises on purpose."""


class UserError(ArchsearchError):
    """Something in the job's input is wrong; retrying will not help.

    `field` names the spec field at fault (dotted, e.g. "dataset.name") when there is one.
    """

    field: str | None = None


class UnknownDatasetError(UserError):
    def __init__(self, name: str, available: list[str]) -> None:
        super().__init__(f"unknown dataset {name!r}; available: {', '.join(available) or '(none)'}")
        self.field = "dataset.name"
        self.name = name
        self.available = available

    def __reduce__(self) -> tuple[type[UnknownDatasetError], tuple[str, list[str]]]:
        return UnknownDatasetError, (self.name, self.available)  # as DivergedError's


class DatasetUnavailableError(UserError):
    """A known dataset whose files are not in the data directory."""

    field = "dataset.name"


class IncompatibleModelError(UserError):
    """The chosen model family cannot take the dataset's inputs."""

    field = "model"


class DivergedError(UserError):
    """The loss became NaN or infinite: a user error (learning rate, data), never retried."""

    def __init__(self, step: int, loss: float) -> None:
        super().__init__(
            f"training diverged at step {step}: loss is {loss}. "
            "Lower the learning rate (optimizer.lr) or check the inputs for NaN values."
        )
        self.step, self.loss = step, loss

    def __reduce__(self) -> tuple[type[DivergedError], tuple[int, float]]:
        # What pickle rebuilds it from (a process pool sends it back to its parent): the
        # constructor's own arguments, not the message `args` holds.
        return DivergedError, (self.step, self.loss)


class ArtifactNotFoundError(UserError):
    """A job refers to another job's artifact that does not exist."""


class JobCancelled(ArchsearchError):
    """Raised inside the engine when `ctx.should_stop()` turns true; ends the job `cancelled`."""


class TrialPruned(ArchsearchError):
    """Raised at an epoch boundary when `ctx.should_prune()` turns true: a study's pruner
    stopped this trial. Ends the job `pruned`, keeping `metrics`: the last epoch's values,
    and what the run spent (added on the way out by `core.budget.measured`)."""

    def __init__(self, epoch: int, metrics: dict[str, float]) -> None:
        super().__init__(f"pruned by its study's pruner after epoch {epoch}")
        self.epoch = epoch
        self.metrics = dict(metrics)

    def __reduce__(self) -> tuple[type[TrialPruned], tuple[int, dict[str, float]]]:
        return TrialPruned, (self.epoch, self.metrics)  # as DivergedError's
