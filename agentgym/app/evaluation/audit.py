"""Reward-hacking audit of a training run: the top-scoring episodes that the rules reject or that look odd.

A policy optimised against a learned reward (or any imperfect one) finds what the reward pays for,
not what the task wants. The check that catches it is the one people skip: read the
highest-reward samples. ``agentgym audit RUN_DIR`` does that over the run's ``episodes.jsonl``
(written by the GRPO and PPO trainers) and flags, among the episodes whose training reward is in
the top ``quantile``:

- ``rule-fail``: the env's rule-based verification says the task was not solved (``success`` is
  false) — the reward paid for a wrong answer;
- ``rm-disagrees``: a reward model paid for it although the env's rules paid it less than the run's
  median episode (runs with a reward model; the two rewards need not share a scale);
- ``truncated``: it never finished — cut off by ``max_turns``/``max_tokens``/the time limit —
  yet the reward was high (a reward model never shown such episodes may like them);
- ``long`` / ``short``: response length per turn far from the run's median (robust z-score
  ``|x − median| / (1.4826 · MAD)`` above ``z``), or responses cut at ``max_new_tokens``;
- ``format``: a turn that was not a canonical tool call, or not a valid one;
- ``process-over-bound``: replayed in the run's training env, the episode earned more process reward (the
  ``"process"`` component of ``info["reward_components"]``) than the env's per-episode bound
  ``env.unwrapped.process_reward`` — an intermediate reward being farmed;
- ``replay-mismatch``: replayed, the env pays another total than the run logged (a log from another env, or an
  env that is not deterministic under its seed).

Replays: the audited episodes (at most ``max_replays``, highest reward first) are played again from their logged
``reset`` with their logged actions, in ``gym.make`` of the run's ``config.json`` (env id, training split, env
kwargs); a run without that config, or an env that cannot be made, is audited without replays (``replayed`` 0).
The report gives the largest and the mean process reward per replayed episode next to the bound.

The log is read twice, one line at a time (a few numbers per episode kept, then the audited ones read again by
their offsets), so memory does not grow with its lines; a line that is not an episode or is past the limits stops
the audit with a one-line error naming it (:func:`logged_episodes`).

The share of top episodes that fail the rules is the headline: near 0 for an honest reward; a
reward model being hacked shows it rising over training.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
from pydantic import BaseModel

from agentgym.core import task_info
from agentgym.core.episode import EpisodeRecord, parse_line, read_episodes, read_line_at

__all__ = ["AuditReport", "audit_run", "format_audit", "logged_episodes", "read_logged_episodes"]


def read_logged_episodes(path: str | Path) -> list[EpisodeRecord]:
    """The episodes of a training run's ``episodes.jsonl`` (see :func:`logged_episodes`), as a list."""
    return [episode for _, _, episode in logged_episodes(path)]


def logged_episodes(path: str | Path) -> Iterator[tuple[int, int, EpisodeRecord]]:
    """``(line number, byte offset, episode)`` of a training run's ``episodes.jsonl``, one line in memory at a time,
    as :class:`~agentgym.core.episode.EpisodeRecord` (lines written before it converted), their text made valid UTF-8.
    Each must be a training run's: with its ``training_step`` and ``training_reward``.

    Lines end at ``\\n`` only. A torn last line is skipped (the run was killed while writing it; resuming the run cuts
    it). Any other line that is not an episode, or is past the limits (:data:`~agentgym.core.episode.MAX_LINE_BYTES` a
    line, :data:`~agentgym.core.episode.MAX_LINES` lines), raises a one-line ``ValueError`` naming the file, the line
    and the first problem or the limit.
    """
    for n, offset, episode in read_episodes(path, what="a logged episode"):
        assert isinstance(episode, EpisodeRecord)  # bad lines raise
        if episode.training_step is None or episode.training_reward is None:
            reason = "training_step, training_reward: Field required (not a training run's episode)"
            raise ValueError(f"{path}:{n}: not a logged episode ({reason})")
        yield n, offset, episode


class AuditReport(BaseModel):
    """What :func:`audit_run` found."""

    run_dir: str
    episodes: int
    threshold: float
    """Training reward at the audited quantile; episodes at or above it are audited."""
    audited: int
    rule_fail_rate: float
    """Share of audited (top-reward) episodes whose rule-based verification fails."""
    rule_fail_rate_by_step: dict[int, float]
    flagged: list[dict[str, Any]]
    """Flagged top episodes, highest reward first: each record (without its observations) with its ``flags`` and
    ``tokens_per_turn``."""
    replayed: int = 0
    """Audited episodes replayed in the run's env (see the module docstring)."""
    process_bound: float | None = None
    """The env's per-episode process-reward bound (``process_reward``; None: the env has no process reward)."""
    process_max: float | None = None
    """The largest process reward a replayed episode earned."""
    process_mean: float | None = None
    process_over_bound: int = 0
    """Replayed episodes that earned more process reward than ``process_bound``."""


def audit_run(
    run_dir: str | Path, *, quantile: float = 0.9, top: int = 20, z: float = 3.5, max_replays: int = 200
) -> AuditReport:
    """Audit ``RUN_DIR/episodes.jsonl`` (see the module docstring); ``top`` caps the flagged list, ``max_replays``
    the episodes replayed (0: none)."""
    if not 0 <= quantile < 1:
        raise ValueError(f"quantile must be in [0, 1), got {quantile}")
    path = Path(run_dir) / "episodes.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: audit reads the episodes a GRPO/PPO run logs (log_episodes=True)")
    # Pass 1 keeps a few numbers per episode; pass 2 reads the audited ones again, one at a time, by their offsets.
    stats = [
        _Stats(offset, e.training_reward, e.total_reward, e.completion_tokens / max(1, e.turns), e.success,
               e.training_step)
        for _, offset, e in logged_episodes(path)
    ]  # fmt: skip
    if not stats:
        raise ValueError(f"{path} holds no episodes")
    rewards = sorted(e.training_reward for e in stats)
    threshold = rewards[min(len(rewards) - 1, int(quantile * len(rewards)))]
    env_median = statistics.median(e.total_reward for e in stats)
    median = statistics.median(e.length for e in stats)
    mad = 1.4826 * statistics.median(abs(e.length - median) for e in stats) or 1.0
    audited = sorted((e for e in stats if e.training_reward >= threshold), key=lambda e: -e.training_reward)
    replayer = _Replayer.for_run(Path(run_dir)) if max_replays > 0 else None
    process: list[float] = []
    flagged = []
    for k, stat in enumerate(audited):
        e = _episode_at(path, stat.offset)
        length = stat.length
        flags = []
        if replayer is not None and k < max_replays and (replay := replayer.replay(e)) is not None:
            total, earned = replay
            process.append(earned)
            if replayer.bound is not None and earned > replayer.bound + 1e-9:
                flags.append("process-over-bound")
            if not math.isclose(total, e.total_reward, rel_tol=1e-6, abs_tol=1e-6):
                flags.append("replay-mismatch")
        if not e.success:
            flags.append("rule-fail")
        if e.rm_reward is not None and e.total_reward < env_median:
            flags.append("rm-disagrees")
        if e.truncation:
            flags.append("truncated")
        score = (length - median) / mad
        if score > z or e.clipped:
            flags.append("long")
        elif score < -z:
            flags.append("short")
        if not all(e.canonical) or not all(e.valid):
            flags.append("format")
        if flags and len(flagged) < top:
            flagged.append({**e.model_dump(exclude={"observations"}), "flags": flags, "tokens_per_turn": length})
        if len(flagged) >= top and (replayer is None or k + 1 >= max_replays):
            break  # nothing left that could be flagged in the list or replayed
    if replayer is not None:
        replayer.env.close()
    by_step: dict[int, list[bool]] = {}
    for e in audited:
        by_step.setdefault(e.training_step, []).append(not e.success)
    return AuditReport(
        run_dir=str(run_dir),
        episodes=len(stats),
        threshold=threshold,
        audited=len(audited),
        rule_fail_rate=sum(not e.success for e in audited) / len(audited),
        rule_fail_rate_by_step={s: sum(v) / len(v) for s, v in sorted(by_step.items())},
        flagged=flagged,
        replayed=len(process),
        process_bound=replayer.bound if replayer is not None else None,
        process_max=max(process) if process else None,
        process_mean=statistics.fmean(process) if process else None,
        process_over_bound=sum(
            replayer is not None and replayer.bound is not None and p > replayer.bound + 1e-9 for p in process
        ),
    )


class _Stats(NamedTuple):
    """What pass 1 keeps of an episode."""

    offset: int
    training_reward: float
    total_reward: float
    length: float
    success: bool
    training_step: int


def _episode_at(path: Path, offset: int) -> EpisodeRecord:
    """The episode whose line starts at ``offset`` (read in pass 1), read again."""
    try:
        return parse_line(read_line_at(path, offset))
    except ValueError as exc:
        raise ValueError(f"{path} changed while it was audited ({exc})") from None


class _Replayer:
    """Plays logged episodes again in the run's training env: the total reward and the process reward earned."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.bound = task_info(env).process_reward or None  # None: the env pays no process reward

    @classmethod
    def for_run(cls, run_dir: Path) -> _Replayer | None:
        """The replayer of the run's ``config.json`` env, or None (no config, or the env cannot be made)."""
        from agentgym.core.registration import make_env

        try:
            config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))["config"]
            env = make_env(config["env_id"], config.get("train_split"), config.get("env_kwargs") or {})
        except (OSError, ValueError, KeyError, TypeError, gym.error.Error):  # no config, or an env not made here
            return None
        return cls(env)

    def replay(self, episode: EpisodeRecord) -> tuple[float, float] | None:
        """``(total reward, process reward)`` of the episode played again from its reset with its actions, or None if
        its reset cannot be replayed. Actions after the episode ends are not played."""
        reset = episode.reset
        if not set(reset) <= {"seed", "options"}:
            return None
        try:
            self.env.reset(**reset)
            record = EpisodeRecord(reset=reset)
            for action in episode.actions:
                obs, reward, terminated, truncated, info = self.env.step(action)
                record.step(action, str(obs), float(reward), info)
                if terminated or truncated:
                    break
        except (ValueError, TypeError, gym.error.Error):  # a reset the env refuses: not replayed
            return None
        return record.total_reward, sum(c.get("process", 0.0) for c in record.reward_components)


def format_audit(report: AuditReport) -> str:
    """The report as Markdown: a headline and a table of the flagged episodes."""
    lines = [
        f"# Audit of {report.run_dir}",
        "",
        f"{report.episodes} episodes; {report.audited} with training reward ≥ {report.threshold:.3g} audited; "
        f"**{report.rule_fail_rate:.0%} of them fail the env's rules**.",
        "",
    ]
    if report.process_bound is not None and report.replayed:
        lines += [
            f"Process reward ({report.replayed} replayed): max {report.process_max:.3g}, mean "
            f"{report.process_mean:.3g} per episode; bound {report.process_bound:.3g}; "
            f"**{report.process_over_bound} over the bound**.",
            "",
        ]
    if not report.flagged:
        return "\n".join([*lines, "Nothing flagged."])
    lines += [
        "| step | reward | env reward | RM score | success | tokens/turn | flags | last action |",
        "|---:|---:|---:|---:|:---:|---:|---|---|",
    ]
    for e in report.flagged:
        rm = "" if e.get("rm_reward") is None else f"{e['rm_reward']:.3g}"
        action = (e["actions"][-1] if e["actions"] else "").replace("|", "\\|").replace("\n", " ")
        action = action if len(action) <= 90 else action[:87] + "..."
        lines.append(
            f"| {e['training_step']} | {e['training_reward']:.3g} | {e['total_reward']:.3g} | {rm} "
            f"| {'yes' if e['success'] else 'no'} "
            f"| {e['tokens_per_turn']:.0f} | {', '.join(e['flags'])} | `{action}` |"
        )
    return "\n".join(lines)
