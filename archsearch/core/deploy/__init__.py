"""Deployable job results: sparse storage, measured latency, ONNX, a model card.

Every method calls `write_deployment` once, where it has saved its final (compact) model,
with a `Deployable` (`deployable`): the files are written by `write`, the preprocessing
record by `preprocessing`, the ONNX file by `onnx`, the card by `card`, the per-layer kernel
forms by `forms`. It returns the metrics the method adds to `metrics.json`.
"""

from archsearch.core.deploy.deployable import (
    Deployable,
    load_deployed,
    pruned_deployable,
    registry_deployable,
)
from archsearch.core.deploy.preprocessing import preprocessing
from archsearch.core.deploy.write import same_networks, write_deployment

__all__ = [
    "Deployable",
    "load_deployed",
    "preprocessing",
    "pruned_deployable",
    "registry_deployable",
    "same_networks",
    "write_deployment",
]
