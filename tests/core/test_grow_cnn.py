"""Growing a small CNN's channels: the registry `cnn` (pool off) seen as a chain of convolutions,
one growth step per pair checked against the real model (finite differences of its
pre-activations and of its loss), and the `grow` job with `growth.family = "cnn"` end to end."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError
from torch import nn

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import load_dataset
from archsearch.core.errors import JobCancelled
from archsearch.core.export import load_model
from archsearch.core.growth import cnn_step
from archsearch.core.growth.layer_step import LayerPolicy
from archsearch.core.methods import get_method
from archsearch.core.models import Architecture, create_model
from archsearch.specs import GrowJob, parse_job_spec
from archsearch.specs.model_configs import CNNConfig


@pytest.fixture(scope="module")
def digits():
    return load_dataset(
        parse_job_spec({"method": "grow", "dataset": {"name": "digits"}}).dataset, (), 0
    )


def toy() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A registry CNN (2 convs of 2 channels, a head of 3, tanh, no pool) on a fixed problem."""
    torch.manual_seed(0)
    config = CNNConfig(
        channels=(2, 2), hidden=(3,), activation="tanh", batch_norm=False, pool=False
    )
    model = create_model(Architecture(config, (1, 6, 6), 4)).double()
    x = torch.randn(200, 1, 6, 6, dtype=torch.float64)  # n > the head's fan-in 2 * 36 + 1
    y = (x[:, 0, :3].sum((1, 2)) > 0).long() + 2 * (x[:, 0, :, :3].mean((1, 2)) > 0).long()
    return model, x, y


def next_module(model: nn.Module, i: int) -> nn.Module:
    """The real module whose output is chain layer i + 1's pre-activation."""
    convs = len(model.features)
    return model.features[i + 1][0] if i + 1 < convs else model.head[i + 1 - convs]


def pre_activation(model: nn.Module, i: int, x: torch.Tensor, grad: bool = False):
    """(loss, a_{i+1} flattened, d loss / d a_{i+1}) from the registry model's own forward."""
    seen: dict[str, torch.Tensor] = {}

    def hook(_module, _inputs, output):
        if grad:
            output.retain_grad()
        seen["a"] = output

    handle = next_module(model, i).register_forward_hook(hook)
    logits = model(x)
    handle.remove()
    return logits, seen["a"]


@pytest.mark.parametrize("i", [0, 1, 2])  # conv -> conv, conv -> head, head -> classifier
def test_channels_first_order_gain_matches_the_real_network(i: int) -> None:
    model, x, y = toy()
    layers = cnn_step.chain(model, (6, 6))
    h = x
    for layer in layers[:-1]:
        h = torch.tanh(layer(h))
    torch.testing.assert_close(layers[-1](h).flatten(1), model(x))  # the chain is the model
    stats = cnn_step.PairStats(layers, model.act, x, y, i)
    policy = LayerPolicy(max_neurons=3, rel_threshold=0.0, rtol=1e-12)
    dw, neurons = cnn_step.solve_pair(layers, stats, i, policy)
    assert neurons.count >= 1
    logits, a_before = pre_activation(model, i, x, grad=True)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    grad = a_before.grad.flatten(1)  # independent V_goal / -n, by autograd on the real model
    torch.testing.assert_close(-grad * len(x), stats.v_goal.flatten(1))
    gamma = 1e-6
    with torch.no_grad():
        logits_after, a_after = pre_activation(widened(model, i, dw, neurons, 0.0, gamma), i, x)
        v_new = (a_after - a_before).flatten(1) / gamma  # (n, C2 L): the channels' move, measured
    # Prop. 3.2 on patches: the projected goal gains exactly sum lambda_k^2 per unit gamma.
    b_mid = cnn_step.conv.patches(stats.mid, layers[i + 1])
    v_proj = stats.v_goal - torch.einsum("npl,op->nol", b_mid, dw)
    gain = float((v_proj.flatten(1) * v_new).sum()) / len(x)
    lam2 = float(neurons.lambdas[: neurons.count].square().sum())
    assert gain == pytest.approx(lam2, rel=1e-3)
    # dW* and the channels together (gamma0 = gamma): the real widened network's loss falls
    # by the first-order amount the growth step predicts from the patches (within 10%).
    with torch.no_grad():
        logits_both, _ = pre_activation(widened(model, i, dw, neurons, gamma, gamma), i, x)
    measured = loss.item() - F.cross_entropy(logits_both, y).item()
    predicted = gamma * (
        cnn_step.dw_rate(stats, layers[i + 1], dw)
        - cnn_step.first_order_rate(model.act, layers, stats, i, neurons)
    )
    assert predicted > 0 and abs(measured - predicted) <= 0.1 * predicted


def widened(model: nn.Module, i: int, dw, neurons, gamma0: float, gamma: float) -> nn.Module:
    """A copy of `model` grown at chain layer i through the registry modules."""
    grown = create_model(
        Architecture(
            CNNConfig(
                channels=(2, 2), hidden=(3,), activation="tanh", batch_norm=False, pool=False
            ),
            (1, 6, 6),
            4,
        )
    ).double()
    grown.load_state_dict(model.state_dict())
    cnn_step.apply_pair(grown, cnn_step.chain(grown, (6, 6)), i, dw, neurons, gamma0, gamma)
    assert cnn_step.chain(grown, (6, 6))[i].out_channels == 2 + (i == 2) + neurons.count
    return grown


@pytest.mark.parametrize("i", [0, 1, 2])
def test_zero_amplitude_channels_leave_the_function_unchanged(i: int) -> None:
    model, x, y = toy()
    before = model(x).detach()
    layers = cnn_step.chain(model, (6, 6))
    stats = cnn_step.PairStats(layers, model.act, x, y, i)
    dw, neurons = cnn_step.solve_pair(
        layers, stats, i, LayerPolicy(max_neurons=3, rel_threshold=0.0)
    )
    cnn_step.apply_pair(model, layers, i, dw, neurons, 0.0, 0.0)
    assert (
        cnn_step.chain(model, (6, 6))[i].out_channels
        == layers[i].out_channels + neurons.count
        > layers[i].out_channels
    )
    torch.testing.assert_close(model(x), before, rtol=0, atol=1e-12)


def cnn_job(**growth) -> GrowJob:
    spec = {
        "method": "grow",
        "dataset": {"name": "digits"},
        "training": {"epochs": 4, "seed": 3},
        "growth": {
            "family": "cnn",
            "initial_channels": [1, 1],
            "max_growth_steps": 4,
            "steps_between_growth": 10,
            "baseline": False,
            **growth,
        },
    }
    return parse_job_spec(spec)  # type: ignore[return-value]


def test_cnn_spec_defaults_and_validation() -> None:
    assert parse_job_spec({"method": "grow", "dataset": {"name": "digits"}}).growth.family == "mlp"
    cnn = parse_job_spec(
        {"method": "grow", "dataset": {"name": "digits"}, "growth": {"family": "cnn"}}
    )
    # Convs feed the classifier unless a head is asked for; smaller steps than the MLP's.
    assert (
        cnn.growth.initial_hidden,
        cnn.growth.max_growth_steps,
        cnn.growth.max_neurons_per_step,
    ) == ((), 6, 8)
    assert cnn_job(initial_hidden=[4], max_growth_steps=2).growth.initial_hidden == (4,)
    with pytest.raises(ValidationError, match="family"):
        parse_job_spec(
            {"method": "grow", "dataset": {"name": "digits"}, "growth": {"family": "vgg"}}
        )


def test_cnn_grow_job_grows_channels_and_reloads_as_a_registry_cnn(digits) -> None:
    ctx = InMemoryContext()
    result = get_method("grow")(cnn_job(), digits, ctx)
    growth = json.loads(ctx.artifacts["growth.json"])
    widths = growth["final_widths"]
    assert widths[0] > 1 and widths[1] > 1 and len(growth["steps"]) == 4
    assert all(layer["measured_decrease"] >= 0 for s in growth["steps"] for layer in s["layers"])
    assert (
        result.metrics["test_accuracy"] >= 0.9
    )  # chance is 0.1; measured 0.967 ([1, 1] -> [30, 33])
    arch = json.loads(ctx.artifacts["architecture.json"])["model"]
    assert (arch["name"], arch["channels"], arch["pool"], arch["batch_norm"]) == (
        "cnn",
        widths,
        False,
        False,
    )
    model = load_model(ctx.artifacts["architecture.json"], ctx.artifacts["model.safetensors"])
    accuracy = (model(digits.x_test).argmax(1) == digits.y_test).float().mean().item()
    assert accuracy == pytest.approx(result.metrics["test_accuracy"])


def test_cnn_stopped_run_resumes_to_the_same_widths(digits) -> None:
    spec = cnn_job(max_growth_steps=3).model_copy(
        update={"training": cnn_job().training.model_copy(update={"epochs": 1})}
    )
    full = InMemoryContext()
    get_method("grow")(spec, digits, full)
    interrupted = InMemoryContext(stop_after_reports=25)  # between the 2nd and 3rd growth steps
    with pytest.raises(JobCancelled):
        get_method("grow")(spec, digits, interrupted)
    assert len(interrupted.load_checkpoint()["state"]["log"]) == 2
    resumed = InMemoryContext(checkpoint=interrupted.checkpoint)
    get_method("grow")(spec, digits, resumed)
    final = json.loads(full.artifacts["growth.json"])["final_widths"]
    assert json.loads(resumed.artifacts["growth.json"])["final_widths"] == final
    a = load_model(full.artifacts["architecture.json"], full.artifacts["model.safetensors"])
    b = load_model(resumed.artifacts["architecture.json"], resumed.artifacts["model.safetensors"])
    torch.testing.assert_close(a(digits.x_test), b(digits.x_test))
