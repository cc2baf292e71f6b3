"""The `compare_spectra` method: Laplacian spectra of several prune jobs, side by side.

"Disentangling Neural Architectures and Weights", section 5, Figure 5: each job's
normalized Laplacian spectrum (its `spectrum.json`) is a point; a 2-D PCA of these points
shows which architectures are structurally alike.
"""

from __future__ import annotations

import json

import torch

from archsearch.core.charts.pruning import spectra_pca_png
from archsearch.core.context import Result, RunContext
from archsearch.core.data.loaders import Dataset
from archsearch.core.errors import UserError
from archsearch.core.export import json_bytes
from archsearch.core.pruning.spectrum import spectrum_pca
from archsearch.specs.transfer import CompareSpectraJob


def load_spectra(spec: CompareSpectraJob, ctx: RunContext) -> torch.Tensor:
    if len(spec.jobs) < 2:
        raise UserError("compare_spectra needs 'jobs': the ids of two or more finished prune jobs")
    spectra = []
    for job in spec.jobs:
        payload = json.loads(ctx.read_job_artifact(job, "spectrum.json"))
        spectra.append(torch.tensor(payload[spec.spectrum], dtype=torch.float64))
    sizes = {len(s) for s in spectra}
    if len(sizes) != 1:
        raise UserError(
            f"the spectra have different lengths {sorted(sizes)}: compare jobs that pruned "
            "the same parent network (same model and dataset shape)"
        )
    return torch.stack(spectra)  # (jobs, nodes)


def run(spec: CompareSpectraJob, data: Dataset, ctx: RunContext) -> Result:
    """Save `spectra-pca.png` and `spectra-pca.json` (coordinates per job)."""
    spectra = load_spectra(spec, ctx)
    coords, ratio = spectrum_pca(spectra)
    payload = {
        "jobs": list(spec.jobs),
        "spectrum": spec.spectrum,
        "coordinates": coords.tolist(),
        "explained_variance_ratio": ratio.tolist(),
    }
    ctx.save_artifact("spectra-pca.json", json_bytes(payload), "application/json")
    png = spectra_pca_png(coords.numpy(), list(spec.jobs), ratio.numpy())
    ctx.save_artifact("spectra-pca.png", png, "image/png")
    distances = torch.cdist(spectra, spectra)
    metrics = {
        "jobs": float(len(spec.jobs)),
        "mean_spectral_distance": float(
            distances.sum() / max(1, len(spectra) * (len(spectra) - 1))
        ),
        "pc1_variance_ratio": float(ratio[0]),
        "pc2_variance_ratio": float(ratio[1]),
    }
    return Result(metrics=metrics)
