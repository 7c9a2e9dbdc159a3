"""Multi-turn rollouts of a language model (or a scripted teacher) on agentgym text envs.

A batch of envs steps in lock-step: each turn, every unfinished episode gets a prompt, the policy
samples all responses in one batched call, and each env steps on its response. Finished episodes
drop out. The result is token ids the trainers use as they are — never re-tokenised:

- ``loss_mask`` is 1 on the tokens the policy wrote and 0 on everything the env or the chat
  template wrote, so env tokens never receive gradient;
- ``logprobs`` are the sampling log-probs of the policy's tokens (0 elsewhere).

Two context modes (``RolloutConfig.context``):

- ``"append"``: one growing transcript per episode (first observation, response, closing and
  observation tokens, response, ...), one training sample per episode.
- ``"summary"``: each turn's prompt is rebuilt as system prompt + ``turn_template`` filled with the
  task, the tools, the last ``history`` turns and the env's one-line state summary; each turn is
  its own sample and all of an episode's samples share its advantage. Context stays short however
  long the episode is. The parts come from the env's :class:`~agentgym.core.ObservationParts`
  (:func:`~agentgym.core.parts_of`), never from parsing its text; the history is the core's
  "last N turns" (:meth:`~agentgym.core.ObservationParts.with_history`, each turn
  ``"Action: …\\nResult: …\\n"``). An env that is not a ``ToolEnv`` gives no parts: its task and
  tools are empty, its summary is ``info["summary"]`` (else the observation) and a turn's result is
  the observation.

Budgets: ``max_turns`` and ``max_tokens`` end an episode early; such an episode is marked
``truncated`` with the reason in ``truncation`` (as is one the env's time limit cut off), and a
response cut at ``max_new_tokens`` is counted in ``Episode.clipped``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import gymnasium as gym
import torch
from pydantic import BaseModel, ConfigDict, Field, computed_field

from agentgym.core import Turn, parts_of, past_turn, recent_turns, task_info
from agentgym.core.episode import EpisodeRecord, outcome_rates
from agentgym.core.registration import eval_kwargs, eval_resets
from agentgym.core.summary import RolloutStats, RunConfig, RunSummary, env_facts, episode_tasks, summarize
from agentgym.core.tools import ToolCall
from agentgym.trainers.models.decoding import PrefixCache
from agentgym.trainers.models.policy import LLMPolicy

__all__ = [
    "Episode",
    "OracleTeacher",
    "RolloutConfig",
    "Sample",
    "collate",
    "episode_metrics",
    "evaluate_llm",
    "evaluate_split",
    "oracle_transcript",
    "random_resets",
    "rollout",
    "rollout_stats",
    "signatures",
]


class RolloutConfig(BaseModel):
    """How episodes are played and turned into token sequences."""

    model_config = ConfigDict(extra="forbid")

    context: Literal["append", "summary"] = Field(
        "append", description="append: one growing transcript per episode; summary: a fresh short prompt per turn."
    )
    history: int = Field(0, ge=0, description="summary mode: how many past turns the prompt shows.")
    turn_template: str = Field(
        "{task}\n\n{tools}\n\n{history}State: {summary}",
        description="summary mode: the user message of every turn; fields {task} {tools} {history} {summary}, "
        "{signatures} (the compact tool list: name(param, ...), ...) and {task_line} (the task's first line, e.g. "
        "SQLLookup's 'Question: …' without the instructions after it).",
    )
    system_prompt: str | None = Field(None, description="A system message before the first observation.")
    examples: list[dict[str, str]] = Field(
        default_factory=list,
        description="Few-shot turns: chat messages ({role, content}) between the system message and the first "
        "observation, e.g. an oracle transcript of another task (benchmarks/leaderboard_smollm2.py).",
    )
    max_turns: int | None = Field(None, ge=1, description="Stop an episode after this many actions (None: env limit).")
    max_new_tokens: int = Field(64, ge=1, description="Longest response per turn.")
    max_tokens: int = Field(2048, ge=8, description="Longest sequence (prompt + responses) a sample may reach.")
    temperature: float = Field(1.0, ge=0, description="Sampling temperature; 0 is greedy.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling mass.")


@dataclass
class Sample:
    """One training sequence: token ids, loss mask (1 = written by the policy) and sampling log-probs."""

    input_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    def extend(self, ids: Sequence[int], *, policy: bool, logprobs: Sequence[float] | None = None) -> None:
        self.input_ids.extend(ids)
        self.loss_mask.extend([int(policy)] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))


class Episode(EpisodeRecord):
    """One episode as it was played: the :class:`~agentgym.core.episode.EpisodeRecord` (what is logged) plus what only
    trainers use, its token ``samples`` and ``env_seconds``; ``Episode(reset)`` starts an empty one.

    ``observations`` holds the first observation and the observation after every action, so
    ``observations[i]`` is what the policy answered with ``actions[i]``. :meth:`record` is the episode without the
    trainer-only parts (what ``episodes.jsonl`` files hold).
    """

    samples: list[Any] = Field(default_factory=list, exclude=True)
    """The training sequences (:class:`Sample`): one per episode in append mode, one per turn in summary mode."""
    env_seconds: float = Field(0.0, exclude=True)
    """Time spent in the env's ``reset`` and ``step`` (tools, SQL, the sandbox), apart from generation."""

    def __init__(self, reset: dict[str, Any] | None = None, /, **data: Any) -> None:
        super().__init__(reset=reset or {}, **data)

    @computed_field
    @property
    def total_reward(self) -> float:
        """The episode's return in the env (``sum(rewards)``, in order, as the trainers' metrics always added it)."""
        return float(sum(self.rewards))

    @property
    def truncated(self) -> bool:
        return self.truncation is not None

    @property
    def used_tools(self) -> bool:
        """Whether the episode made a valid call that did not end it (a lookup, not only a final answer)."""
        last = self.turns - 1 if self.terminated else self.turns
        return any(self.valid[:last])

    @property
    def response_tokens(self) -> int:
        return sum(sum(s.loss_mask) for s in self.samples)

    def record(self, **fields: Any) -> EpisodeRecord:
        """The episode as an :class:`~agentgym.core.episode.EpisodeRecord` (``completion_tokens``: the tokens the policy
        wrote), with ``fields`` set (a training log's ``training_step``, ``training_reward``, ``rm_reward``)."""
        data = self.model_dump(exclude=set(self.model_computed_fields))  # derived again by the record
        return EpisodeRecord.model_validate({**data, "completion_tokens": self.response_tokens, **fields})


class OracleTeacher:
    """Plays each env's scripted oracle instead of sampling (demonstrations for SFT).

    ``randomize_decisions=True`` keeps the oracle's calls but not its decisions: each boolean
    argument becomes a coin flip (WeatherRun: ``suitable``; the ``reason`` with the numbers stays),
    and a call without one is replaced by a random action from the env's menu calling the same tool
    (SQLLookup and CodeSandbox: which candidate to run or submit). The demonstrations then teach
    the format and the order of calls, not the answer — so what RL adds afterwards is measurable.
    ``oracle_kwargs`` go to each env's ``oracle()`` (SQLLookup: ``{"run_query": False}``).
    """

    def __init__(
        self, randomize_decisions: bool = False, seed: int = 0, oracle_kwargs: dict[str, Any] | None = None
    ) -> None:
        self.randomize_decisions = randomize_decisions
        self.rng = random.Random(seed)
        self.oracle_kwargs = dict(oracle_kwargs or {})
        self._oracles: dict[int, Any] = {}

    def act(self, env: gym.Env, observation: str) -> str:
        base = env.unwrapped
        if id(base) not in self._oracles:
            self._oracles[id(base)] = base.oracle(**self.oracle_kwargs)
        oracle = self._oracles[id(base)]
        action, _ = oracle.predict(observation)
        if not self.randomize_decisions or not (calls := base.interpret(action).parse.calls):
            return action
        call = calls[0]
        if any(isinstance(v, bool) for v in call.arguments.values()):
            flipped = {k: self.rng.random() < 0.5 if isinstance(v, bool) else v for k, v in call.arguments.items()}
            return ToolCall(call.name, flipped).to_text()
        same = [a for a in base.action_menu() if (c := base.interpret(a).parse.calls) and c[0].name == call.name]
        return self.rng.choice(same) if len(same) > 1 else action


def oracle_transcript(env: gym.Env, reset: dict[str, Any] | None = None) -> list[dict[str, str]]:
    """One episode of ``env``'s scripted oracle (``env.reset(**reset)``) as chat messages — each observation a
    ``user`` message, each action an ``assistant`` one — ending with its last action (the outcome left out, as in
    :meth:`Episode.transcript`): a few-shot example for :attr:`RolloutConfig.examples`."""
    teacher = OracleTeacher()
    observation, _ = env.reset(**(reset or {}))
    messages: list[dict[str, str]] = []
    done = False
    while not done:
        action = teacher.act(env, observation)
        messages += [{"role": "user", "content": observation}, {"role": "assistant", "content": action}]
        observation, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    return messages


def signatures(schemas: Sequence[dict[str, Any]]) -> str:
    """The compact tool list of OpenAI-style tool schemas: ``get_weather(city), answer(suitable, reason)``."""
    functions = [s.get("function", s) for s in schemas]
    return ", ".join(f"{f['name']}({', '.join(f.get('parameters', {}).get('properties', {}))})" for f in functions)


class _Run:
    """The state of one episode while it is being played."""

    def __init__(self, env: gym.Env, reset: dict[str, Any], config: RolloutConfig, policy: LLMPolicy) -> None:
        self.env, self.config, self.policy = env, config, policy
        self.episode = Episode(reset)
        start = time.perf_counter()
        self.observation, info = env.reset(**reset)
        self.episode.env_seconds += time.perf_counter() - start
        self.episode.start(self.observation, info)
        self.tools = info.get("tools")
        self.signatures = signatures(self.tools or [])
        self.parts = parts_of(env)
        self.summary = self.parts.summary if self.parts else info.get("summary", self.observation)
        self.task = (self.parts.task or "") if self.parts else ""
        self.tools_text = (self.parts.tools or "") if self.parts and not policy.supports_tools else ""
        self.past: list[Turn] = []
        self.messages = [{"role": "system", "content": config.system_prompt}] if config.system_prompt else []
        self.messages += [dict(message) for message in config.examples]
        self.done = False
        if config.context == "append":
            self.messages.append({"role": "user", "content": self.observation})
            self.rendered = policy.render(self.messages, tools=self.tools, generation=True)
            self.episode.samples.append(Sample())
            self.episode.samples[0].extend(policy.encode(self.rendered), policy=False)

    def prompt(self) -> list[int] | None:
        """This turn's prompt ids, or None if the token budget is spent (the episode is then truncated)."""
        if self.config.context == "append":
            ids = self.episode.samples[0].input_ids
        else:
            history = "".join(turn.render() for turn in self._history())
            history += "\n" if history else ""
            text = self.config.turn_template.format(
                task=self.task,
                tools=self.tools_text,
                history=history,
                summary=self.summary,
                signatures=self.signatures,
                task_line=self.task.split("\n", 1)[0],
            )
            messages = self.messages + [{"role": "user", "content": text}]
            ids = self.policy.chat_ids(messages, tools=self.tools)
        if len(ids) + self.config.max_new_tokens > self.config.max_tokens:
            self.finish("max_tokens")
            return None
        return ids

    def _history(self) -> tuple[Turn, ...]:
        """The last ``config.history`` turns, as many as fit beside the env's latest observation in its
        ``max_observation_length`` (the same rule as ``ToolEnv(history=)``; no character limit without parts)."""
        if self.parts is None:
            return recent_turns(self.past, self.config.history)
        limit = self.env.unwrapped.max_observation_length
        return self.parts.with_history(self.past, self.config.history, limit).turns

    def record(self, prompt: list[int], ids: list[int], logprobs: list[float], stopped: bool) -> None:
        """Step the env on the response and append it (and, in append mode, the env's reply) to the sample."""
        policy, ep = self.policy, self.episode
        text = policy.decode(ids)
        start = time.perf_counter()
        obs, reward, terminated, truncated, info = self.env.step(text)
        ep.env_seconds += time.perf_counter() - start
        ep.step(text, obs, reward, info)
        ep.clipped += not stopped
        self.observation, self.parts = obs, parts_of(self.env)
        self.summary = self.parts.summary if self.parts else info.get("summary", obs)
        if self.config.context == "summary":
            result = self.parts.result if self.parts and self.parts.result is not None else obs
            self.past.append(past_turn(text, result))
            sample = Sample()
            sample.extend(prompt, policy=False)
            sample.extend(ids, policy=True, logprobs=logprobs)
            ep.samples.append(sample)
        else:
            ep.samples[0].extend(ids, policy=True, logprobs=logprobs)
        if terminated:
            ep.terminated = True
            self.done = True
        elif truncated:
            self.finish("time_limit")
        elif self.config.max_turns is not None and ep.turns >= self.config.max_turns:
            self.finish("max_turns")
        elif self.config.context == "append":
            self._append_observation(text, ids, obs)

    def _append_observation(self, content: str, ids: list[int], observation: str) -> None:
        """Append the template's end of the assistant turn and the env's message, as env tokens."""
        policy = self.policy
        before = self.rendered
        self.messages.append({"role": "assistant", "content": content})
        closed = policy.render(self.messages, tools=self.tools, generation=False)
        self.messages.append({"role": "user", "content": observation})
        self.rendered = policy.render(self.messages, tools=self.tools, generation=True)
        eos = policy.tokenizer.eos_token or ""
        closing = closed[len(before) + len(content) :] if closed.startswith(before + content) else eos
        if ids and ids[-1] == policy.tokenizer.eos_token_id and closing.startswith(eos):
            closing = closing[len(eos) :]  # the model already wrote the end-of-turn token
        delta = self.rendered[len(closed) :] if self.rendered.startswith(closed) else self.rendered
        self.episode.samples[0].extend(policy.encode(closing + delta), policy=False)

    def finish(self, reason: str) -> None:
        self.episode.truncation = reason
        self.done = True
        if self.config.context == "append":  # env tokens after the last response teach nothing: drop them
            sample = self.episode.samples[0]
            keep = max((i + 1 for i, m in enumerate(sample.loss_mask) if m), default=len(sample.loss_mask))
            del sample.input_ids[keep:], sample.loss_mask[keep:], sample.logprobs[keep:]


def rollout(
    policy: LLMPolicy,
    envs: Sequence[gym.Env],
    resets: Sequence[dict[str, Any]],
    config: RolloutConfig,
    *,
    generator: torch.Generator | None = None,
    teacher: OracleTeacher | None = None,
) -> list[Episode]:
    """Play one episode per env (``env.reset(**resets[i])``) in lock-step and return them in order.

    The policy samples every response, unless a ``teacher`` is given: then the teacher's action
    texts are tokenised as the policy's turns (demonstrations; their log-probs are 0).
    """
    runs = [_Run(env, dict(reset), config, policy) for env, reset in zip(envs, resets, strict=True)]
    eos = policy.tokenizer.eos_token_id
    # append mode: each turn's prompt extends the last one, so its keys and values are kept, never recomputed
    cache = PrefixCache() if config.context == "append" and teacher is None else None
    while active := [r for r in runs if not r.done]:
        prompts = [(r, p) for r in active if (p := r.prompt()) is not None]
        if not prompts:
            break
        if teacher is None:
            generations = policy.generate(
                [p for _, p in prompts],
                max_new_tokens=config.max_new_tokens,
                temperature=config.temperature,
                top_p=config.top_p,
                generator=generator,
                cache=cache,
                keys=[id(run) for run, _ in prompts],
            )
            responses = [(g.token_ids, g.logprobs, g.stopped) for g in generations]
        else:
            responses = []
            for run, _ in prompts:
                text = teacher.act(run.env, run.observation)
                ids = policy.encode(text)
                if not any(text.endswith(s) for s in policy.stop_strings):
                    ids.append(eos)
                responses.append((ids, [0.0] * len(ids), True))
        for (run, prompt), (ids, logprobs, stopped) in zip(prompts, responses, strict=True):
            run.record(prompt, ids, logprobs, stopped)
    return [r.episode for r in runs]


def random_resets(rng: random.Random, count: int, num_tasks: int | None) -> list[dict[str, Any]]:
    """``count`` reset arguments: a random env seed each, and a random task index if the env has a task list."""
    resets = []
    for _ in range(count):
        reset: dict[str, Any] = {"seed": rng.randrange(2**31)}
        if num_tasks:
            reset["options"] = {"task_index": rng.randrange(num_tasks)}
        resets.append(reset)
    return resets


def turn_spans(mask: list[int]) -> list[tuple[int, int]]:
    """``(start, end)`` of every maximal run of 1s in ``mask``: the turns of a sample's policy tokens."""
    spans, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    return spans


def collate(samples: Sequence[Sample], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded tensors ``input_ids``, ``attention_mask``, ``loss_mask``, ``logprobs`` (N × longest)."""
    width = max(len(s.input_ids) for s in samples)
    out = {
        "input_ids": torch.full((len(samples), width), pad_id, dtype=torch.long),
        "attention_mask": torch.zeros((len(samples), width), dtype=torch.long),
        "loss_mask": torch.zeros((len(samples), width), dtype=torch.long),
        "logprobs": torch.zeros((len(samples), width)),
    }
    for i, s in enumerate(samples):
        n = len(s.input_ids)
        out["input_ids"][i, :n] = torch.tensor(s.input_ids)
        out["attention_mask"][i, :n] = 1
        out["loss_mask"][i, :n] = torch.tensor(s.loss_mask)
        out["logprobs"][i, :n] = torch.tensor(s.logprobs)
    return out


def rollout_stats(episodes: Sequence[Episode]) -> RolloutStats:
    """What only a policy's own rollouts show: tool use per episode, clipped responses and response tokens per
    turn."""
    n_turns = max(1, sum(ep.turns for ep in episodes))
    return RolloutStats(
        tool_use=sum(ep.used_tools for ep in episodes) / max(1, len(episodes)),
        clipped_responses=sum(ep.clipped for ep in episodes) / n_turns,
        response_length=sum(ep.response_tokens for ep in episodes) / n_turns,
    )


def episode_metrics(episodes: Sequence[Episode]) -> dict[str, float]:
    """Success, reward and format statistics of a training batch of episodes (the names the trainers log): the
    outcome rates every report states (:func:`~agentgym.core.episode.outcome_rates`) and :func:`rollout_stats`."""
    rewards = torch.tensor([ep.total_reward for ep in episodes], dtype=torch.float64)
    rates, stats = outcome_rates(episodes), rollout_stats(episodes)
    return {
        "reward": float(rewards.mean()) if len(episodes) else 0.0,
        "reward_std": float(rewards.std()) if len(episodes) > 1 else 0.0,
        "success": rates["success"],
        "tool_use": stats.tool_use,
        "format_compliance": rates["format_compliance"],
        "tool_call_validity": rates["tool_call_validity"],
        "truncation_rate": rates["truncation_rate"],
        "clipped_responses": stats.clipped_responses,
        "turns": rates["turns"],
        "response_length": stats.response_length,
    }


def evaluate_llm(
    policy: LLMPolicy,
    env_id: str,
    config: RolloutConfig,
    *,
    env_kwargs: dict[str, Any] | None = None,
    episodes: int | None = None,
    batch_size: int = 64,
    seed: int = 0,
) -> RunSummary:
    """Greedy evaluation of the episodes :func:`~agentgym.core.registration.eval_resets` names (``episodes=None``: every
    task of the env once, or :data:`~agentgym.core.registration.DEFAULT_EPISODES` seeded episodes), in batches.

    Returns the :class:`~agentgym.core.summary.RunSummary` of the episodes (agent ``"policy"``, the greedy rollout
    settings as ``agent_settings``) with their :func:`rollout_stats`; ``summary.metrics()`` is what trainers log.
    """
    greedy = config.model_copy(update={"temperature": 0.0})
    kwargs = dict(env_kwargs or {})
    probe = gym.make(env_id, **kwargs)
    info = task_info(probe)
    resets = eval_resets(info.num_tasks, episodes, seed)
    envs = [probe] + [gym.make(env_id, **kwargs) for _ in range(min(batch_size, len(resets)) - 1)]
    results: list[Episode] = []
    for start in range(0, len(resets), batch_size):
        chunk = resets[start : start + batch_size]
        results += rollout(policy, envs[: len(chunk)], chunk, greedy)
    run = RunConfig(
        env_id=env_id,
        env_kwargs=kwargs,
        split=kwargs.get("split"),
        agent="policy",
        agent_settings=greedy.model_dump(mode="json"),
        seed=seed,
        episodes=len(resets),
        all_tasks=episodes is None and bool(info.num_tasks),
    )
    summary = summarize(
        [ep.record(index=i) for i, ep in enumerate(results)],
        run,
        tasks=episode_tasks(probe, resets),
        rollout=rollout_stats(results),
        **env_facts(probe),
    )
    for env in envs:
        env.close()
    return summary


if TYPE_CHECKING:  # agentgym.trainers.llm.config imports RolloutConfig from this module
    from agentgym.trainers.llm.config import EvalConfig


def evaluate_split(
    policy: LLMPolicy, config: EvalConfig, *, split: str | None = None, episodes: int | None = None
) -> RunSummary:
    """:func:`evaluate_llm` as a trainer's config describes it (any config built on
    :class:`~agentgym.trainers.llm.config.EvalConfig`): ``config.env_id``'s ``split`` (default ``config.eval_split``)
    made with ``config.eval_env_kwargs`` (``config.env_kwargs`` when None; the split rule of
    :func:`~agentgym.core.registration.eval_kwargs`), played with ``config.rollout``,
    ``episodes`` (default ``config.eval_episodes``; None: every task once)."""
    from agentgym.trainers.llm.config import EvalConfig

    if not isinstance(config, EvalConfig):
        raise TypeError(f"evaluate_split takes a config built on EvalConfig, not {type(config).__name__}")
    kwargs = config.env_kwargs if config.eval_env_kwargs is None else config.eval_env_kwargs
    env_kwargs = eval_kwargs(config.env_id, config.eval_split if split is None else split, kwargs)
    return evaluate_llm(
        policy, config.env_id, config.rollout, env_kwargs=env_kwargs, episodes=episodes or config.eval_episodes
    )
