"""Benchmark runs on disk: one record per episode, a reproducible summary, and side-by-side comparisons.

A run directory (what ``agentgym eval --out DIR`` writes) holds:

- ``run.json`` — the run's settings (:class:`RunConfig`); ``--resume`` refuses a directory whose
  settings differ from the ones given;
- ``episodes.jsonl`` — one :class:`EpisodeRecord` per line, appended and flushed as each episode
  ends (in the order episodes finish, not by index). A run that is killed keeps every finished
  episode; resuming skips them. A later record of the same index replaces an earlier one (a
  failed episode that a resumed run played again);
- ``summary.json`` — the :class:`RunSummary` of the latest record of every episode index.

Everything in the summary except its ``timing`` block is a function of the records sorted by index,
so the same agent, seed and env version give a byte-identical summary apart from ``timing``.
:func:`markdown_table` and :func:`plot_success` compare several runs.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field

from agentgym.core import valid_utf8

__all__ = [
    "EpisodeRecord",
    "RunConfig",
    "RunSummary",
    "Timing",
    "compare_runs",
    "error_line",
    "latest_by_index",
    "load_episodes",
    "load_run_config",
    "load_summary",
    "markdown_table",
    "mean_interval",
    "plot_success",
    "run_labels",
    "summarize",
    "wilson_interval",
    "write_json",
]

Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile
ERROR_CHARS = 300  # an error reason is one line of at most this many characters (a summary counts reasons by text)

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
Model = TypeVar("Model", bound=BaseModel)


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95 % by default); ``(0, 1)`` when ``n == 0``.

    Unlike the normal approximation it stays inside [0, 1] and is not degenerate at 0 % or 100 %.
    """
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    lo = 0.0 if successes == 0 else max(0.0, center - half)  # the bounds at 0 % and 100 % are exact
    hi = 1.0 if successes == n else min(1.0, center + half)
    return lo, hi


def mean_interval(values: Sequence[float], z: float = Z95) -> tuple[float, float]:
    """``mean ± z·s/√n`` with the sample standard deviation ``s`` (normal approximation; a point if n < 2)."""
    n = len(values)
    if n == 0:
        return 0.0, 0.0
    mean = math.fsum(values) / n
    if n < 2:
        return mean, mean
    s = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    return mean - z * s / math.sqrt(n), mean + z * s / math.sqrt(n)


class EpisodeRecord(BaseModel):
    """One episode's trajectory and outcome, as a line of ``episodes.jsonl``.

    ``observations[i]`` is what the agent answered with ``actions[i]`` (the first observation, then
    one after every action). ``canonical[i]`` is ``info["canonical"]`` of step ``i`` (format
    compliance), ``valid[i]`` whether its tool calls parsed and validated. ``error`` is None for an
    episode that was played to its end (success or not) and says why otherwise (an endpoint that
    kept failing); such an episode counts as unsuccessful and is played again by ``--resume``.
    Token counts are what the agent's endpoint or model reported (0 for scripted and tabular agents).
    """

    index: int = Field(ge=0)
    reset: dict[str, Any]
    observations: list[str] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)
    rewards: list[FiniteFloat] = Field(default_factory=list)
    canonical: list[bool] = Field(default_factory=list)
    valid: list[bool] = Field(default_factory=list)
    success: bool = False
    terminated: bool = False
    truncation: str | None = None
    error: str | None = None
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)

    @computed_field
    @property
    def total_reward(self) -> float:
        return math.fsum(self.rewards)

    @computed_field
    @property
    def turns(self) -> int:
        return len(self.actions)

    def step(self, action: str, observation: str, reward: float, info: dict[str, Any]) -> None:
        """Append one env step (``info`` as ``ToolEnv.step`` returns it). A reward that is not a finite
        number raises ``ValueError`` before anything is appended (the record stays consistent)."""
        if not math.isfinite(reward := float(reward)):
            raise ValueError(f"the env returned the reward {reward} at turn {self.turns + 1}")
        self.actions.append(action)
        self.observations.append(observation)
        self.rewards.append(reward)
        self.canonical.append(bool(info.get("canonical", False)))
        self.valid.append(info.get("parse_error") is None and bool(info.get("tool_calls", True)))
        self.success = bool(info.get("success", False))


class RunConfig(BaseModel):
    """What a run plays: saved as ``run.json``; ``--resume`` requires the same values (except ``episodes``)."""

    model_config = ConfigDict(extra="forbid")

    env_id: str
    env_kwargs: dict[str, Any]
    split: str | None
    agent: str
    agent_settings: dict[str, Any]
    seed: int
    episodes: int
    all_tasks: bool = Field(description="Episode i plays task i of the env's fixed task list.")

    def mismatch(self, other: RunConfig) -> str | None:
        """The first setting (other than ``episodes``) in which ``other`` differs, as words; None if none."""
        mine, theirs = self.model_dump(exclude={"episodes"}), other.model_dump(exclude={"episodes"})
        for key, value in mine.items():
            if theirs.get(key) != value:
                return f"{key} is {theirs.get(key)!r} there, {value!r} here"
        return None


class Timing(BaseModel):
    """How this invocation ran — not part of what it measured, and not reproducible."""

    wall_s: float
    episodes_run: int = Field(description="Episodes played by this invocation (a resumed run skips finished ones).")
    episodes_per_s: float
    concurrency: int


class RunSummary(BaseModel):
    """A run's results and what is needed to reproduce them. ``timing`` is the only non-reproducible part.

    Rates are over all ``episodes`` (failed ones count as unsuccessful); ``tool_call_validity`` and
    ``format_compliance`` are over all turns. ``success_ci95`` is the Wilson interval,
    ``return_ci95`` the normal-approximation interval of the mean return.
    """

    env_id: str
    env_version: int | None
    split: str | None
    env_kwargs: dict[str, Any]
    data_checksum: str | None
    package_version: str
    agent: str
    agent_settings: dict[str, Any]
    seed: int
    episodes: int
    completed: int
    failures: int
    failure_reasons: dict[str, int]
    success_rate: float
    success_ci95: tuple[float, float]
    mean_return: float
    std_return: float
    return_ci95: tuple[float, float]
    tool_call_validity: float
    format_compliance: float
    mean_turns: float
    truncation_rate: float
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    returns: list[float]
    timing: Timing | None = None


def latest_by_index(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    """The last record of every episode index, sorted by index."""
    latest: dict[int, EpisodeRecord] = {}
    for record in records:
        latest[record.index] = record
    return [latest[i] for i in sorted(latest)]


def summarize(records: Iterable[EpisodeRecord], config: RunConfig, **meta: Any) -> RunSummary:
    """Summarise the latest record of each index in ``range(config.episodes)``.

    ``meta`` fills the remaining :class:`RunSummary` fields (``env_version``, ``data_checksum``,
    ``package_version``, ``timing``).
    """
    eps = [r for r in latest_by_index(records) if r.index < config.episodes]
    n = len(eps)
    returns = [r.total_reward for r in eps]
    mean = math.fsum(returns) / n if n else 0.0
    successes = sum(r.success for r in eps)
    turns = sum(r.turns for r in eps)
    failed = [r for r in eps if r.error is not None]
    prompt, completion = sum(r.prompt_tokens for r in eps), sum(r.completion_tokens for r in eps)
    return RunSummary(
        env_id=config.env_id,
        split=config.split,
        env_kwargs=config.env_kwargs,
        agent=config.agent,
        agent_settings=config.agent_settings,
        seed=config.seed,
        episodes=n,
        completed=n - len(failed),
        failures=len(failed),
        failure_reasons=dict(sorted(Counter(r.error for r in failed).items())),
        success_rate=successes / n if n else 0.0,
        success_ci95=wilson_interval(successes, n),
        mean_return=mean,
        std_return=math.sqrt(math.fsum((x - mean) ** 2 for x in returns) / n) if n else 0.0,
        return_ci95=mean_interval(returns),
        tool_call_validity=sum(sum(r.valid) for r in eps) / turns if turns else 0.0,
        format_compliance=sum(sum(r.canonical) for r in eps) / turns if turns else 0.0,
        mean_turns=turns / n if n else 0.0,
        truncation_rate=sum(r.truncation is not None for r in eps) / n if n else 0.0,
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        returns=returns,
        **meta,
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
    """Read ``episodes.jsonl``; a torn last line (the process died while writing it) is cut off the file.

    A line that is not an episode record raises ``ValueError`` naming the file and the line, as does a
    record for which ``check(record)`` returns a problem (``--resume`` checks records against the env).
    A last line without its newline is torn only if its JSON ends early; a whole record there is kept.
    """
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    if (last := lines[-1]) and (tail := _tail(last)) != "damaged":  # no newline at the end of the file
        with path.open("r+b") as f:
            end = f.seek(0, os.SEEK_END)
            if tail == "whole":
                f.write(b"\n")  # the next appended record starts on a line of its own
            else:
                f.truncate(end - len(last))
                lines[-1] = b""
    records = []
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        line = _decode(raw, f"{path}:{n}")
        try:
            record = EpisodeRecord.model_validate_json(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: not an episode record ({error_line(exc)})") from None
        if check is not None and (problem := check(record)) is not None:
            raise ValueError(f"{path}:{n}: {problem}")
        records.append(record)
    return records


def _tail(line: bytes) -> str:
    """A last line without its newline: ``"whole"`` (a record), ``"torn"`` (a record cut off mid-write: its
    JSON ends early) or ``"damaged"`` (anything else, reported as not a record)."""
    try:
        EpisodeRecord.model_validate_json(line.decode("utf-8", "ignore"))  # a cut may split a character
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        return "torn" if first["type"] == "json_invalid" and "EOF while parsing" in first["msg"] else "damaged"
    return "whole"


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
        return type(model).model_validate(_scrub(model.model_dump())).model_dump_json(indent=indent)


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return valid_utf8(value)
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


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
    return "\n".join(lines)


def plot_success(runs: dict[str, RunSummary], path: str | Path) -> Path:
    """A bar chart of each run's success rate with its 95 % Wilson interval as error bars."""
    from agentgym.trainers.plotting import _pyplot, _save

    plt = _pyplot()
    labels = list(runs)
    rates = [runs[k].success_rate for k in labels]
    lower = [r - runs[k].success_ci95[0] for k, r in zip(labels, rates, strict=True)]
    upper = [runs[k].success_ci95[1] - r for k, r in zip(labels, rates, strict=True)]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.4 * len(labels) + 1.5), 3.8))
    ax.bar(range(len(labels)), rates, yerr=[lower, upper], capsize=6, color="#4c72b0", alpha=0.85)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels([f"{k}\n{runs[k].agent}" for k in labels], fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate")
    envs = sorted({f"{s.env_id}{f' ({s.split})' if s.split else ''}" for s in runs.values()})
    ax.set_title(f"success with 95% Wilson intervals — {', '.join(envs)}", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


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
