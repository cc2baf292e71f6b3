"""Every model family of the registry: shapes, finiteness, gradients, and rebuilding."""

from __future__ import annotations

import pytest
import torch

from archsearch.core.errors import IncompatibleModelError
from archsearch.core.export import load_model, model_to_bytes
from archsearch.core.models import Architecture, create_model, list_models
from archsearch.specs.families import MODEL_CONFIG_TYPES
from archsearch.specs.model_configs import CNNConfig, MLPConfig

CANDIDATE_SHAPES = [(1, 28, 28), (1, 8, 8), (3, 32, 32)]
CONFIGS = {t.model_fields["name"].default: t for t in MODEL_CONFIG_TYPES}


def default_architecture(name: str) -> Architecture:
    config = CONFIGS[name].model_validate({})
    shape = next(s for s in CANDIDATE_SHAPES if config.input_problem(s) is None)
    return Architecture(config, shape, num_classes=10)


def test_every_config_has_a_builder() -> None:
    assert set(CONFIGS) == set(list_models())


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_family_forward_and_gradients(name: str) -> None:
    torch.manual_seed(0)
    architecture = default_architecture(name)
    model = create_model(architecture)
    x = torch.randn(4, *architecture.input_shape)
    out = model(x)
    assert out.shape == (4, 10)
    assert torch.isfinite(out).all()
    out.logsumexp(1).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert missing == [], f"no gradient reaches {missing}"


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_family_rebuilds_from_architecture_json(name: str) -> None:
    torch.manual_seed(1)
    architecture = default_architecture(name)
    model = create_model(architecture).eval()
    assert Architecture.from_json(architecture.to_json()) == architecture
    rebuilt = load_model(architecture.to_json(), model_to_bytes(model))
    x = torch.randn(3, *architecture.input_shape)
    torch.testing.assert_close(rebuilt(x), model(x))


def test_mlp_layers_have_the_configured_widths() -> None:
    model = create_model(Architecture(MLPConfig(hidden=(7, 5)), (1, 8, 8), 3))
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert [tuple(layer.weight.shape) for layer in linears] == [(7, 64), (5, 7), (3, 5)]


def test_cnn_refuses_images_too_small_for_its_pooling() -> None:
    with pytest.raises(IncompatibleModelError, match="fewer 'channels'"):
        create_model(Architecture(CNNConfig(channels=(4, 4, 4, 4)), (1, 8, 8), 10))
    with pytest.raises(IncompatibleModelError, match=r"needs image inputs"):
        create_model(Architecture(CNNConfig(), (64,), 10))
