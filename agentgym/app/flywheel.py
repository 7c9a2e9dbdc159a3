"""The data flywheel: logged episodes become training data — SFT transcripts, preference pairs and a report.

``agentgym data EPISODES.jsonl [...] --out DIR`` (:func:`build_data`) reads any ``episodes.jsonl``:

- from ``agentgym eval`` of any agent (``random``, ``oracle``, ``hf:``, an ``openai:`` endpoint, ...); the env comes
  from ``run.json`` beside it;
- from training (GRPO, LLM PPO); the env comes from ``config.json`` beside it.

Every line is an :class:`~agentgym.episode.EpisodeRecord` with its observations (lines written before it are
converted; a training log of that time kept no observations, so its episodes are dropped as ``no observations``).

``--env ID`` names the env of files with neither (and keeps only that env's episodes of the others). It writes:

- ``DIR/sft.jsonl`` — what ``agentgym train sft --set data=DIR/sft.jsonl`` reads: one ``{"messages": [...],
  "tools": [...]}`` per line (the tools are the env's OpenAI-style schemas, as rollouts pass them to the chat
  template). Kept: successful episodes (``info["success"]``) played to their end, with filters ``min_reward``
  (total reward), ``max_turns`` and ``dedupe`` (identical transcripts once);
- ``DIR/pairs.jsonl`` — what ``agentgym train dpo`` / ``reward-model --set data=DIR/pairs.jsonl`` read
  (:mod:`agentgym.trainers.preferences`): ``{"chosen", "rejected", "chosen_reward", "rejected_reward", "reset"}``.
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
reason naming the file and line (the first :data:`SHOWN_ERRORS` are in the report).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentgym.app.reports import error_line, write_json
from agentgym.core import ToolEnv, valid_utf8
from agentgym.episode import EpisodeRecord
from agentgym.registration import make_env, split_kwargs

__all__ = [
    "MAX_LINES",
    "MAX_LINE_BYTES",
    "DataConfig",
    "DataReport",
    "build_data",
    "format_report",
    "read_episode_lines",
]

MAX_LINE_BYTES = 4 * 2**20
"""The longest line read (4 MiB: an episode of 12 turns of 16 k-character observations is ~200 KB)."""
MAX_LINES = 200_000
"""Lines read per file; the rest are skipped (and reported)."""
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


def read_episode_lines(path: Path) -> Iterator[tuple[int, bytes | str]]:
    """``(line number, raw line)`` of a file, or ``(n, reason)`` for a line past the limits, at most
    :data:`MAX_LINES` lines of :data:`MAX_LINE_BYTES` bytes; memory is bounded by one line."""
    with path.open("rb") as f:
        n = 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            n += 1
            if n > MAX_LINES:
                yield n, f"more than {MAX_LINES:,} lines: the rest of the file was not read"
                return
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while (more := f.readline(MAX_LINE_BYTES)) and not more.endswith(b"\n"):  # skip the rest of it
                    pass
                yield n, f"longer than {MAX_LINE_BYTES:,} bytes"
                continue
            if raw.strip():
                yield n, raw


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
    dropped: dict[str, int] = defaultdict(int)
    skips: dict[str, int] = defaultdict(int)
    errors: list[str] = []
    bad = 0
    per_file: dict[str, dict[str, Any]] = {}
    episodes: list[tuple[_Source, EpisodeRecord]] = []
    try:
        for source in sources:
            counts = {"env_id": source.env_id, "kind": source.kind, "lines": 0, "episodes": 0, "bad_lines": 0}
            per_file[str(source.path)] = counts
            if cfg.env_id is not None and source.env_id != cfg.env_id:
                dropped["another env"] += sum(1 for _ in read_episode_lines(source.path))
                continue
            for n, raw in read_episode_lines(source.path):
                counts["lines"] += 1
                try:
                    if isinstance(raw, str):  # a line past the limits: the reason
                        raise ValueError(raw)
                    record = _episode(raw)
                except ValueError as exc:
                    reason = str(exc)
                    if reason.startswith("dropped: "):
                        dropped[reason.removeprefix("dropped: ")] += 1
                        continue
                    bad += 1
                    counts["bad_lines"] += 1
                    if len(errors) < SHOWN_ERRORS:
                        errors.append(f"{source.path}:{n}: {reason}")
                    continue
                counts["episodes"] += 1
                episodes.append((source, record))
        sft, kept = _sft_examples(episodes, cfg, dropped)
        pairs, tasks = _pairs(episodes, cfg, skips)
    finally:
        for source in sources:
            source.close()
    out.mkdir(parents=True, exist_ok=True)
    (out / "sft.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sft), encoding="utf-8")
    (out / "pairs.jsonl").write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8")
    finished = [r for _, r in episodes if r.error is None]
    report = DataReport(
        inputs=per_file,
        episodes=len(episodes),
        sft_episodes=kept,
        sft_examples=len(sft),
        dropped=dict(dropped),
        tasks=tasks,
        pairs=len(pairs),
        pair_skips=dict(skips),
        bad_lines=bad,
        errors=errors,
        sft_success_rate=sum(r.success for r in finished) / len(finished) if finished else None,
    )
    write_json(out / "report.json", report)
    (out / "report.md").write_text(format_report(report) + "\n", encoding="utf-8")
    return report


def _check_template(template: str) -> None:
    try:
        template.format(observation="", summary="", signatures="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"turn_template {template!r} is not a template of {{observation}}, {{summary}}, {{signatures}} "
            f"({error_line(exc)})"
        ) from None


def _episode(raw: bytes) -> EpisodeRecord:
    """One line as an episode with its observations; ``ValueError`` with the reason."""
    try:
        data = json.loads(raw.rstrip(b"\r\n").decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object (an episode), got {type(data).__name__}")
    try:
        record = EpisodeRecord.from_line(data)
    except ValidationError as exc:
        raise ValueError(f"not an episode ({error_line(exc)})") from None
    if not record.observations and record.turns:
        raise ValueError("dropped: no observations (a training log written before they were kept)")
    if len(record.observations) != record.turns + 1 or len(record.rewards) != record.turns:
        raise ValueError(
            f"{record.turns} actions need {record.turns + 1} observations and {record.turns} rewards, got "
            f"{len(record.observations)} and {len(record.rewards)}"
        )
    return record.model_copy(update={"observations": [valid_utf8(o) for o in record.observations]})


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
    from agentgym.trainers.rollout import signatures

    return signatures(_tools(source))


def _tools(source: _Source) -> list[dict[str, Any]]:
    base = source.env.unwrapped
    return [t.schema for t in base.tools.values()] if isinstance(base, ToolEnv) else []


def _sft_examples(
    episodes: list[tuple[_Source, EpisodeRecord]], cfg: DataConfig, dropped: dict[str, int]
) -> tuple[list[dict[str, Any]], int]:
    examples, seen, kept = [], set(), 0
    for source, record in episodes:
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
            dropped[reason] += 1
            continue
        messages = _messages(source, record, cfg)
        if cfg.context == "summary":  # one example a turn: the system prompt, the turn's user message, the action
            head = messages[:1] if cfg.system_prompt else []
            body = messages[len(head) :]
            chunks = [head + body[i : i + 2] for i in range(0, len(body), 2)]
        else:
            chunks = [messages]
        new = 0
        for chunk in chunks:
            key = json.dumps(chunk, sort_keys=True)
            if cfg.dedupe and key in seen:
                continue
            seen.add(key)
            examples.append({"messages": chunk, "tools": _tools(source)})
            new += 1
        if new == 0:
            dropped["duplicate"] += 1
            continue
        kept += 1
    return examples, kept


def _pairs(
    episodes: list[tuple[_Source, EpisodeRecord]], cfg: DataConfig, skips: dict[str, int]
) -> tuple[list[dict[str, Any]], int]:
    groups: dict[str, list[tuple[_Source, EpisodeRecord]]] = defaultdict(list)
    for source, record in episodes:
        if record.error is None and record.turns:
            groups[source.task_key(record.reset)].append((source, record))
    pairs, seen = [], set()
    for group in groups.values():
        if len(group) < 2:
            skips["task played once"] += 1
            continue
        ranked = sorted(group, key=lambda item: -item[1].total_reward)  # stable: input order breaks ties
        for k in range(cfg.pairs_per_task):
            if k >= len(ranked) - 1 - k:
                break
            (best_source, best), (worst_source, worst) = ranked[k], ranked[-1 - k]
            if best.total_reward - worst.total_reward <= cfg.min_margin:
                skips["rewards tie (within min_margin)"] += 1
                break
            chosen, rejected = _messages(best_source, best, cfg), _messages(worst_source, worst, cfg)
            first = next(i for i, m in enumerate(chosen) if m["role"] == "assistant")
            if chosen[:first] != rejected[:first]:
                skips["prompts differ"] += 1
                continue
            record = {
                "chosen": chosen,
                "rejected": rejected,
                "chosen_reward": best.total_reward,
                "rejected_reward": worst.total_reward,
                "reset": best.reset,
            }
            key = json.dumps(record, sort_keys=True)
            if cfg.dedupe and key in seen:
                skips["duplicate"] += 1
                continue
            seen.add(key)
            pairs.append(record)
    return pairs, len(groups)


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
