"""Evaluate an agent on an env: success, returns, format, tokens, and what is needed to reproduce them.

:func:`evaluate_agent` is the benchmark runner behind ``agentgym eval``: it plays an agent given as a
spec string on a registered env, writes every episode to ``out_dir/episodes.jsonl`` as it ends, can
resume a killed run, and returns (and writes) a :class:`~agentgym.core.summary.RunSummary`::

    from agentgym.app.evaluation.runner import evaluate_agent

    summary = evaluate_agent("agentgym/WeatherRun-v0", "oracle", split="test", out_dir="runs/oracle")
    summary.success_rate, summary.success_ci95        # 1.0, (0.963, 1.0)

:func:`evaluate_suite` plays one agent on several envs' test splits into one directory (``agentgym eval --suite``).

Retry with reflection (``evaluate_agent(..., retry=K)``, ``agentgym eval --retry K``): every episode is played in
:class:`~agentgym.core.wrappers.Retry` with ``K`` attempts, and :func:`retry_stats` reports pass@1 (solved in the first
attempt) and success-within-k for k = 1 … K, written to ``out_dir/retry.json``.

Agent specs: ``random``, ``oracle``, ``qtable:PATH``, ``torch:PATH`` (see :func:`make_agent`),
``hf:PATH_OR_HUB_ID`` (a causal LM played by :func:`agentgym.trainers.llm.rollout.rollout`, greedy by
default) and ``openai:MODEL@BASE_URL`` (an OpenAI-compatible endpoint, :mod:`agentgym.app.integrations.openai_agent`).
:func:`evaluate` is the plain in-memory loop for any policy object.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from pydantic import BaseModel

from agentgym.app.evaluation.reports import (
    error_line,
    load_episodes,
    load_run_config,
    load_summary,
    run_timing,
    write_json,
)
from agentgym.core import task_info
from agentgym.core.episode import EpisodeRecord, append_episodes
from agentgym.core.registration import eval_kwargs, eval_reset, eval_resets
from agentgym.core.summary import RunConfig, RunSummary, env_facts, episode_tasks, summarize
from agentgym.core.wrappers import DiscreteToolActions, Retry, as_discrete
from agentgym.envs.remote import RemoteEnv

__all__ = [
    "RandomAgent",
    "RetryStats",
    "default_suite",
    "evaluate",
    "evaluate_agent",
    "evaluate_suite",
    "make_agent",
    "model_source",
    "retry_stats",
]

AGENT_SPECS = "'random', 'oracle', 'qtable:PATH', 'torch:PATH', 'hf:PATH_OR_HUB_ID' or 'openai:MODEL@BASE_URL'"


class RandomAgent:
    """Uniformly random actions from ``action_space`` (seeded)."""

    def __init__(self, action_space: gym.Space, seed: int | None = None) -> None:
        self.action_space = action_space
        self.action_space.seed(seed)

    def predict(self, observation: Any, state: Any = None, deterministic: bool = True) -> tuple[Any, None]:
        return self.action_space.sample(), None


def evaluate(
    policy: Any,
    env: gym.Env,
    *,
    episodes: int | None = None,
    seed: int = 0,
    agent: str = "",
    max_steps: int = 10_000,
) -> RunSummary:
    """Play ``policy`` on ``env`` (in memory, nothing written) and summarise the episodes as :func:`evaluate_agent`
    does. Episodes are :func:`~agentgym.core.registration.eval_resets`: episode ``i`` is reset with ``seed + i``;
    ``episodes=None`` plays every task of an env with a fixed task list once (e.g. WeatherRun's frozen test split),
    else :data:`~agentgym.core.registration.DEFAULT_EPISODES` seeded episodes.

    ``policy`` is an object with SB3's ``predict(obs) -> (action, state)`` or a plain callable ``obs -> action``;
    ``agent`` names it in the summary (default: its class name). ``max_steps`` caps an episode on an env without a
    time limit. An episode whose agent or env raises is recorded as failed (``failures``, ``failure_reasons``).
    """
    info = task_info(env)
    resets = eval_resets(info.num_tasks, episodes, seed)
    records: list[EpisodeRecord] = []
    _PolicyPlayer(policy, env, max_steps).play(list(enumerate(resets)), records.append)
    spec = env.spec
    kwargs = _plain(spec.kwargs) if spec else {}
    config = RunConfig(
        env_id=spec.id if spec else type(env.unwrapped).__name__,
        env_kwargs=kwargs,
        split=kwargs.get("split"),
        agent=agent or type(policy).__name__,
        agent_settings={},
        seed=seed,
        episodes=len(resets),
        all_tasks=episodes is None and bool(info.num_tasks),
    )
    return summarize(records, config, tasks=episode_tasks(env, resets), **env_facts(env))


class RetryStats(BaseModel):
    """Success of a run played under :class:`~agentgym.core.wrappers.Retry`: ``success_within[k-1]`` is the share of
    episodes solved in one of their first ``k`` attempts (``pass_at_1`` is ``success_within[0]``); rates are over
    all episodes (failed ones count as unsolved). ``mean_attempts`` is over episodes played to their end."""

    attempts: int
    discount: float
    episodes: int
    pass_at_1: float
    success_within: list[float]
    mean_attempts: float


def retry_stats(records: list[EpisodeRecord], attempts: int, discount: float = 0.5) -> RetryStats:
    """:class:`RetryStats` of a retry run's episode records (the attempt each ended in:
    :attr:`~agentgym.core.episode.EpisodeRecord.attempt`)."""
    n = max(len(records), 1)
    used = [r.attempt for r in records]
    within = [sum(r.success and a <= k for r, a in zip(records, used, strict=True)) / n for k in range(1, attempts + 1)]
    played = [a for r, a in zip(records, used, strict=True) if r.error is None]
    return RetryStats(
        attempts=attempts,
        discount=discount,
        episodes=len(records),
        pass_at_1=within[0],
        success_within=within,
        mean_attempts=float(np.mean(played)) if played else 0.0,
    )


def make_agent(spec: str, env: gym.Env, seed: int | None = None) -> tuple[Any, gym.Env]:
    """Build an agent from a spec string and return it with the env view it acts on.

    Specs: ``random`` (uniform over the discrete menu), ``oracle`` (the task's scripted expert, on
    the text env), ``qtable:PATH`` (a saved Q-learning or SARSA agent, acting greedily),
    ``torch:PATH`` (a saved REINFORCE or PPO agent, taking its most likely action).
    """
    kind, _, arg = spec.partition(":")
    if kind in ("hf", "openai"):
        raise ValueError(f"{kind}: agents play many episodes at once; use evaluate_agent({spec!r}, ...)")
    if kind == "oracle":
        return env.unwrapped.oracle(), env
    if kind == "random":
        env = _discrete(env)
        return RandomAgent(env.action_space, seed), env
    if kind == "qtable":
        from agentgym.trainers.classic.tabular import TabularAgent

        agent = TabularAgent.load(arg, env)
        return agent, agent.env
    if kind == "torch":
        from agentgym.trainers import PPO, REINFORCE
        from agentgym.trainers.classic.torch_agent import read_checkpoint

        algorithm = read_checkpoint(arg)["algorithm"]
        agent_cls = {"reinforce": REINFORCE, "ppo": PPO}.get(algorithm)
        if agent_cls is None:
            raise ValueError(f"{arg} holds no REINFORCE or PPO checkpoint (algorithm {algorithm!r})")
        agent = agent_cls.load(arg, env)
        return agent, agent.env
    raise ValueError(f"unknown agent spec {spec!r}; use {AGENT_SPECS}")


def _discrete(env: gym.Env) -> gym.Env:
    """The discrete view of ``env`` (:func:`~agentgym.core.wrappers.as_discrete`); for an ``agentgym/Remote-v0`` env, a
    session of the server's in its discrete view (the server wraps its env: same menu, same state keys)."""
    if isinstance(env.unwrapped, RemoteEnv) and not isinstance(env.action_space, gym.spaces.Discrete):
        return env.unwrapped.discrete_view()
    return as_discrete(env)


# ---------------------------------------------------------------------------------------------------- benchmark runs


def model_source(name_or_path: str | Path) -> str:
    """A model directory or hub id for ``from_pretrained``; FileNotFoundError if it is written as a path (starting with
    ``/``, ``.`` or ``~``, or existing) that is not a directory. A model name of
    :data:`agentgym.trainers.models.policy.NAMED_MODELS` (``tiny``, ``smollm2``) is resolved to its folder here, before
    any episode (SmolLM2 is fetched and converted on first use; an ``OSError`` says what to run if it cannot be)."""
    text = str(name_or_path)
    if not text:
        raise ValueError("hf: needs a model directory or hub id, e.g. hf:Qwen/Qwen2.5-0.5B-Instruct")
    from agentgym.trainers.models.policy import NAMED_MODELS, resolve_model_source

    if text in NAMED_MODELS:
        return resolve_model_source(text)
    path = Path(text).expanduser()
    if text.startswith(("/", ".", "~")) or path.exists():
        if not path.is_dir():
            raise FileNotFoundError(f"no model directory at {text} (give a from_pretrained directory or a hub id)")
        return str(path)
    return text


def _run_async(coro: Any) -> Any:
    """``asyncio.run(coro)``, also from inside a running event loop (a notebook): then in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class _Player:
    """How one kind of agent plays a list of ``(index, reset)`` jobs; built (and validated) before any run."""

    settings: dict[str, Any]
    concurrency: int = 1  # episodes played at once

    def play(self, jobs: list[tuple[int, dict[str, Any]]], emit: Callable[[EpisodeRecord], None]) -> None:
        raise NotImplementedError


class _PolicyPlayer(_Player):
    """An object with ``predict(obs)`` (or a callable) stepping one env, one episode after another."""

    def __init__(self, policy: Any, env: gym.Env, max_steps: int = 10_000) -> None:
        self.policy, self.env, self.max_steps = policy, env, max_steps
        self.settings = {}

    def play(self, jobs: list[tuple[int, dict[str, Any]]], emit: Callable[[EpisodeRecord], None]) -> None:
        policy, env = self.policy, self.env
        act = (lambda o: policy.predict(o, deterministic=True)[0]) if hasattr(policy, "predict") else policy
        remote_view = isinstance(env.unwrapped, RemoteEnv) and env.unwrapped.view == "discrete"
        discrete = env if isinstance(env, DiscreteToolActions) else env.unwrapped if remote_view else None
        for index, reset in jobs:
            if isinstance(policy, RandomAgent):  # each episode's actions depend on its index only (resumable)
                policy.action_space.seed(reset["seed"])
            record = EpisodeRecord(index=index, reset=reset)
            try:
                self._play_one(record, act, discrete)
            except Exception as exc:  # a failing agent or env fails this episode, never the run
                record.error = episode_error(exc)
            emit(record)

    def _play_one(self, record: EpisodeRecord, act: Callable[[Any], Any], discrete: Any) -> None:
        obs, info = self.env.reset(**record.reset)
        record.start(info["text"] if discrete else str(obs), info)
        for _ in range(self.max_steps):
            action = act(obs)
            text = discrete.menu[int(action)] if discrete else str(action)
            obs, reward, terminated, truncated, info = self.env.step(action)
            record.step(text, info["text"] if discrete else str(obs), reward, info)
            if terminated or truncated:
                record.terminated = bool(terminated)
                record.truncation = None if terminated else "time_limit"
                return
        record.truncation = "max_steps"


class _ConcurrentPolicyPlayer(_Player):
    """A ``predict`` agent (random, oracle, ...) ``concurrency`` episodes at once, on an ``agentgym/Remote-v0`` env
    or a local env whose work runs in subprocesses (``TaskInfo.parallel_episodes``: CodeSandbox's sandboxes): each
    worker thread holds its own env (a remote one: its own session, spread over the ``base_url`` list) and agent, and
    plays the next job (a random agent is reseeded per episode, so which worker plays an episode changes nothing)."""

    def __init__(self, spec: str, env_factory: Callable[[], gym.Env], seed: int, concurrency: int) -> None:
        self.spec, self.env_factory, self.seed, self.concurrency = spec, env_factory, seed, concurrency
        self.settings = {}

    def play(self, jobs: list[tuple[int, dict[str, Any]]], emit: Callable[[EpisodeRecord], None]) -> None:
        lock, todo, problems, stop = threading.Lock(), iter(list(jobs)), [], []

        def locked_emit(record: EpisodeRecord) -> None:  # once emit raised, nothing more is reported or started
            with lock:
                if stop:
                    return
                try:
                    emit(record)
                except BaseException as exc:
                    stop.append(exc)
                    raise

        def next_job() -> tuple[int, dict[str, Any]] | None:
            with lock:
                return None if stop else next(todo, None)

        def work() -> None:
            try:
                env = self.env_factory()
            except Exception as exc:  # this worker has no session; the others play its share
                problems.append(exc)
                return
            try:
                policy, view = make_agent(self.spec, env, seed=self.seed)
                player = _PolicyPlayer(policy, view)
                while (job := next_job()) is not None:
                    player.play([job], locked_emit)
            except Exception as exc:
                problems.append(exc)
            finally:
                env.close()

        workers = [threading.Thread(target=work, daemon=True) for _ in range(min(self.concurrency, len(jobs)))]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        if stop:  # the caller's emit (its callback) raised: the run stops with that error
            raise stop[0]
        while (job := next_job()) is not None:  # no worker could play it: failed, with the reason
            reason = problems[-1] if problems else RuntimeError("no worker could play it")
            locked_emit(EpisodeRecord(index=job[0], reset=job[1], error=episode_error(reason)))


def episode_error(exc: BaseException) -> str:
    """Why an episode failed, as :attr:`EpisodeRecord.error` holds it: ``Type: first line of the message``
    (one line of valid UTF-8, however the message was written)."""
    return error_line(f"{type(exc).__name__}: {error_line(exc)}")


class _HFPlayer(_Player):
    """A causal LM playing ``batch_size`` episodes at a time in lock-step
    (``agentgym.trainers.llm.rollout.rollout``)."""

    def __init__(
        self, source: str, sampling: dict[str, Any], env_factory: Callable[[], gym.Env], batch_size: int
    ) -> None:
        import torch

        from agentgym.trainers.llm.rollout import RolloutConfig

        options = dict(sampling)
        device = str(options.pop("device", "cuda" if torch.cuda.is_available() else "cpu"))
        dtype = str(options.pop("dtype", "float32"))
        if not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise ValueError(f"dtype must name a torch dtype such as 'float32' or 'bfloat16', got {dtype!r}")
        self.config = RolloutConfig.model_validate({"temperature": 0.0, **options})  # greedy unless told
        self.source, self.device, self.dtype = source, device, dtype
        self.env_factory, self.batch_size = env_factory, batch_size
        self.concurrency = batch_size
        self.settings = {**self.config.model_dump(), "device": device, "dtype": dtype}

    def play(self, jobs: list[tuple[int, dict[str, Any]]], emit: Callable[[EpisodeRecord], None]) -> None:
        import torch

        from agentgym.trainers.models.policy import LLMPolicy

        if not jobs:
            return
        policy = LLMPolicy.from_pretrained(self.source, dtype=getattr(torch, self.dtype))
        policy.model.to(self.device)
        envs = [self.env_factory() for _ in range(min(self.batch_size, len(jobs)))]
        try:
            for start in range(0, len(jobs), self.batch_size):
                chunk = jobs[start : start + self.batch_size]
                try:
                    records = self._play_batch(policy, envs, chunk)
                except Exception as exc:  # one episode's failure must not fail its batch-mates: play each alone
                    if len(chunk) == 1:
                        records = [EpisodeRecord(index=chunk[0][0], reset=chunk[0][1], error=episode_error(exc))]
                    else:
                        records = [self._play_alone(policy, envs, job) for job in chunk]
                for record in records:
                    emit(record)
        finally:
            for env in envs:
                env.close()

    def _play_alone(self, policy: Any, envs: list[gym.Env], job: tuple[int, dict[str, Any]]) -> EpisodeRecord:
        try:
            (record,) = self._play_batch(policy, envs, [job])
        except Exception as exc:
            record = EpisodeRecord(index=job[0], reset=job[1], error=episode_error(exc))
        return record

    def _play_batch(
        self, policy: Any, envs: list[gym.Env], chunk: list[tuple[int, dict[str, Any]]]
    ) -> list[EpisodeRecord]:
        import torch

        from agentgym.trainers.llm.rollout import rollout

        generator = None
        if self.config.temperature > 0:  # seeded by the batch's first episode
            generator = torch.Generator(device=self.device).manual_seed(chunk[0][1]["seed"])
        resets = [reset for _, reset in chunk]
        episodes = rollout(policy, envs[: len(chunk)], resets, self.config, generator=generator)
        return [
            ep.record(index=index, reset=reset, prompt_tokens=_prompt_tokens(ep.samples))
            for (index, reset), ep in zip(chunk, episodes, strict=True)
        ]


def _prompt_tokens(samples: list[Any]) -> int:
    """Prompt tokens summed over turns: each response's context length (as an API would bill them)."""
    total = 0
    for sample in samples:
        mask = sample.loss_mask
        total += sum(i for i in range(len(mask)) if mask[i] and (i == 0 or not mask[i - 1]))
    return total


class _OpenAIPlayer(_Player):
    """An OpenAI-compatible endpoint, ``concurrency`` episodes in flight
    (``agentgym.app.integrations.openai_agent.OpenAIAgent``)."""

    def __init__(self, config: Any, env_factory: Callable[[], gym.Env], concurrency: int, seed: int) -> None:
        self.config, self.env_factory, self.concurrency, self.seed = config, env_factory, concurrency, seed
        self.settings = config.settings()

    def play(self, jobs: list[tuple[int, dict[str, Any]]], emit: Callable[[EpisodeRecord], None]) -> None:
        from agentgym.app.integrations.openai_agent import OpenAIAgent

        agent = OpenAIAgent(self.config, seed=self.seed)
        _run_async(agent.play_all(self.env_factory, jobs, concurrency=self.concurrency, on_episode=emit, check=False))


def _player(
    spec: str,
    env: gym.Env,
    env_factory: Callable[[], gym.Env],
    *,
    seed: int,
    concurrency: int,
    sampling: dict[str, Any],
    api_key_env: str | None,
) -> _Player:
    kind, _, arg = spec.partition(":")
    if kind == "hf":
        return _HFPlayer(model_source(arg), sampling, env_factory, concurrency)
    if kind == "openai":
        from agentgym.app.integrations.openai_agent import OpenAIConfig, check_endpoint, parse_spec

        model, base_url = parse_spec(arg)
        values = {"model": model, "base_url": base_url, **sampling}
        if api_key_env:
            if api_key_env not in os.environ:
                raise ValueError(f"the API key variable {api_key_env} is not set")
            values["api_key_env"] = api_key_env
        config = OpenAIConfig.model_validate(values)
        check_endpoint(config)
        return _OpenAIPlayer(config, env_factory, concurrency, seed)
    if sampling:
        raise ValueError(f"sampling settings apply to hf: and openai: agents, not {spec!r}")
    if concurrency > 1 and task_info(env).parallel_episodes:  # its work runs on a server or in subprocesses
        make_agent(spec, env, seed=seed)  # a bad spec fails here, before any episode
        remote = isinstance(env.unwrapped, RemoteEnv)
        workers = concurrency if remote else min(concurrency, os.cpu_count() or 1)  # local: one per core
        return _ConcurrentPolicyPlayer(spec, env_factory, seed, workers)
    policy, view = make_agent(spec, env, seed=seed)
    return _PolicyPlayer(policy, view)


def evaluate_agent(
    env_id: str,
    agent: str | Any,
    *,
    episodes: int | None = None,
    seed: int = 0,
    split: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    concurrency: int = 8,
    sampling: dict[str, Any] | None = None,
    api_key_env: str | None = None,
    callback: Callable[[EpisodeRecord], None] | None = None,
    progress_bar: bool = False,
    retry: int = 1,
    retry_discount: float = 0.5,
) -> RunSummary:
    """Play ``agent`` (a spec string, see the module docstring, or any object with SB3's ``predict(obs)`` playing
    the text env, recorded under its class name) on ``env_id`` and summarise the run.

    The episodes are :func:`~agentgym.core.registration.eval_resets`: episode ``i`` is ``env.reset(seed=seed + i)``;
    with ``episodes=None`` an env with a fixed task list plays each task once (episode ``i`` is task ``i``), other envs
    play :data:`~agentgym.core.registration.DEFAULT_EPISODES` (100). ``split`` sets the env's ``split`` argument where
    it has one (``env_kwargs`` may also name it; :func:`~agentgym.core.registration.eval_kwargs`): an env without splits
    (CliffWalk) has one configuration, so its test set is that configuration over the seeded episodes, and
    ``split="test"`` is accepted there (and recorded as no split), any other split is a ``ValueError``.

    ``out_dir`` gets ``run.json``, ``episodes.jsonl`` (one record per finished episode, flushed as it
    ends) and ``summary.json``; without it nothing is written. ``resume=True`` continues the run in
    ``out_dir``: episodes already recorded without an error are not played again (the settings must
    match; ``episodes`` may grow). ``concurrency``: episodes in flight (``openai:``) or the batch size
    (``hf:``); the other agents play one episode at a time. ``sampling``: settings of an ``hf:`` agent
    (:class:`~agentgym.trainers.llm.rollout.RolloutConfig` fields, plus ``device`` and ``dtype``; greedy
    by default) or an ``openai:`` agent (:class:`~agentgym.app.integrations.openai_agent.OpenAIConfig` fields);
    ``api_key_env`` names the variable holding the endpoint's key. ``callback(record)`` is called
    after each episode is written; if it raises, the run stops there (and can be resumed).

    ``retry=K`` (K > 1) plays every episode in :class:`~agentgym.core.wrappers.Retry` (``attempts=K``, ``discount=
    retry_discount``): the summary's success is success within K attempts and its rewards are the wrapper's, and
    ``out_dir/retry.json`` holds :class:`RetryStats` (pass@1 and success within 1 … K; :func:`retry_stats` computes
    them from the records). The retry settings are part of the run (``agent_settings``), so a resume must match.
    An ``hf:`` agent's ``max_turns`` (``sampling``) counts the turns of all attempts: raise it K-fold.

    Bad settings, a missing model and an unreachable endpoint raise before any episode is played. After
    that, one episode never stops the run: an agent or env that raises, or an env that pays a reward that
    is not a finite number, fails that episode (recorded with ``error``, e.g. ``"RuntimeError: ..."``;
    ``--resume`` plays it again), and text no JSON file can hold (lone surrogates) is written as U+FFFD.
    ``resume`` trusts only records this run and env could have written (the reset of their index, the
    env's time limit, one reward per action, within the env's ``reward_bounds()`` if it states them) and
    refuses a damaged ``run.json`` or ``episodes.jsonl`` with a ``ValueError`` naming the file and line.
    """
    eval_resets(None, episodes)  # checks episodes
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if resume and out_dir is None:
        raise ValueError("resume needs out_dir, the directory of the run to continue")
    policy = None
    if not isinstance(retry, int) or retry < 1:
        raise ValueError(f"retry must be an int >= 1 (attempts per episode), got {retry!r}")
    kwargs = eval_kwargs(env_id, split, env_kwargs)

    def make() -> gym.Env:
        # Gymnasium's passive env checker breaks every step after a reset that raised (gymnasium 1.4), which would
        # fail the episodes after a failed one; the registered envs pass check_env in the tests instead.
        env = gym.make(env_id, disable_env_checker=True, **kwargs)
        return Retry(env, attempts=retry, discount=retry_discount) if retry > 1 else env

    probe = make()
    try:
        info = task_info(probe)
        num_tasks = info.num_tasks
        all_tasks = episodes is None and bool(num_tasks)
        resets = eval_resets(num_tasks, episodes, seed)
        n = len(resets)
        if not isinstance(agent, str):  # a policy object: played on the text env, one episode after another
            if not callable(getattr(agent, "predict", None)):
                raise ValueError(f"agent must be a spec string ({AGENT_SPECS}) or an object with predict(obs)")
            policy, agent = agent, type(agent).__name__
        player = (
            _PolicyPlayer(policy, probe)
            if policy is not None
            else _player(
                agent,
                probe,
                make,
                seed=seed,
                concurrency=concurrency,
                sampling=dict(sampling or {}),
                api_key_env=api_key_env,
            )
        )
        config = RunConfig(
            env_id=env_id,
            env_kwargs=_plain(kwargs),
            split=kwargs.get("split"),
            agent=agent,
            agent_settings=_plain(
                {**player.settings, **({"retry": retry, "retry_discount": retry_discount} if retry > 1 else {})}
            ),
            seed=seed,
            episodes=n,
            all_tasks=all_tasks,
        )
        limit = _turn_limit(probe, player)
        check = _RecordCheck(config, probe, None if limit is None else limit * retry, per_turn=retry == 1)
        previous = _prepare_out_dir(Path(out_dir), config, resume, check) if out_dir is not None else []
        finished = {r.index for r in previous if r.error is None}
        jobs = [(i, resets[i]) for i in range(n) if i not in finished]
        records = list(previous)
        start = time.perf_counter()
        if jobs:  # a finished run resumed plays nothing (an endpoint client given no episodes would fail)
            with _EpisodeLog(out_dir, records, len(jobs), agent, progress_bar, callback) as log:
                player.play(jobs, log.write)
        wall = time.perf_counter() - start
        summary = summarize(
            records,
            config,
            tasks=episode_tasks(probe, resets),
            timing=run_timing(wall, len(jobs), player.concurrency),
            **env_facts(probe),
        )
        if retry > 1 and out_dir is not None:
            write_json(Path(out_dir) / "retry.json", retry_stats(records, retry, retry_discount))
        if out_dir is None:
            return summary
        if not jobs and (stored := _stored_summary(Path(out_dir), summary)) is not None:
            return stored  # a finished run: its summary as written, timing included
        write_json(Path(out_dir) / "summary.json", summary)
        return summary
    finally:
        probe.close()


def default_suite() -> list[str]:
    """Every registered env at its newest version (``agentgym list`` names them all)."""
    from agentgym.core.registration import ENV_IDS

    newest: dict[str, str] = {}
    for env_id in ENV_IDS:
        name, _, version = env_id.rpartition("-v")
        if name not in newest or int(version) > int(newest[name].rpartition("-v")[2]):
            newest[name] = env_id
    return list(newest.values())


def suite_run_dir(out_dir: str | Path, env_id: str) -> Path:
    """Where :func:`evaluate_suite` puts ``env_id``'s run: ``out_dir/<name>-v<N>`` (the id after its namespace)."""
    return Path(out_dir) / env_id.rpartition("/")[2]


def evaluate_suite(
    agent: str,
    env_ids: list[str] | None = None,
    *,
    out_dir: str | Path,
    split: str = "test",
    on_run: Callable[[str, RunSummary], None] | None = None,
    **kwargs: Any,
) -> dict[str, RunSummary]:
    """Play ``agent`` on each env's ``split`` (default: :func:`default_suite`), ``env_id → summary``.

    Each env's run goes to :func:`suite_run_dir` (a run directory like ``evaluate_agent``'s, so
    ``agentgym report`` and ``resume=True`` work on it), and ``out_dir/suite.md`` gets the table of all
    of them. ``kwargs`` are :func:`evaluate_agent`'s, applied to every env; ``episodes`` (default: every
    task once, :data:`~agentgym.core.registration.DEFAULT_EPISODES` on CliffWalk) too. ``on_run(env_id, summary)`` is
    called after each env. Every env id is checked before any episode is played.
    """
    from agentgym.app.evaluation.reports import markdown_table

    env_ids = list(env_ids or default_suite())
    if len({suite_run_dir(out_dir, e) for e in env_ids}) != len(env_ids):
        raise ValueError(f"the suite names an env twice: {', '.join(env_ids)}")
    if unknown := [env_id for env_id in env_ids if env_id not in gym.registry]:  # before any run
        from agentgym.core.registration import ENV_IDS

        raise ValueError(f"no env {unknown[0]!r} in the suite; the agentgym envs are {', '.join(ENV_IDS)}")
    summaries: dict[str, RunSummary] = {}
    for env_id in env_ids:
        summaries[env_id] = evaluate_agent(env_id, agent, split=split, out_dir=suite_run_dir(out_dir, env_id), **kwargs)
        if on_run is not None:
            on_run(env_id, summaries[env_id])
    table = markdown_table({env_id.rpartition("/")[2]: s for env_id, s in summaries.items()})
    (Path(out_dir) / "suite.md").write_text(table + "\n", encoding="utf-8")
    return summaries


def _stored_summary(out: Path, fresh: RunSummary) -> RunSummary | None:
    """The run's ``summary.json`` if it says what ``fresh`` (recomputed from its episodes) says, timing aside."""
    try:
        stored = load_summary(out)
    except (OSError, ValueError):
        return None
    volatile = {"timing"}  # how this invocation ran (wall time, provenance), not what it measured
    same = stored.model_dump(exclude=volatile) == fresh.model_dump(exclude=volatile)
    return stored if same else None


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data (paths and other objects as strings), so it compares equal after a round trip."""
    return json.loads(json.dumps(value, default=str))


def _prepare_out_dir(out: Path, config: RunConfig, resume: bool, check: _RecordCheck) -> list[EpisodeRecord]:
    """Check ``out`` against ``config``, write ``run.json``, and return the records already there (resume)."""
    out.mkdir(parents=True, exist_ok=True)
    episodes, run = out / "episodes.jsonl", out / "run.json"
    previous: list[EpisodeRecord] = []
    if resume:
        if run.exists():
            if problem := config.mismatch(load_run_config(run)):
                raise ValueError(
                    f"{out} holds a different run ({problem}); resume it with its settings or use another out dir"
                )
        previous = load_episodes(episodes, check=check)
    elif episodes.exists() and episodes.stat().st_size:
        raise ValueError(f"{out} already holds episodes; resume that run (--resume) or choose another out dir")
    write_json(run, config)
    return previous


def _turn_limit(env: gym.Env, player: _Player) -> int | None:
    """The most actions an episode of this run can take: the env's time limit, or the player's own cap."""
    limits = [env.spec.max_episode_steps if env.spec else None, getattr(player, "max_steps", None)]
    known = [n for n in limits if n is not None]
    return min(known) if known else None


class _RecordCheck:
    """What a recorded episode of this run must satisfy to be trusted by ``--resume``.

    A record must have been reset the way this run resets its index, hold one reward, format flag and
    validity flag per action and one observation more than actions (none at all if the reset itself
    failed), and take no more actions than the env's time limit. Its rewards are finite numbers, and lie
    within the env's reward bounds where it declares them (:attr:`agentgym.core.TaskInfo.reward_bounds`: the
    ``(low, high)`` any one action can be paid, so ``turns · low <= return <= turns · high`` for any episode,
    finished or not). A record that breaks any of these is not from this run and env. Under
    :class:`~agentgym.core.wrappers.Retry` (``per_turn=False``) an attempt's rewards are paid at its last turn, so only
    the return is checked: ``turns · min(low, 0) <= return <= turns · max(high, 0)``.
    """

    def __init__(self, config: RunConfig, env: gym.Env, turn_limit: int | None, per_turn: bool = True) -> None:
        self.config, self.turn_limit, self.per_turn = config, turn_limit, per_turn
        info = task_info(env)
        self.num_tasks, self.reward_bounds = info.num_tasks, info.reward_bounds

    def expected_reset(self, index: int) -> dict[str, Any]:
        return eval_reset(index, self.config.seed, every_task=self.config.all_tasks)

    def __call__(self, record: EpisodeRecord) -> str | None:
        i, turns = record.index, record.turns
        if self.config.all_tasks and self.num_tasks is not None and i >= self.num_tasks:
            return f"episode {i} does not exist: the env has {self.num_tasks} tasks"
        if record.reset != (expected := self.expected_reset(i)):
            return f"episode {i} was reset with {record.reset}; this run resets it with {expected}"
        if not len(record.rewards) == len(record.canonical) == len(record.valid) == turns:
            return (
                f"episode {i} has {turns} actions but {len(record.rewards)} rewards, {len(record.canonical)} "
                f"format flags and {len(record.valid)} validity flags"
            )
        if len(record.reward_components) != turns:
            return f"episode {i} has {turns} actions but {len(record.reward_components)} reward breakdowns"
        if len(record.observations) != turns + 1 and not (record.error and not record.observations and not turns):
            return f"episode {i} has {turns} actions but {len(record.observations)} observations (expected {turns + 1})"
        if self.turn_limit is not None and turns > self.turn_limit:
            return f"episode {i} took {turns} actions; this env ends an episode after {self.turn_limit}"
        if self.reward_bounds is not None and not self.per_turn:
            low, high = self.reward_bounds
            total = record.total_reward
            if not turns * min(low, 0) - 1e-9 <= total <= turns * max(high, 0) + 1e-9:
                return f"episode {i} returned {total:g} in {turns} actions; this env pays [{low:g}, {high:g}] a turn"
        elif self.reward_bounds is not None:
            low, high = self.reward_bounds
            for turn, reward in enumerate(record.rewards, 1):
                if not low - 1e-9 <= reward <= high + 1e-9:
                    return f"episode {i} was paid {reward:g} at turn {turn}; this env pays [{low:g}, {high:g}] a turn"
        if record.terminated and record.truncation is not None:
            return f"episode {i} is marked both terminated and truncated ({record.truncation})"
        return None


class _EpisodeLog:
    """Appends each finished episode to ``episodes.jsonl`` (:func:`~agentgym.core.episode.append_episodes`), keeps it,
    ticks the bar, calls back."""

    def __init__(
        self,
        out_dir: str | Path | None,
        records: list[EpisodeRecord],
        total: int,
        label: str,
        progress_bar: bool,
        callback: Callable[[EpisodeRecord], None] | None,
    ) -> None:
        self.path = Path(out_dir) / "episodes.jsonl" if out_dir is not None else None
        self.records, self.callback = records, callback
        self.total, self.label, self.progress_bar = total, label, progress_bar

    def __enter__(self) -> _EpisodeLog:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=self.total, desc=self.label, unit="episode", disable=not self.progress_bar)
        return self

    def write(self, record: EpisodeRecord) -> None:
        if self.path is not None:
            append_episodes(self.path, [record])
        self.records.append(record)
        self.bar.update(1)
        if self.callback is not None:
            self.callback(record)

    def __exit__(self, *exc: object) -> None:
        self.bar.close()
