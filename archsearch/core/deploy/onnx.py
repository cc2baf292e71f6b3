"""ONNX export of a deployable model, checked against PyTorch with onnxruntime (issue 14).

The compact model is exported in its dense form: ONNX has sparse initializers but no
portable sparse matmul kernel in onnxruntime, so a CSR weight would be densified at load
anyway. The TorchScript exporter (`dynamo=False`) is used: it handles the families' Python
control flow by tracing, with a dynamic batch axis. Continuous-time neural graphs call an
adaptive ODE solver whose step count depends on the input: they have no static graph to
export. A failed export never fails the job: the reason is recorded in `deployment.json`.
"""

from __future__ import annotations

import io
import warnings
from typing import Any

import torch
from torch import nn

from archsearch.core.models.registry import Architecture

OPSET = 17


def no_onnx_reason(architecture: Architecture) -> str | None:
    """Why this family has no ONNX form, or None when it has one."""
    if getattr(architecture.config, "setting", None) == "continuous":
        return (
            "continuous-time neural graphs integrate an ODE with an input-dependent number of "
            "solver steps: there is no static graph to export; use model.safetensors with "
            "archsearch (load_model) instead"
        )
    return None


def export_onnx(model: nn.Module, input_shape: tuple[int, ...]) -> bytes:
    """The model as ONNX bytes (float32 input `input` of shape (batch, *input_shape))."""
    buffer = io.BytesIO()
    example = torch.zeros(2, *input_shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's tracer warnings are not the user's
        torch.onnx.export(
            model.eval(),
            (example,),
            buffer,  # type: ignore[arg-type]  # the TorchScript exporter writes to file objects
            input_names=["input"],
            output_names=["logits"],
            dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
            opset_version=OPSET,
            dynamo=False,
        )
    return buffer.getvalue()


def onnx_max_abs_diff(onnx_bytes: bytes, model: nn.Module, inputs: torch.Tensor) -> float:
    """max |onnxruntime(x) - model(x)| over `inputs` (the exported model's check)."""
    import onnxruntime  # type: ignore[import-untyped]  # ships no type information

    session = onnxruntime.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    (ort_out,) = session.run(None, {"input": inputs.numpy()})
    with torch.inference_mode():
        torch_out = model.eval()(inputs)
    return float((torch.from_numpy(ort_out) - torch_out).abs().max())


def onnx_artifact(
    model: nn.Module, architecture: Architecture, inputs: torch.Tensor
) -> tuple[bytes | None, dict[str, Any]]:
    """`model.onnx` bytes (or None) and the record deployment.json keeps about it."""
    reason = no_onnx_reason(architecture)
    if reason is not None:
        return None, {"exported": False, "reason": reason}
    try:
        data = export_onnx(model, architecture.input_shape)
        diff = onnx_max_abs_diff(data, model, inputs)
    except Exception as error:  # any exporter gap is a deployment note, not a failed job
        return None, {"exported": False, "reason": f"{type(error).__name__}: {error}"[:500]}
    return data, {
        "exported": True,
        "file": "model.onnx",
        "opset": OPSET,
        "form": "compact model, dense weights (onnxruntime has no portable sparse kernels)",
        "checked_with": f"onnxruntime, {len(inputs)} test samples",
        "max_abs_diff": diff,
    }
