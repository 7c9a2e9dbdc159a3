"""The data flywheel: logged episodes become training data — SFT transcripts, preference pairs and a report.

``agentgym data EPISODES.jsonl [...] --out DIR`` (:func:`build_data`) reads any ``episodes.jsonl``:

- from ``agentgym eval`` of any agent (``random``, ``oracle``, ``hf:``, an ``openai:`` endpoint, ...); the env comes
  from ``run.json`` beside it;
- from training (GRPO, LLM PPO); the env comes from ``config.json`` beside it.

Every line is an :class:`~agentgym.core.episode.EpisodeRecord` with its observations (lines written before it are
converted; a training log of that time kept no observations, so its episodes are dropped as ``no observations``).

``--env ID`` names the env of files with neither (and keeps only that env's episodes of the others). It writes:

- ``DIR/sft.jsonl`` — what ``agentgym train sft --set data=DIR/sft.jsonl`` reads: one ``{"messages": [...],
  "tools": [...]}`` per line (the tools are the env's OpenAI-style schemas, as rollouts pass them to the chat
  template). Kept: successful episodes (``info["success"]``) played to their end, with filters ``min_reward``
  (total reward), ``max_turns`` and ``dedupe`` (identical transcripts once);
- ``DIR/pairs.jsonl`` — what ``agentgym train dpo`` / ``reward-model --set data=DIR/pairs.jsonl`` read
  (:mod:`agentgym.trainers.llm.preferences`): ``{"chosen", "rejected", "chosen_reward", "rejected_reward", "reset"}``.
  Episodes of the same task (same env, env kwargs and reset: seed, or task index where there is one) are ranked by
  total reward; the k-th best is paired with the k-th worst (``pairs_per_task``) when their rewards differ by more
  than ``min_margin``. Transcripts end with the last action: the env's verdict after it would give the answer away;
- ``DIR/report.json`` and ``DIR/report.md`` — what was read, kept and dropped, and why.

Rendering (``context``): ``"append"`` (default) writes each episode as one multi-turn transcript whose user
messages are the observations; ``"summary"`` writes each turn of an SFT episode as its own one-turn example, as
``RolloutConfig(context="summary")`` trains, with the user message ``turn_template`` filled with ``{observation}``,
``{summary}`` (the env's one-line state summary, kept in the record) and ``{signatures}`` (the compact tool list) —
e.g. the tiny recipe's ``"{signatures}\\n{summary}"``. Pairs are whole transcripts in either mode, their user
messages rendered with the same template.

Input files are untrusted: at most :data:`MAX_LINES` lines of at most :data:`MAX_LINE_BYTES` bytes each are read
(beyond, the rest of the file is skipped and reported); a line that is not an episode is skipped with a one-line
reason naming the file and line (the first :data:`SHOWN_ERRORS` are in the report). Files are streamed: SFT examples
are written as their episodes are read, and a pair's two episodes are read again by their offsets, so memory holds
one line and a hash per example. The outputs appear only when all of them are written (no half-written
``sft.jsonl``).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field

from agentgym.app.evaluation.reports import error_line, write_json
from agentgym.core import tools_of
from agentgym.core.episode import (
    MAX_LINE_BYTES,
    MAX_LINES,
    EpisodeRecord,
    parse_line,
    read_episodes,
    read_line_at,
    read_lines,
)
from agentgym.core.registration import make_env, split_kwargs

__all__ = [
    "MAX_LINES",
    "MAX_LINE_BYTES",
    "DataConfig",
    "DataReport",
    "build_data",
    "format_report",
]

SHOWN_ERRORS = 20
"""Bad lines the report names one by one (all are counted)."""


class DataConfig(BaseModel):
    """What :func:`build_data` keeps and how it writes it (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    env_id: str | None = Field(None, description="The env of files without run.json/config.json; keep only its.")
    min_reward: float | None = Field(None, description="SFT: keep episodes whose total reward is at least this.")
    max_turns: int | None = Field(None, ge=1, description="SFT: keep episodes of at most this many actions.")
    dedupe: bool = Field(True, description="Write identical SFT examples and pairs once.")
    context: Literal["append", "summary"] = Field("append", description="One transcript, or one example a turn.")
    turn_template: str = Field("{observation}", description="User message: {observation} {summary} {signatures}.")
    system_prompt: str | None = Field(None, description="A system message before the first user message.")
    pairs_per_task: int = Field(1, ge=0, description="Preference pairs per task: k-th best vs k-th worst (0: none).")
    min_margin: float = Field(0.0, ge=0, description="A pair's rewards must differ by more than this.")


class DataReport(BaseModel):
    """What :func:`build_data` read, kept and dropped."""

    inputs: dict[str, dict[str, Any]]
    """Per input file: its env, its kind (eval or training) and its line counts."""
    episodes: int
    sft_episodes: int
    sft_examples: int
    dropped: dict[str, int]
    """Episodes left out of the SFT data, by reason."""
    tasks: int
    """Distinct tasks among the episodes (pairs are made within a task)."""
    pairs: int
    pair_skips: dict[str, int]
    """Pairs not made, by reason."""
    bad_lines: int
    errors: list[str]
    """The first :data:`SHOWN_ERRORS` bad lines, one line each."""
    sft_success_rate: float | None = None
    """Share of the read episodes that were successful (the source agent's success)."""


class _Source:
    """One input file: its env (from run.json / config.json / --env) and how to read its lines."""

    def __init__(self, path: Path, env_id: str | None) -> None:
        self.path, self.kind = path, "unknown"
        self.env_id, self.env_kwargs, self.split = env_id, {}, None
        run, train = path.parent / "run.json", path.parent / "config.json"
        try:
            if run.is_file():
                meta = json.loads(run.read_text(encoding="utf-8"))
                self.kind, self.env_id, self.env_kwargs = "eval", meta["env_id"], dict(meta.get("env_kwargs") or {})
            elif train.is_file():
                meta = json.loads(train.read_text(encoding="utf-8"))["config"]
                self.kind, self.env_id = "training", meta["env_id"]
                self.env_kwargs = split_kwargs(meta["env_id"], meta.get("train_split"), meta.get("env_kwargs") or {})
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path.parent}: cannot read the run's settings ({error_line(exc)})") from None
        if self.kind != "unknown" and not isinstance(self.env_id, str):
            raise ValueError(f"{path.parent}: the run's settings name no env id")
        self._env: gym.Env | None = None

    @property
    def env(self) -> gym.Env:
        if self._env is None:
            if self.env_id is None:
                raise ValueError(f"{self.path}: no run.json or config.json beside it; name its env with --env")
            self._env = make_env(self.env_id, None, self.env_kwargs)
        return self._env

    def task_key(self, reset: dict[str, Any]) -> str:
        """Which task a reset plays: the env, its kwargs and the task index (or, without one, the seed)."""
        options = reset.get("options") or {}
        which = {"task_index": options["task_index"]} if "task_index" in options else {"seed": reset.get("seed")}
        return json.dumps([self.env_id, self.env_kwargs, which], sort_keys=True, default=str)

    def close(self) -> None:
        if self._env is not None:
            self._env.close()


def build_data(inputs: list[str | Path], out_dir: str | Path, config: DataConfig | None = None) -> DataReport:
    """Turn ``inputs`` (``episodes.jsonl`` files) into ``out_dir/sft.jsonl``, ``pairs.jsonl``, ``report.json`` and
    ``report.md`` (see the module docstring). A missing input file or unreadable run settings raise before anything
    is written; bad lines are skipped and reported."""
    cfg = config or DataConfig()
    sources = []
    for item in inputs:
        path = Path(item)
        if not path.is_file():
            raise FileNotFoundError(f"no episodes file at {path}")
        sources.append(_Source(path, cfg.env_id))
    _check_template(cfg.turn_template)
    out = Path(out_dir)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    writing = {name: out / f".{name}.partial" for name in ("sft.jsonl", "pairs.jsonl")}  # renamed once all is done
    counts = _Counts()
    per_file: dict[str, dict[str, Any]] = {}
    groups: dict[str, list[tuple[float, int, int]]] = defaultdict(list)  # task -> (reward, source, offset) each
    try:
        with writing["sft.jsonl"].open("w", encoding="utf-8") as sft:
            for k, source in enumerate(sources):
                lines = {"env_id": source.env_id, "kind": source.kind, "lines": 0, "episodes": 0, "bad_lines": 0}
                per_file[str(source.path)] = lines
                if cfg.env_id is not None and source.env_id != cfg.env_id:
                    counts.dropped["another env"] += sum(1 for _ in read_lines(source.path, MAX_LINE_BYTES, MAX_LINES))
                    continue
                for n, offset, item in read_episodes(
                    source.path, bad="yield", what="an episode", max_line_bytes=MAX_LINE_BYTES, max_lines=MAX_LINES
                ):
                    record = counts.episode(f"{source.path}:{n}", item, lines)
                    if record is None:
                        continue
                    _write_sft(sft, source, record, cfg, counts)
                    if record.error is None and record.turns:
                        groups[source.task_key(record.reset)].append((record.total_reward, k, offset))
        with writing["pairs.jsonl"].open("w", encoding="utf-8") as pairs:
            _write_pairs(pairs, sources, groups, cfg, counts)
        for name, partial in writing.items():
            partial.replace(out / name)
    except BaseException:
        for partial in writing.values():
            partial.unlink(missing_ok=True)
        if created:
            out.rmdir()  # nothing half-written: not even the folder
        raise
    finally:
        for source in sources:
            source.close()
    report = DataReport(
        inputs=per_file,
        episodes=counts.episodes,
        sft_episodes=counts.sft_episodes,
        sft_examples=counts.sft_examples,
        dropped=dict(counts.dropped),
        tasks=len(groups),
        pairs=counts.pairs,
        pair_skips=dict(counts.skips),
        bad_lines=counts.bad,
        errors=counts.errors,
        sft_success_rate=counts.successes / counts.finished if counts.finished else None,
    )
    write_json(out / "report.json", report)
    (out / "report.md").write_text(format_report(report) + "\n", encoding="utf-8")
    return report


class _Counts:
    """What :func:`build_data` counted while it streamed the inputs (memory: one hash per example or pair written)."""

    def __init__(self) -> None:
        self.dropped: dict[str, int] = defaultdict(int)
        self.skips: dict[str, int] = defaultdict(int)
        self.errors: list[str] = []
        self.bad = self.episodes = self.finished = self.successes = 0
        self.sft_episodes = self.sft_examples = self.pairs = 0
        self.seen: set[bytes] = set()

    def episode(self, where: str, item: EpisodeRecord | str, lines: dict[str, Any]) -> EpisodeRecord | None:
        """Line ``where``'s episode (:func:`~agentgym.core.episode.read_episodes`' item), or None (a bad line counted
        and named, or a dropped one counted); ``lines``: the file's counts."""
        lines["lines"] += 1
        try:
            if isinstance(item, str):  # not an episode: "PATH:N: not an episode (the reason)"
                raise ValueError(item.removeprefix(f"{where}: "))
            record = _usable(item)
        except ValueError as exc:
            reason = str(exc)
            if reason.startswith("dropped: "):
                self.dropped[reason.removeprefix("dropped: ")] += 1
                return None
            self.bad += 1
            lines["bad_lines"] += 1
            if len(self.errors) < SHOWN_ERRORS:
                self.errors.append(f"{where}: {reason}")
            return None
        self.episodes += 1
        lines["episodes"] += 1
        if record.error is None:
            self.finished += 1
            self.successes += record.success
        return record

    def new(self, value: Any) -> bool:
        """Whether ``value`` was not written before (remembered by its hash)."""
        key = hashlib.sha256(json.dumps(value, sort_keys=True).encode("utf-8", "replace")).digest()
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


def _check_template(template: str) -> None:
    try:
        template.format(observation="", summary="", signatures="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"turn_template {template!r} is not a template of {{observation}}, {{summary}}, {{signatures}} "
            f"({error_line(exc)})"
        ) from None


def _usable(record: EpisodeRecord) -> EpisodeRecord:
    """The record if it has its observations; ``ValueError`` with the reason."""
    if not record.observations and record.turns:
        raise ValueError("dropped: no observations (a training log written before they were kept)")
    if len(record.observations) != record.turns + 1 or len(record.rewards) != record.turns:
        raise ValueError(
            f"{record.turns} actions need {record.turns + 1} observations and {record.turns} rewards, got "
            f"{len(record.observations)} and {len(record.rewards)}"
        )
    return record


def _messages(source: _Source, record: EpisodeRecord, cfg: DataConfig) -> list[dict[str, str]]:
    """The episode as chat messages ending with its last action, user messages rendered with the template."""
    messages = [{"role": "system", "content": cfg.system_prompt}] if cfg.system_prompt else []
    summaries = record.summaries if len(record.summaries) == len(record.observations) else [""] * record.turns
    for observation, summary, action in zip(record.observations, summaries, record.actions, strict=False):
        messages += [{"role": "user", "content": _render(source, observation, summary, cfg)}]
        messages += [{"role": "assistant", "content": action}]
    return messages


def _render(source: _Source, observation: str, summary: str, cfg: DataConfig) -> str:
    if cfg.turn_template == "{observation}":
        return observation
    return cfg.turn_template.format(observation=observation, summary=summary, signatures=_signatures(source))


def _signatures(source: _Source) -> str:
    from agentgym.trainers.llm.rollout import signatures

    return signatures(_tools(source))


def _tools(source: _Source) -> list[dict[str, Any]]:
    return [t.schema for t in tools_of(source.env).values()]


def _write_sft(out: Any, source: _Source, record: EpisodeRecord, cfg: DataConfig, counts: _Counts) -> None:
    """Write the episode's SFT examples if it is kept, else count why it was dropped."""
    if record.error is not None:
        reason = "failed (error)"
    elif not record.success:
        reason = "not successful"
    elif cfg.min_reward is not None and record.total_reward < cfg.min_reward:
        reason = f"reward below {cfg.min_reward:g}"
    elif cfg.max_turns is not None and record.turns > cfg.max_turns:
        reason = f"more than {cfg.max_turns} turns"
    elif (
        cfg.context == "summary"
        and "{summary}" in cfg.turn_template
        and not (len(record.summaries) == len(record.observations) and all(record.summaries))
    ):
        reason = "no state summary in the record"
    else:
        reason = None
    if reason is not None:
        counts.dropped[reason] += 1
        return
    messages = _messages(source, record, cfg)
    if cfg.context == "summary":  # one example a turn: the system prompt, the turn's user message, the action
        head = messages[:1] if cfg.system_prompt else []
        body = messages[len(head) :]
        chunks = [head + body[i : i + 2] for i in range(0, len(body), 2)]
    else:
        chunks = [messages]
    new = 0
    for chunk in chunks:
        if cfg.dedupe and not counts.new(chunk):
            continue
        out.write(json.dumps({"messages": chunk, "tools": _tools(source)}, ensure_ascii=False) + "\n")
        new += 1
    if new == 0:
        counts.dropped["duplicate"] += 1
        return
    counts.sft_episodes += 1
    counts.sft_examples += new


def _write_pairs(
    out: Any,
    sources: list[_Source],
    groups: dict[str, list[tuple[float, int, int]]],
    cfg: DataConfig,
    counts: _Counts,
) -> None:
    """Pair the k-th best with the k-th worst episode of each task, reading the two lines again by their offsets."""

    def record(ref: tuple[float, int, int]) -> tuple[_Source, EpisodeRecord]:
        source = sources[ref[1]]
        return source, _usable(parse_line(read_line_at(source.path, ref[2], MAX_LINE_BYTES)))

    for group in groups.values():
        if len(group) < 2:
            counts.skips["task played once"] += 1
            continue
        ranked = sorted(group, key=lambda ref: -ref[0])  # stable: input order breaks ties
        for k in range(cfg.pairs_per_task):
            if k >= len(ranked) - 1 - k:
                break
            if ranked[k][0] - ranked[-1 - k][0] <= cfg.min_margin:
                counts.skips["rewards tie (within min_margin)"] += 1
                break
            try:
                (best_source, best), (worst_source, worst) = record(ranked[k]), record(ranked[-1 - k])
            except (OSError, ValueError):  # the file changed since it was read
                counts.skips["episode changed on disk"] += 1
                continue
            chosen, rejected = _messages(best_source, best, cfg), _messages(worst_source, worst, cfg)
            first = next(i for i, m in enumerate(chosen) if m["role"] == "assistant")
            if chosen[:first] != rejected[:first]:
                counts.skips["prompts differ"] += 1
                continue
            pair = {
                "chosen": chosen,
                "rejected": rejected,
                "chosen_reward": best.total_reward,
                "rejected_reward": worst.total_reward,
                "reset": best.reset,
            }
            if cfg.dedupe and not counts.new(pair):
                counts.skips["duplicate"] += 1
                continue
            out.write(json.dumps(pair, ensure_ascii=False) + "\n")
            counts.pairs += 1


def format_report(report: DataReport) -> str:
    """The report as Markdown."""
    lines = [
        "# Data from episodes",
        "",
        "| input | env | kind | lines | episodes | bad lines |",
        "|---|---|---|---:|---:|---:|",
    ]
    for path, c in report.inputs.items():
        lines.append(f"| {path} | {c['env_id']} | {c['kind']} | {c['lines']} | {c['episodes']} | {c['bad_lines']} |")
    rate = (
        "" if report.sft_success_rate is None else f" ({report.sft_success_rate:.0%} of the finished ones successful)"
    )
    lines += [
        "",
        f"**SFT**: {report.sft_episodes} of {report.episodes} episodes kept{rate}, {report.sft_examples} examples "
        "→ `sft.jsonl`.",
    ]
    lines += [f"- dropped, {reason}: {n}" for reason, n in sorted(report.dropped.items())]
    lines += ["", f"**Pairs**: {report.pairs} from {report.tasks} tasks → `pairs.jsonl`."]
    lines += [f"- not made, {reason}: {n}" for reason, n in sorted(report.pair_skips.items())]
    if report.bad_lines:
        lines += ["", f"**Bad lines**: {report.bad_lines} skipped.", *[f"- {e}" for e in report.errors]]
    return "\n".join(lines)
