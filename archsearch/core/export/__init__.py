"""Everything a user downloads: safetensors weights, architectures, counts and plots.

Split by concern: `files` (safetensors and JSON bytes, saving a model), `sparse` (the
bitmask weights file), `loading` (`load_model`), `counts` (parameters and multiply-adds),
`charts.layout` (the PNG figures' layout, re-exported here). The names below are the public
ones (`load_model` is in the README).
"""

from archsearch.core.charts.layout import (
    curves_png,
    figure_png,
    kept_figure,
    new_figure,
    plain_log_ticks,
    whole_number_ticks,
)
from archsearch.core.export.counts import count_macs, count_parameters
from archsearch.core.export.files import (
    json_bytes,
    model_to_bytes,
    save_model,
    tensors_from_bytes,
    tensors_to_bytes,
)
from archsearch.core.export.loading import load_model
from archsearch.core.export.sparse import is_sparse_file, load_state, sparse_state_bytes

__all__ = [
    "count_macs",
    "count_parameters",
    "curves_png",
    "figure_png",
    "is_sparse_file",
    "json_bytes",
    "kept_figure",
    "load_model",
    "load_state",
    "model_to_bytes",
    "new_figure",
    "plain_log_ticks",
    "save_model",
    "sparse_state_bytes",
    "tensors_from_bytes",
    "tensors_to_bytes",
    "whole_number_ticks",
]
