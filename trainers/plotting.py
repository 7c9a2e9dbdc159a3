"""Learning-curve plots (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["moving_average", "plot_grid_paths", "plot_learning_curves", "plot_probe"]


def _pyplot() -> Any:
    """matplotlib.pyplot on the headless Agg backend (imported on first use: it is slow to import)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | Path) -> Path:
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    fig.clf()
    _pyplot().close(fig)
    return path


def moving_average(values: Sequence[float], window: int) -> np.ndarray:
    """Trailing mean over up to ``window`` values (shorter at the start, so no points are lost)."""
    x = np.asarray(values, dtype=float)
    if window <= 1 or len(x) == 0:
        return x
    c = np.cumsum(np.insert(x, 0, 0.0))
    idx = np.arange(1, len(x) + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def plot_learning_curves(
    runs: Mapping[str, Sequence[Mapping[str, Any]]],
    path: str | Path,
    *,
    keys: Sequence[str] = ("return", "greedy_return"),
    x: str = "episode",
    window: int = 10,
    title: str | None = None,
    floor: float | None = None,
) -> Path:
    """One panel per metric in ``keys``, one line per run (raw values faint, moving average bold).

    ``floor`` clips the y-axis from below; by default it is set just under the lowest moving
    average, so a few huge early losses (CliffWalk's −2,000 first episodes) do not flatten the curve.
    """
    plt = _pyplot()
    keys = [k for k in keys if any(k in row for rows in runs.values() for row in rows)]
    fig, axes = plt.subplots(1, len(keys), figsize=(5.5 * len(keys), 3.8), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        lowest = []
        for label, rows in runs.items():
            pts = [(row[x], row[key]) for row in rows if key in row and np.isfinite(row[key])]
            if not pts:
                continue
            xs, ys = map(np.asarray, zip(*pts, strict=True))
            smooth = moving_average(ys, window)
            (line,) = ax.plot(xs, smooth, label=label, linewidth=1.8)
            ax.plot(xs, ys, color=line.get_color(), alpha=0.2, linewidth=0.8)
            lowest.append(smooth[min(window, len(smooth) - 1) :].min(initial=smooth.min()))
        ax.set_xlabel(x)
        ax.set_ylabel(key.replace("_", " "))
        ax.set_title(f"{key.replace('_', ' ')} ({window}-{x} moving average)", fontsize=10)
        bottom = floor if floor is not None else (min(lowest) if lowest else None)
        if bottom is not None:
            top = ax.get_ylim()[1]
            ax.set_ylim(bottom=bottom - 0.05 * (top - bottom), top=top)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_grid_paths(
    shape: tuple[int, int],
    paths: Mapping[str, Sequence[tuple[int, int]]],
    path: str | Path,
    *,
    hazards: Sequence[tuple[int, int]] = (),
    start: tuple[int, int] | None = None,
    goal: tuple[int, int] | None = None,
    title: str | None = None,
) -> Path:
    """Draw walks on a grid world: ``paths`` maps a label to the ``(row, col)`` cells visited."""
    plt = _pyplot()
    rows, cols = shape
    fig, ax = plt.subplots(figsize=(cols * 0.55 + 1, rows * 0.55 + 1.3))
    for r, c in hazards:
        ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, color="#5a463c"))
    for cell, text in ((start, "S"), (goal, "G")):
        if cell is not None:
            ax.text(cell[1], cell[0], text, ha="center", va="center", fontsize=13, weight="bold")
    offsets = np.linspace(-0.15, 0.15, max(len(paths), 1))
    for (label, cells), dy in zip(paths.items(), offsets, strict=False):
        ys, xs = zip(*cells, strict=True) if cells else ((), ())
        ax.plot(np.asarray(xs), np.asarray(ys) + dy, marker="o", markersize=3, linewidth=2.2, label=label)
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.set_xticks(np.arange(-0.5, cols), minor=True)
    ax.set_yticks(np.arange(-0.5, rows), minor=True)
    ax.grid(which="minor", color="#bbbbbb")
    ax.tick_params(which="minor", length=0)
    ax.set_aspect("equal")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=max(len(paths), 1), frameon=False)
    if title:
        ax.set_title(title)
    return _save(fig, path)


def plot_probe(report: Any, path: str | Path) -> Path:
    """Held-out accuracy of each layer's linear probe (:class:`~agentgym.trainers.probe.ProbeReport`) as bars,
    with the policy's own greedy accuracy and the majority answer as lines: the gap is what training has yet to read
    out."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    layers = np.arange(len(report.layers))
    bars = ax.bar(layers, [100 * a for a in report.layers], color="#4c72b0", label="linear probe (held out)")
    bars[report.best_layer].set_color("#dd8452")
    ax.axhline(100 * report.policy, color="#c44e52", lw=2, label=f"policy, greedy ({report.policy:.0%})")
    ax.axhline(100 * report.majority, color="gray", ls="--", lw=1, label=f"majority ({report.majority:.0%})")
    ax.set_xticks(layers, ["emb"] + [str(i) for i in layers[1:]])
    ax.set(xlabel="layer", ylabel="held-out accuracy (%)", ylim=(0, 100),
           title=f"{report.env_id}: {report.decision}")
    ax.legend(loc="lower right", fontsize=8)
    return _save(fig, path)
