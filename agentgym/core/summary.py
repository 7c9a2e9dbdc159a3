"""What a set of played episodes measured, in one shape: :class:`RunSummary`, computed by :func:`summarize` from
:class:`~agentgym.core.episode.EpisodeRecord` lists. Every evaluation returns one (the benchmark runner, the in-memory
loop, a trainer's greedy evaluation), and ``summary.json`` files hold one.

Everything in a summary except its ``timing`` block is a function of the records sorted by index (and of the env's
task list, for the per-tag breakdown and pass@k), so the same agent, seed and env version give a byte-identical
summary apart from ``timing``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field, model_serializer

import agentgym
from agentgym.core.episode import EpisodeRecord, outcome_rates
from agentgym.core.tool_env import ToolEnv, task_info

__all__ = [
    "TASK_TAGS",
    "PassAtK",
    "Provenance",
    "RolloutStats",
    "RunConfig",
    "RunSummary",
    "TagStats",
    "TaskFacts",
    "Timing",
    "env_facts",
    "episode_tasks",
    "latest_by_index",
    "mean_interval",
    "mean_pass_at_k",
    "pass_at_k",
    "summarize",
    "tag_breakdown",
    "wilson_interval",
]

Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile


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


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``n`` samples of one task of which ``c`` succeeded (Chen et al.,
    2021): the chance that ``k`` of the samples drawn without replacement hold at least one success,
    ``1 - C(n - c, k) / C(n, k)``. Exact (integer binomials); ``ValueError`` unless ``0 <= c <= n`` and
    ``1 <= k <= n``."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:  # every draw of k samples holds a success
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


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


class Provenance(BaseModel):
    """What software and machine a run ran on (part of :class:`Timing`: it differs between machines, not results).

    ``git_commit`` is the commit of the agentgym checkout the package was imported from, with ``git_dirty``
    whether tracked files differ from it; both None for an installed package (or without git). ``packages``
    maps each installed distribution of :data:`PROVENANCE_PACKAGES` to its version (read from its metadata,
    without importing it). ``gpus`` lists the CUDA devices, if this process had already initialised CUDA.
    """

    python: str
    packages: dict[str, str]
    git_commit: str | None = None
    git_dirty: bool | None = None
    platform: str
    cpu_model: str | None = None
    cpu_count: int | None = None
    gpus: list[str] = Field(default_factory=list)


class Timing(BaseModel):
    """How this invocation ran — when, how fast, on what — not part of what it measured, and not reproducible.

    ``started_at`` and ``finished_at`` are ISO 8601 UTC times; they and ``provenance`` are None in
    summaries written before they were recorded.
    """

    wall_s: float
    episodes_run: int = Field(description="Episodes played by this invocation (a resumed run skips finished ones).")
    episodes_per_s: float
    concurrency: int
    started_at: str | None = None
    finished_at: str | None = None
    provenance: Provenance | None = None


@dataclass(frozen=True)
class TaskFacts:
    """What an episode's task is: its position in the env's fixed task list, and its tags (e.g.
    ``{"difficulty": "join"}``). Episodes of one ``task`` are samples of it (pass@k)."""

    task: int | None
    tags: dict[str, str] = field(default_factory=dict)


class TagStats(BaseModel):
    """Success on the episodes whose task has one tag value, with the 95 % Wilson interval."""

    episodes: int
    successes: int
    success_rate: float
    success_ci95: tuple[float, float]


class PassAtK(BaseModel):
    """pass@k for each k in :data:`PASS_AT_K` up to ``max_samples`` (and ``min_samples``), averaged over the
    tasks played at least k times (``tasks[k]`` of them; see :func:`pass_at_k`).

    Which tasks were played how often depends only on the seeds, never on outcomes, so each average is an
    unbiased estimate for the env's tasks; where every task was played ``n`` times, every k uses all of them.
    """

    min_samples: int
    max_samples: int
    values: dict[str, float] = Field(description="k (as text) → mean pass@k over the tasks with at least k samples")
    tasks: dict[str, int] = Field(description="k (as text) → how many tasks have at least k samples")


class RolloutStats(BaseModel):
    """What only a language-model policy's own rollouts show (a trainer's evaluation): the share of episodes that
    made a lookup (a valid call that did not end them), responses cut at the token limit and tokens written, per
    turn."""

    tool_use: float
    clipped_responses: float
    response_length: float


PASS_AT_K = (1, 2, 5, 10, 20, 50, 100)
UNTAGGED = "untagged"  # the tag value of an episode whose task lacks the tag


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
    truncation_reasons: dict[str, int] = Field(
        default_factory=dict,
        description="why episodes were cut (time_limit, max_turns, context_limit, ...) → how many; not failures",
    )
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    returns: list[float]
    by_tag: dict[str, dict[str, TagStats]] = Field(
        default_factory=dict, description="tag name → tag value → success there (absent for untagged envs)"
    )
    pass_at_k: PassAtK | None = Field(None, description="When a task was played more than once (sampled agents).")
    rollout: RolloutStats | None = Field(None, description="A trainer's evaluation of its policy.")
    timing: Timing | None = None

    def metrics(self) -> dict[str, float]:
        """The figures as a trainer logs them (``eval_<name>`` rows of ``metrics.jsonl``): ``reward``,
        ``reward_std``, ``success``, ``format_compliance``, ``tool_call_validity``, ``truncation_rate``, ``turns``,
        ``episodes``, and :class:`RolloutStats` where the summary has them."""
        rollout = self.rollout.model_dump() if self.rollout else {}
        figures = {
            "reward": self.mean_return,
            "reward_std": self.std_return,
            "success": self.success_rate,
            "tool_use": rollout.get("tool_use"),
            "format_compliance": self.format_compliance,
            "tool_call_validity": self.tool_call_validity,
            "truncation_rate": self.truncation_rate,
            "clipped_responses": rollout.get("clipped_responses"),
            "turns": self.mean_turns,
            "response_length": rollout.get("response_length"),
            "episodes": self.episodes,
        }
        return {name: value for name, value in figures.items() if value is not None}

    @model_serializer(mode="wrap")
    def _leave_out_empty(self, handler: Any) -> dict[str, Any]:
        """Leave out ``by_tag``, ``pass_at_k``, ``truncation_reasons`` and ``rollout`` where they say nothing, so an
        untagged env's summary is byte for byte what it was before they existed."""
        data = handler(self)
        for key in ("by_tag", "pass_at_k", "truncation_reasons", "rollout"):
            if not data.get(key):
                data.pop(key, None)
        return data


def env_facts(env: gym.Env) -> dict[str, Any]:
    """The :class:`RunSummary` fields that ``env`` states: ``env_version``, ``data_checksum`` (of its task data)
    and ``package_version``, as keyword arguments of :func:`summarize`."""
    return {
        "env_version": env.spec.version if env.spec else None,
        "data_checksum": task_info(env).data_checksum,
        "package_version": agentgym.__version__,
    }


def latest_by_index(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    """The last record of every episode index, sorted by index."""
    latest: dict[int, EpisodeRecord] = {}
    for record in records:
        latest[record.index] = record
    return [latest[i] for i in sorted(latest)]


def summarize(
    records: Iterable[EpisodeRecord],
    config: RunConfig,
    tasks: Sequence[TaskFacts | None] | None = None,
    **meta: Any,
) -> RunSummary:
    """Summarise the latest record of each index in ``range(config.episodes)``.

    ``tasks[i]`` is episode ``i``'s task (None where unknown): it gives the per-tag breakdown
    (``by_tag``) and, where a task was played more than once, ``pass_at_k``. ``meta`` fills the
    remaining :class:`RunSummary` fields (``env_version``, ``data_checksum``, ``package_version``, ``timing``).
    """
    eps = [r for r in latest_by_index(records) if r.index < config.episodes]
    n = len(eps)
    returns = [r.total_reward for r in eps]
    mean = math.fsum(returns) / n if n else 0.0
    successes = sum(r.success for r in eps)
    rates = outcome_rates(eps)
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
        success_rate=rates["success"],
        success_ci95=wilson_interval(successes, n),
        mean_return=mean,
        std_return=math.sqrt(math.fsum((x - mean) ** 2 for x in returns) / n) if n else 0.0,
        return_ci95=mean_interval(returns),
        tool_call_validity=rates["tool_call_validity"],
        format_compliance=rates["format_compliance"],
        mean_turns=rates["turns"],
        truncation_rate=rates["truncation_rate"],
        truncation_reasons=dict(sorted(Counter(r.truncation for r in eps if r.truncation is not None).items())),
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        returns=returns,
        by_tag=tag_breakdown(eps, tasks or []),
        pass_at_k=mean_pass_at_k(eps, tasks or []),
        **meta,
    )


def _facts(tasks: Sequence[TaskFacts | None], index: int) -> TaskFacts | None:
    return tasks[index] if index < len(tasks) else None


def tag_breakdown(eps: Sequence[EpisodeRecord], tasks: Sequence[TaskFacts | None]) -> dict[str, dict[str, TagStats]]:
    """``tag name → tag value → TagStats`` over ``eps`` (sorted by name and value); an episode whose task
    lacks a tag counts under :data:`UNTAGGED`, so each tag's values add up to all episodes."""
    facts = [_facts(tasks, r.index) for r in eps]
    names = sorted({name for f in facts if f is not None for name in f.tags})
    breakdown: dict[str, dict[str, TagStats]] = {}
    for name in names:
        groups: dict[str, list[bool]] = defaultdict(list)
        for record, f in zip(eps, facts, strict=True):
            groups[f.tags.get(name, UNTAGGED) if f is not None else UNTAGGED].append(record.success)
        breakdown[name] = {
            value: TagStats(
                episodes=len(wins),
                successes=sum(wins),
                success_rate=sum(wins) / len(wins),
                success_ci95=wilson_interval(sum(wins), len(wins)),
            )
            for value, wins in sorted(groups.items())
        }
    return breakdown


def mean_pass_at_k(eps: Sequence[EpisodeRecord], tasks: Sequence[TaskFacts | None]) -> PassAtK | None:
    """:class:`PassAtK` over ``eps``, or None unless every episode's task is known and some task was played more
    than once. A failed episode (``error``) is an unsuccessful sample, as in ``success_rate``."""
    samples: dict[int, list[bool]] = defaultdict(list)
    for record in eps:
        f = _facts(tasks, record.index)
        if f is None or f.task is None:
            return None
        samples[f.task].append(record.success)
    counts = [len(wins) for wins in samples.values()]
    if not counts or max(counts) < 2:
        return None
    least, most = min(counts), max(counts)
    values, covered = {}, {}
    for k in sorted({k for k in PASS_AT_K if k <= most} | {least}):
        estimates = [pass_at_k(len(wins), sum(wins), k) for wins in samples.values() if len(wins) >= k]
        values[str(k)], covered[str(k)] = math.fsum(estimates) / len(estimates), len(estimates)
    return PassAtK(min_samples=least, max_samples=most, values=values, tasks=covered)


TASK_TAGS = ("difficulty", "topic")
"""Attributes of an env's task objects that a summary breaks success down by (``by_tag``), where tasks have them:
SQLLookup's question kinds (single_table, join, aggregate, nested, date), CodeSandbox's difficulties and topics."""


def episode_tasks(env: gym.Env, resets: list[dict[str, Any]]) -> list[TaskFacts | None]:
    """Each episode's task and tags (:data:`TASK_TAGS`), for an env with a fixed task list (``ToolEnv.task_list``;
    ``[]`` for other envs). An episode reset with ``task_index`` plays that task; for one reset by seed alone,
    ``env`` is reset the same way (~0.1 ms on SQLLookup and CodeSandbox) to see which task it draws."""
    tasks = env.unwrapped.task_list if isinstance(env.unwrapped, ToolEnv) else None
    if not tasks:
        return []
    facts: list[TaskFacts | None] = []
    for reset in resets:
        index = (reset.get("options") or {}).get("task_index")
        if index is None:
            try:
                env.reset(**reset)
            except Exception:  # the episode itself failed the same way; it has no known task
                facts.append(None)
                continue
            index = tasks.index
        if not isinstance(index, int) or not 0 <= index < len(tasks):
            facts.append(None)
            continue
        values = {name: getattr(tasks[index], name, None) for name in TASK_TAGS}
        facts.append(TaskFacts(index, {k: str(v) for k, v in values.items() if v is not None}))
    return facts
