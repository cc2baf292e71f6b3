"""PNG figures of a job (`curves.png` and the layout every plot of archsearch shares).

A figure is drawn once per file, by a job at its end or, for a job's charts, by the API on
the file's first download (`core.charts`); either way its CPU is paid by someone waiting, so
the layout avoids matplotlib's costly paths: a bare `Figure` on an Agg canvas
(no pyplot figure manager to create and close), fixed margins instead of a tight
bounding box, whole-number epoch ticks, and plain tick labels on log axes (the default
labels are mathtext, laid out glyph by glyph, with a minor tick object per decade step).
The figures every job draws are kept from one job to the next (`kept_figure`): a figure's
first draw creates its tick objects and measures its text, a third of its CPU.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

# Margins of a `new_figure` in inches: room for tick labels, axis labels, axis titles and a
# suptitle. Fixed margins replace `bbox_inches="tight"`, which lays every figure out twice
# (measured for curves + mask-logits: 0.28-0.31 s CPU instead of 0.44 s); the
# alternatives save little (`tight_layout` 0.42 s, constrained layout 0.43 s).
MARGINS_IN = {"left": 1.0, "right": 0.2, "bottom": 0.55, "top": 0.65}
GAP_IN = 1.05  # between two panels: the right one's tick labels and y label
DPI = 110  # the figure is created at it: drawn once, never rescaled by `savefig`
# zlib level 3 instead of PIL's 6: the same pixels, encoded in 0.04 s less per figure
# (a third of a 1210x396 mask-logits plot's cost) for files about 15% larger.
PNG_OPTIONS = {"compress_level": 3}


def figure_png(fig: Any) -> bytes:
    """The figure as PNG bytes at `DPI`: drawn once at its planned size, or, when axes were
    added after `new_figure` (a colorbar its fixed margins did not plan for), cropped to its
    content by matplotlib's tight bounding box."""
    if getattr(fig, "archsearch_axes", None) == len(fig.axes):
        return _canvas_png(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", pil_kwargs=PNG_OPTIONS)
    return buffer.getvalue()


def _canvas_png(fig: Any) -> bytes:
    """What `savefig` writes for a figure already at `DPI`, without its alpha channel when
    the figure is opaque (every pixel then is: 11% smaller files, 3 ms less per figure)."""
    import matplotlib
    from PIL import Image, PngImagePlugin

    fig.canvas.draw()
    rgba = fig.canvas.buffer_rgba()  # (H, W, 4) uint8
    image = Image.frombuffer("RGBA", (rgba.shape[1], rgba.shape[0]), rgba, "raw", "RGBA", 0, 1)
    if fig.get_facecolor()[3] == 1.0:
        image = image.convert("RGB")
    info = PngImagePlugin.PngInfo()
    info.add_text(
        "Software", f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/"
    )
    buffer = io.BytesIO()
    image.save(buffer, format="png", dpi=(DPI, DPI), pnginfo=info, **PNG_OPTIONS)
    return buffer.getvalue()


def new_figure(ncols: int = 1, width: float = 5.0, height: float = 3.6) -> tuple[Any, Any]:
    """A figure of `ncols` panels side by side on its own Agg canvas (headless: workers have
    no display), and its axes as a (1, ncols) array. Nothing registers it with pyplot, so
    it is freed with its last reference."""
    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    total = width * ncols
    fig: Any = Figure(figsize=(total, height), dpi=DPI)  # `archsearch_axes`: see figure_png
    FigureCanvasAgg(fig)
    # Titles at a fixed height above their panel: placed automatically, each draw measured
    # the axes' tick labels first (a fifth of a small figure's drawing), only to find they
    # sit below, never under the title.
    with rc_context({"axes.titley": 1.0}):
        axes = fig.subplots(1, ncols, squeeze=False)
    panel = (total - MARGINS_IN["left"] - MARGINS_IN["right"] - GAP_IN * (ncols - 1)) / ncols
    fig.subplots_adjust(
        left=MARGINS_IN["left"] / total,
        right=1 - MARGINS_IN["right"] / total,
        bottom=MARGINS_IN["bottom"] / height,
        top=1 - MARGINS_IN["top"] / height,
        wspace=GAP_IN / panel,
    )
    fig.archsearch_axes = ncols
    return fig, axes


@dataclass
class _Kept:
    """The figure a kind of plot drew last, and who is drawing on it now."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    figure: tuple[Any, Any] | None = None
    shape: tuple[int, float, float] = (0, 0.0, 0.0)


_KEPT: dict[str, _Kept] = {}
_KEPT_LOCK = threading.Lock()


@contextmanager
def kept_figure(
    kind: str, ncols: int = 1, width: float = 5.0, height: float = 3.6
) -> Iterator[tuple[Any, Any]]:
    """`new_figure`, kept for the next plot of the same `kind` and cleared of what this one
    draws, so that the next draw skips what a new figure costs first: its axes, the tick
    objects matplotlib creates on a first draw, the text measures of its renderer (a third
    of a job figure's CPU). The PNG is the one a new figure gives, pixel for pixel.

    A plot drawn while another thread draws the same kind gets a new figure; a plot that
    fails drops the kept one (it may hold anything).
    """
    with _KEPT_LOCK:
        kept = _KEPT.setdefault(kind, _Kept())
    if not kept.lock.acquire(blocking=False):
        yield new_figure(ncols, width, height)
        return
    try:
        if (
            kept.figure is None
            or kept.shape != (ncols, width, height)
            or not _cleared(*kept.figure)
        ):
            kept.figure, kept.shape = new_figure(ncols, width, height), (ncols, width, height)
        yield kept.figure
    except BaseException:
        kept.figure = None
        raise
    finally:
        kept.lock.release()


def _cleared(fig: Any, axes: Any) -> bool:
    """Remove what a plot drew on a kept figure; False when it holds more than the planned
    axes (a colorbar) and so is not worth clearing."""
    if getattr(fig, "archsearch_axes", None) != len(fig.axes):
        return False
    for ax in axes.flat:
        for container in list(ax.containers):  # bars, error bars: with their own artists
            container.remove()
        drawn = [*ax.lines, *ax.images, *ax.collections, *ax.patches, *ax.texts, *ax.artists]
        for artist in [*drawn, *ax.tables]:
            artist.remove()
        if ax.get_legend() is not None:
            ax.get_legend().remove()
        ax.set_prop_cycle(None)  # the next plot's colours start again at the first one
        ax.relim()  # data limits of nothing: the next plot's own data sets them
        ax.set_autoscale_on(True)
    for artist in [*fig.legends, *fig.texts, *fig.lines, *fig.images, *fig.patches]:
        artist.remove()
    if fig._suptitle is not None:
        fig._suptitle.set_text("")
    return True


def whole_number_ticks(axis: Any) -> None:
    """Ticks only at whole numbers (epochs): 1, 2 rather than 1.0, 1.2, ..., 2.0."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def plain_log_ticks(axis: Any) -> None:
    """A log axis labelled 1, 10, 100, 1000 in plain text, without minor ticks: the
    default `10^k` mathtext labels and minor tick objects cost more than the rest of a
    figure's text."""
    from matplotlib.ticker import FuncFormatter, NullLocator

    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))


def curves_png(history: list[dict[str, float]], title: str = "") -> bytes:
    """Loss and accuracy per epoch: `curves.png`."""
    with kept_figure("curves", ncols=2) as (fig, axes):
        return _draw_curves(fig, axes, history, title)


def _draw_curves(fig: Any, axes: Any, history: list[dict[str, float]], title: str) -> bytes:
    epochs = [row["epoch"] for row in history]
    loss_ax, acc_ax = axes[0]
    loss_ax.plot(epochs, [r["train_loss"] for r in history], marker="o", label="train")
    loss_ax.plot(epochs, [r["test_loss"] for r in history], marker="o", label="test")
    loss_ax.set(xlabel="epoch", ylabel="cross-entropy", title="loss")
    loss_ax.legend()
    acc_ax.plot(epochs, [r["test_accuracy"] for r in history], marker="o", color="tab:green")
    acc_ax.set(xlabel="epoch", ylabel="accuracy", title="test accuracy")
    for ax in (loss_ax, acc_ax):
        whole_number_ticks(ax.xaxis)
    if title:
        fig.suptitle(title)
    return figure_png(fig)
