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

# The eigenvalue solve runs in float32: it is the spectrum's whole cost (0.07 s per spectrum
# of a density-0.1 MNIST MLP in float64, 0.036 s in float32, half the memory). Eigenvalues
# of this L lie in [0, 2]; float32 moves them by at most ~1e-5 (6e-6 measured on that MLP),
# far below the gaps between the spectra of different architectures that the PCA compares.
SOLVE_DTYPE = torch.float32


def block_adjacency(weights: list[torch.Tensor]) -> torch.Tensor:
    """Symmetric adjacency of the layered graph, as float64. `weights[l]` is (n_{l+1}, n_l)."""
    every = [torch.ones(n, dtype=torch.bool) for n in _layer_sizes(weights)]
    return _adjacency(weights, every, torch.float64)


def normalized_laplacian_spectrum(weights: list[torch.Tensor]) -> torch.Tensor:
    """Ascending eigenvalues of I - D^-1/2 A D^-1/2 for the block adjacency of `weights`
    (float64, each within ~1e-5 of the exact value, see SOLVE_DTYPE; clipped to [0, 2]).

    A neuron with every link cut (a pruned input, a dead unit) keeps only its self-loop:
    degree 1, so its row and column of L are exactly zero and it adds an eigenvalue 0 of its
    own, exactly. Those are set aside before the O(N^3) solve (294 of the 1178 neurons of
    a density-0.1 MNIST MLP, 2.4x less work).

    Memory: the linked neurons' block is the only (n, n) matrix built, and L is made from it
    in place (the dense whole-graph adjacency, its cut copies and the temporaries of
    `I - d A d` were five more float64 ones: ~30 MB at the end of an MNIST prune job).
    """
    linked = _linked_neurons(weights)  # per layer, (n_l,) bool
    laplacian = _adjacency(weights, linked, SOLVE_DTYPE)  # (n, n) over linked neurons only
    # Degrees summed in float64 (>= 1 thanks to the self-loops), rounded once for the solve.
    inv_sqrt = laplacian.sum(1, dtype=torch.float64).rsqrt().to(SOLVE_DTYPE)  # (n,)
    laplacian.mul_(inv_sqrt[:, None]).mul_(inv_sqrt[None, :]).neg_()  # -D^-1/2 A D^-1/2
    laplacian.diagonal().add_(1.0)
    # torch's solve, on the torch threads the worker set (one in the benches). numpy's
    # OpenBLAS starts a thread per core whatever those are, and its threads spin while they
    # wait: on a busy machine the same solve cost 0.2-1.2 s of CPU instead of 0.08 s.
    eigenvalues = torch.linalg.eigvalsh(laplacian).to(torch.float64)  # (n,) ascending
    del laplacian
    neurons = sum(len(layer) for layer in linked)
    isolated = torch.zeros(neurons - len(eigenvalues), dtype=torch.float64)
    # Rounding puts a component's zero eigenvalue at +-1e-7: the clip keeps L's [0, 2].
    spectrum: torch.Tensor = torch.cat([isolated, eigenvalues.clamp_(0.0, 2.0)]).sort().values
    return spectrum  # (N,)


def _layer_sizes(weights: list[torch.Tensor]) -> list[int]:
    return [weights[0].shape[1], *(w.shape[0] for w in weights)]


def _linked_neurons(weights: list[torch.Tensor]) -> list[torch.Tensor]:
    """Per layer, which neurons have a link besides their self-loop (a nonzero weight in or
    out), without the dense adjacency."""
    linked = [torch.zeros(n, dtype=torch.bool) for n in _layer_sizes(weights)]
    for layer, w in enumerate(weights):
        nonzero = w.detach() != 0  # (n_{l+1}, n_l)
        linked[layer] |= nonzero.any(0)
        linked[layer + 1] |= nonzero.any(1)
    return linked


def _adjacency(
    weights: list[torch.Tensor], keep: list[torch.Tensor], dtype: torch.dtype
) -> torch.Tensor:
    """The block adjacency restricted to the neurons in `keep` (per layer, (n_l,) bool):
    |W_l| between consecutive layers, 1 on the diagonal, as `dtype`."""
    counts = [int(k.sum()) for k in keep]
    offsets = [sum(counts[:i]) for i in range(len(counts) + 1)]
    adjacency = torch.eye(offsets[-1], dtype=dtype)  # self-loops: the "1" blocks
    for layer, w in enumerate(weights):
        rows = slice(offsets[layer], offsets[layer + 1])
        cols = slice(offsets[layer + 1], offsets[layer + 2])
        kept = w.detach()[keep[layer + 1]][:, keep[layer]]  # (k_{l+1}, k_l)
        block = kept.abs().to(dtype).T  # (k_l, k_{l+1})
        adjacency[rows, cols] = block
        adjacency[cols, rows] = block.T
    return adjacency


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
