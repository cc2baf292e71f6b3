"""The `grow` job end to end: spec validation, the default digits job, artifacts that reload
as an ordinary MLP, resume from a checkpoint, and growing a previous job's model."""

from __future__ import annotations

import json

import pytest
import torch
from pydantic import ValidationError

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import load_dataset
from archsearch.core.errors import IncompatibleModelError, JobCancelled
from archsearch.core.export import load_model
from archsearch.core.growth.schedule import neuron_cost
from archsearch.core.methods import get_method
from archsearch.specs import GrowJob, parse_job_spec


@pytest.fixture(scope="module")
def digits():
    return load_dataset(
        parse_job_spec({"method": "grow", "dataset": {"name": "digits"}}).dataset, (), 0
    )


def small_job(**growth) -> GrowJob:
    spec = {
        "method": "grow",
        "dataset": {"name": "digits"},
        "training": {"epochs": 4, "seed": 3},
        "growth": {"max_growth_steps": 4, "steps_between_growth": 10, "baseline": False, **growth},
    }
    return parse_job_spec(spec)  # type: ignore[return-value]


def test_relu_is_refused_with_the_field_and_the_allowed_values() -> None:
    with pytest.raises(ValidationError) as info:
        parse_job_spec(
            {"method": "grow", "dataset": {"name": "digits"}, "growth": {"activation": "relu"}}
        )
    text = str(info.value)
    assert "activation" in text and "selu" in text and "tanh" in text and "sigma(0) = 0" in text


def test_partial_training_keeps_the_grow_defaults_and_from_job_is_referenced() -> None:
    spec = parse_job_spec(
        {
            "method": "grow",
            "dataset": {"name": "digits"},
            "from_job": "j1",
            "training": {"seed": 7, "optimizer": {"lr": 0.01}},
        }
    )
    assert isinstance(spec, GrowJob)
    assert (spec.training.seed, spec.training.epochs, spec.training.optimizer.lr) == (7, 30, 0.01)
    assert spec.training.optimizer.name == "adam"
    assert spec.referenced_jobs() == ["j1"]


def test_default_digits_job_is_accurate_and_reloads_as_an_mlp(digits) -> None:
    spec = parse_job_spec({"method": "grow", "dataset": {"name": "digits"}})
    ctx = InMemoryContext()
    result = get_method("grow")(spec, digits, ctx)  # its speed is bench/grow.py's business
    assert result.metrics["test_accuracy"] >= 0.95
    growth = json.loads(ctx.artifacts["growth.json"])
    widths = growth["final_widths"]
    assert widths[0] > 1 and widths[1] > 1
    assert [result.metrics["width_0"], result.metrics["width_1"]] == widths
    steps = growth["steps"]
    assert len(steps) == spec.growth.max_growth_steps
    assert steps[-1]["widths"] == widths  # growth stopped at the last logged step
    for step in steps:
        for layer in step["layers"]:
            assert layer["measured_decrease"] >= 0  # the line search never accepts a loss increase
            assert layer["lambdas"] == sorted(layer["lambdas"], reverse=True)
    assert ctx.artifacts["growth.png"].startswith(b"\x89PNG")
    arch = json.loads(ctx.artifacts["architecture.json"])
    assert arch["model"]["name"] == "mlp" and arch["model"]["hidden"] == widths
    model = load_model(ctx.artifacts["architecture.json"], ctx.artifacts["model.safetensors"])
    logits = model(digits.x_test)
    assert (logits.argmax(1) == digits.y_test).float().mean().item() == pytest.approx(
        result.metrics["test_accuracy"]
    )
    assert "baseline_test_accuracy" in result.metrics


def test_stopped_run_resumes_to_the_same_widths_and_weights(digits) -> None:
    spec = small_job()
    full = InMemoryContext()
    reference = get_method("grow")(spec, digits, full)
    interrupted = InMemoryContext(stop_after_reports=25)  # between the 2nd and 3rd growth steps
    with pytest.raises(JobCancelled):
        get_method("grow")(spec, digits, interrupted)
    saved = json.loads(json.dumps(interrupted.load_checkpoint()["state"]["log"]))
    assert 1 <= len(saved) < spec.growth.max_growth_steps
    resumed = InMemoryContext(checkpoint=interrupted.checkpoint)
    result = get_method("grow")(spec, digits, resumed)
    assert (
        json.loads(resumed.artifacts["growth.json"])["final_widths"]
        == json.loads(full.artifacts["growth.json"])["final_widths"]
    )
    a = load_model(full.artifacts["architecture.json"], full.artifacts["model.safetensors"])
    b = load_model(resumed.artifacts["architecture.json"], resumed.artifacts["model.safetensors"])
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(p, q, msg=name)
    assert result.metrics["test_accuracy"] == reference.metrics["test_accuracy"]


def test_random_neurons_baseline_runs_the_same_schedule(digits) -> None:
    ctx = InMemoryContext()
    get_method("grow")(small_job(neurons="random"), digits, ctx)
    growth = json.loads(ctx.artifacts["growth.json"])
    assert growth["neurons"] == "random" and len(growth["steps"]) == 4
    assert all(layer["measured_decrease"] >= 0 for s in growth["steps"] for layer in s["layers"])


def test_grow_from_a_previous_jobs_model(digits) -> None:
    train = parse_job_spec(
        {
            "method": "train",
            "dataset": {"name": "digits"},
            "model": {"name": "mlp", "hidden": [4, 3], "activation": "tanh"},
            "training": {"epochs": 2},
        }
    )
    previous = InMemoryContext()
    get_method("train")(train, digits, previous)
    spec = small_job(activation="tanh", max_growth_steps=0).model_copy(update={"from_job": "prev"})
    ctx = InMemoryContext(other_jobs={"prev": previous.artifacts})
    start = load_model(
        previous.artifacts["architecture.json"], previous.artifacts["model.safetensors"]
    )
    from archsearch.core.methods.grow import start_model

    loaded = start_model(spec, digits, ctx)
    torch.testing.assert_close(loaded(digits.x_test), start(digits.x_test))
    grown = small_job(activation="tanh").model_copy(update={"from_job": "prev"})
    get_method("grow")(grown, digits, ctx)
    widths = json.loads(ctx.artifacts["growth.json"])["final_widths"]
    assert widths[0] >= 4 and widths[1] >= 3 and sum(widths) > 7
    with pytest.raises(IncompatibleModelError, match="growth.activation"):
        start_model(
            small_job(activation="selu").model_copy(update={"from_job": "prev"}), digits, ctx
        )


@pytest.mark.parametrize(
    ("growth", "reason"),
    [
        ({"max_parameters": 300}, "max_parameters"),
        ({"lambda_stop": 1e9}, "no_lambda_above_threshold"),
        ({"target_accuracy": 0.05}, "target_accuracy"),
    ],
)
def test_stop_rules(digits, growth: dict, reason: str) -> None:
    ctx = InMemoryContext()
    spec = small_job(**growth).model_copy(
        update={"training": small_job().training.model_copy(update={"epochs": 1})}
    )
    result = get_method("grow")(spec, digits, ctx)
    log = json.loads(ctx.artifacts["growth.json"])
    assert log["stop_reason"] == reason
    if reason != "max_parameters":
        assert len(log["steps"]) == 1
    if reason == "no_lambda_above_threshold":  # every lambda_k^2 is under the bar: nothing added
        assert log["final_widths"] == [1, 1] and log["steps"][0]["layers"][0]["added"] == 0
    if reason == "max_parameters":
        sizes = [step["parameters"] for step in log["steps"]]
        assert max(sizes) <= 300, "the cap is checked before a layer grows, never passed"
        assert result.metrics["parameters"] == sizes[-1] <= 300
        # It stops because no layer can take one more neuron, not earlier.
        widths = log["final_widths"]
        spec_cost = min(neuron_cost(widths, h, spec, digits) for h in range(len(widths)))
        assert sizes[-1] + spec_cost > 300


def test_wall_clock_schedule_grows_every_interval(digits) -> None:
    ctx = InMemoryContext()
    # 24 epochs: several times the training three 0.05 s intervals need, even on a fast machine.
    job = small_job(seconds_between_growth=0.05, max_growth_steps=3)
    job = job.model_copy(update={"training": job.training.model_copy(update={"epochs": 24})})
    get_method("grow")(job, digits, ctx)
    steps = json.loads(ctx.artifacts["growth.json"])["steps"]
    assert len(steps) == 3
    # `seconds` is the run time when a growth step starts; the next one waits for 0.05 s of
    # training after the previous one has finished.
    starts = [s["seconds"] for s in steps]
    ends = [s["seconds"] + s["growth_seconds"] for s in steps]
    assert starts[0] >= 0.05
    assert all(b - a >= 0.05 for a, b in zip(ends, starts[1:], strict=False))
