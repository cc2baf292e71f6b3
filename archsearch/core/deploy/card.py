"""`model-card.md`: what a downloaded model is, in one page (after Mitchell et al.,
"Model Cards for Model Reporting", 2019, reduced to what a job knows for certain)."""

from __future__ import annotations

import json
from typing import Any

from archsearch.specs import JOB_TYPES


def _paper_of(method: str) -> str:
    by_method = {t.model_fields["method"].default: t.paper for t in JOB_TYPES}
    return by_method.get(method, "")


PLAIN_PYTORCH = (
    "In plain PyTorch (the README's recipe): a `sparse` layer is int32 CSR through "
    "`torch.addmv` (batch 1) or `torch.sparse.addmm` (larger batches), a `dense` one "
    "`F.linear`; that is the 'compact + sparse kernels' column."
)


def _size_rows(d: dict[str, Any]) -> list[str]:
    size = d["size"]
    return [
        "| | parameters | nonzero | multiply-adds | file bytes |",
        "|---|---|---|---|---|",
        f"| dense parent | {size['parameters_dense']:,} | {size['nonzero_dense']:,} | "
        f"{size['macs_dense']:,} | {size['bytes_dense']:,} |",
        f"| compact (`{d['files']['weights']}`) | {size['parameters_compact']:,} | "
        f"{size['nonzero_compact']:,} | {size['macs_compact']:,} | {size['bytes_compact']:,} |",
        f"| sparse storage (`model-sparse.safetensors`) | | | | {size['bytes_sparse']:,} |",
    ]


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f} ms"


def _cell(row: dict[str, float], variant: str) -> str:
    """CPU time, and the wall clock beside it where the job measured one."""
    wall = row.get(f"{variant}_wall_s")
    cpu = _ms(row.get(f"{variant}_s"))
    return cpu if wall is None else f"{cpu} (wall {_ms(wall)})"


def _latency_rows(latency: dict[str, dict[str, float]]) -> list[str]:
    rows = ["| batch | dense parent | compact | compact + sparse kernels | calls |"]
    rows.append("|---|---|---|---|---|")
    for key, row in latency.items():
        rows.append(
            f"| {key.removeprefix('batch_')} | {_cell(row, 'dense')} | "
            f"{_cell(row, 'compact')} | {_cell(row, 'sparse')} | {int(row['repeats'])} |"
        )
    return rows


def _latency_heading(d: dict[str, Any]) -> str:
    """What the latency table measured: files written before `measure` existed timed the
    wall clock on the worker's threads."""
    if "measure" not in d:
        return f"## Latency on {d['device']} ({d['threads']} threads; wall-clock medians)"
    return (
        f"## Latency on {d['device']}: CPU time per call, {d['threads']} thread "
        f"({d['measure']}; the wall clock beside it)"
    )


def model_card(deployment: dict[str, Any], spec: dict[str, Any]) -> str:
    """The card's markdown, from deployment.json's record and the job's spec."""
    d = deployment
    pre = d["preprocessing"]
    onnx = d["onnx"]
    onnx_line = _onnx_line(onnx)
    lines = [
        f"# Model card: {d['model']} trained by `{d['method']}` on `{d['dataset']}`",
        "",
        f"- Method: `{d['method']}`, {_paper_of(d['method'])}",
        f"- Dataset: `{d['dataset']}`; classes: {', '.join(pre['class_names']) or '-'}",
        f"- Seed: {d['seed']}",
        *_granularity_lines(spec),
        f"- Test accuracy of the deployed model: {d['test_accuracy']:.4f}",
        f"- Input: float32 {tuple(pre['input_shape'])}, x = (raw / {pre['scale']:g} - mean) / std,"
        f" mean {list(pre['mean'])}, std {list(pre['std'])}",
        "",
        "## Size",
        "",
        *_size_rows(d),
        "",
        _latency_heading(d),
        "",
        *_latency_rows(d["latency"]),
        "",
        f"Per-layer forms: {_forms_line(d['forms'])}",
        "",
        *_graph_lines(d),
        PLAIN_PYTORCH,
        "",
        f"## ONNX\n\n{onnx_line}",
        "",
        "## Spec",
        "",
        "```json",
        json.dumps(spec, indent=2, sort_keys=True),
        "```",
        "",
    ]
    return "\n".join(lines)


def _granularity_lines(spec: dict[str, Any]) -> list[str]:
    if spec.get("granularity") != "unit":
        return []
    return [
        "- Pruned at unit granularity: whole neurons and channels were removed, so the compact "
        "model is a smaller dense network of its family (`density.json` lists the units kept)"
    ]


def _graph_lines(d: dict[str, Any]) -> list[str]:
    graph = d.get("graph_form")
    if graph is None:
        return []
    if not graph["compiled"]:
        return [f"Graph: {graph['form']}.", ""]
    return [
        f"Graph: {graph['form']}; {graph['products']} products. The 'compact' column and "
        "`model.onnx` are this compiled form.",
        "",
    ]


def _forms_line(forms: list[dict[str, Any]]) -> str:
    if not forms:
        return "no linear layers"
    return "; ".join(
        f"`{f['layer']}` {f['batch_1']} at batch 1, {f['batch_64']} at 64" for f in forms
    )


def _onnx_line(onnx: dict[str, Any]) -> str:
    if not onnx["exported"]:
        return f"none: {onnx['reason']}"
    line = f"`model.onnx` (checked with onnxruntime, max abs diff {onnx['max_abs_diff']:.2e})"
    if "latency" in onnx:
        lat = onnx["latency"]
        line += (
            f"; {onnx.get('form', '')}. Runs in {onnx['runtime']} at "
            f"{_ms(lat['batch_1_s'])} (batch 1), {_ms(lat['batch_64_s'])} (batch 64)"
            f"{' of CPU time per call, 1 thread' if 'batch_1_wall_s' in lat else ''}"
        )
        if "latency_call" in onnx:
            line += f", called through {onnx['latency_call']}"
    return line
