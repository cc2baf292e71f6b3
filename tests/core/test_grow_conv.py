"""Channel growth of a convolution pair (statistics over unfolded patches), checked against
`torch.linalg.lstsq`, the real convolutions, and finite differences of the loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from archsearch.core.growth import conv


class TinyCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 2, 3, padding=1)
        self.conv2 = nn.Conv2d(2, 3, 3, padding=1)
        self.head = nn.Linear(3 * 6 * 6, 4)

    def tail(self, a2: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(a2).flatten(1))  # (n, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tail(self.conv2(torch.tanh(self.conv1(x))))


def problem():
    torch.manual_seed(0)
    model = TinyCNN().double()
    x = torch.randn(64, 1, 6, 6, dtype=torch.float64)
    y = (x[:, 0, :3].sum((1, 2)) > 0).long() + 2 * (x[:, 0, :, :3].mean((1, 2)) > 0).long()
    mid = torch.tanh(model.conv1(x)).detach()
    a2 = model.conv2(mid).detach().requires_grad_(True)
    loss = F.cross_entropy(model.tail(a2), y)
    (grad,) = torch.autograd.grad(loss, a2)
    v_goal = (-grad * len(x)).flatten(2)  # (n, C2, L)
    return model, x, y, mid, v_goal, loss.item()


def test_conv_best_update_is_least_squares_over_positions_and_acts_as_a_convolution() -> None:
    model, x, _, mid, v_goal, _ = problem()
    b = conv.patches(mid, model.conv2)  # (n, 19, 36)
    dw = conv.conv_best_update(v_goal, b, rtol=1e-12)
    rows, targets = b.transpose(1, 2).reshape(-1, b.shape[1]), v_goal.transpose(1, 2).reshape(-1, 3)
    torch.testing.assert_close(dw, torch.linalg.lstsq(rows, targets).solution.T)
    as_conv = F.conv2d(mid, dw[:, :-1].reshape(3, 2, 3, 3), dw[:, -1], padding=1).flatten(2)
    torch.testing.assert_close(as_conv, torch.einsum("npl,op->nol", b, dw))


def linear_move(x: torch.Tensor, model: TinyCNN, neurons) -> torch.Tensor:
    """V_new (n, C2, L) from the unfolded-patch formula, independent of `widen_conv_pair`."""
    p = conv.patches(x, model.conv1).reshape(len(x), -1, 6, 6)
    z = torch.einsum("nqhw,kq->nkhw", p, neurons.in_weights)  # new channels' pre-activations
    kernel = neurons.out_weights.T.reshape(-1, 3, 3, 3).transpose(0, 1)  # (C2, K, 3, 3)
    return F.conv2d(z, kernel, padding=1).flatten(2)


def test_new_channels_first_order_gain_and_finite_differences() -> None:
    model, x, y, mid, v_goal, base = problem()
    b = conv.patches(mid, model.conv2)
    dw = conv.conv_best_update(v_goal, b, rtol=1e-12)
    v_proj = v_goal - torch.einsum("npl,op->nol", b, dw)
    neurons = conv.optimal_channels(x, model.conv1, model.conv2, v_proj, rtol=1e-12)
    assert neurons.count >= 1
    moved = linear_move(x, model, neurons)  # (n, C2, L)
    # The linear term of the chosen channels is exactly sum lambda_k^2 (section 3.2).
    torch.testing.assert_close((v_proj * moved).sum() / len(x), neurons.lambdas.square().sum())
    gamma = 1e-5
    root = gamma**0.5
    conv1, conv2 = conv.widen_conv_pair(
        model.conv1, model.conv2, root * neurons.in_weights, root * neurons.out_weights
    )
    a2 = conv2(torch.tanh(conv1(x)))
    # The widened convolutions realise gamma * V_new to first order (tanh'(0) = 1).
    torch.testing.assert_close(
        (a2 - model.conv2(mid)).flatten(2) / gamma, moved, rtol=1e-3, atol=1e-6
    )
    measured = F.cross_entropy(model.tail(a2), y).item() - base
    predicted = -gamma * float((v_goal * moved).sum()) / len(x)
    assert predicted < 0 and abs(measured - predicted) <= 0.1 * abs(predicted)


def test_zero_amplitude_channels_leave_the_function_unchanged() -> None:
    model, x, _, mid, v_goal, _ = problem()
    neurons = conv.optimal_channels(x, model.conv1, model.conv2, v_goal, rtol=1e-12)
    conv1, conv2 = conv.widen_conv_pair(
        model.conv1, model.conv2, 0 * neurons.in_weights, 0 * neurons.out_weights
    )
    assert conv1.out_channels == conv2.in_channels == 2 + neurons.count
    torch.testing.assert_close(conv2(torch.tanh(conv1(x))), model.conv2(mid), rtol=0, atol=1e-12)
