"""A benchmark run dealt by a server: each task once, in the server's order, recorded as an ``agentgym eval`` run.

The one rule both serving modes that deal tasks follow (``agentgym serve mcp``, and ``agentgym serve env
--benchmark``): a client never chooses a task. It asks for the next one, and :meth:`BenchmarkRun.deal` hands out
the run's next unplayed episode — episode ``i`` reset as ``agentgym eval`` resets it (``seed + i``, and
``options={"task_index": i}`` on an env with a task list, :func:`~agentgym.core.registration.eval_resets`) — or
nothing once every episode has been dealt. An episode dealt is played once: whoever played it, however it ended
(solved, failed, abandoned by a reset or a closed session), it is recorded by :meth:`BenchmarkRun.end` and never
dealt again in this run, to that client or any other.

The order is the dealer's: ``order="index"`` deals episode 0, 1, 2, ... (the MCP server, whose one client is
trusted with the order); ``order="secret"`` deals a permutation drawn from a server-side secret
(:func:`secrets.randbits`, never sent, never written), so no client can know which task comes next.

The run is written as ``agentgym eval --out DIR`` writes one (``run.json`` at the start, each episode appended to
``episodes.jsonl`` as it ends, ``summary.json`` when the run finishes), with the same writers
(:class:`~agentgym.core.episode.EpisodeRecord` lines, :func:`~agentgym.core.summary.summarize`), so ``agentgym
report`` reads it like any eval run. :meth:`BenchmarkRun.finish` (after the last episode, or when the server stops)
counts an episode still in play as abandoned and every episode never dealt as failed (``error:`` :data:`NOT_PLAYED`), so
a success rate is always over the whole task set.
"""

from __future__ import annotations

import json
import random
import secrets
import threading
import time
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym

from agentgym.app.evaluation.reports import run_timing, to_json, write_json
from agentgym.core import task_info
from agentgym.core.episode import EpisodeRecord, append_episodes
from agentgym.core.registration import eval_kwargs, eval_resets
from agentgym.core.summary import RunConfig, RunSummary, env_facts, episode_tasks, summarize

__all__ = ["ABANDONED", "MAX_STEPS", "NOT_PLAYED", "BenchmarkRun"]

NOT_PLAYED = "NotPlayed: the run ended before this task was dealt"
ABANDONED = "abandoned"
"""The ``truncation`` of an episode its client left unfinished (it asked for the next task, closed its session,
or the server stopped)."""
MAX_STEPS = 10_000
"""Calls after which an episode ends (``truncation: "max_steps"``) on an env without a time limit, as
``agentgym eval``'s policy player caps one; every registered env's own time limit is far below it."""


class BenchmarkRun:
    """One run of ``env_id``'s episodes (every task of ``split`` once by default), dealt one at a time and recorded.

    Thread-safe. ``agent`` and ``agent_settings`` go into ``run.json`` (who played: ``"mcp"``, ``"env-server"``).
    ``out_dir`` gets the run directory (refused if it already holds episodes); without it the run is kept in memory
    only (:meth:`files` still renders it). See the module docstring for ``order``. ``each_task_once`` refuses
    ``episodes`` on an env with a task list (seeded episodes may draw a task twice).
    """

    def __init__(
        self,
        env_id: str,
        *,
        split: str | None = "test",
        env_kwargs: dict[str, Any] | None = None,
        episodes: int | None = None,
        seed: int = 0,
        out_dir: str | Path | None = None,
        agent: str = "env-server",
        agent_settings: dict[str, Any] | None = None,
        order: Literal["index", "secret"] = "secret",
        each_task_once: bool = False,
    ) -> None:
        eval_resets(None, episodes)  # checks episodes
        if order not in ("index", "secret"):
            raise ValueError(f"order is 'index' or 'secret', got {order!r}")
        self.env_kwargs = eval_kwargs(env_id, split, env_kwargs)
        self.env = gym.make(env_id, disable_env_checker=True, **self.env_kwargs)  # for the summary's task facts
        num_tasks = task_info(self.env).num_tasks
        if each_task_once and episodes is not None and num_tasks:
            self.env.close()
            raise ValueError(f"{env_id} has a task list ({num_tasks} tasks): a benchmark run deals each task once, "
                             "so it plays them all; --episodes is for envs whose tasks seeds draw")  # fmt: skip
        self.resets = eval_resets(num_tasks, episodes, seed)
        n = len(self.resets)
        self.config = RunConfig(
            env_id=env_id,
            env_kwargs=json.loads(json.dumps(self.env_kwargs, default=str)),
            split=self.env_kwargs.get("split"),
            agent=agent,
            agent_settings=dict(agent_settings or {}),
            seed=seed,
            episodes=n,
            all_tasks=episodes is None and bool(num_tasks),
        )
        self._order = list(range(n))
        if order == "secret":
            random.Random(secrets.randbits(128)).shuffle(self._order)
        self.out_dir = Path(out_dir) if out_dir is not None else None
        if self.out_dir is not None:
            self._prepare_out_dir(self.out_dir)
        self.records: list[EpisodeRecord] = []  # the episodes that ended, in the order they ended
        self.in_play: dict[int, EpisodeRecord] = {}  # dealt, not yet ended
        self.dealt = 0
        self.finished = False
        self.started_at: float | None = None
        self._final: RunSummary | None = None
        self._lock = threading.RLock()

    @property
    def episodes(self) -> int:
        return self.config.episodes

    # ------------------------------------------------------------------ dealing

    def deal(self) -> EpisodeRecord | None:
        """The next episode of the run (its ``index`` and ``reset``, nothing played yet), now in play; None once every
        episode has been dealt or the run has finished."""
        with self._lock:
            if self.finished or self.dealt >= self.episodes:
                return None
            if self.started_at is None:
                self.started_at = time.perf_counter()
            index = self._order[self.dealt]
            self.dealt += 1
            record = EpisodeRecord(index=index, reset=self.resets[index])
            self.in_play[index] = record
            return record

    def end(self, record: EpisodeRecord, truncation: str | None = None) -> None:
        """Record an episode dealt by :meth:`deal` as over. One that neither terminated, nor was truncated, nor failed
        is cut with ``truncation`` (default :data:`ABANDONED`). After the last episode the run finishes. An episode
        not in play (ended already, or never dealt) changes nothing."""
        with self._lock:
            if self.in_play.get(record.index) is not record:
                return
            del self.in_play[record.index]
            if record.error is None and not record.terminated and record.truncation is None:
                record.truncation = truncation or ABANDONED
            self._log(record)
            if self.dealt >= self.episodes and not self.in_play:
                self._finish()

    def progress(self) -> dict[str, Any]:
        """How far the run is: episodes ``played`` (ended), ``in_play``, ``left`` to deal, of ``episodes``; ``done``."""
        with self._lock:
            return {
                "episodes": self.episodes,
                "played": len(self.records),
                "in_play": len(self.in_play),
                "left": self.episodes - self.dealt,
                "done": self.finished,
            }

    def summary(self) -> RunSummary | None:
        """``agentgym eval``'s summary of the episodes that ended so far (the final one once finished); None before
        any."""
        with self._lock:
            if self._final is not None:
                return self._final
            return self._summary(self.records) if self.records else None

    def finish(self) -> RunSummary:
        """End the run: episodes in play as abandoned, episodes never dealt as failed (:data:`NOT_PLAYED`); write
        ``summary.json``. Calling it again returns the same summary."""
        with self._lock:
            return self._finish()

    def files(self) -> dict[str, bytes]:
        """The run directory as it stands, ``name → bytes`` (``run.json``, ``episodes.jsonl``, and ``summary.json``
        once finished): what ``out_dir`` holds, for an operator who downloads it."""
        with self._lock:
            files = {
                "run.json": (to_json(self.config, indent=2) + "\n").encode("utf-8"),
                "episodes.jsonl": "".join(r.to_line() + "\n" for r in self.records).encode("utf-8"),
            }
            if self._final is not None:
                files["summary.json"] = (to_json(self._final, indent=2) + "\n").encode("utf-8")
            return files

    def close(self) -> None:
        """Finish the run (if it has not) and close its env."""
        self.finish()
        self.env.close()

    # ------------------------------------------------------------------ inside

    def _log(self, record: EpisodeRecord) -> None:
        self.records.append(record)
        if self.out_dir is not None:
            append_episodes(self.out_dir / "episodes.jsonl", [record])

    def _finish(self) -> RunSummary:
        if self._final is not None:
            return self._final
        for record in list(self.in_play.values()):
            del self.in_play[record.index]
            if record.error is None and not record.terminated and record.truncation is None:
                record.truncation = ABANDONED
            self._log(record)
        played = len(self.records)
        for index in self._order[self.dealt :]:
            self._log(EpisodeRecord(index=index, reset=self.resets[index], error=NOT_PLAYED))
        self.dealt = self.episodes
        wall = time.perf_counter() - self.started_at if self.started_at is not None else 0.0
        tasks = episode_tasks(self.env, self.resets)
        self._final = self._summary(self.records, tasks, timing=run_timing(wall, played, 1))
        self.finished = True
        if self.out_dir is not None:
            write_json(self.out_dir / "summary.json", self._final)
        return self._final

    def _summary(self, records: list[EpisodeRecord], tasks: list[Any] | None = None, **meta: Any) -> RunSummary:
        if tasks is None:  # a seeded episode's task is found by resetting the env: only once the run is over
            tasks = episode_tasks(self.env, self.resets) if self.config.all_tasks else []
        return summarize(
            records,
            self.config,
            tasks=tasks,
            **env_facts(self.env),
            **meta,
        )

    def _prepare_out_dir(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        episodes = out / "episodes.jsonl"
        if episodes.exists() and episodes.stat().st_size:
            raise ValueError(f"{out} already holds episodes; choose another --out directory")
        write_json(out / "run.json", self.config)
