"""Sparse weights files (`model-sparse.safetensors`): a bitmask and the kept values.

A floating tensor of two or more dimensions whose zeros make it smaller is stored as two
tensors: `NAME.mask`, one bit per entry (uint8, entry i of the row-major flattened tensor is
bit i % 8 of byte i // 8, least significant bit first), and `NAME.values`, the nonzero
entries in row-major order, in the tensor's own dtype (float32: lossless). The file's
metadata names the format (`archsearch-bitmask-v1`) and each such tensor's dense shape
(`sparse`), so plain safetensors + torch rebuild every tensor (the README shows how).

Why a bitmask and not CSR: a kept float32 weight costs 32 bits, its position 1 bit per entry
of the tensor as a bitmask, 16 bits per kept weight as an int16 CSR column index. At the
densities pruning ships (0.05 to 0.5) the bitmask is the smaller one above density 1/16:
at density 0.1 the file is 0.13x the dense one (int16 CSR: 0.15x), at 0.05 0.08x (0.075x).
One format, with no index width to choose and a one-line decode, for a few percent at the
lowest densities. Files of the CSR format of earlier versions (`archsearch-csr-v1`) still
load (`load_state`).
"""

from __future__ import annotations

import json

import torch

from archsearch.core.export.files import tensors_from_bytes, tensors_to_bytes

FORMAT = "archsearch-bitmask-v1"
CSR_FORMAT = "archsearch-csr-v1"  # read only: the files of earlier versions
CSR_PARTS = ("values", "col_indices", "crow_indices")
PARTS = ("mask", "values")
State = dict[str, torch.Tensor]
BIT_WEIGHTS = 2 ** torch.arange(8, dtype=torch.uint8)  # bit i of a byte is worth 2^i


def pack_bits(mask: torch.Tensor) -> torch.Tensor:
    """A boolean tensor as uint8 bytes, 8 entries a byte, least significant bit first."""
    flat = mask.flatten().to(torch.uint8)
    padded = torch.cat([flat, flat.new_zeros(-flat.numel() % 8)]).view(-1, 8)
    return (padded * BIT_WEIGHTS).sum(dim=1, dtype=torch.uint8)


def unpack_bits(packed: torch.Tensor, count: int) -> torch.Tensor:
    """The first `count` booleans of `pack_bits` bytes."""
    bits = (packed[:, None] >> torch.arange(8, dtype=torch.uint8)) & 1
    return bits.flatten()[:count].bool()


def _bitmask_parts(tensor: torch.Tensor) -> State:
    flat = tensor.detach().cpu().flatten()
    kept = flat != 0
    return {"mask": pack_bits(kept), "values": flat[kept]}


def _nbytes(tensors: State) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())


def sparse_state_bytes(state: State) -> bytes:
    """The state dict as safetensors, each tensor as bitmask + values when that is smaller."""
    out: State = {}
    shapes: dict[str, list[int]] = {}
    for name, tensor in state.items():
        if tensor.dim() >= 2 and tensor.is_floating_point():
            parts = _bitmask_parts(tensor)
            if _nbytes(parts) < tensor.numel() * tensor.element_size():
                out.update({f"{name}.{part}": parts[part] for part in PARTS})
                shapes[name] = list(tensor.shape)
                continue
        out[name] = tensor
    metadata = {"format": FORMAT, "sparse": json.dumps(shapes)}
    return tensors_to_bytes(out, metadata=metadata)


def is_sparse_file(data: bytes) -> bool:
    return _metadata(data).get("format") in (FORMAT, CSR_FORMAT)


def _metadata(data: bytes) -> dict[str, str]:
    # safetensors: 8-byte little-endian header length, then the JSON header.
    length = int.from_bytes(data[:8], "little")
    meta: dict[str, str] = json.loads(data[8 : 8 + length]).get("__metadata__", {}) or {}
    return meta


def _from_bitmask(parts: State, shape: list[int]) -> torch.Tensor:
    """The dense tensor of one stored bitmask + values pair."""
    count = 1
    for dim in shape:
        count *= dim
    kept = unpack_bits(parts["mask"], count)
    if int(kept.sum()) != parts["values"].numel():  # a damaged file fails here, not later
        raise ValueError("sparse weights: the bitmask and the values disagree")
    dense = parts["values"].new_zeros(count)
    dense[kept] = parts["values"]
    return dense.view(shape)


def _from_csr(parts: State, shape: list[int]) -> torch.Tensor:
    """The dense tensor of one CSR triple (files of `archsearch-csr-v1`)."""
    cols = 1
    for dim in shape[1:]:
        cols *= dim
    matrix = torch.sparse_csr_tensor(
        parts["crow_indices"].long(),
        parts["col_indices"].long(),
        parts["values"],
        (shape[0], cols),
        check_invariants=True,  # a damaged file fails here, not with a crash later
    )
    return matrix.to_dense().reshape(shape)


def load_state(data: bytes) -> State:
    """The dense state dict of a weights file: plain, bitmask (or older CSR) sparse."""
    tensors = tensors_from_bytes(data)
    meta = _metadata(data)
    shapes: dict[str, list[int]] = json.loads(meta.get("sparse", "{}"))
    csr = meta.get("format") == CSR_FORMAT
    names, rebuild = (CSR_PARTS, _from_csr) if csr else (PARTS, _from_bitmask)
    stored = {f"{name}.{part}" for name in shapes for part in names}
    state = {name: t for name, t in tensors.items() if name not in stored}
    for name, shape in shapes.items():
        state[name] = rebuild({part: tensors[f"{name}.{part}"] for part in names}, shape)
    return state
