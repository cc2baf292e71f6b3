"""Study pruner benchmark: the same grid study with and without a pruner, side by side.

For each dataset (digits, MNIST) and each pruner (`none`, then `--pruner`, default `median`),
one fixed study over learning rate x width (`--lrs`, `--widths`) with `--seeds` seeds at a
budget of `--epochs` epochs, run through the service's own path in one process: an embedded
SQLite database, `studies.service.submit_study`, and the jobs executed one by one by the same
executor a worker uses (`execute_next`), so each pruned trial is stopped by Optuna's pruner
through the run context exactly as on a worker. Both studies of a dataset queue the same jobs
in the same order (arm by arm, seeds inner), and run one after the other on this machine,
after one uncounted warm-up job, in ABBA order over `--rounds` rounds (device seconds summed).

Printed per dataset, for each study's last round: its device time (the summed wall seconds of
its jobs, start to end: the trials' device time on this one-job-at-a-time machine), optimizer
steps and jobs by status; then the device-time ratio pruned / unpruned over every round, and
whether the Pareto fronts (mean test accuracy against parameters over seeds) match within one
standard deviation: the same sizes on both fronts, and at each size accuracies within the
larger of the two arms' std over seeds (the study report's own tie rule); and whether the
same arms (knob values) are on both.

    nice -n 10 python bench/study_pruner.py [--datasets digits mnist] [--seeds 3]
        [--epochs 8] [--lrs 0.1 0.01 0.001 0.0001 0.00001] [--widths 16 64]
        [--pruner median|asha] [--warmup-epochs 1] [--mnist-train 4000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _data_dir import bench_data_dir  # noqa: E402

from archsearch.jobs.domain.accounts.service import LOCAL_USER  # noqa: E402
from archsearch.jobs.domain.studies import summary  # noqa: E402
from archsearch.jobs.domain.studies.service import submit_study  # noqa: E402
from archsearch.jobs.platform.db import transaction  # noqa: E402
from archsearch.jobs.platform.migrate import upgrade  # noqa: E402
from archsearch.jobs.platform.services import Services  # noqa: E402
from archsearch.jobs.platform.settings import Settings  # noqa: E402
from archsearch.jobs.runtime.executor import execute_next  # noqa: E402
from archsearch.jobs.runtime.runner import EMBEDDED_OFFER, LocalRunner  # noqa: E402
from archsearch.schemas.studies import StudyCreate, StudyDetail  # noqa: E402

PRUNERS = ("median", "asha")


def pruner_spec(args: argparse.Namespace, pruner: str) -> dict[str, Any]:
    """The study's `pruner`: Optuna's median (after a seed's worth of trials) or ASHA."""
    if pruner == "median":
        return {"name": "median", "startup_trials": 3, "warmup_epochs": args.warmup_epochs}
    if pruner == "asha":
        return {"name": "asha", "min_epochs": args.warmup_epochs or 1, "reduction_factor": 3}
    return {"name": "none"}


def study_request(args: argparse.Namespace, dataset: str, pruner: str) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": dataset}
    if dataset != "digits":
        ref["train_subset"] = args.mnist_train
    return {
        "name": f"{dataset}-{pruner}",
        "dataset": ref,
        "base": {"method": "train", "model": {"name": "mlp"}, "training": {"batch_size": 100}},
        "budget": {"epochs": args.epochs},
        "seeds": list(range(args.seeds)),
        "grid": {
            "training.optimizer.lr": args.lrs,
            "model.hidden": [[width] for width in args.widths],
        },
        "pruner": pruner_spec(args, pruner),
    }


def run_study(args: argparse.Namespace, dataset: str, pruner: str) -> StudyDetail:
    """One study in a fresh embedded service (removed after), its jobs run to the end here."""
    with tempfile.TemporaryDirectory(prefix="archsearch-pruner-bench-") as home:
        return _run_study_in(Path(home), args, dataset, pruner)


def _run_study_in(home: Path, args: argparse.Namespace, dataset: str, pruner: str) -> StudyDetail:
    settings = Settings(home=home, data_dir=bench_data_dir(), broker_url=None)
    upgrade(settings.resolved_database_url)
    services = Services.from_settings(settings)
    request = StudyCreate.model_validate(study_request(args, dataset, pruner))
    runner = LocalRunner(services)  # not started: only its enqueue and device answers
    with transaction(services.sessions) as session:
        study_id = submit_study(session, settings, runner, request, LOCAL_USER).id
    while execute_next(services, EMBEDDED_OFFER) is not None:
        pass
    with transaction(services.sessions) as session:
        detail = summary.read_study(session, study_id, team_id=None)
    services.engine.dispose()
    return detail


def front(detail: StudyDetail) -> dict[float, tuple[float, float, str]]:
    """The front by size: parameters -> (mean accuracy, its std over seeds, arm label)."""
    arms = {arm.label: arm for arm in detail.arms}
    out = {}
    for point in detail.pareto:
        accuracy = arms[point.label].test_accuracy
        out[point.parameters] = (
            point.test_accuracy,
            accuracy.std if accuracy else 0.0,
            point.label,
        )
    return out


def fronts_match(plain: StudyDetail, pruned: StudyDetail) -> bool:
    a, b = front(plain), front(pruned)
    if set(a) != set(b):
        return False
    return all(abs(a[size][0] - b[size][0]) <= max(a[size][1], b[size][1]) for size in a)


def describe(detail: StudyDetail) -> str:
    points = ", ".join(
        f"{label} {accuracy:.3f}±{std:.3f} ({size:,.0f} p)"
        for size, (accuracy, std, label) in sorted(front(detail).items())
    )
    return (
        f"device {detail.device_seconds:7.1f} s, steps {detail.optimizer_steps_spent:7,}, "
        f"jobs {dict(sorted(detail.counts.items()))}\n      front: {points}"
    )


def warm_up(args: argparse.Namespace, dataset: str) -> None:
    """One short job first, not counted: the first study would otherwise pay this process's
    imports and the dataset's first load, and the second would look cheaper for it."""
    small = argparse.Namespace(**{**vars(args), "seeds": 1, "epochs": 1})
    small.lrs, small.widths = args.lrs[:1], args.widths[:1]
    run_study(small, dataset, "none")


def both_studies(args: argparse.Namespace, dataset: str) -> tuple[StudyDetail, StudyDetail, float]:
    """(unpruned, pruned, device-time ratio): the ratio summed over `--rounds` rounds in ABBA
    order (no pruner first, then the pruner first, ...), so a load that drifts while the
    bench runs falls on both alike. The studies' results are the same every round."""
    seconds = {"none": 0.0, args.pruner: 0.0}
    details: dict[str, StudyDetail] = {}
    for round_ in range(args.rounds):
        order = ["none", args.pruner] if round_ % 2 == 0 else [args.pruner, "none"]
        for pruner in order:
            details[pruner] = run_study(args, dataset, pruner)
            seconds[pruner] += details[pruner].device_seconds
    return details["none"], details[args.pruner], seconds[args.pruner] / seconds["none"]


def compare(args: argparse.Namespace, dataset: str) -> tuple[float, bool]:
    warm_up(args, dataset)
    plain, pruned, ratio = both_studies(args, dataset)
    steps = pruned.optimizer_steps_spent / plain.optimizer_steps_spent
    same = fronts_match(plain, pruned)
    same_arms = sorted(v[2] for v in front(plain).values()) == sorted(
        v[2] for v in front(pruned).values()
    )
    print(f"{dataset}:")
    print(f"  no pruner   {describe(plain)}")
    print(f"  {args.pruner:<11} {describe(pruned)}")
    print(
        f"  device time ratio {ratio:.2f}x over {args.rounds} round(s) "
        f"(optimizer steps {steps:.2f}x); "
        f"fronts match within 1 std: {'yes' if same else 'NO'} "
        f"(the same arms on them: {'yes' if same_arms else 'no'}); "
        f"goal (same front at <= 0.5x): {'met' if same and ratio <= 0.5 else 'MISSED'}",
        flush=True,
    )
    return ratio, same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["digits", "mnist"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=float, default=8)
    parser.add_argument("--lrs", type=float, nargs="+", default=[0.1, 0.01, 0.001, 1e-4, 1e-5])
    parser.add_argument("--widths", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--pruner", choices=PRUNERS, default="median")
    parser.add_argument("--warmup-epochs", type=int, default=1)
    parser.add_argument("--mnist-train", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=2, help="ABBA rounds of the two studies")
    args = parser.parse_args()
    print(
        f"grid lr {args.lrs} x width {args.widths}, {args.seeds} seeds, {args.epochs} epochs, "
        f"pruner {pruner_spec(args, args.pruner)}; run {uuid.uuid4().hex[:6]}",
        flush=True,
    )
    for dataset in args.datasets:
        compare(args, dataset)


if __name__ == "__main__":
    main()
