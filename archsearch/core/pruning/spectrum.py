"""Laplacian spectra of MLP architectures and their 2-D PCA map.

"Disentangling Neural Architectures and Weights", section 5 ("Laplacian spectra",
Figure 5, footnote 14): the network is a graph whose nodes are the neurons of every layer;
its block adjacency holds |W_l| between consecutive layers and the identity on the
diagonal blocks. The spectrum is the eigenvalues of the normalized Laplacian
L = I - D^-1/2 A D^-1/2 (D the degrees), sorted ascending; they lie in [0, 2].
Spectra of networks with the same parent are compared by PCA (Figure 5, right).
"""

from __future__ import annotations

import torch


def block_adjacency(weights: list[torch.Tensor]) -> torch.Tensor:
    """Symmetric adjacency of the layered graph. `weights[l]` is (n_{l+1}, n_l)."""
    sizes = [weights[0].shape[1], *(w.shape[0] for w in weights)]
    offsets = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    adjacency = torch.eye(offsets[-1], dtype=torch.float64)  # self-loops: the "1" blocks
    for layer, w in enumerate(weights):
        rows = slice(offsets[layer], offsets[layer + 1])
        cols = slice(offsets[layer + 1], offsets[layer + 2])
        block = w.detach().abs().to(torch.float64).T  # (n_l, n_{l+1})
        adjacency[rows, cols] = block
        adjacency[cols, rows] = block.T
    return adjacency


def normalized_laplacian_spectrum(weights: list[torch.Tensor]) -> torch.Tensor:
    """Ascending eigenvalues of I - D^-1/2 A D^-1/2 for the block adjacency of `weights`.

    A neuron with every link cut (a pruned input, a dead unit) keeps only its self-loop:
    degree 1, so its row and column of L are exactly zero and it adds an eigenvalue 0 of its
    own. Those are set aside before the O(N^3) solve (294 of the 1178 neurons of
    a density-0.1 MNIST MLP, 2.4x less work); the other eigenvalues are those of the linked
    neurons' block, equal up to float rounding.
    """
    adjacency = block_adjacency(weights)
    linked = (adjacency != 0).sum(1) > 1  # (N,) more than the self-loop
    adjacency = adjacency[linked][:, linked]
    inv_sqrt = adjacency.sum(1).rsqrt()  # degrees >= 1 thanks to the self-loops
    laplacian = (
        torch.eye(len(adjacency), dtype=torch.float64)
        - inv_sqrt[:, None] * adjacency * inv_sqrt[None, :]
    )
    # torch's solve, on the torch threads the worker set (one in the benches). numpy's
    # OpenBLAS starts a thread per core whatever those are, and its threads spin while they
    # wait: on a busy machine the same solve cost 0.2-1.2 s of CPU instead of 0.08 s.
    eigenvalues = torch.linalg.eigvalsh(laplacian)  # (linked,) ascending
    isolated = torch.zeros(len(linked) - len(adjacency), dtype=torch.float64)
    spectrum: torch.Tensor = torch.cat([isolated, eigenvalues]).sort().values  # (N,)
    return spectrum


def mlp_weights(state: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The Linear weights of an MLP state dict (`layers.{i}.weight`), in order."""
    count = sum(1 for key in state if key.startswith("layers.") and key.endswith(".weight"))
    return [state[f"layers.{i}.weight"] for i in range(count)]


def spectrum_pca(spectra: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """2-D PCA of (jobs, eigenvalues): coordinates (jobs, 2) and explained variance ratio (2,)."""
    assert spectra.dim() == 2 and spectra.shape[0] >= 2, "PCA needs at least two spectra"
    centered = spectra.to(torch.float64) - spectra.to(torch.float64).mean(0, keepdim=True)
    u, s, _ = torch.linalg.svd(centered, full_matrices=False)
    coords = torch.zeros(len(spectra), 2, dtype=torch.float64)
    k = min(2, len(s))
    coords[:, :k] = u[:, :k] * s[:k]
    variance = s**2
    ratio = torch.zeros(2, dtype=torch.float64)
    ratio[:k] = variance[:k] / variance.sum().clamp(min=1e-300)
    return coords, ratio
