"""Laplacian spectra of MLP architectures and the compare_spectra job."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from archsearch.core.context import InMemoryContext
from archsearch.core.data.loaders import load_dataset
from archsearch.core.methods import compare_spectra, prune
from archsearch.core.pruning.spectrum import (
    block_adjacency,
    normalized_laplacian_spectrum,
    spectrum_pca,
)
from archsearch.specs import parse_job_spec


def reference_spectrum(weights: list[np.ndarray]) -> np.ndarray:
    """Independent: build the graph edge by edge, then L = I - D^-1/2 A D^-1/2 with numpy."""
    sizes = [weights[0].shape[1]] + [w.shape[0] for w in weights]
    index, start = [], 0
    for size in sizes:
        index.append(list(range(start, start + size)))
        start += size
    adjacency = np.eye(start)
    for layer, w in enumerate(weights):
        for j_out, node_out in enumerate(index[layer + 1]):
            for j_in, node_in in enumerate(index[layer]):
                adjacency[node_in, node_out] = adjacency[node_out, node_in] = abs(w[j_out, j_in])
    degree = adjacency.sum(1)
    laplacian = np.eye(start) - adjacency / np.sqrt(np.outer(degree, degree))
    return np.sort(np.linalg.eigvalsh(laplacian))


# The eigenvalues lie in [0, 2] and are solved in float32: 1e-5 is 5e-6 of their range,
# ten times float32's rounding of them, and a thousand times below the gaps between spectra.
TOLERANCE = 1e-5


def test_spectrum_matches_independent_computation() -> None:
    rng = np.random.default_rng(0)
    weights = [rng.normal(size=(5, 4)) * (rng.random((5, 4)) > 0.4), rng.normal(size=(3, 5))]
    ours = normalized_laplacian_spectrum([torch.from_numpy(w) for w in weights]).numpy()
    assert np.abs(ours - reference_spectrum(weights)).max() < TOLERANCE
    assert ours.min() >= 0 and ours.max() <= 2, "normalized Laplacian eigenvalues lie in [0, 2]"


def dense_form_spectrum(weights: list[torch.Tensor]) -> torch.Tensor:
    """The spectrum through the whole-graph adjacency and `I - d A d` as written, in float64:
    the dense form the in-place float32 construction must reproduce within TOLERANCE."""
    adjacency = block_adjacency(weights)
    linked = (adjacency != 0).sum(1) > 1
    adjacency = adjacency[linked][:, linked]
    inv_sqrt = adjacency.sum(1).rsqrt()
    eye = torch.eye(len(adjacency), dtype=torch.float64)
    laplacian = eye - inv_sqrt[:, None] * adjacency * inv_sqrt[None, :]
    isolated = torch.zeros(len(linked) - len(adjacency), dtype=torch.float64)
    return torch.cat([isolated, torch.linalg.eigvalsh(laplacian)]).sort().values


def pruned_mlp(sizes: list[int], density: float, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    weights = []
    for n_in, n_out in zip(sizes, sizes[1:], strict=False):
        w = torch.randn(n_out, n_in, generator=generator)
        weights.append(w * (torch.rand(n_out, n_in, generator=generator) < density))
    return weights


def test_spectrum_matches_the_float64_dense_form_with_cut_neurons() -> None:
    weights = pruned_mlp([60, 24, 12, 10], density=0.2, seed=3)
    weights[0][:, :15] = 0  # inputs with every link cut
    weights[1][:4] = 0  # four hidden units with no link in
    weights[2][:, :4] = 0  # nor out
    for graph in (weights, [(w != 0).to(torch.float64) for w in weights]):
        ours, dense = normalized_laplacian_spectrum(graph), dense_form_spectrum(graph)
        assert ours.dtype == torch.float64 and (ours - dense).abs().max() < TOLERANCE
        assert int((ours == 0).sum()) >= 15 + 4, "one exact zero per cut neuron at least"


def test_spectrum_of_an_mnist_sized_mlp_stays_within_tolerance() -> None:
    """Float32's error grows with the matrix: checked at the size a prune job solves (the
    default MLP on MNIST at density 0.1, a quarter of the pixels never linked)."""
    weights = pruned_mlp([784, 256, 128, 10], density=0.1, seed=0)
    weights[0][:, ::4] = 0
    for graph in (weights, [(w != 0).to(torch.float64) for w in weights]):
        ours, dense = normalized_laplacian_spectrum(graph), dense_form_spectrum(graph)
        assert (ours - dense).abs().max() < TOLERANCE
        assert bool((ours[1:] >= ours[:-1]).all()), "ascending"


def test_disconnected_graph_has_one_zero_eigenvalue_per_component() -> None:
    w1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # two separate chains 0-2-4, 1-3-5
    w2 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    eig = normalized_laplacian_spectrum([w1, w2])
    assert int((eig < TOLERANCE).sum()) == 2 and eig[2] > 0.1


def test_pca_matches_covariance_eigendecomposition() -> None:
    spectra = torch.randn(6, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    coords, ratio = spectrum_pca(spectra)
    centered = (spectra - spectra.mean(0)).numpy()
    values, vectors = np.linalg.eigh(centered.T @ centered)
    top = vectors[:, ::-1][:, :2]
    expected = centered @ top
    assert np.allclose(np.abs(coords.numpy()), np.abs(expected), atol=1e-8), (
        "up to the sign of each axis"
    )
    assert np.allclose(ratio.numpy(), values[::-1][:2] / values.sum())


def test_compare_spectra_job(data_dirs: tuple[Path, ...]) -> None:
    artifacts = {}
    for job, weights in (("bin", "free"), ("real", "learned")):
        spec = parse_job_spec(
            {
                "method": "prune",
                "dataset": {"name": "digits"},
                "weights": weights,
                "model": {"name": "mlp", "hidden": [16], "activation": "tanh"},
                "density": 0.3,
                "training": {"epochs": 2},
            }
        )
        ctx = InMemoryContext()
        prune.run(spec, load_dataset(spec.dataset, data_dirs), ctx)
        spectrum = json.loads(ctx.artifacts["spectrum.json"])
        assert len(spectrum["mask"]) == 64 + 16 + 10
        artifacts[job] = ctx.artifacts
    spec = parse_job_spec(
        {"method": "compare_spectra", "dataset": {"name": "digits"}, "jobs": ["bin", "real"]}
    )
    assert spec.referenced_jobs() == ["bin", "real"]
    ctx = InMemoryContext(other_jobs=artifacts)
    result = compare_spectra.run(spec, load_dataset(spec.dataset, data_dirs), ctx)
    payload = json.loads(ctx.artifacts["spectra-pca.json"])
    a, b = (np.array(json.loads(artifacts[j]["spectrum.json"])["mask"]) for j in ("bin", "real"))
    coords = np.array(payload["coordinates"])
    assert np.linalg.norm(coords[0] - coords[1]) == pytest.approx(np.linalg.norm(a - b), rel=1e-8)
    assert result.metrics["pc1_variance_ratio"] == pytest.approx(1.0)
    assert ctx.artifacts["spectra-pca.png"][:4] == b"\x89PNG"
