"""Unit granularity pruning: one two-temperature mask per neuron / channel, removed by
compaction so the compact model is a smaller dense network of the same family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import load_dataset
from archsearch.core.export import load_model, tensors_from_bytes
from archsearch.core.methods import transfer
from archsearch.core.methods.prune import run
from archsearch.core.models import Architecture
from archsearch.core.nn.masked_model import hard_masks, masked_layers, set_masks
from archsearch.core.pruning.build import build_masked_model, plain_model
from archsearch.core.pruning.compact import compact_model
from archsearch.core.pruning.units import as_unit_masks, as_weight_masks
from archsearch.specs import parse_job_spec

FAMILIES = {
    "mlp": ({"name": "mlp", "hidden": [24, 16]}, (1, 8, 8)),
    "cnn": ({"name": "cnn", "channels": [6, 8], "hidden": [12]}, (1, 8, 8)),
    "vgg": ({"name": "vgg", "stages": [[6], [8, 8]], "hidden": [12]}, (3, 8, 8)),
    "mobilenet_v1": (
        {"name": "mobilenet_v1", "stem": 6, "blocks": [[8, 1], [12, 2]]},
        (1, 8, 8),
    ),
}


def unit_spec(**fields):
    body = {"method": "prune", "dataset": {"name": "digits"}, "granularity": "unit", **fields}
    return parse_job_spec(body)


@pytest.fixture(scope="module")
def digits(data_dirs: tuple[Path, ...]):
    return load_dataset(
        parse_job_spec({"method": "prune", "dataset": {"name": "digits"}}).dataset, data_dirs
    )


def _randomise_batch_norm(model: torch.nn.Module, generator: torch.Generator) -> None:
    """Nonzero BN constants: a cut unit must vanish exactly even when BN(0) != 0."""
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            size = module.num_features
            module.running_mean.copy_(torch.randn(size, generator=generator))
            module.running_var.copy_(torch.rand(size, generator=generator) + 0.5)
            module.weight.data.copy_(torch.randn(size, generator=generator))
            module.bias.data.copy_(torch.randn(size, generator=generator))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_compaction_equals_masked_model_and_shrinks_the_family_config(family: str) -> None:
    config, shape = FAMILIES[family]
    spec = unit_spec(model=config, density=0.5)
    architecture = Architecture(spec.model, shape, 10)
    torch.manual_seed(0)
    model = build_masked_model(spec, architecture)
    generator = torch.Generator().manual_seed(1)
    units = {
        n: torch.rand(m.shape, generator=generator) < 0.5 for n, m in hard_masks(model).items()
    }
    for name in units:
        units[name].view(-1)[0] = True  # every level keeps a unit (a config needs one)
    set_masks(model, units)
    _randomise_batch_norm(model, generator)
    model.eval()
    plain = plain_model(model, architecture)
    compacted = compact_model(plain.state_dict(), architecture)
    assert compacted is not None
    compact, compact_arch = compacted
    x = torch.randn(5, *shape, generator=generator)
    with torch.no_grad():
        torch.testing.assert_close(compact(x), model(x), rtol=1e-4, atol=1e-5)
    kept = {name: int(mask.sum()) for name, mask in units.items()}
    dumped = json.loads(compact_arch.to_json())["model"]
    assert dumped["name"] == family, "the compact model is an ordinary config of its family"
    parameters = sum(p.numel() for p in compact.parameters())
    assert parameters < sum(p.numel() for p in plain.parameters())
    # Every cut unit is gone: the compact widths are the kept unit counts.
    assert sorted(_widths(compact_arch.config)) == sorted(kept.values())


def _widths(config) -> list[int]:
    if config.name == "mlp":
        return list(config.hidden)
    if config.name == "cnn":
        return [*config.channels, *config.hidden]
    if config.name == "vgg":
        return [w for stage in config.stages for w in stage] + list(config.hidden)
    return [config.stem, *(c for c, _ in config.blocks)]


def test_unit_mask_gradient_matches_finite_differences() -> None:
    """At t_hard = t_soft = t the surrogate is the exact derivative of sigmoid(t w) per unit,
    so d loss / d w_unit must match central differences of the relaxed forward pass."""
    spec = unit_spec(
        model=FAMILIES["cnn"][0], temperatures={"t_hard": 3.0, "t_soft": 3.0}, mask_init="normal"
    )
    architecture = Architecture(spec.model, (1, 8, 8), 10)
    torch.manual_seed(0)
    model = build_masked_model(spec, architecture).double().eval()
    x = torch.randn(4, 1, 8, 8, dtype=torch.float64)
    for name, layer in masked_layers(model):
        layer.mask_logits.grad = None
        model(x).square().sum().backward()
        analytic = layer.mask_logits.grad.clone()
        assert analytic.shape == (layer.unit_count or layer.weight.shape[1],), name
        numeric = torch.zeros_like(analytic)
        with torch.no_grad():
            for i in range(analytic.numel()):
                layer.mask_logits[i] += 1e-6
                up = model(x).square().sum()
                layer.mask_logits[i] -= 2e-6
                down = model(x).square().sum()
                layer.mask_logits[i] += 1e-6
                numeric[i] = (up - down) / 2e-6
        torch.testing.assert_close(analytic, numeric, rtol=1e-5, atol=1e-7)
        model.zero_grad()


@pytest.mark.parametrize("family", ["mlp", "cnn"])
def test_unit_prune_job_reaches_unit_density_and_ships_a_small_dense_model(
    digits, family: str
) -> None:
    config = FAMILIES[family][0]
    training = {"epochs": 8, "optimizer": {"lr": 0.01}}
    spec = unit_spec(model=config, density=0.25, training=training, baselines=["random"])
    ctx = InMemoryContext()
    result = run(spec, digits, ctx)
    assert result.metrics["density"] == pytest.approx(0.25, abs=0.03)
    assert result.metrics["test_accuracy"] > 0.35, "a quarter of the units still learn digits"
    assert result.metrics["density/layers.1" if family == "mlp" else "density/head.0"] == 0.25
    art = ctx.artifacts
    compact_config = json.loads(art["architecture-compact.json"])["model"]
    assert compact_config["name"] == family
    compact = load_model(art["architecture-compact.json"], art["model-compact.safetensors"])
    masked = load_model(art["architecture.json"], art["model.safetensors"])
    with torch.no_grad():
        torch.testing.assert_close(
            compact(digits.x_test[:32]), masked(digits.x_test[:32]), rtol=1e-4, atol=1e-5
        )
    deployment = json.loads(art["deployment.json"])
    assert deployment["size"]["macs_compact"] < 0.45 * deployment["size"]["macs_dense"]
    # The job page's layer table: units per pruned layer, as many as the compact model has.
    rows = {row["layer"]: row for row in json.loads(art["density.json"])["units"]}
    widths = {
        "mlp": {"layers.0": 24, "layers.1": 16},
        "cnn": {"features.0.0": 6, "features.1.0": 8, "head.0": 12},
    }
    assert {name: row["units"] for name, row in rows.items()} == widths[family]
    assert all(row["kept"] == round(0.25 * row["units"]) for row in rows.values())
    kept = [rows[name]["kept"] for name in widths[family]]
    assert kept == list(compact_config["hidden" if family == "mlp" else "channels"]) + (
        [] if family == "mlp" else list(compact_config["hidden"])
    )
    assert "Pruned at unit granularity" in art["model-card.md"].decode()
    assert result.metrics["parameters"] == result.metrics["parameters_compact"], (
        "a cut unit's own weights are no parameters of the deployed model"
    )
    # The mask files are weight-shaped at either granularity (what `transfer` reads).
    for file in ("mask.safetensors", "mask-random.safetensors"):
        for name, mask in tensors_from_bytes(art[file]).items():
            assert mask.shape == masked.get_submodule(name).weight.shape, (file, name)


def test_unit_l1_magnitude_baseline_keeps_the_largest_filters(digits) -> None:
    spec = unit_spec(
        model=FAMILIES["mlp"][0], density=0.5, training={"epochs": 1}, baselines=["magnitude"]
    )
    ctx = InMemoryContext()
    run(spec, digits, ctx)
    magnitude = tensors_from_bytes(ctx.artifacts["mask-magnitude.safetensors"])
    # Whole columns: a unit is read by all of its reader's outputs or by none.
    for mask in magnitude.values():
        columns = mask.any(dim=0)
        assert torch.equal(mask, columns.expand_as(mask))
    kept = sum(int(m.any(dim=0).sum()) for m in magnitude.values())
    assert kept == round(0.5 * 24) + round(0.5 * 16), "half of each layer's units"


def test_unit_granularity_rejects_families_without_units() -> None:
    with pytest.raises(ValueError, match="granularity 'unit'"):
        unit_spec(model={"name": "neural_graph"})


@pytest.fixture(scope="module")
def unit_source(digits) -> InMemoryContext:
    source = InMemoryContext()
    run(unit_spec(model=FAMILIES["mlp"][0], density=0.5, training={"epochs": 1}), digits, source)
    return source


@pytest.mark.parametrize("mask", ["random", "reshuffle"])
def test_transfer_baselines_of_a_unit_mask_draw_whole_units(
    digits, unit_source: InMemoryContext, mask: str
) -> None:
    source = unit_source
    arch = Architecture.from_json(source.artifacts["architecture.json"])
    learned = as_unit_masks(tensors_from_bytes(source.artifacts["mask.safetensors"]), arch)
    assert learned is not None, "a unit job's mask file is read back as units"
    spec = parse_job_spec(
        {
            "method": "transfer",
            "source_job": "src",
            "mask": mask,
            "dataset": {"name": "digits", "samples_per_class": 5},
            "training": {"epochs": 1, "seed": 3},
        }
    )
    ctx = InMemoryContext(other_jobs={"src": source.artifacts})
    transfer.run(spec, digits, ctx)
    drawn = as_unit_masks(tensors_from_bytes(ctx.artifacts["mask.safetensors"]), arch)
    assert drawn is not None, "whole units drawn, not single weights"
    assert {n: int(m.sum()) for n, m in drawn.items()} == {
        n: int(m.sum()) for n, m in learned.items()
    }, "every layer keeps its number of units"
    assert any(not torch.equal(drawn[n], learned[n]) for n in learned), "other units"


def test_unit_masks_are_told_apart_from_weight_masks() -> None:
    config, shape = FAMILIES["cnn"]
    arch = Architecture(
        parse_job_spec({"method": "prune", "model": config, "dataset": {"name": "digits"}}).model,
        shape,
        10,
    )
    model = build_masked_model(unit_spec(model=config), arch)
    generator = torch.Generator().manual_seed(0)
    units = {
        n: torch.rand(m.shape, generator=generator) < 0.5 for n, m in hard_masks(model).items()
    }
    weights = as_weight_masks(units, arch)
    assert all(weights[n].shape == layer.weight.shape for n, layer in masked_layers(model))
    back = as_unit_masks(weights, arch)
    assert back is not None and all(torch.equal(back[n], units[n]) for n in units)
    single = {n: torch.rand(m.shape, generator=generator) < 0.5 for n, m in weights.items()}
    assert as_unit_masks(single, arch) is None, "connection masks are not unit masks"
