"""Learning-curve plots (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["RATES", "learning_phases", "moving_average", "plot_grid_paths", "plot_learning_curves", "plot_probe"]


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


RATES = frozenset(
    {"success", "tool_use", "format_compliance", "tool_call_validity", "truncation_rate", "frac_zero_std"}
    | {"accuracy", "token_accuracy"}
)
"""Metrics that are fractions: drawn on a fixed 0–100 % axis, so that a flat line at 100 % reads as one."""


def _effective_window(window: int, points: int) -> int:
    """``window``, shortened to a fifth of a short run's points (a 10-point average would flatten a 10-step run)."""
    return max(1, min(window, points // 5))


def plot_learning_curves(
    runs: Mapping[str, Sequence[Mapping[str, Any]]],
    path: str | Path,
    *,
    keys: Sequence[str] = ("return", "greedy_return"),
    x: str = "episode",
    window: int = 10,
    title: str | None = None,
    floor: float | None = None,
    phases: Sequence[tuple[float, str]] = (),
    columns: int = 3,
) -> Path:
    """One panel per metric in ``keys`` (those the rows have), in rows of up to ``columns``; one colour per run.

    A training metric is drawn raw (faint) and as a trailing moving average over ``window`` points (fewer on a
    short run, see :func:`_effective_window`). An evaluation metric ``eval_<key>``, logged every few steps, is
    drawn as markers in ``<key>``'s panel (its own panel when ``<key>`` is not plotted). Rates (:data:`RATES`)
    share a 0–100 % axis; on other metrics ``floor`` clips the axis from below, by default just under the lowest
    moving average, so a few huge early losses (CliffWalk's −2,000 first episodes) do not flatten the curve.
    ``phases`` (``[(x, label)]``, e.g. from :func:`learning_phases`) are marked by dashed lines in every panel.
    """
    from matplotlib.ticker import PercentFormatter

    plt = _pyplot()
    present = {k for rows in runs.values() for row in rows for k in row}
    panels = [k for k in keys if not (k.startswith("eval_") and k[5:] in keys)]
    panels = [k for k in panels if k in present or f"eval_{k}" in present]
    height = max(1, -(-len(panels) // columns))
    width = max(1, -(-len(panels) // height))  # balanced rows: four panels are 2 × 2, not 3 + 1
    fig, grid = plt.subplots(height, width, figsize=(4.6 * width, 3.4 * height), squeeze=False)
    for ax in grid.flat[len(panels) :]:
        ax.set_visible(False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]  # one colour per run, the same in every panel
    for ax, key in zip(grid.flat, panels, strict=False):
        name = key.removeprefix("eval_").replace("_", " ")
        rate, lowest, used = key.removeprefix("eval_") in RATES, [], 1
        for i, (label, rows) in enumerate(runs.items()):
            color = colors[i % len(colors)]
            for series in (key, f"eval_{key}") if not key.startswith("eval_") else (key,):
                pts = [(row[x], row[series]) for row in rows if series in row and np.isfinite(row[series])]
                if not pts:
                    continue
                xs, ys = map(np.asarray, zip(*pts, strict=True))
                if series.startswith("eval_"):  # a point every few steps: markers, no smoothing
                    ax.plot(xs, ys, "o-", color=color, markersize=5, linewidth=1.2, label=f"{label} (evaluation)")
                    lowest.append(ys.min())
                    continue
                used = _effective_window(window, len(ys))
                smooth = moving_average(ys, used)
                ax.plot(xs, smooth, color=color, linewidth=1.8, label=f"{label} (training)")
                ax.plot(xs, ys, color=color, alpha=0.2, linewidth=0.8)
                lowest.append(smooth[min(used, len(smooth) - 1) :].min(initial=smooth.min()))
        if rate:
            ax.set_ylim(-0.03, 1.03)
            ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        elif (bottom := floor if floor is not None else (min(lowest) if lowest else None)) is not None:
            top = ax.get_ylim()[1]
            ax.set_ylim(bottom=bottom - 0.05 * (top - bottom), top=top)
        for at, text in phases:
            ax.axvline(at, color="0.35", linestyle="--", linewidth=1)
            ax.text(at, 0.98, f" {text}", transform=ax.get_xaxis_transform(), fontsize=7, va="top", color="0.25")
        ax.set_xlabel(x)
        ax.set_title(name + (f" ({used}-{x} moving average)" if used > 1 else ""), fontsize=10)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="lower right")
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def learning_phases(
    rows: Sequence[Mapping[str, Any]], *, x: str = "step", tool_use: float = 0.5, success: float = 0.9
) -> list[tuple[float, str]]:
    """Where a tool-using agent's run enters its phases, as ``(x, label)``: it *uses tools* from the first point at
    which tool use reaches ``tool_use`` (if it started below), and *succeeds* from the first at which success
    reaches ``success``. Read from the evaluation metrics (``eval_tool_use``, ``eval_success``) where a run has
    them, else from the training ones; a phase never entered is left out."""
    found = []
    for key, level, label in (("tool_use", tool_use, "uses tools"), ("success", success, f"success ≥ {success:.0%}")):
        series = f"eval_{key}" if any(f"eval_{key}" in r for r in rows) else key
        points = [(r[x], r[series]) for r in rows if series in r and x in r]
        if key == "tool_use" and (not points or points[0][1] >= level):
            continue  # no phase without tools to leave
        first = next((at for at, value in points if value >= level), None)
        if first is not None:
            found.append((first, label))
    return found


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
    """Held-out accuracy of each layer's linear probe (:class:`~agentgym.trainers.llm.probe.ProbeReport`) as bars,
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
    ax.set(xlabel="layer", ylabel="held-out accuracy (%)", ylim=(0, 100), title=f"{report.env_id}: {report.decision}")
    ax.legend(loc="lower right", fontsize=8)
    return _save(fig, path)
