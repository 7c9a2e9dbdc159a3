"""Benchmark runs on disk: one record per episode, a reproducible summary, and side-by-side comparisons.

A run directory (what ``agentgym eval --out DIR`` writes) holds:

- ``run.json`` — the run's settings (:class:`RunConfig`); ``--resume`` refuses a directory whose
  settings differ from the ones given;
- ``episodes.jsonl`` — one :class:`EpisodeRecord` per line, appended and flushed as each episode
  ends (in the order episodes finish, not by index). A run that is killed keeps every finished
  episode; resuming skips them. A later record of the same index replaces an earlier one (a
  failed episode that a resumed run played again);
- ``summary.json`` — the :class:`RunSummary` of the latest record of every episode index.

Everything in the summary except its ``timing`` block is a function of the records sorted by index
(and of the env's task list, for the per-tag breakdown and pass@k), so the same agent, seed and env
version give a byte-identical summary apart from ``timing``. ``timing`` holds everything volatile: how
long the run took, when it ran and its :class:`Provenance` (git commit, Python and library versions,
machine). :func:`markdown_table` and :func:`plot_success` compare several runs.
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agentgym.core.episode import EpisodeRecord, read_episodes
from agentgym.core.summary import Provenance, RunConfig, RunSummary, TagStats, Timing
from agentgym.core.tool_env import valid_utf8, valid_utf8_data

__all__ = [
    "breakdown_tables",
    "collect_provenance",
    "compare_runs",
    "error_line",
    "load_episodes",
    "load_run_config",
    "load_summary",
    "markdown_table",
    "plot_success",
    "run_labels",
    "run_timing",
    "success_figure",
    "write_json",
]

ERROR_CHARS = 300  # an error reason is one line of at most this many characters (a summary counts reasons by text)

Model = TypeVar("Model", bound=BaseModel)


PROVENANCE_PACKAGES = ("agentgym-suite", "gymnasium", "numpy", "torch", "transformers", "trl")
GIT_TIMEOUT_S = 5.0  # a git call answers in ~10 ms; a hung network file system must not hang the run


def collect_provenance() -> Provenance:
    """This process's :class:`Provenance`. Never raises: a fact that cannot be read is left out (None)."""
    packages = {}
    for name in PROVENANCE_PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    commit, dirty = _git_state(Path(__file__).resolve().parents[3])
    return Provenance(
        python=f"{platform.python_implementation()} {platform.python_version()}",
        packages=packages,
        git_commit=commit,
        git_dirty=dirty,
        platform=platform.platform(),
        cpu_model=_cpu_model(),
        cpu_count=os.cpu_count(),
        gpus=_cuda_devices(),
    )


def _git(root: Path, *args: str) -> str | None:
    """``git -C root ARGS``'s output, or None if git is missing, fails or hangs. ``GIT_OPTIONAL_LOCKS=0``:
    ``git status`` must not rewrite the index of a checkout others are working in."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _git_state(root: Path) -> tuple[str | None, bool | None]:
    """The commit and dirtiness of the checkout at ``root`` if ``root`` is the top of one (so a package
    installed inside some other repository's folder, e.g. a venv in a checkout, reports none)."""
    if not (root / ".git").exists():
        return None, None
    out = _git(root, "rev-parse", "--show-toplevel", "HEAD")
    lines = out.split() if out else []
    if len(lines) != 2 or Path(lines[0]).resolve() != root:
        return None, None
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return lines[1], None if status is None else bool(status.strip())


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f.read(1 << 16).splitlines():  # the first processor's block is at the top
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def _cuda_devices() -> list[str]:
    """CUDA device names, only if this process already initialised CUDA (reading them costs nothing then)."""
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_initialized():
            return []
        return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # a broken driver must not fail a finished run's summary
        return []


def run_timing(wall_s: float, episodes_run: int, concurrency: int) -> Timing:
    """The :class:`Timing` of an invocation that just finished after ``wall_s`` seconds, with its provenance."""
    finished = datetime.now(UTC)
    return Timing(
        wall_s=round(wall_s, 4),
        episodes_run=episodes_run,
        episodes_per_s=round(episodes_run / wall_s, 4) if wall_s > 0 else math.inf,
        concurrency=concurrency,
        started_at=(finished - timedelta(seconds=wall_s)).isoformat(timespec="seconds"),
        finished_at=finished.isoformat(timespec="seconds"),
        provenance=collect_provenance(),
    )


def error_line(exc: BaseException, limit: int = ERROR_CHARS) -> str:
    """What went wrong, as one line of valid UTF-8 of at most ``limit`` characters: the first line of the
    message (for a pydantic validation error: the first problem's field and message, and how many more)."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False)
        first = errors[0] if errors else {"loc": (), "msg": str(exc)}
        where = ".".join(map(str, first["loc"]))
        text = f"{where}: {first['msg']}" if where else str(first["msg"])
        text += f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    else:
        lines = str(exc).strip().splitlines()
        text = lines[0].strip() if lines else type(exc).__name__
    text = valid_utf8(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def load_episodes(path: str | Path, check: Callable[[EpisodeRecord], str | None] | None = None) -> list[EpisodeRecord]:
    """Read ``episodes.jsonl`` (:func:`~agentgym.core.episode.read_episodes`); a torn last line (the process died while
    writing it) is cut off the file, so that a resumed run appends after whole records.

    A line that is not an episode record raises ``ValueError`` naming the file and the line, as does a
    record for which ``check(record)`` returns a problem (``--resume`` checks records against the env).
    """
    records = []
    for n, _, record in read_episodes(path, torn="cut"):
        assert isinstance(record, EpisodeRecord)  # bad lines raise
        if check is not None and (problem := check(record)) is not None:
            raise ValueError(f"{path}:{n}: {problem}")
        records.append(record)
    return records


def load_run_config(path: str | Path) -> RunConfig:
    """The :class:`RunConfig` in ``run.json``; ``ValueError`` naming the file if it is not one."""
    return _read_model(Path(path), RunConfig, "the settings (run.json) of an agentgym eval run")


def _read_model(path: Path, model: type[Model], what: str) -> Model:
    text = _decode(path.read_bytes(), str(path))
    try:
        return model.model_validate_json(text)
    except ValueError as exc:
        raise ValueError(f"{path}: not {what} ({error_line(exc)})") from None


def to_json(model: BaseModel, indent: int | None = None) -> str:
    """``model`` as JSON, with lone surrogates in its strings (a model's output may hold them) replaced by U+FFFD."""
    try:
        return model.model_dump_json(indent=indent)
    except ValueError:  # pydantic refuses to encode a lone surrogate
        return type(model).model_validate(valid_utf8_data(model.model_dump())).model_dump_json(indent=indent)


def write_json(path: str | Path, model: BaseModel) -> None:
    """Write ``model`` as indented JSON, atomically (a reader never sees half a file)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(to_json(model, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def load_summary(run_dir: str | Path) -> RunSummary:
    """The :class:`RunSummary` in ``run_dir/summary.json`` (or a path to the file itself)."""
    path = Path(run_dir)
    path = path / "summary.json" if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"no summary.json in {run_dir} (is it an `agentgym eval --out` directory?)")
    return _read_model(path, RunSummary, "the summary of an agentgym eval run")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def markdown_table(runs: dict[str, RunSummary]) -> str:
    """One row per run (``label → summary``): agent, env, split, episodes, success ± 95 % CI, reward,
    validity, format compliance, mean turns, tokens and failures, as a Markdown table."""
    head = [
        "run",
        "agent",
        "env",
        "split",
        "episodes",
        "success [95% CI]",
        "reward (mean ± std)",
        "validity",
        "format",
        "turns",
        "tokens",
        "failures",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, s in runs.items():
        lo, hi = s.success_ci95
        row = [
            label,
            f"`{s.agent}`",
            s.env_id,
            s.split or "-",
            str(s.episodes),
            f"{_pct(s.success_rate)} [{_pct(lo)}, {_pct(hi)}]",
            f"{s.mean_return:.3f} ± {s.std_return:.3f}",
            _pct(s.tool_call_validity),
            _pct(s.format_compliance),
            f"{s.mean_turns:.2f}",
            f"{s.total_tokens:,}",
            str(s.failures),
        ]
        lines.append("| " + " | ".join(row) + " |")
    extra = breakdown_tables(runs)
    return "\n".join(lines) + (f"\n\n{extra}" if extra else "")


def _rate(stats: TagStats) -> str:
    lo, hi = stats.success_ci95
    return f"{_pct(stats.success_rate)} [{_pct(lo)}, {_pct(hi)}] n={stats.episodes}"


def breakdown_tables(runs: dict[str, RunSummary]) -> str:
    """Markdown tables of success per tag value (one per tag name, e.g. ``difficulty``; a row per run, a cell
    ``rate [95% CI] n=episodes``) and of pass@k, for the runs that have them; ``""`` if none has."""
    blocks = []
    for name in sorted({name for s in runs.values() for name in s.by_tag}):
        values = sorted({v for s in runs.values() for v in s.by_tag.get(name, {})})
        lines = [f"success by {name}:", "", "| run | " + " | ".join(values) + " |", "|" + "---|" * (len(values) + 1)]
        for label, s in runs.items():
            if name in s.by_tag:
                cells = [_rate(s.by_tag[name][v]) if v in s.by_tag[name] else "-" for v in values]
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
        blocks.append("\n".join(lines))
    sampled = {label: s.pass_at_k for label, s in runs.items() if s.pass_at_k is not None}
    if sampled:
        ks = sorted({int(k) for p in sampled.values() for k in p.values})
        head = ["run", "samples per task", *(f"pass@{k}" for k in ks)]
        lines = ["pass@k (unbiased estimator; in parentheses: tasks with at least k samples):", ""]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for label, p in sampled.items():
            spread = str(p.min_samples) if p.min_samples == p.max_samples else f"{p.min_samples}-{p.max_samples}"
            cells = [f"{_pct(p.values[str(k)])} ({p.tasks[str(k)]})" if str(k) in p.values else "-" for k in ks]
            lines.append("| " + " | ".join([label, spread, *cells]) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


LABEL_CHARS = 44  # a bar's label is wrapped to lines of at most this many characters (~3 inches at 8 pt)
LABEL_LINE_IN = 0.16  # inches of figure height per label line at 8 pt (with leading), so labels never overlap


def _bar_label(label: str, agent: str) -> str:
    """``label`` and ``agent`` wrapped to :data:`LABEL_CHARS` (long paths and specs broken anywhere)."""
    lines = textwrap.wrap(label, LABEL_CHARS, break_on_hyphens=False) + textwrap.wrap(
        agent, LABEL_CHARS, break_on_hyphens=False
    )
    return "\n".join(lines or [""])


def success_figure(runs: dict[str, RunSummary]) -> Any:
    """The matplotlib figure of :func:`plot_success`, laid out: one horizontal bar per run (top to bottom
    in the order given), labelled with the run's label and agent spec.

    Horizontal bars give each label a row as tall as its wrapped lines need, so labels of any length or
    number never overlap (vertical bars' labels collided once they were wider than a bar slot).
    """
    from agentgym.trainers.run.plotting import _pyplot

    plt = _pyplot()
    labels = list(runs)
    texts = [_bar_label(k, runs[k].agent) for k in labels]
    heights = [t.count("\n") + 1 for t in texts]
    rates = [runs[k].success_rate for k in labels]
    lower = [r - runs[k].success_ci95[0] for k, r in zip(labels, rates, strict=True)]
    upper = [runs[k].success_ci95[1] - r for k, r in zip(labels, rates, strict=True)]
    centers, top = [], 0.0  # each row is as tall as its label (in lines), plus half a line of gap either side
    for h in heights:
        centers.append(top + (h + 1) / 2)
        top += h + 1
    envs = sorted({f"{s.env_id}{f' ({s.split})' if s.split else ''}" for s in runs.values()})
    title = textwrap.fill(f"success with 95% Wilson intervals — {', '.join(envs)}", 80)
    fig, ax = plt.subplots(figsize=(7.5, 1.0 + 0.18 * title.count("\n") + LABEL_LINE_IN * max(top, 3)))
    bar_heights = [0.6 * (h + 1) for h in heights]
    ax.barh(centers, rates, height=bar_heights, xerr=[lower, upper], capsize=4, color="#4c72b0", alpha=0.85)
    ax.set_yticks(centers)
    ax.set_yticklabels(texts, fontsize=8)
    ax.set_ylim(top, 0)  # the first run at the top
    ax.set_xlim(0, 1.05)
    ax.set_xlabel("success rate")
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def plot_success(runs: dict[str, RunSummary], path: str | Path) -> Path:
    """A bar chart of each run's success rate with its 95 % Wilson interval as error bars (:func:`success_figure`)."""
    from agentgym.trainers.run.plotting import _save

    return _save(success_figure(runs), path)


def run_labels(run_dirs: Sequence[str | Path]) -> list[str]:
    """Short, distinct labels for run directories: their names, or more of their paths where names repeat."""
    paths = [Path(p).resolve() for p in run_dirs]
    depth = 1
    while depth < 8:
        labels = ["/".join(p.parts[-depth:]) for p in paths]
        if len(set(labels)) == len(labels):
            return labels
        depth += 1
    return [str(p) for p in paths]


def compare_runs(run_dirs: Sequence[str | Path]) -> dict[str, RunSummary]:
    """``label → summary`` for each run directory, in the order given (see :func:`run_labels`)."""
    return {label: load_summary(d) for label, d in zip(run_labels(run_dirs), run_dirs, strict=True)}
