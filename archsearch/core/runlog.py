"""What a running method tells its reader: one line per epoch and one per phase change.

Plain `logging` records of the `archsearch` logger: the engine stays free of I/O, and the
service's job log (`jobs.runtime.joblog`) captures the records of the job's thread into the
job's log, so `archsearch logs -f` and the job page show the run as it goes. A notebook
sees them with `logging.basicConfig(level=logging.INFO)`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

log = logging.getLogger("archsearch.run")

# Shown first, in this order; the method's own keys (density, swaps, widths) follow.
LEADING = ("train_loss", "test_loss", "test_accuracy", "parameters", "lr")
HIDDEN = frozenset({"epoch", "step", "seconds"})


def _number(value: float) -> str:
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


def format_row(row: Mapping[str, float]) -> str:
    """`train_loss 0.4123, test_accuracy 0.8823, density 0.2312`: the row, leading keys first."""
    keys = [k for k in LEADING if k in row]
    keys += sorted(k for k in row if k not in LEADING and k not in HIDDEN)
    return ", ".join(f"{key} {_number(row[key])}" for key in keys)


def epoch_line(phase: str, epoch: int, epochs: int, row: Mapping[str, float]) -> None:
    """One line for a finished epoch (`epoch` counts from 1)."""
    log.info("%s epoch %d/%d: %s", phase, epoch, epochs, format_row(row))


def phase_line(message: str, *args: object) -> None:
    """A phase change: a phase starts or resumes, masks freeze, growth stops."""
    log.info(message, *args)


def phase_start(phase: str, start_epoch: int, epochs: int) -> None:
    """A training phase starts (or a resumed attempt picks it up again)."""
    if start_epoch < epochs:
        verb = "resumes at" if start_epoch else "starts at"
        log.info("phase %s %s epoch %d of %d", phase, verb, start_epoch + 1, epochs)
