"""Weights and architectures a user downloads: safetensors and JSON, no pickle anywhere."""

from __future__ import annotations

import json
from typing import Any

import torch
from safetensors.torch import load as safetensors_load
from safetensors.torch import save as safetensors_save
from torch import nn

from archsearch.core.context import RunContext
from archsearch.core.models.registry import Architecture


def tensors_to_bytes(
    tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None
) -> bytes:
    # safetensors refuses shared or non-contiguous storage; every tensor gets its own copy.
    owned = {name: t.detach().cpu().contiguous().clone() for name, t in tensors.items()}
    return safetensors_save(owned, metadata=metadata)


def tensors_from_bytes(data: bytes) -> dict[str, torch.Tensor]:
    return safetensors_load(data)


def model_to_bytes(model: nn.Module) -> bytes:
    return tensors_to_bytes(model.state_dict())


def save_model(
    ctx: RunContext, model: nn.Module, architecture: Architecture, suffix: str = ""
) -> None:
    """Write `model{suffix}.safetensors` and `architecture{suffix}.json`."""
    ctx.save_artifact(
        f"architecture{suffix}.json", architecture.to_json().encode(), "application/json"
    )
    ctx.save_artifact(
        f"model{suffix}.safetensors", model_to_bytes(model), "application/octet-stream"
    )


def json_bytes(payload: Any) -> bytes:
    return json.dumps(payload, indent=2, sort_keys=True, default=float).encode()
