"""Mathematics of the growth step (Props. 3.1 and 3.2, section 3.3), against independent
computations: `torch.linalg.lstsq`, direct norms, and finite differences of the real loss."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from archsearch.core.growth import layer_step, solver
from archsearch.core.models import Architecture, create_model
from archsearch.core.nn.growable import carry_optimizer_state, widen_pair
from archsearch.specs.model_configs import MLPConfig


def toy_problem(activation: str = "tanh", hidden: tuple[int, ...] = (3, 2), seed: int = 0):
    torch.manual_seed(seed)
    model = create_model(Architecture(MLPConfig(hidden=hidden, activation=activation), (6,), 4))
    model = model.double()
    x = torch.randn(256, 6, dtype=torch.float64)
    y = (x[:, 0] * x[:, 1] > 0).long() + 2 * (x[:, 2].sin() > 0).long()  # a non-linear target
    return model, x, y


@pytest.mark.parametrize("h", [0, 1])
def test_best_update_is_least_squares(h: int) -> None:
    model, x, y = toy_problem()
    stats = layer_step.layer_stats(model, x, y, h)
    dw = solver.best_update(stats.v_goal, stats.b_mid, rtol=1e-12)
    reference = torch.linalg.lstsq(stats.b_mid, stats.v_goal).solution.T  # (d, w + 1)
    torch.testing.assert_close(dw, reference, rtol=1e-8, atol=1e-10)


def test_best_update_matches_lstsq_on_rank_deficient_inputs() -> None:
    torch.manual_seed(1)
    b = torch.randn(50, 4, dtype=torch.float64)
    b = torch.cat([b, b[:, :1], torch.zeros(50, 1, dtype=torch.float64)], dim=1)  # duplicate, dead
    v = torch.randn(50, 3, dtype=torch.float64)
    dw = solver.best_update(v, b, rtol=1e-10)
    reference = torch.linalg.lstsq(b, v, driver="gelsd").solution.T  # minimum-norm solution
    torch.testing.assert_close(dw, reference, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("h", [0, 1])
def test_sum_of_lambda_squared_is_the_norm_reduction_of_eq_10(h: int) -> None:
    model, x, y = toy_problem(hidden=(3, 5))
    stats = layer_step.layer_stats(model, x, y, h)
    dw = solver.best_update(stats.v_goal, stats.b_mid, rtol=1e-12)
    v_proj = stats.v_goal - stats.b_mid @ dw.T
    neurons = solver.optimal_neurons(stats.b_in, v_proj, rtol=1e-12)
    n = x.shape[0]
    for k in range(1, neurons.count + 1):
        alpha, omega = neurons.in_weights[:k], neurons.out_weights[:, :k]
        v_new = stats.b_in @ alpha.T @ omega.T  # (n, d) linearised move with sigma'(0) = 1
        reduction = (v_proj.square().sum() - (v_proj - v_new).square().sum()) / n
        expected = neurons.lambdas[:k].square().sum()
        torch.testing.assert_close(reduction, expected, rtol=1e-9, atol=1e-12)
    # K* = R = rank(N); the rows of a softmax gradient sum to 0, so R <= classes - 1.
    assert neurons.count == torch.linalg.matrix_rank(stats.b_in.T @ v_proj, rtol=1e-10).item()


def test_optimal_neurons_beat_any_other_rank_one_fit() -> None:
    model, x, y = toy_problem(hidden=(3, 5))
    stats = layer_step.layer_stats(model, x, y, 0)
    neurons = solver.optimal_neurons(stats.b_in, stats.v_goal, rtol=1e-12)
    best = (
        stats.v_goal - stats.b_in @ neurons.in_weights[:1].T @ neurons.out_weights[:, :1].T
    ).norm()
    generator = torch.Generator().manual_seed(0)
    for _ in range(50):
        alpha = torch.randn(stats.b_in.shape[1], 1, generator=generator, dtype=torch.float64)
        pre = stats.b_in @ alpha  # (n, 1)
        omega = (pre.T @ stats.v_goal) / pre.square().sum()  # best output weights for this alpha
        assert (stats.v_goal - pre @ omega).norm() >= best - 1e-9


@pytest.mark.parametrize("activation", ["tanh", "selu"])
def test_small_gamma_decreases_the_loss_by_the_first_order_prediction(activation: str) -> None:
    model, x, y = toy_problem(activation, hidden=(3, 5))
    for h in (0, 1):
        stats = layer_step.layer_stats(model, x, y, h)
        dw, neurons = layer_step.solve_layer(
            stats, layer_step.LayerPolicy(max_neurons=4, rtol=1e-12)
        )
        rate = layer_step.first_order_rate(model.act, stats, neurons)
        assert rate < 0, "the optimal neurons must point downhill"
        gamma = 1e-4
        measured = (
            layer_step.candidate_loss(model, stats, y, h, dw, neurons, 0.0, gamma) - stats.loss
        )
        assert abs(measured - gamma * rate) <= 0.1 * abs(gamma * rate)
        if activation == "tanh":  # sigma'(0) = 1: the rate splits as in Prop. 3.2
            v_proj = stats.v_goal - stats.b_mid @ dw.T
            moved = stats.b_in @ neurons.in_weights.T @ neurons.out_weights.T
            lam2 = neurons.lambdas[: neurons.count].square().sum()
            coupling = (stats.b_mid @ dw.T * moved).sum() / x.shape[0]
            torch.testing.assert_close((v_proj * moved).sum() / x.shape[0], lam2)
            torch.testing.assert_close(torch.tensor(-rate, dtype=torch.float64), lam2 + coupling)


def test_gamma_zero_leaves_the_function_unchanged() -> None:
    model, x, y = toy_problem(hidden=(3, 5))
    before = model(x).detach()
    stats = layer_step.layer_stats(model, x, y, 0)
    dw, neurons = layer_step.solve_layer(stats, layer_step.LayerPolicy(max_neurons=3, rtol=1e-12))
    assert layer_step.candidate_loss(model, stats, y, 0, dw, neurons, 0.0, 0.0) == pytest.approx(
        stats.loss, abs=1e-12
    )
    layer_step._apply(model, 0, dw, neurons, 0.0, 0.0)
    assert model.layers[0].out_features == 3 + neurons.count > 3
    torch.testing.assert_close(
        model(x).detach(), before, rtol=0, atol=1e-12
    )  # matmul round-off only


def searched_loss(model, stats, y, dw, neurons) -> float:
    """The line-searched loss over both signs, as the random baseline gets."""
    return layer_step.signed_line_search(
        lambda g: layer_step.candidate_loss(model, stats, y, 0, dw, neurons, 0.0, g), stats.loss
    ).loss


def test_optimal_neurons_decrease_the_loss_more_than_random_ones() -> None:
    for seed in range(3):
        model, x, y = toy_problem(hidden=(2, 3), seed=seed)
        stats = layer_step.layer_stats(model, x, y, 0)
        dw, neurons = layer_step.solve_layer(
            stats, layer_step.LayerPolicy(max_neurons=2, rtol=1e-12)
        )
        optimal = searched_loss(model, stats, y, dw, neurons)
        generator = torch.Generator().manual_seed(seed)
        random = [
            searched_loss(model, stats, y, dw, solver.random_like(neurons, generator))
            for _ in range(3)
        ]
        assert optimal < stats.loss
        assert optimal < min(random), f"seed {seed}: optimal {optimal} vs random {random}"


def test_singular_statistics_give_finite_neurons() -> None:
    model, x, y = toy_problem(hidden=(4, 3))
    x = torch.cat(
        [x, x[:, :2], torch.zeros(len(x), 1, dtype=x.dtype)], dim=1
    )  # duplicated, constant
    model.layers[0] = nn.Linear(9, 4).double()
    with torch.no_grad():
        model.layers[0].weight[1] = 0.0  # a dead unit: tanh(0) = 0 on every sample
        model.layers[0].bias[1] = 0.0
    for h in (0, 1):
        stats = layer_step.layer_stats(model, x, y, h)
        for rtol in (1e-12, 1e-5, 1e-2):
            dw, neurons = layer_step.solve_layer(stats, layer_step.LayerPolicy(rtol=rtol))
            assert torch.isfinite(dw).all() and torch.isfinite(neurons.in_weights).all()
            assert (
                torch.isfinite(neurons.out_weights).all() and torch.isfinite(neurons.lambdas).all()
            )
    zero = solver.optimal_neurons(torch.zeros(10, 3), torch.randn(10, 2))  # S = 0 entirely
    assert zero.count == 0
    record = layer_step.grow_layer(model, x.float().double(), y, 0, layer_step.LayerPolicy())
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert record.loss_after <= record.loss_before


def test_widen_pair_and_optimizer_state_carry_over() -> None:
    first, second = nn.Linear(3, 2), nn.Linear(2, 4)
    optimizer = torch.optim.Adam([*first.parameters(), *second.parameters()])
    second(first(torch.randn(5, 3))).sum().backward()
    optimizer.step()
    old = [*first.parameters(), *second.parameters()]
    new_first, new_second = widen_pair(first, second, torch.randn(2, 4), torch.randn(4, 2))
    assert (new_first.out_features, new_second.in_features) == (4, 4)
    torch.testing.assert_close(new_first.weight[:2], first.weight)
    new_optimizer = torch.optim.Adam([*new_first.parameters(), *new_second.parameters()])
    carry_optimizer_state(
        optimizer, old, new_optimizer, [*new_first.parameters(), *new_second.parameters()]
    )
    moment = new_optimizer.state[new_second.weight]["exp_avg_sq"]  # (4, 4)
    torch.testing.assert_close(moment[:, :2], optimizer.state[second.weight]["exp_avg_sq"])
    assert (moment[:, 2:] == 0).all()
