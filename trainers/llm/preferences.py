"""Preference pairs: two transcripts of the same task, one preferred — what reward models and DPO learn from.

A :class:`PreferencePair` is TRL's *prompt-free conversational* form: ``chosen`` and ``rejected``
are whole chat transcripts (``[{"role": ..., "content": ...}, ...]``) that start with the same
prompt — the messages before the first assistant turn — and differ after it. Optional:
``chosen_reward``/``rejected_reward`` (the env's total rewards), ``reset`` (the ``env.reset``
arguments of the task) and, for pairs played here, each episode's token-level
:class:`~agentgym.trainers.llm.rollout.Sample`\\ s, so DPO scores a response in exactly the context the
policy wrote it in (with ``context="summary"`` every turn is its own short sample).

Pairs from env rollouts (:func:`preference_pairs_from_rollouts`): each of ``tasks`` task instances
is played ``generations`` times with the same ``reset`` (same env seed and task index), sampling
at ``rollout_config.temperature``. In each such group, episodes are ranked by total reward and

    pair k = (k-th best episode, k-th worst episode),   k = 0 … pairs_per_group − 1,

kept only when the two rewards differ (ties teach nothing) and the two are different episodes;
ties in the ranking are broken by play order. ``pairs_per_group=1`` is *best vs worst*.

Pairs from a file (:func:`read_pairs` / :func:`write_pairs`): JSON Lines, one pair a line::

    {"chosen": [messages], "rejected": [messages], "chosen_reward": 1.5, "rejected_reward": 0.0}

The rewards (and ``"reset"``) are optional. TRL's explicit-prompt form, ``{"prompt": [messages],
"chosen": [assistant messages], "rejected": [...]}``, is read too (the prompt is prepended to both),
as are TRL's ``score_chosen``/``score_rejected``; other keys are ignored.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from pydantic import Field

from agentgym.core import task_info
from agentgym.core.registration import make_env
from agentgym.trainers.llm.config import EnvConfig
from agentgym.trainers.llm.rollout import Episode, RolloutConfig, Sample, random_resets, rollout
from agentgym.trainers.models.policy import LLMPolicy

__all__ = [
    "NoPreferencePairs",
    "PairsConfig",
    "rollout_pairs",
    "PreferencePair",
    "check_model_path",
    "pairs_from_episodes",
    "preference_pairs_from_rollouts",
    "read_pairs",
    "split_pairs",
    "write_pairs",
]

Messages = list[dict[str, str]]


@dataclass
class PreferencePair:
    """Two transcripts of one task: ``chosen`` is preferred to ``rejected``.

    ``chosen_samples``/``rejected_samples`` are the token sequences the episodes were played with
    (set by :func:`preference_pairs_from_rollouts`; ``None`` for pairs read from a file).
    """

    chosen: Messages
    rejected: Messages
    chosen_reward: float | None = None
    rejected_reward: float | None = None
    reset: dict[str, Any] | None = None
    chosen_samples: list[Sample] | None = field(default=None, repr=False, compare=False)
    rejected_samples: list[Sample] | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The JSONL record (messages, and the rewards and reset when known)."""
        record: dict[str, Any] = {"chosen": self.chosen, "rejected": self.rejected}
        if self.chosen_reward is not None:
            record["chosen_reward"] = self.chosen_reward
        if self.rejected_reward is not None:
            record["rejected_reward"] = self.rejected_reward
        if self.reset is not None:
            record["reset"] = self.reset
        return record


# ---------------------------------------------------------------------- from episodes


def pairs_from_episodes(
    episodes: Sequence[Episode],
    generations: int,
    *,
    pairs_per_group: int = 1,
    system_prompt: str | None = None,
) -> list[PreferencePair]:
    """Pair episodes within consecutive groups of ``generations`` (one task each): k-th best vs k-th worst.

    A pair is kept only when its rewards differ; groups whose rewards all tie give none.
    """
    if generations < 2 or len(episodes) % generations:
        raise ValueError(f"{len(episodes)} episodes do not form groups of {generations} (need ≥ 2 per group)")
    pairs = []
    for start in range(0, len(episodes), generations):
        group = episodes[start : start + generations]
        ranked = sorted(range(len(group)), key=lambda i: -group[i].total_reward)  # stable: play order breaks ties
        for k in range(pairs_per_group):
            best, worst = group[ranked[k]], group[ranked[-1 - k]]
            if k >= len(group) - 1 - k or best.total_reward == worst.total_reward:
                break
            pairs.append(
                PreferencePair(
                    chosen=best.transcript(system_prompt),
                    rejected=worst.transcript(system_prompt),
                    chosen_reward=best.total_reward,
                    rejected_reward=worst.total_reward,
                    reset=best.reset,
                    chosen_samples=best.samples,
                    rejected_samples=worst.samples,
                )
            )
    return pairs


def preference_pairs_from_rollouts(
    policy: LLMPolicy,
    env_id: str,
    *,
    env_kwargs: dict[str, Any] | None = None,
    split: str | None = "train",
    rollout_config: RolloutConfig | None = None,
    tasks: int = 64,
    generations: int = 4,
    pairs_per_group: int = 1,
    seed: int = 0,
    batch_size: int = 64,
) -> list[PreferencePair]:
    """Play ``generations`` sampled episodes of each of ``tasks`` task instances; pair best vs worst per task.

    Task instances are :func:`~agentgym.trainers.llm.rollout.random_resets` drawn from ``seed`` (an env
    seed, and a task index for envs with a task list); every episode of a group resets identically.
    Returns at most ``tasks × pairs_per_group`` pairs (fewer when groups tie); see the module
    docstring for the rule.
    """
    config = rollout_config or RolloutConfig()
    if generations < 2:
        raise ValueError(f"generations must be at least 2 to compare episodes of a task (got {generations})")
    if pairs_per_group < 1 or 2 * pairs_per_group > generations:
        raise ValueError(f"pairs_per_group must be between 1 and generations // 2 = {generations // 2}")
    per_batch = max(generations, batch_size // generations * generations)  # whole groups per batch
    envs = [make_env(env_id, split, env_kwargs) for _ in range(min(per_batch, tasks * generations))]
    num_tasks = task_info(envs[0]).num_tasks
    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    resets = [reset for reset in random_resets(rng, tasks, num_tasks) for _ in range(generations)]
    episodes: list[Episode] = []
    try:
        for start in range(0, len(resets), per_batch):
            chunk = resets[start : start + per_batch]
            episodes += rollout(policy, envs[: len(chunk)], chunk, config, generator=generator)
    finally:
        for env in envs:
            env.close()
    return pairs_from_episodes(
        episodes, generations, pairs_per_group=pairs_per_group, system_prompt=config.system_prompt
    )


class PairsConfig(EnvConfig):
    """Where a preference trainer's pairs come from: a JSONL file, or rollouts of an env (best vs worst per task).

    The env fields (:class:`~agentgym.trainers.llm.config.EnvConfig`) say what the rollouts play;
    ``rollout.temperature`` samples the pairs. The reward-model and DPO configs extend it.
    """

    data: str | None = Field(
        None, description="JSONL of preference pairs (see agentgym.trainers.llm.preferences); None: play env rollouts."
    )
    tasks: int = Field(256, ge=1, description="Task instances played for rollout pairs (DPO: per round).")
    generations: int = Field(4, ge=2, description="Episodes per task instance; its best and worst make a pair.")
    pairs_per_group: int = Field(1, ge=1, description="Pairs per task: k-th best vs k-th worst, k < this.")


class NoPreferencePairs(ValueError):
    """Every group of rollouts tied on reward, so there is no preferred episode to learn from."""


def rollout_pairs(policy: LLMPolicy, config: PairsConfig, seed: int) -> list[PreferencePair]:
    """:func:`preference_pairs_from_rollouts` with ``config``'s settings; :class:`NoPreferencePairs` if every
    group tied."""
    pairs = preference_pairs_from_rollouts(
        policy,
        config.env_id,
        env_kwargs=config.env_kwargs,
        split=config.train_split,
        rollout_config=config.rollout,
        tasks=config.tasks,
        generations=config.generations,
        pairs_per_group=config.pairs_per_group,
        seed=seed,
    )
    if not pairs:
        raise NoPreferencePairs(
            f"no preference pairs: in all {config.tasks} tasks the {config.generations} episodes tied on reward; "
            "play more tasks or generations, or sample at a higher rollout.temperature"
        )
    return pairs


def split_pairs(
    pairs: Sequence[PreferencePair], eval_fraction: float, seed: int = 0
) -> tuple[list[PreferencePair], list[PreferencePair]]:
    """Shuffle with ``seed`` and hold out ``round(eval_fraction × n)`` pairs: ``(train, held_out)``."""
    order = list(pairs)
    random.Random(seed).shuffle(order)
    n_eval = round(eval_fraction * len(order))
    if eval_fraction > 0 and len(order) >= 2:
        n_eval = min(max(n_eval, 1), len(order) - 1)
    return order[n_eval:], order[:n_eval]


# ---------------------------------------------------------------------- JSON Lines


def write_pairs(pairs: Sequence[PreferencePair], path: str | Path) -> Path:
    """Write ``pairs`` as JSON Lines (see the module docstring); token samples are not written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(p.to_json(), ensure_ascii=False) + "\n" for p in pairs)
    path.write_text(text, encoding="utf-8")
    return path


def read_pairs(path: str | Path) -> list[PreferencePair]:
    """Read a JSONL file of preference pairs; a malformed line raises ``ValueError`` naming it and the fault."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no preference-pairs file at {path}")
    pairs = []
    for n, raw in enumerate(path.read_bytes().splitlines(), 1):
        if not raw.strip():
            continue
        try:
            pairs.append(_parse_pair(raw.decode("utf-8")))  # UnicodeDecodeError is a ValueError
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: {exc}") from None
    if not pairs:
        raise ValueError(f"{path}: no preference pairs in the file")
    return pairs


def _parse_pair(line: str) -> PreferencePair:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object with 'chosen' and 'rejected', got {type(record).__name__}")
    prompt = _messages(record, "prompt") if "prompt" in record else []
    chosen = prompt + _messages(record, "chosen")
    rejected = prompt + _messages(record, "rejected")
    for name, messages in (("chosen", chosen), ("rejected", rejected)):
        if not any(m["role"] == "assistant" for m in messages):
            raise ValueError(f"'{name}' has no assistant message: there is no response to prefer")
    if _prompt_of(chosen) != _prompt_of(rejected):
        raise ValueError("'chosen' and 'rejected' start differently: the messages before the first assistant turn")
    rewards = {}
    for key, alias in (("chosen_reward", "score_chosen"), ("rejected_reward", "score_rejected")):
        value = record.get(key, record.get(alias))
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError(f"'{key}' must be a number, got {value!r}")
        rewards[key] = None if value is None else float(value)
    reset = record.get("reset")
    if reset is not None and not isinstance(reset, dict):
        raise ValueError(f"'reset' must be an object (env.reset keyword arguments), got {reset!r}")
    return PreferencePair(chosen, rejected, reset=reset, **rewards)


def _messages(record: dict[str, Any], key: str) -> Messages:
    value = record.get(key)
    if value is None:
        raise ValueError(f"missing '{key}' (a list of chat messages)")
    if not isinstance(value, list) or not value:
        raise ValueError(f"'{key}' must be a non-empty list of chat messages, got {json.dumps(value)[:60]}")
    for i, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ValueError(f"{key}[{i}] must be an object with a string 'role', got {json.dumps(message)[:60]}")
        if not isinstance(message.get("content"), str):
            raise ValueError(f"{key}[{i}] ({message['role']}) has no string 'content'")
    return [{"role": m["role"], "content": m["content"]} for m in value]


def _prompt_of(messages: Messages) -> Messages:
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return messages[:first]


# ---------------------------------------------------------------------- start-up checks

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def check_model_path(path: str | Path, what: str = "model") -> None:
    """Fail fast, with one message, when ``path`` is neither a saved model directory nor a hub id."""
    p = Path(path).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise FileNotFoundError(f"{what} directory {p} has no config.json (expected a save_pretrained directory)")
        return
    local = p.exists() or Path(str(path).split("/")[0]).expanduser().exists() or str(path).startswith((".", "~"))
    if local or not _HUB_ID.match(str(path)):
        raise FileNotFoundError(f"no {what} at {path}: expected a directory written by save_pretrained or a hub id")
