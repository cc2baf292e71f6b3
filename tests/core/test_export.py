"""Counting parameters and multiply-adds, and safetensors round trips."""

from __future__ import annotations

import io

import torch
from PIL import Image
from torch import nn

from archsearch.core.export import (
    count_macs,
    count_parameters,
    figure_png,
    new_figure,
    plain_log_ticks,
    tensors_from_bytes,
    tensors_to_bytes,
    whole_number_ticks,
)
from archsearch.core.models import Architecture, create_model
from archsearch.specs import CNNConfig, MLPConfig


def test_mlp_macs_are_the_sum_of_weight_matrix_sizes() -> None:
    model = create_model(Architecture(MLPConfig(hidden=(30, 20)), (1, 8, 8), 10))
    assert count_macs(model, (1, 8, 8)) == 64 * 30 + 30 * 20 + 20 * 10
    assert count_parameters(model) == 64 * 30 + 30 + 30 * 20 + 20 + 20 * 10 + 10


def test_cnn_macs_by_hand() -> None:
    config = CNNConfig(channels=(4, 8), hidden=(16,), kernel_size=3)
    model = create_model(Architecture(config, (1, 28, 28), 10))
    conv1 = 28 * 28 * 4 * 1 * 9  # 'same' padding: every output pixel, every weight once
    conv2 = 14 * 14 * 8 * 4 * 9
    head = 8 * 7 * 7 * 16 + 16 * 10
    assert count_macs(model, (1, 28, 28)) == conv1 + conv2 + head


def test_zero_weights_cost_nothing_unless_asked() -> None:
    linear = nn.Linear(10, 4, bias=False)
    model = nn.Sequential(nn.Flatten(), linear)
    with torch.no_grad():
        linear.weight[:, :5] = 0
    assert count_macs(model, (10,)) == 20
    assert count_macs(model, (10,), nonzero_only=False) == 40
    assert count_parameters(model, nonzero_only=True) == 20


def test_safetensors_round_trip_copies_shared_storage() -> None:
    base = torch.randn(4, 4)
    tensors = {"a": base, "view": base[:, 1]}  # shared, non-contiguous
    loaded = tensors_from_bytes(tensors_to_bytes(tensors))
    torch.testing.assert_close(loaded["a"], base)
    torch.testing.assert_close(loaded["view"], base[:, 1])


def test_fixed_margins_keep_every_label_inside_the_figure() -> None:
    """Without `bbox_inches="tight"` the PNG is exactly the planned size, and
    wide tick labels, axis labels, titles and a suptitle still fit inside it."""
    fig, axes = new_figure(ncols=2)
    for ax in axes[0]:
        ax.plot([1, 2, 3], [123456.0, 234567.0, 345678.0], label="a long legend entry")
        ax.set(xlabel="epoch", ylabel="real edges at epoch end", title="a panel title")
        ax.legend()
    fig.suptitle("search (dnw)")
    image = Image.open(io.BytesIO(figure_png(fig))).convert("L")
    assert image.size == (1100, 396), "5 x 3.6 in per panel at 110 dpi: no cropping"
    pixels = torch.tensor(list(image.tobytes()), dtype=torch.uint8).view(396, 1100)
    frame = torch.cat([pixels[:3].flatten(), pixels[-3:].flatten()])
    frame = torch.cat([frame, pixels[:, :3].flatten(), pixels[:, -3:].flatten()])
    assert bool((frame == 255).all()), "no label reaches the edge of the image (none is cut)"
    assert int((pixels[:40] < 128).sum()) > 20, "the suptitle is drawn near the top"


def test_png_holds_the_pixels_savefig_draws_without_an_alpha_channel() -> None:
    """The figure is drawn once at its own dpi and written as RGB: pixel for pixel what
    matplotlib's `savefig` writes (as RGBA, every pixel opaque), at the same dpi."""
    import numpy as np

    fig, axes = new_figure(ncols=2)
    axes[0][0].plot([1, 2, 3], [0.5, 0.2, 0.1], marker="o", label="train")
    axes[0][0].legend()
    axes[0][1].imshow(np.arange(12.0).reshape(3, 4), aspect="auto")
    fig.suptitle("a title")
    ours = Image.open(io.BytesIO(figure_png(fig)))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    theirs = np.asarray(Image.open(buffer))
    assert ours.mode == "RGB" and round(ours.info["dpi"][0]) == 110
    assert bool((theirs[..., 3] == 255).all()), "an opaque figure: the alpha channel says nothing"
    assert np.array_equal(np.asarray(ours), theirs[..., :3])


def test_a_figure_with_an_unplanned_colorbar_is_cropped_to_its_content() -> None:
    fig, axes = new_figure(ncols=1)
    fig.colorbar(axes[0][0].imshow(torch.rand(4, 4).numpy()), ax=axes[0][0])
    assert Image.open(io.BytesIO(figure_png(fig))).size != (550, 396), "tight bounding box"


def test_log_axes_read_plain_numbers_and_epochs_whole_ones() -> None:
    """Plain tick labels on a log axis (no `10^k` mathtext), no minor ticks, and an epoch
    axis ticked at whole numbers only; the figure is never registered with pyplot."""
    import matplotlib.pyplot as plt

    figures = plt.get_fignums()
    fig, axes = new_figure()
    ax = axes[0][0]
    ax.plot([1.0, 2.0], [1.0, 1e4])
    ax.set_yscale("log")
    plain_log_ticks(ax.yaxis)
    whole_number_ticks(ax.xaxis)
    fig.canvas.draw()
    labels = [label.get_text() for label in ax.get_yticklabels()]
    assert {"1", "10", "100", "1000", "10000"} <= set(labels), labels
    assert not any("$" in label for label in labels), "no mathtext"
    assert len(ax.yaxis.get_minorticklocs()) == 0
    assert all(float(x).is_integer() for x in ax.get_xticks())
    assert plt.get_fignums() == figures, "nothing left for pyplot to close"
