"""Figures for the exercises' results; matplotlib is imported only when drawing."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .experiments import ConcurrencyStudy, MatmulRow, NormsStudy

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_concurrency", "plot_matmul", "plot_norms", "summary_figure"]


def _axes(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(4.5, 3.2))[1]


def plot_matmul(rows: Sequence[MatmulRow], ax: Axes | None = None) -> Axes:
    """GFLOP/s against n on log-log axes, one line per library, device and dtype."""
    ax = _axes(ax)
    series: dict[str, list[MatmulRow]] = {}
    for r in rows:
        series.setdefault(f"{r.backend} {r.device} {r.dtype}", []).append(r)
    for label, points in series.items():
        points.sort(key=lambda r: r.n)
        ax.plot([r.n for r in points], [r.gflops for r in points], marker="o", label=label)
    sizes = sorted({r.n for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes, [str(n) for n in sizes], fontsize="small")
    ax.minorticks_off()
    ax.set(xlabel="n (n x n times n x n)", ylabel="GFLOP/s")
    ax.set_title("Exercise 1: matrix product rate")
    ax.legend(fontsize="small")
    return ax


def _bars(ax: Axes, labels: list[str], medians: list[float], iqrs: list[float]) -> None:
    ms = [m * 1e3 for m in medians]
    ax.bar(range(len(ms)), ms, yerr=[i * 1e3 / 2 for i in iqrs], capsize=4, color="tab:blue")
    ax.set_xticks(range(len(ms)), labels, fontsize="small")
    ax.set_ylabel("ms (median, bar = IQR)")


def plot_norms(study: NormsStudy, ax: Axes | None = None) -> Axes:
    """The three ways of logging norms: median time with the IQR as an error bar."""
    ax = _axes(ax)
    _bars(
        ax,
        [r.method.split(" ", 1)[0] for r in study.rows],
        [r.median for r in study.rows],
        [r.iqr for r in study.rows],
    )
    ax.set_yscale("log")
    ax.set_title(f"Exercise 3: {study.products} norms on {study.device}")
    return ax


def plot_concurrency(study: ConcurrencyStudy, ax: Axes | None = None) -> Axes:
    """Sequential against concurrent, titled with what was really measured."""
    ax = _axes(ax)
    _bars(
        ax,
        [r.mode for r in study.rows],
        [r.median for r in study.rows],
        [r.iqr for r in study.rows],
    )
    title = textwrap.fill(f"Exercise 4: {study.kind}", 45)
    ax.set_title(f"{title}\nspeedup {study.speedup:.2f}x", fontsize="small")
    return ax


def summary_figure(
    matmul: Sequence[MatmulRow], norms: NormsStudy, concurrency: ConcurrencyStudy
) -> Figure:
    """The three timed exercises side by side, for ``bench --plot``."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4), layout="constrained")
    plot_matmul(matmul, axes[0])
    plot_norms(norms, axes[1])
    plot_concurrency(concurrency, axes[2])
    return fig
