"""One episode record: what every part of agentgym writes for a played episode and reads back.

An :class:`EpisodeRecord` is one line of an ``episodes.jsonl`` — an evaluation's (``agentgym eval --out DIR``), a
training run's (GRPO, LLM PPO: ``RUN_DIR/episodes.jsonl``) or the MCP server's — and the base of the trainers'
in-memory rollout episode (which adds its token samples). The flywheel, the audit and the reports read it.

Per turn ``i`` (parallel lists): ``observations[i]`` is what the agent answered with ``actions[i]`` (the first
observation, then the one after every action, so there is one more observation than actions; ``summaries[i]`` is
the env's one-line state summary of ``observations[i]``, its ``info["summary"]``), ``rewards[i]`` and
``reward_components[i]`` what the step paid (``info["reward_components"]``), ``canonical[i]`` whether the call was
written in the canonical format, ``valid[i]`` whether its tool calls parsed and validated. The outcome is
``success``, ``terminated``, ``truncation`` (why the episode was cut, else None) and ``error`` (why it could not be
played to its end, else None). ``attempt`` is the attempt the episode ended in under the
:class:`~agentgym.wrappers.Retry` wrapper (its ``info["attempt"]``; 1 without it).

Files written before this record (an eval line without ``reward_components``; a training-log line with ``reward``,
``env_reward``, ``turns`` and ``response_tokens`` but no observations) are converted when
read (:meth:`EpisodeRecord.from_line`).
"""

from __future__ import annotations

import json
import math
import re
from typing import Annotated, Any

from pydantic import BaseModel, Field, computed_field

__all__ = ["EpisodeRecord", "components_of", "convert_old_line", "summary_of"]

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]

_OLD_RETRY_HEADER = re.compile(r"Attempt (\d+) of (\d+) failed\.")
"""How the Retry wrapper began a retry's observation; read only to convert eval lines written before ``attempt``."""


class EpisodeRecord(BaseModel):
    """One played episode: its task, per turn what was seen, done and paid, its outcome and token counts.

    See the module docstring for the per-turn lists. ``index`` is the episode's number in its run (an evaluation's
    episode ``i``; 0 where there is none), ``reset`` the ``env.reset`` arguments that chose its task (``seed`` and
    ``options``). Token counts are what the agent's endpoint or model reported (``completion_tokens``: the tokens
    the policy wrote; 0 for scripted and tabular agents). A training run's lines also carry ``training_step`` (the
    training step that played it), ``training_reward`` (the return the trainer optimised: env reward, reward-model
    score and penalties as it summed them), ``rm_reward`` (the reward model's score, if any) and ``clipped``
    (responses cut at the token limit).
    """

    index: int = Field(0, ge=0)
    reset: dict[str, Any] = Field(default_factory=dict)
    observations: list[str] = Field(default_factory=list)
    summaries: list[str] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)
    rewards: list[FiniteFloat] = Field(default_factory=list)
    reward_components: list[dict[str, float]] = Field(default_factory=list)
    canonical: list[bool] = Field(default_factory=list)
    valid: list[bool] = Field(default_factory=list)
    attempt: int = Field(1, ge=1)
    success: bool = False
    terminated: bool = False
    truncation: str | None = None
    error: str | None = None
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    training_step: int | None = Field(None, ge=0)
    training_reward: FiniteFloat | None = None
    rm_reward: FiniteFloat | None = None
    clipped: int = Field(0, ge=0)

    @computed_field
    @property
    def total_reward(self) -> float:
        """The episode's return in the env (the sum of ``rewards``)."""
        return math.fsum(self.rewards)

    @computed_field
    @property
    def turns(self) -> int:
        """How many actions the episode took."""
        return len(self.actions)

    def start(self, observation: str, info: dict[str, Any]) -> None:
        """Record the first observation and its ``info`` (as ``env.reset`` returns them)."""
        self.observations.append(observation)
        self.summaries.append(summary_of(info))

    def step(self, action: str, observation: str, reward: float, info: dict[str, Any]) -> None:
        """Append one env step (``info`` as ``ToolEnv.step`` returns it). A reward that is not a finite number raises
        ``ValueError`` before anything is appended (the record stays consistent)."""
        if not math.isfinite(reward := float(reward)):
            raise ValueError(f"the env returned the reward {reward} at turn {self.turns + 1}")
        self.actions.append(action)
        self.observations.append(observation)
        self.summaries.append(summary_of(info))
        self.rewards.append(reward)
        self.reward_components.append(components_of(info))
        self.canonical.append(bool(info.get("canonical", False)))
        self.valid.append(info.get("parse_error") is None and bool(info.get("tool_calls", True)))
        self.success = bool(info.get("success", False))
        self.attempt = int(info.get("attempt", self.attempt))

    def transcript(self, system_prompt: str | None = None) -> list[dict[str, str]]:
        """The episode as chat messages, ending with the last action (the env's verdict after it is left out)."""
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        for observation, action in zip(self.observations, self.actions, strict=False):
            messages += [{"role": "user", "content": observation}, {"role": "assistant", "content": action}]
        return messages

    def to_line(self) -> str:
        """The record as one JSON line (no newline), as ``episodes.jsonl`` files hold it."""
        return self.model_dump_json()

    @classmethod
    def from_line(cls, line: str | bytes | dict[str, Any]) -> EpisodeRecord:
        """A line of any ``episodes.jsonl``: today's, or one written before this record, converted (see
        :func:`convert_old_line`). Raises ``ValueError`` (pydantic's ``ValidationError``, ``JSONDecodeError``) if it
        is not an episode."""
        if not isinstance(line, str | bytes):
            return cls.model_validate(convert_old_line(line))
        record = cls.model_validate_json(line)  # pydantic's errors for what is not a record at all
        if "reward_components" in record.model_fields_set:
            return record
        return cls.model_validate(convert_old_line(json.loads(line)))  # written before this record


def convert_old_line(data: Any) -> Any:
    """A line written before :class:`EpisodeRecord` (it has no ``reward_components``) in today's form; others as
    they are.

    - an old training-log line (``step``, ``reward``, ``env_reward``, ``response_tokens``; no observations): the
      step becomes ``training_step``, ``reward`` ``training_reward``, ``response_tokens`` ``completion_tokens``; the
      log kept no per-turn rewards, so its return (``env_reward``) becomes the last turn's reward;
    - an old eval line: ``attempt`` is counted from the retry headers its observations began with (the Retry wrapper
      did not report it otherwise then), and ``summaries`` are its observations' ``State:`` lines.
    """
    if not isinstance(data, dict) or "reward_components" in data:
        return data
    data = {k: v for k, v in data.items() if k not in ("turns", "total_reward")}
    if "env_reward" in data:  # an old training-log line
        turns = len(data.get("actions") or [])
        env_reward = data.pop("env_reward")
        data["training_step"] = data.pop("step", None)
        data["training_reward"] = data.pop("reward", None)
        data["completion_tokens"] = data.pop("response_tokens", 0)
        data["rewards"] = [0.0] * (turns - 1) + [env_reward] if turns else []
    observations = data.get("observations")
    if isinstance(observations, list) and "attempt" not in data:
        data["attempt"] = 1 + sum(isinstance(o, str) and bool(_OLD_RETRY_HEADER.match(o)) for o in observations)
    if isinstance(observations, list) and "summaries" not in data:
        data["summaries"] = [_old_summary(o) for o in observations]
    rewards = data.get("rewards")
    data["reward_components"] = [{} for _ in rewards] if isinstance(rewards, list) else []
    return data


def _old_summary(observation: Any) -> str:
    last = observation.rsplit("\n", 1)[-1] if isinstance(observation, str) else ""
    return last.removeprefix("State: ") if last.startswith("State: ") else ""


def summary_of(info: dict[str, Any]) -> str:
    """A step's ``info["summary"]`` (the env's one-line state summary), or "" where the env gives none."""
    summary = info.get("summary")
    return summary if isinstance(summary, str) else ""


def components_of(info: dict[str, Any]) -> dict[str, float]:
    """A step's ``info["reward_components"]`` as plain floats ({} where the env reports none)."""
    components = info.get("reward_components")
    if not isinstance(components, dict):
        return {}
    return {str(k): float(v) for k, v in components.items() if isinstance(v, int | float)}
