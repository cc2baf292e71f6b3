"""Loading a downloaded model: `architecture*.json` plus a dense or sparse weights file."""

from __future__ import annotations

from torch import nn

from archsearch.core.export.sparse import load_state
from archsearch.core.models.registry import Architecture, create_model


def load_model(architecture_json: str | bytes, weights: bytes) -> nn.Module:
    """Rebuild a model from `architecture.json` and `model.safetensors` (or the sparse file)."""
    model = create_model(Architecture.from_json(architecture_json))
    # `model-sparse.safetensors` (sparse weights) loads as well as a dense file.
    model.load_state_dict(load_state(weights))
    return model.eval()
