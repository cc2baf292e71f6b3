"""Every documented default configuration of `train` and `search` learns (issue 11, item 4).

Each case is a job as docs/jobs.md documents it, run the way a worker runs it
(`parse_job_spec`, then the method's `run`), on digits, MNIST and Fashion-MNIST. Only the
data is cut (a small training subset, a small test subset) so the file runs in about a
minute on one core; optimiser, learning rate, batch size, schedule and epochs stay the
documented ones. A case passes when every loss is finite and the final model is no
collapsed classifier: it answers with several classes and beats chance by a wide margin.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from archsearch.core.context import InMemoryContext, Result
from archsearch.core.data.loaders import Dataset, load_dataset, training_subset
from archsearch.core.errors import IncompatibleModelError
from archsearch.core.methods import get_method
from archsearch.core.spec import DatasetRef, parse_job_spec

DATASETS = ("digits", "mnist", "fashion_mnist")
TRAIN_IMAGES = 256
TEST_IMAGES = 300
# Ten balanced classes: a collapsed model scores about 0.1; these runs take 20-40 steps.
MIN_ACCURACY = 0.3
MIN_PREDICTED_CLASSES = 4

TRAIN_MODELS: dict[str, dict[str, Any]] = {
    "mlp": {"name": "mlp"},
    "cnn": {"name": "cnn"},
    "vgg": {"name": "vgg"},
    "mobilenet_v1": {"name": "mobilenet_v1"},
}
SEARCH_JOBS: dict[str, dict[str, Any]] = {
    "static": {},
    "discrete": {"model": {"name": "neural_graph", "setting": "discrete"}},
    "continuous": {"model": {"name": "neural_graph", "setting": "continuous"}},
    "mlp_style": {"model": {"name": "neural_graph", "node_op": "act"}},
    "mobilenet_dnw": {"model": {"name": "mobilenet_dnw"}},
    **{
        strategy: {"search": {"strategy": strategy}}
        for strategy in (
            "random_graph",
            "no_update",
            "l1_anneal",
            "targeted_dropout",
            "lottery_one_shot",
            "fine_tune",
            "complete",
        )
    },
}


@pytest.fixture(scope="module")
def datasets(data_dirs: tuple[Path, ...]) -> dict[str, Dataset]:
    loaded = {name: load_dataset(DatasetRef(name=name), data_dirs) for name in DATASETS}
    return {
        name: replace(data, x_test=data.x_test[:TEST_IMAGES], y_test=data.y_test[:TEST_IMAGES])
        for name, data in loaded.items()
    }


def _run(job: dict[str, Any], datasets: dict[str, Dataset]) -> Result:
    spec = parse_job_spec(job)
    assert spec.dataset.name is not None
    data = training_subset(datasets[spec.dataset.name], spec.dataset, spec.training.seed)
    try:
        return get_method(spec.method)(spec, data, InMemoryContext())
    except IncompatibleModelError as refused:  # refused at submit time too: not a default
        pytest.skip(str(refused))


def _assert_learned(result: Result) -> None:
    losses = [row[k] for row in result.history for k in ("train_loss", "test_loss") if k in row]
    assert losses and all(math.isfinite(loss) for loss in losses), losses
    assert result.metrics["test_accuracy"] >= MIN_ACCURACY, result.metrics
    assert result.metrics["predicted_classes"] >= MIN_PREDICTED_CLASSES, result.metrics
    assert not result.warnings, result.warnings


def _dataset(name: str) -> dict[str, Any]:
    return {"name": name, "train_subset": TRAIN_IMAGES}


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("model", sorted(TRAIN_MODELS))
def test_train_defaults_learn(model: str, dataset: str, datasets: dict[str, Dataset]) -> None:
    job = {"method": "train", "dataset": _dataset(dataset), "model": TRAIN_MODELS[model]}
    _assert_learned(_run(job, datasets))


@pytest.mark.parametrize("dataset", DATASETS)
@pytest.mark.parametrize("case", sorted(SEARCH_JOBS))
def test_search_defaults_learn(case: str, dataset: str, datasets: dict[str, Dataset]) -> None:
    job = {"method": "search", "dataset": _dataset(dataset), **SEARCH_JOBS[case]}
    _assert_learned(_run(job, datasets))
