"""Two-temperature masks: the surrogate gradient, masks as module state, model families."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from archsearch.core.models import Architecture, create_model
from archsearch.core.nn.masked import MaskedConv2d, MaskedLinear
from archsearch.core.nn.masked_model import (
    hard_masks,
    make_weight_free,
    mask_model,
    masked_layers,
    plain_state_dict,
    set_masks,
)
from archsearch.core.nn.two_temperature import (
    SIGMOID_ONE_ABOVE,
    binary_mask_straight_through,
    masked_weight_product,
    positive_indicator,
    scaled_sigmoid,
    times_sigmoid,
    two_temperature_sigmoid,
)
from archsearch.specs.model_configs import CNNConfig, MLPConfig
from archsearch.specs.prune_model_configs import MobileNetV1Config, VGGConfig


@pytest.mark.parametrize("t_hard,t_soft", [(100.0, 10.0), (1000.0, 10.0), (50.0, 5.0), (7.0, 7.0)])
def test_surrogate_gradient_is_soft_sigmoid_derivative(t_hard: float, t_soft: float) -> None:
    torch.manual_seed(0)
    w = (0.2 * torch.randn(40, dtype=torch.float64)).requires_grad_()
    upstream = torch.randn(40, dtype=torch.float64)
    mask = two_temperature_sigmoid(w, t_hard, t_soft)
    assert torch.equal(mask.detach(), torch.sigmoid(t_hard * w.detach())), (
        "forward is the hard sigmoid"
    )
    (mask * upstream).sum().backward()
    # Independent computation: autograd of sigmoid(t_soft w) gives t_soft s (1 - s).
    w_ref = w.detach().clone().requires_grad_()
    (torch.sigmoid(t_soft * w_ref) * upstream).sum().backward()
    assert torch.allclose(w.grad, w_ref.grad, rtol=1e-12, atol=1e-15)
    s = torch.sigmoid(t_soft * w.detach())
    assert torch.allclose(w.grad, upstream * t_soft * s * (1 - s), rtol=1e-12, atol=1e-15)


def test_equal_temperatures_give_the_exact_gradient() -> None:
    w = torch.linspace(-0.05, 0.05, 11, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: two_temperature_sigmoid(x, 30.0, 30.0), (w,))


def test_masked_linear_gradients_against_dense_reference() -> None:
    torch.manual_seed(1)
    layer = nn.Linear(5, 3).double()
    model = nn.Sequential(layer)
    mask_model(model, t_hard=20.0, t_soft=4.0, logit_init=0.05)
    masked = model[0]
    assert isinstance(masked, MaskedLinear) and masked.weight is layer.weight, "weights are shared"
    x = torch.randn(7, 5, dtype=torch.float64)
    model(x).pow(2).sum().backward()
    w, logits = layer.weight.detach(), masked.mask_logits.detach()
    w_ref = w.clone().requires_grad_()
    v = torch.sigmoid(20.0 * logits).requires_grad_()
    (x @ (w_ref * v).T + layer.bias.detach()).pow(2).sum().backward()
    assert torch.allclose(layer.weight.grad, w_ref.grad)
    s = torch.sigmoid(4.0 * logits)
    assert torch.allclose(masked.mask_logits.grad, v.grad * 4.0 * s * (1 - s))


def test_masks_are_module_state() -> None:
    model = create_model(Architecture(MLPConfig(hidden=(8,)), (1, 4, 4), 3))
    names = mask_model(model, keep_dense=("last",))
    assert names == ["layers.0"], "the last layer is kept dense"
    state = model.state_dict()
    assert "layers.0.mask_logits" in state and "layers.0.mask_frozen" in state
    model.to(torch.float64)
    assert model.layers[0].mask_logits.dtype == torch.float64, "logits move with .to()"
    logits = model.layers[0].mask_logits.detach()
    assert (logits > 0).all() and (logits <= 0.05).all(), "logits start small and positive"
    clone = create_model(Architecture(MLPConfig(hidden=(8,)), (1, 4, 4), 3)).double()
    mask_model(clone, keep_dense=("last",))
    clone.load_state_dict(state)
    assert torch.equal(clone.layers[0].mask_logits, model.layers[0].mask_logits)


def test_frozen_mask_is_binary_and_plain_state_loads_in_registry_model() -> None:
    torch.manual_seed(0)
    arch = Architecture(MLPConfig(hidden=(6,)), (1, 3, 3), 2)
    model = create_model(arch)
    mask_model(model)
    keep = {n: torch.rand_like(m.weight) > 0.5 for n, m in masked_layers(model)}
    set_masks(model, keep)
    assert all(torch.equal(hard_masks(model)[n], keep[n]) for n in keep)
    plain = create_model(arch)
    plain.load_state_dict(plain_state_dict(model))
    x = torch.randn(4, 1, 3, 3)
    assert torch.allclose(plain(x), model(x), atol=1e-6)
    model(x).sum().backward()
    assert all(m.mask_logits.grad is None for _, m in masked_layers(model)), "frozen: no mask grads"


def test_weight_free_trains_only_masks() -> None:
    model = create_model(Architecture(MLPConfig(hidden=(5,)), (1, 2, 2), 2))
    mask_model(model)
    make_weight_free(model)
    trainable = sorted(n for n, p in model.named_parameters() if p.requires_grad)
    assert trainable == ["layers.0.mask_logits", "layers.1.mask_logits"]
    for _, layer in masked_layers(model):
        link = 1.0 / layer.weight.shape[1] ** 0.5  # one value per layer: 1 / sqrt(fan_in)
        assert torch.equal(layer.weight, torch.full_like(layer.weight, link))


def test_straight_through_mask_is_binary_forward_soft_backward() -> None:
    torch.manual_seed(0)
    w = (0.2 * torch.randn(40, dtype=torch.float64)).requires_grad_()
    upstream = torch.randn(40, dtype=torch.float64)
    mask = binary_mask_straight_through(w, 5.0)
    assert torch.equal(mask.detach(), (w.detach() > 0).double()), "forward is exactly 1[w > 0]"
    (mask * upstream).sum().backward()
    w_ref = w.detach().clone().requires_grad_()
    (torch.sigmoid(5.0 * w_ref) * upstream).sum().backward()
    assert torch.allclose(w.grad, w_ref.grad, rtol=1e-12, atol=1e-15)


def test_binary_forward_trains_the_returned_network() -> None:
    torch.manual_seed(2)
    arch = Architecture(MLPConfig(hidden=(6,), activation="tanh"), (1, 3, 3), 3)
    model = create_model(arch)
    mask_model(model, init="normal", binary_forward=True)
    make_weight_free(model)
    x = torch.randn(16, 1, 3, 3)
    trained = model(x)
    plain = create_model(arch)
    plain.load_state_dict(plain_state_dict(model))
    assert torch.allclose(plain(x), trained, atol=1e-6), "no gap between trained and binary"
    trained.square().sum().backward()
    assert all(m.mask_logits.grad.abs().sum() > 0 for _, m in masked_layers(model))


FAMILIES = [
    MLPConfig(hidden=(16, 8)),
    CNNConfig(channels=(4, 8), hidden=(16,)),
    VGGConfig(stages=((4,), (8, 8)), hidden=(8,)),
    MobileNetV1Config(stem=4, blocks=((8, 1), (16, 2)), width_multiplier=1.0),
]


@pytest.mark.parametrize("config", FAMILIES, ids=lambda c: c.name)
@pytest.mark.parametrize("masked", [False, True], ids=["dense", "masked"])
def test_model_family(config, masked: bool) -> None:
    torch.manual_seed(0)
    model = create_model(Architecture(config, (1, 8, 8), 5))
    if masked:
        names = mask_model(model, keep_dense=("first",))
        assert names and all(
            isinstance(m, (MaskedLinear, MaskedConv2d)) for _, m in masked_layers(model)
        )
    out = model(torch.randn(3, 1, 8, 8))
    assert out.shape == (3, 5) and torch.isfinite(out).all()
    out.square().mean().backward()
    missing = [
        n
        for n, p in model.named_parameters()
        if p.requires_grad and (p.grad is None or not p.grad.abs().sum() > 0)
    ]
    assert not missing, f"no gradient for {missing}"


def test_frozen_mask_is_cached_and_follows_every_write_to_the_logits() -> None:
    """A frozen layer computes 1[w > 0] once, yet set_masks, load_state_dict and
    unfreezing each show up in the very next forward."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5))
    (name,) = mask_model(model, logit_init=0.1, init="normal")
    layer = dict(masked_layers(model))[name]
    x = torch.randn(3, 6)
    layer.mask_frozen.fill_(True)
    first = layer.mask()
    assert layer.mask() is first, "the frozen mask is computed once"
    assert torch.equal(model(x), x @ (layer.weight * (layer.mask_logits > 0)).T + layer.bias)

    keep = torch.zeros(5, 6, dtype=torch.bool)
    keep[0, :2] = True
    set_masks(model, {name: keep})
    assert torch.equal(layer.mask(), keep.float()), "set_masks invalidates the cache"

    state = {k: v.clone() for k, v in model.state_dict().items()}
    state[f"{name}.mask_logits"] = torch.ones(5, 6)
    model.load_state_dict(state)
    assert torch.equal(layer.mask(), torch.ones(5, 6)), "load_state_dict invalidates it"
    assert torch.equal(model(x), x @ layer.weight.T + layer.bias)

    layer.mask_frozen.fill_(False)
    assert layer.mask().requires_grad, "unfrozen: the two-temperature mask again"
    model.double()
    layer.mask_frozen.fill_(True)
    assert layer.mask().dtype == torch.float64, "a dtype change recomputes the mask"


def test_frozen_mask_computed_in_inference_mode_trains_afterwards() -> None:
    model = nn.Sequential(nn.Linear(4, 3))
    mask_model(model)
    ((_, layer),) = masked_layers(model)
    layer.mask_frozen.fill_(True)
    with torch.inference_mode():
        model(torch.randn(2, 4))
    model(torch.randn(2, 4)).sum().backward()  # no inference tensor saved for backward
    assert layer.weight.grad is not None and layer.mask_logits.grad is None


@pytest.mark.parametrize("binary", [False, True])
def test_fused_masked_weight_equals_weight_times_mask(binary: bool) -> None:
    """The one-node product against the two-node formula: the binary forward to the bit,
    the relaxed one (a sigmoid written as e^x / (e^x + 1)) and the gradients to rounding."""
    torch.manual_seed(3)
    weight = torch.randn(7, 5, requires_grad=True)
    logits = (0.1 * torch.randn(7, 5)).requires_grad_()
    upstream = torch.randn(7, 5)
    if binary:
        reference_mask = binary_mask_straight_through(logits, 10.0)
        positive = (logits.detach() > 0).float()
    else:
        reference_mask = two_temperature_sigmoid(logits, 100.0, 10.0)
        positive = None
    reference = weight * reference_mask
    (reference * upstream).sum().backward()
    grads = (weight.grad.clone(), logits.grad.clone())
    weight.grad, logits.grad = None, None
    fused = masked_weight_product(weight, logits, 100.0, 10.0, positive)
    (fused * upstream).sum().backward()
    if binary:
        assert torch.equal(fused, reference), "the same forward product"
    assert torch.allclose(fused, reference, rtol=1e-6, atol=0.0)
    assert torch.allclose(weight.grad, grads[0], rtol=1e-6, atol=0.0)
    assert torch.allclose(logits.grad, grads[1], rtol=1e-5, atol=1e-12)


def test_masked_weight_gradient_is_exact_at_equal_temperatures() -> None:
    """With t_hard = t_soft the surrogate is the true derivative of weight * sigmoid(t w):
    finite differences of the fused node's forward agree with its backward."""
    torch.manual_seed(5)
    weight = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    logits = (0.05 * torch.randn(4, 3, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda w, m: masked_weight_product(w, m, 30.0, 30.0), (weight, logits)
    )


def test_masked_weight_adds_the_penalty_gradient_to_the_logits_only() -> None:
    torch.manual_seed(6)
    weight = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    logits = (0.1 * torch.randn(6, 4, dtype=torch.float64)).requires_grad_()
    term = torch.randn(6, 4, dtype=torch.float64)
    upstream = torch.randn(6, 4, dtype=torch.float64)
    (masked_weight_product(weight, logits, 100.0, 10.0) * upstream).sum().backward()
    plain = (weight.grad.clone(), logits.grad.clone())
    weight.grad, logits.grad = None, None
    (masked_weight_product(weight, logits, 100.0, 10.0, None, term) * upstream).sum().backward()
    assert torch.equal(weight.grad, plain[0]), "the weights' gradient has no penalty"
    assert torch.allclose(logits.grad, plain[1] + term, rtol=1e-14, atol=1e-15)
    # Independent: t_soft * g * weight * s (1 - s) + term, s = sigmoid(t_soft w).
    s = torch.sigmoid(10.0 * logits.detach())
    expected = 10.0 * upstream * weight.detach() * s * (1 - s) + term
    assert torch.allclose(logits.grad, expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_times_sigmoid_is_the_scaled_sigmoid_product(dtype: torch.dtype) -> None:
    torch.manual_seed(7)
    logits = torch.cat([torch.linspace(-2, 2, 401), torch.tensor([0.0, 0.4, 0.41, 5.0])])
    logits, values = logits.to(dtype), torch.randn(logits.numel(), dtype=dtype)
    product = times_sigmoid(values, logits, 100.0)
    # Exactly, from the same rounded argument 100 * w (its rounding is the formula's too).
    argument = (100.0 * logits).double()
    reference = (values.double() * torch.sigmoid(argument)).to(dtype)
    ulp, tiny = torch.finfo(dtype).eps, torch.finfo(dtype).tiny
    assert torch.allclose(product, reference, rtol=4 * ulp, atol=4 * tiny)
    saturated = 100.0 * logits > SIGMOID_ONE_ABOVE
    assert saturated.any() and torch.equal(product[saturated], values[saturated])
    soft = torch.sigmoid((10.0 * logits).double()).to(dtype)
    assert torch.allclose(scaled_sigmoid(logits, 10.0), soft, rtol=4 * ulp, atol=4 * tiny)


def test_positive_indicator_is_the_comparison() -> None:
    logits = torch.tensor([-1.0, -0.0, 0.0, 1e-30, 2.0, float("nan"), float("inf")])
    indicator = positive_indicator(logits)
    assert indicator.dtype == logits.dtype
    assert torch.equal(indicator, (logits > 0).float()), "NaN -> 0, as the comparison"


def test_binary_forward_mask_follows_every_fused_optimiser_step() -> None:
    """The cached 1[w > 0] (shared by the density count and the next forward) is renewed
    after each logit step, although torch's fused Adam leaves the version counter alone."""
    from archsearch.core.pruning.trainer import MaskSchedule, MaskTrainer

    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(6, 4))
    mask_model(model, init="normal", binary_forward=True, logit_init=0.01)
    layer = model[0]
    trainer = MaskTrainer(model, MaskSchedule(target=None, total_steps=50, penalised=False))
    trainer.optimizer.param_groups[0]["lr"] = 0.05  # big steps: signs flip within a few
    flips = 0
    for step in range(20):
        before = layer.mask_logits.detach() > 0
        model(torch.randn(8, 6)).square().sum().backward()
        trainer.after_step(step)
        now = layer.mask_logits.detach() > 0
        flips += int((now != before).sum())
        assert trainer.density() == int(now.sum()) / now.numel()
        expected = layer.weight.detach() * now.float()
        assert torch.equal(layer.masked_weight().detach(), expected), f"stale mask at {step}"
    assert flips > 0, "the test moved some logits across 0"


def _weight_free_pair(conv: bool) -> tuple[nn.Module, nn.Module]:
    """The same weight-free network twice: folded (b * (x @ m^T)), and with the fold off
    (the general path x @ (b * m)^T)."""
    if conv:
        arch = Architecture(CNNConfig(channels=(4,), hidden=()), (2, 6, 6), 3)
    else:
        arch = Architecture(MLPConfig(hidden=(9,), activation="elu"), (1, 4, 4), 3)
    models = []
    for _ in range(2):
        torch.manual_seed(5)
        model = create_model(arch)
        mask_model(model, init="normal", binary_forward=True, t_soft=5.0)
        make_weight_free(model)
        models.append(model)
    for _, layer in masked_layers(models[1]):
        layer._weight_free = None
    return models[0], models[1]


@pytest.mark.parametrize("conv", [False, True])
def test_weight_free_fold_computes_the_general_products(conv: bool) -> None:
    folded, general = _weight_free_pair(conv)
    assert all(layer.weight_free_scale() is not None for _, layer in masked_layers(folded))
    assert all(layer.weight_free_scale() is None for _, layer in masked_layers(general))
    x = torch.randn(8, 2, 6, 6) if conv else torch.randn(8, 1, 4, 4)
    outputs = [model(x) for model in (folded, general)]
    for out in outputs:
        out.square().sum().backward()
    # Not to the bit: b multiplies the sums instead of their terms.
    assert torch.allclose(outputs[0], outputs[1], rtol=1e-5, atol=1e-6)
    for (_, a), (_, b) in zip(masked_layers(folded), masked_layers(general), strict=True):
        assert a.mask_logits.grad is not None and b.mask_logits.grad is not None
        scale = float(b.mask_logits.grad.abs().max())
        assert scale > 0
        assert torch.allclose(a.mask_logits.grad, b.mask_logits.grad, rtol=1e-4, atol=1e-6 * scale)


def test_weight_free_fold_ends_when_a_weight_changes_and_survives_a_reload() -> None:
    folded, _ = _weight_free_pair(conv=False)
    layers = [layer for _, layer in masked_layers(folded)]
    folded.load_state_dict(folded.state_dict())  # the same constants written again
    assert all(layer.weight_free_scale() is not None for layer in layers)
    with torch.no_grad():
        layers[0].weight[0, 0] += 1.0
    assert layers[0].weight_free_scale() is None, "no longer one constant: the general path"
    x = torch.randn(3, 1, 4, 4)
    plain = create_model(Architecture(MLPConfig(hidden=(9,), activation="elu"), (1, 4, 4), 3))
    plain.load_state_dict(plain_state_dict(folded))
    assert torch.allclose(plain(x), folded(x), atol=1e-6), "the changed weight is used"
    layers[1].bias.requires_grad_(True)
    assert layers[1].weight_free_scale() is None, "a trained bias is never dropped"
