"""The mathematics of DNW's edge updates (section 2.2, Algorithm 1, Figure 3, eq. 13)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from archsearch.core.nn.graph_edges import GraphEdges
from archsearch.core.nn.neural_graph import DynamicGraph, OpSpec, StaticGraph, block_admissible
from archsearch.core.nn.topk import topk_mask


def _edges(graph: StaticGraph) -> GraphEdges:
    assert isinstance(graph.edges, GraphEdges), "a search graph has dense edges"
    return graph.edges


def _grad(t: torch.Tensor) -> torch.Tensor:
    assert t.grad is not None, "backward reached this tensor"
    return t.grad


def _static_graph(blocks: tuple[int, ...], k: int, op: OpSpec, seed: int = 0) -> StaticGraph:
    torch.manual_seed(seed)
    return StaticGraph(blocks, GraphEdges(block_admissible(blocks), k), op)


def test_hallucinated_edge_gradient_is_inner_product_of_state_and_input_gradient() -> None:
    """dL/dw_uv = <Z_u, dL/dI_v> for every admissible edge, from an explicit computation."""
    blocks = (3, 4, 2)
    graph = _static_graph(blocks, k=6, op=OpSpec("act", "none", "tanh"))
    _edges(graph).weight.data.normal_()
    w = (_edges(graph).weight * _edges(graph).mask).detach().requires_grad_(True)  # real edges
    x = torch.randn(5, 3)
    target = torch.randn(5, 2)

    out = graph(x[:, :, None, None])[:, :, 0, 0]
    torch.autograd.backward(F.mse_loss(out, target))

    # Independent forward pass written out by hand (eq. 1-2), keeping I_v for its gradient.
    i1 = x @ w[3:7, 0:3].T  # (B, 4)
    z1 = torch.tanh(i1)
    i2 = x @ w[7:9, 0:3].T + z1 @ w[7:9, 3:7].T  # (B, 2): output nodes have no op
    i1.retain_grad()
    i2.retain_grad()
    torch.autograd.backward(F.mse_loss(i2, target))
    states = torch.cat([x, z1.detach()], dim=1)  # Z_u for u = 0..6
    input_grads = torch.cat([_grad(i1), _grad(i2)], dim=1)  # dL/dI_v for v = 3..8
    expected = torch.zeros(9, 9)
    expected[3:, :7] = input_grads.T @ states  # <Z_u, dL/dI_v> summed over the batch
    expected *= _edges(graph).admissible
    hallucinated = _edges(graph).admissible & ~_edges(graph).mask.bool()
    assert bool(hallucinated.any()) and bool((expected[hallucinated] != 0).any())
    torch.testing.assert_close(_grad(_edges(graph).weight), expected)


def test_straight_through_gradient_matches_dense_autograd_on_conv_graph() -> None:
    """On the conv graph (norm, ReLU, depthwise conv), the gradient of every admissible edge
    equals the dense gradient w.r.t. the masked adjacency; inadmissible entries get none."""
    graph = _static_graph((3, 4, 5, 2), k=12, op=OpSpec("conv", "instance"))
    x = torch.randn(4, 3, 6, 6)
    upstream = torch.randn(4, 2, 6, 6)
    torch.autograd.backward((graph(x) * upstream).sum())

    dense = (_edges(graph).weight * _edges(graph).mask).detach().requires_grad_(True)
    _edges(graph).matrix = lambda: dense  # type: ignore[method-assign]
    torch.autograd.backward((graph(x) * upstream).sum())
    admissible = _edges(graph).admissible
    torch.testing.assert_close(_grad(_edges(graph).weight), _grad(dense) * admissible)
    assert bool((_grad(_edges(graph).weight)[~admissible] == 0).all())


def test_no_gradient_flows_through_hallucinated_edges_to_upstream_nodes() -> None:
    graph = _static_graph((3, 4, 5, 2), k=10, op=OpSpec("conv", "instance"))
    x = torch.randn(4, 3, 6, 6, requires_grad=True)
    upstream = torch.randn(4, 2, 6, 6)
    out = graph(x)
    torch.autograd.backward((out * upstream).sum())
    grad_before = _grad(x).clone()

    hallucinated = _edges(graph).admissible & ~_edges(graph).mask.bool()
    with torch.no_grad():  # arbitrary new values on hallucinated edges, same real edges
        _edges(graph).weight[hallucinated] = torch.randn(int(hallucinated.sum())) * 50
    x.grad = None
    out_after = graph(x)
    torch.autograd.backward((out_after * upstream).sum())
    torch.testing.assert_close(out_after, out)
    torch.testing.assert_close(_grad(x), grad_before)


def _fixed_state_problem(seed: int, m: float) -> tuple[torch.Tensor, GraphEdges, torch.Tensor]:
    """One target node k fed by 6 sources with fixed states Z_u; real edges 0, 1 (strong)
    and 2 (weak, |w| = m); hallucinated edges 3, 4, 5 are weaker still."""
    g = torch.Generator().manual_seed(seed)
    states = torch.randn(32, 6, generator=g)  # Z_u, held fixed (B, sources)
    admissible = torch.zeros(7, 7, dtype=torch.bool)
    admissible[6, :6] = True
    edges = GraphEdges(admissible, k=3)
    signs = torch.randint(0, 2, (6,), generator=g) * 2.0 - 1.0
    magnitudes = torch.tensor([1.0, 0.7, m, 0.1 * m, 0.1 * m, 0.1 * m])
    with torch.no_grad():
        edges.weight.zero_()
        edges.weight[6, :6] = signs * magnitudes
        edges.select()
    assert edges.mask[6, :3].all() and not edges.mask[6, 3:].any()
    return states, edges, torch.randn(32, generator=g)


def _loss(states: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    i_k = states @ weight[6, :6]  # I_k = sum_u w_uk Z_u, (B,)
    return F.mse_loss(torch.tanh(i_k), target)


def test_a_swap_made_by_the_update_rule_decreases_the_loss() -> None:
    """Section 2.2's claim: with node states fixed and a small enough learning rate, when the
    update makes a hallucinated edge i overtake the real edge j (|w_i| < |w_j| but
    |w~_i| > |w~_j|), swapping them lowers the loss compared with not swapping."""
    alpha, m = 1e-3, 2e-3
    swaps = 0
    for seed in range(20):
        states, edges, target = _fixed_state_problem(seed, m)
        loss = _loss(states, edges.matrix(), target)
        grad = torch.autograd.grad(loss, edges.weight)[0][6, :6]  # <Z_u, dL/dI_k> for all u
        i = 3 + int(grad[3:].abs().argmax())
        assert alpha * float(grad.abs().max()) < m, "sign(w~) = sign(w) (the claim's premise)"
        with torch.no_grad():
            # w_i just below |w_j|, on the side the update grows: a small step swaps them.
            edges.weight[6, i] = -grad[i].sign() * (m - 0.5 * alpha * abs(float(grad[i])))
            old_mask = edges.mask.clone()
            updated = edges.weight.clone()
            updated[6, :6] -= alpha * grad  # Algorithm 1, line 10
            if updated[6, i].abs() <= updated[6, 2].abs():
                continue  # the update did not make i overtake j: no swap to judge
            edges.weight.copy_(updated)
            assert edges.select() == 1
            assert edges.mask[6, i] == 1 and edges.mask[6, 2] == 0, "i replaced j"
            swapped = _loss(states, updated * edges.mask, target)
            not_swapped = _loss(states, updated * old_mask, target)
        assert float(swapped) < float(not_swapped), f"seed {seed}: swap increased the loss"
        swaps += 1
    assert swaps >= 10, f"only {swaps} of 20 problems produced a swap"


@pytest.mark.slow
@pytest.mark.parametrize("adjoint", [False, True])
def test_continuous_graph_gradients_match_finite_differences(adjoint: bool) -> None:
    """dZ/dt = A tanh(Z) (eq. 13, MLP-style nodes) solved by dopri5: autograd through the
    solver (or the adjoint method) agrees with central finite differences on real edges."""
    torch.manual_seed(0)
    n = 6
    edges = GraphEdges(torch.ones(n, n, dtype=torch.bool), k=14).double()
    graph = DynamicGraph(
        edges,
        OpSpec("act", "none", "tanh"),
        n_in=2,
        n_out=2,
        time="continuous",
        ode_tol=1e-10,
        adjoint=adjoint,
    ).double()
    x = torch.randn(3, 2, 1, 1, dtype=torch.float64)
    upstream = torch.randn(3, 2, 1, 1, dtype=torch.float64)

    def loss() -> torch.Tensor:
        total: torch.Tensor = (graph(x) * upstream).sum()
        return total

    torch.autograd.backward(loss())
    assert edges.weight.grad is not None
    checked = 0
    for t, s in edges.mask.bool().nonzero().tolist():
        analytic = float(edges.weight.grad[t, s])
        with torch.no_grad():
            edges.weight[t, s] += 1e-6
            up = float(loss())
            edges.weight[t, s] -= 2e-6
            down = float(loss())
            edges.weight[t, s] += 1e-6
        numeric = (up - down) / 2e-6
        assert abs(analytic - numeric) < 1e-5 * max(1.0, abs(numeric)), (t, s, analytic, numeric)
        checked += abs(numeric) > 1e-3
    assert checked >= 3, "the check must include edges that matter"


def test_topk_inside_graph_never_selects_inadmissible_entries() -> None:
    edges = GraphEdges(block_admissible((3, 4, 2)), k=9)
    with torch.no_grad():
        edges.weight.copy_(torch.randn(9, 9) * 10)  # inadmissible entries now large too
    edges.select()
    assert edges.num_real() == 9
    assert not bool((edges.mask.bool() & ~edges.admissible).any())
    assert torch.equal(edges.mask.bool(), topk_mask(edges.weight.abs(), edges.admissible, 9))
