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
- ``format``: a turn that was not a canonical tool call, or not a valid one.

The share of top episodes that fail the rules is the headline: near 0 for an honest reward; a
reward model being hacked shows it rising over training.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentgym.app.reports import error_line
from agentgym.core import valid_utf8

__all__ = ["AuditReport", "LoggedEpisode", "audit_run", "format_audit", "read_logged_episodes"]


class LoggedEpisode(BaseModel):
    """A line of a training run's ``episodes.jsonl``: what the audit reads (other fields are kept as they are)."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    step: int = Field(ge=0)
    reward: float
    """The training reward (env reward, reward model score and penalties, as the trainer summed them)."""
    env_reward: float
    rm_reward: float | None = None
    success: bool
    turns: int = Field(ge=0)
    response_tokens: int = Field(ge=0)
    canonical: list[bool] = []
    valid: list[bool] = []
    truncation: str | None = None
    clipped: int = Field(0, ge=0)
    actions: list[str] = []


def read_logged_episodes(path: str | Path) -> list[dict[str, Any]]:
    """The episodes of a training run's ``episodes.jsonl``, each checked as a :class:`LoggedEpisode`.

    Lines end at ``\\n`` only. A last line without its newline that is not a whole episode is skipped (the run was
    killed while writing it; resuming the run cuts it). Any other line that is not an episode raises a one-line
    ``ValueError`` naming the file, the line and the first problem.
    """
    path = Path(path)
    episodes = []
    with path.open("rb") as f:  # a binary file splits at b"\n" only, line by line
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                episode = LoggedEpisode.model_validate(json.loads(raw.rstrip(b"\r\n").decode("utf-8")))
            except ValueError as exc:  # UnicodeDecodeError, JSONDecodeError, pydantic's ValidationError
                if not raw.endswith(b"\n"):  # the last line, torn
                    break
                reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else error_line(exc)
                raise ValueError(f"{path}:{n}: not a logged episode ({reason})") from None
            episodes.append(_valid_text(episode.model_dump()))
    return episodes


def _valid_text(value: Any) -> Any:
    """``value`` with every string made valid UTF-8 (a JSON escape can spell a lone surrogate; printing it fails)."""
    if isinstance(value, str):
        return valid_utf8(value)
    if isinstance(value, dict):
        return {_valid_text(k): _valid_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_valid_text(v) for v in value]
    return value


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
    """Flagged top episodes, highest reward first, each with its ``flags``."""


def audit_run(run_dir: str | Path, *, quantile: float = 0.9, top: int = 20, z: float = 3.5) -> AuditReport:
    """Audit ``RUN_DIR/episodes.jsonl`` (see the module docstring); ``top`` caps the flagged list."""
    if not 0 <= quantile < 1:
        raise ValueError(f"quantile must be in [0, 1), got {quantile}")
    path = Path(run_dir) / "episodes.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: audit reads the episodes a GRPO/PPO run logs (log_episodes=True)")
    episodes = read_logged_episodes(path)
    if not episodes:
        raise ValueError(f"{path} holds no episodes")
    rewards = sorted(e["reward"] for e in episodes)
    threshold = rewards[min(len(rewards) - 1, int(quantile * len(rewards)))]
    env_median = statistics.median(e["env_reward"] for e in episodes)
    lengths = [e["response_tokens"] / max(1, e["turns"]) for e in episodes]
    median = statistics.median(lengths)
    mad = 1.4826 * statistics.median(abs(x - median) for x in lengths) or 1.0
    audited = [(e, n) for e, n in zip(episodes, lengths, strict=True) if e["reward"] >= threshold]
    flagged = []
    for e, length in sorted(audited, key=lambda item: -item[0]["reward"]):
        flags = []
        if not e["success"]:
            flags.append("rule-fail")
        if e.get("rm_reward") is not None and e["env_reward"] < env_median:
            flags.append("rm-disagrees")
        if e.get("truncation"):
            flags.append("truncated")
        score = (length - median) / mad
        if score > z or e.get("clipped"):
            flags.append("long")
        elif score < -z:
            flags.append("short")
        if not all(e.get("canonical", [])) or not all(e.get("valid", [])):
            flags.append("format")
        if flags:
            flagged.append({**e, "flags": flags, "tokens_per_turn": length})
    by_step: dict[int, list[bool]] = {}
    for e, _ in audited:
        by_step.setdefault(e["step"], []).append(not e["success"])
    return AuditReport(
        run_dir=str(run_dir),
        episodes=len(episodes),
        threshold=threshold,
        audited=len(audited),
        rule_fail_rate=sum(not e["success"] for e, _ in audited) / len(audited),
        rule_fail_rate_by_step={s: sum(v) / len(v) for s, v in sorted(by_step.items())},
        flagged=flagged[:top],
    )


def format_audit(report: AuditReport) -> str:
    """The report as Markdown: a headline and a table of the flagged episodes."""
    lines = [
        f"# Audit of {report.run_dir}",
        "",
        f"{report.episodes} episodes; {report.audited} with training reward ≥ {report.threshold:.3g} audited; "
        f"**{report.rule_fail_rate:.0%} of them fail the env's rules**.",
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
            f"| {e['step']} | {e['reward']:.3g} | {e['env_reward']:.3g} | {rm} | {'yes' if e['success'] else 'no'} "
            f"| {e['tokens_per_turn']:.0f} | {', '.join(e['flags'])} | `{action}` |"
        )
    return "\n".join(lines)
