"""``agentgym serve env``: any agentgym env as a network service (protocol ``agentgym-env/1``).

::

    agentgym serve env --env agentgym/CodeSandbox-v0 --env-kwargs '{"split": "test"}' --token-env AGENTGYM_TOKEN

The server's env id and kwargs are fixed when it starts; a client opens *sessions* (one env instance each, made
with ``gym.make(env_id, **env_kwargs)``, ``TimeLimit`` included) and chooses only seeds and ``reset`` options.
The Gymnasium client is ``gym.make("agentgym/Remote-v0", base_url=...)`` (:mod:`agentgym.envs.remote`, which
also holds the protocol's constants, the value codec for ``info``/``options`` and the request models).

Endpoints (JSON bodies, UTF-8; values in ``observation``, ``info``, ``options`` and ``action`` use the codec):

===========================================  ===================================================================
``POST /v1/sessions``                        body ``{"protocol": "agentgym-env/1", "view": "text"|"discrete"}``
                                             (both optional) → ``{"protocol", "session", "view", "views",
                                             "env_id", "env_kwargs", "observation_space", "action_space",
                                             "tools", "max_episode_steps", "num_tasks", "data_checksum",
                                             "reward_bounds", "idle_timeout_s", "step_timeout_s",
                                             "operator"}``; 429 when ``max_sessions`` are open; 403 for the
                                             discrete view of a server without ``operator``
``POST /v1/sessions/{id}/reset``             ``{"seed": int|null, "options": {...}|null, "seq": int|null}`` →
                                             ``{"protocol", "seq", "observation", "info", "parts"|"menu"}``
``POST /v1/sessions/{id}/step``              ``{"action": "...", "seq": int|null}`` → ``{"protocol", "seq",
                                             "observation", "reward", "terminated", "truncated", "info",
                                             "parts"|"menu"}``
``POST /v1/sessions/{id}/oracle``            ``{"seq": int|null}`` → ``{"protocol", "seq", "action"}``: the
                                             env's ``oracle().predict`` on the session's latest observation
                                             (text view; one oracle per session, as ``agentgym eval`` keeps one).
                                             Operator only: 403 on a server without ``operator``
``DELETE /v1/sessions/{id}``                 → ``{"protocol", "closed": true}``
``GET /v1/sessions/{id}/tools``, ``GET /v1/env``  the tool schemas; what the server serves (no session needed)
``WS /v1/sessions/{id}/ws``                  text frames ``{"op": "reset"|"step"|"oracle"|"close", ...body}``,
                                             each answered by one frame with the HTTP reply's body
``GET /v1/run``, ``GET /v1/run/{file}``      benchmark mode, the operator only (the operator's token; any other
                                             gets 403): the run's progress and files; ``run.json``,
                                             ``episodes.jsonl``, ``summary.json`` (once the run is over)
``GET /health``                              ``{"protocol", "status": "ok", "env_id"}`` (no token needed)
``GET /metrics``                             Prometheus text: sessions open, created, refused, reaped; resets,
                                             steps, errors by kind; step seconds (counts over all sessions, no
                                             content of any)
===========================================  ===================================================================

Views. A session plays ``"text"`` (default: the env's text spaces) or, on an ``operator`` server, ``"discrete"``
(the env wrapped in :class:`~agentgym.core.wrappers.DiscreteToolActions`: ``Discrete`` spaces, ``info["text"]``, for
tabular and SB3 learners and ``agentgym eval --agent random``). A text-view reply carries ``parts``, the env's
:class:`~agentgym.core.ObservationParts` of that observation (``{"task", "summary", "tools", "turns": [[action,
result], ...], "result"}``: what the LLM rollout builds summary prompts from); a discrete-view reply carries
``menu``, the action strings actions ``0..n-1`` send next. These fields, ``view``/``views`` and ``oracle`` were
added within ``agentgym-env/1`` (a client ignores fields it does not know; one asking an older server for a
discrete view gets the text view's spaces and refuses them), so its version is unchanged.

Every error is ``{"protocol", "error": {"status", "message"}}`` with a one-line message, over HTTP with that
status and over the WebSocket as a frame (the socket stays open): 400 malformed JSON or a value the env refused
(a bad ``options``), 401 a missing or wrong token, 403 an operator-only feature on a server without ``operator``,
404 an unknown session (the message says if it was closed
and why), 409 a call while the session's previous call runs, or a ``seq`` older than the last, 408 a body
slower than ``request_timeout_s``, 413 a body over ``max_body_bytes``, 422 a message of the wrong shape, 429
no free session, 504 a call past ``step_timeout_s`` (the session is then closed: its env is in an unknown state).

``seq`` makes retries safe: a client numbers its calls; a call with the session's last ``seq`` is answered from
the record without running again, so a step retried after a dropped connection is not taken twice.

Limits (:class:`ServerLimits`). ``max_sessions`` (64) sessions at once; a session with no call for
``idle_timeout_s`` (300 s) is closed. Each session's env lives on its own thread, which runs every call of that
session in order (SQLite handles must stay on the thread that made them; one call at a time is what an env
expects): 64 sessions are 64 mostly idle threads, and a closed or reaped session's thread ends. A call is
answered within ``step_timeout_s`` (60 s): one CodeSandbox action's programs share 1.5 × 5 s
(:meth:`agentgym.core.ToolEnv.call_time_limit`), so 60 s is 8× the worst step; a call still running then is
abandoned and its session closed when it ends. A client that goes away mid-call changes nothing: the call
finishes and its reply is kept for a retry with the same ``seq``. Bodies and WebSocket frames are at most
``max_body_bytes`` (1 MiB: an action is at most 64 Ki characters, up to 256 KiB of UTF-8); a body must arrive within
``request_timeout_s`` (20 s) and a request head within ``head_timeout_s`` (10 s) of the connection opening or the
previous response, so a slowloris client holds a socket for seconds, never a thread; at most ``max_connections``
(1024) connections.

Security. The server binds 127.0.0.1 unless ``--host`` says otherwise. With ``--token-env VAR`` every endpoint
but ``/health`` needs ``Authorization: Bearer <$VAR>``, compared with :func:`hmac.compare_digest`.

Benchmark integrity. A client holding the token reaches what an agent sees in a local ``agentgym eval`` of the
same env and kwargs (split included), and nothing more: task text, tools, observations, rewards, ``info`` and
the observation's parts; for CodeSandbox, its programs run in the same sandbox, whose guarantees are unchanged.
It never gets an answer key, a reference solution, a gold query, a hidden test, an oracle action or another
session's state (sessions are reached only by their unguessable ids; nothing lists them). Two features exist
for the operator's own tooling and are off unless the server is started with ``--operator``
(``EnvServer(operator=True)``), because each hands out answers: the ``oracle`` call (the env's scripted expert's
next action: ``agentgym eval --env-url ... --agent oracle``) and the ``discrete`` view (its action menu lists
each task's candidate answers — CodeSandbox's reference solution, SQLLookup's gold query — for ``--agent
random``, tabular and SB3 learners). Without the flag both answer 403 and say so. Never start a server an
agent under test can reach with ``--operator``. ``/metrics`` shows counts over all sessions, no content. No
TLS: off one machine, put it behind a TLS-terminating proxy or an SSH tunnel.

Benchmark mode (``--benchmark``, ``EnvServer(benchmark=True)``: what a leaderboard must use). In open mode a client
resets any task as often as it likes, so a side session can learn each answer from its rewards and a fresh one then
solves it in one step. A benchmark server deals the tasks itself, through a
:class:`~agentgym.app.evaluation.benchmark.BenchmarkRun` (the rule ``agentgym serve mcp`` follows too): ``reset`` takes
no ``seed`` and no ``options`` (403; ``task_index`` anywhere in the body is 422), and hands the session the run's next
task, in an order drawn from a server-side secret; each task is dealt once per run, across all sessions, and a task once
dealt is never dealt again, however it ended (a reset, a closed or reaped session, a timeout end it as abandoned,
recorded as a failure). A step with no task in play is 409; a reset after the last task is dealt is 409. The server
records every episode as ``agentgym eval --out`` does (``run.json``, ``episodes.jsonl``, ``summary.json`` once every
task has ended or the server stops, counting tasks never dealt as failed), in ``--out DIR`` and for download by the
operator (``GET /v1/run``, with ``--operator-token-env VAR``'s token, which must differ from the clients' token). A
client sees what an agent in a local eval sees of the task in play, and nothing of another: never the order, the seeds,
another task's text or answer, the oracle or the discrete view (``--operator`` is refused with ``--benchmark``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import queue
import socket
import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import gymnasium as gym
import h11
from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import Response
from uvicorn.protocols.http.h11_impl import H11Protocol

from agentgym.app.evaluation.benchmark import MAX_STEPS, BenchmarkRun
from agentgym.app.evaluation.runner import episode_error
from agentgym.core import parts_of, task_info, tools_of
from agentgym.core.episode import EpisodeRecord
from agentgym.core.registration import resolve_env_id
from agentgym.core.wrappers import DiscreteToolActions
from agentgym.envs.remote import (
    API,
    PROTOCOL,
    describe_space,
    dumps,
    encode,
    encode_parts,
    parse_request,
    token_matches,
)

__all__ = ["BoundedUvicorn", "EnvServer", "ServerLimits"]


@dataclass(frozen=True)
class ServerLimits:
    """How much clients may ask of an :class:`EnvServer` (the module docstring says why each default)."""

    max_sessions: int = 64
    idle_timeout_s: float = 300.0
    step_timeout_s: float = 60.0
    max_body_bytes: int = 1 << 20
    request_timeout_s: float = 20.0
    head_timeout_s: float = 10.0
    max_connections: int = 1024

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value <= 0:
                raise ValueError(f"ServerLimits.{name} must be positive, got {value}")


class Problem(Exception):
    """A request the server answers with ``status`` and a one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


_OPERATOR_ONLY = (
    "{what} is off on this server ({why}); it is for the operator's own tooling, who turns it on with "
    "`agentgym serve env --operator` (EnvServer(operator=True))"
)
_MENU_HOLDS_ANSWERS = "its action menu lists candidate answers: reference solutions, gold queries"
_DEALT = (
    "this is a benchmark server: it deals the tasks, each once per run, in its own order; reset takes no {what} "
    "(send {{}}, or reset() on agentgym/Remote-v0)"
)
RUN = f"{API}/run"
"""Where a benchmark server's run directory is downloaded by its operator (``GET /v1/run``, ``/v1/run/<file>``)."""
_RUN_IS_THE_OPERATORS = (
    "the run's results are downloaded by the operator only, with the operator's token (Authorization: Bearer "
    "<$VAR of `agentgym serve env --benchmark --operator-token-env VAR`), not the clients' token"
)


def _error(status: int, message: str) -> dict[str, Any]:
    return {"protocol": PROTOCOL, "error": {"status": status, "message": message}}


# ---------------------------------------------------------------------------------------------- sessions


class _Session:
    """One env on its own thread: :meth:`submit` queues a call of ``fn(env)`` there and returns its future."""

    def __init__(self, session_id: str, make: Callable[[], gym.Env], view: str = "text") -> None:
        self.id = session_id
        self.view = view
        self.env: gym.Env | None = None
        self.oracle: Any = None  # made on the first oracle call, kept for the session (its episodes share it)
        self.observation: Any = None  # the latest text observation, what the oracle is asked about
        self.last_used = time.monotonic()
        self.busy = False
        self.last_seq: int | None = None
        self.last_reply: dict[str, Any] | None = None
        self.episode: EpisodeRecord | None = None  # benchmark mode: the episode dealt to this session, in play
        self._calls: queue.SimpleQueue[tuple[concurrent.futures.Future, Callable] | None] = queue.SimpleQueue()
        self._make = make
        self.thread = threading.Thread(target=self._run, name=f"agentgym-env-{session_id[:8]}", daemon=True)
        self.thread.start()

    def submit(self, fn: Callable[[gym.Env], Any]) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._calls.put((future, fn))
        return future

    def stop(self) -> None:
        """Close the env after the calls already queued, and end the thread."""
        self._calls.put(None)

    def _run(self) -> None:
        try:
            while (item := self._calls.get()) is not None:
                future, fn = item
                if future.set_running_or_notify_cancel():
                    try:
                        if self.env is None:
                            self.env = self._make()
                        future.set_result(fn(self.env))
                    except BaseException as exc:  # noqa: BLE001 (handed to the caller, who answers it)
                        future.set_exception(exc)
        finally:
            if self.env is not None:
                try:
                    self.env.close()
                except Exception:  # noqa: BLE001 (a failing close must not kill the server)
                    pass


class Sessions:
    """The open sessions, their limits and the counts ``/metrics`` shows; used from the event loop only."""

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, Any],
        limits: ServerLimits,
        operator: bool = False,
        run: BenchmarkRun | None = None,
    ) -> None:
        self.env_id, self.env_kwargs, self.limits, self.operator = env_id, env_kwargs, limits, operator
        self.run = run
        self.open: dict[str, _Session] = {}
        self.closed: OrderedDict[str, str] = OrderedDict()  # id -> why, for the last 1024 closed sessions
        self.counts: Counter[str] = Counter()
        self.step_seconds = 0.0
        self.abandoned = 0  # sessions closed past their deadline whose call still runs (they hold a thread)
        self._abandoned_lock = threading.Lock()
        probe = gym.make(env_id, **env_kwargs)
        try:
            info = task_info(probe)
            bounds = info.reward_bounds
            self.discrete_spaces: dict[str, Any] = {}  # empty: the env has no discrete view
            if info.discrete_view:
                try:
                    view = DiscreteToolActions(probe)
                    self.discrete_spaces = {"observation_space": describe_space(view.observation_space),
                                            "action_space": describe_space(view.action_space)}  # fmt: skip
                except (NotImplementedError, ValueError):  # a declared view whose hooks fail: served without it
                    pass
            self.description = {
                "env_id": env_id,
                "env_kwargs": encode(env_kwargs),
                "observation_space": describe_space(probe.observation_space),
                "action_space": describe_space(probe.action_space),
                "views": ["text", "discrete"] if self.discrete_spaces and operator else ["text"],
                "operator": operator,
                "tools": [t.schema for t in tools_of(probe).values()],
                "max_episode_steps": probe.spec.max_episode_steps if probe.spec else None,
                "num_tasks": info.num_tasks,
                "data_checksum": info.data_checksum,
                "reward_bounds": None if bounds is None else [float(bounds[0]), float(bounds[1])],
                "idle_timeout_s": limits.idle_timeout_s,
                "step_timeout_s": limits.step_timeout_s,
                "benchmark": None if run is None else {"episodes": run.episodes},
            }
        finally:
            probe.close()

    def _make(self, view: str) -> gym.Env:
        env = gym.make(self.env_id, **self.env_kwargs)
        return DiscreteToolActions(env) if view == "discrete" else env

    async def create(self, view: str = "text") -> dict[str, Any]:
        if view == "discrete" and not self.operator and self.discrete_spaces:
            self.counts["error_operator_only"] += 1
            raise Problem(403, _OPERATOR_ONLY.format(what="the discrete view", why=_MENU_HOLDS_ANSWERS))
        if view not in self.description["views"]:
            raise Problem(422, f"view {str(view)[:40]!r}: this server's sessions play {self.description['views']}")
        in_use = len(self.open) + self.abandoned
        if in_use >= self.limits.max_sessions:
            self.counts["refused"] += 1
            raise Problem(429, f"all {self.limits.max_sessions} sessions are in use (max_sessions); retry later")
        session = _Session(uuid.uuid4().hex, lambda: self._make(view), view)
        self.open[session.id] = session
        session.busy = True
        try:
            await self._wait(session, session.submit(lambda env: None), "create")
        except Problem:
            raise
        except Exception as exc:
            self._close(session, f"its env failed to start ({type(exc).__name__})")
            raise Problem(500, f"the env failed to start: {type(exc).__name__}: {str(exc)[:200]}") from None
        finally:
            session.busy = False
        self.counts["created"] += 1
        spaces = self.discrete_spaces if view == "discrete" else {}
        return {"protocol": PROTOCOL, "session": session.id, "view": view, **self.description, **spaces}

    def get(self, session_id: str) -> _Session:
        session = self.open.get(session_id)
        if session is None:
            why = self.closed.get(session_id)
            detail = f"it was closed: {why}" if why else "no such session (the server may have restarted)"
            raise Problem(404, f"unknown session {session_id[:64]!r}: {detail}")
        return session

    async def call(self, session_id: str, op: str, body: Any) -> dict[str, Any]:
        """Run ``op`` (reset/step/close) with ``body`` on a session; the reply body."""
        session = self.get(session_id)
        try:
            request = parse_request(op, body)
        except ValueError as exc:
            self.counts["error_invalid"] += 1
            raise Problem(422, str(exc)) from None
        if op == "close":
            self.close(session_id, "closed by the client")
            return {"protocol": PROTOCOL, "closed": True}
        if session.busy:
            raise Problem(409, f"session {session.id[:8]} is still running its previous call; wait for its answer")
        if request.seq is not None and session.last_seq is not None:
            if request.seq == session.last_seq and session.last_reply is not None:
                self.counts["replayed"] += 1
                return session.last_reply  # a retry of the call already answered
            if request.seq < session.last_seq:
                raise Problem(409, f"seq {request.seq} is older than this session's last call ({session.last_seq})")
        if op == "reset":
            fn = (
                self._deal(session, request) if self.run is not None else _reset(session, request.seed, request.options)
            )
        elif op == "oracle":
            if not self.operator:
                self.counts["error_operator_only"] += 1
                raise Problem(403, _OPERATOR_ONLY.format(what="the oracle", why="it answers every task"))
            fn = _oracle(session)
        else:
            if self.run is not None and session.episode is None:
                self.counts["error_no_episode"] += 1
                raise Problem(
                    409, "no task is in play on this session: reset to be dealt the next one (each task is played once)"
                )
            fn = _step(session, request.action)
        session.busy = True
        started = time.monotonic()
        try:
            result = await self._wait(session, session.submit(fn), op)
        except (ValueError, TypeError, KeyError, IndexError, gym.error.Error) as exc:
            self.counts[f"error_{op}"] += 1
            self._end_episode(session, exc)
            raise Problem(400, f"{op} refused: {type(exc).__name__}: {str(exc)[:300]}") from None
        except Problem:
            raise
        except Exception as exc:
            self.counts[f"error_{op}"] += 1
            self._end_episode(session, exc)
            raise Problem(500, f"{op} failed in the env: {type(exc).__name__}: {str(exc)[:300]}") from None
        finally:
            session.busy = False
            session.last_used = time.monotonic()
        raw = result.pop("_raw")
        if session.episode is not None:
            self._record(session, op, getattr(request, "action", None), raw, result)
        self.counts[f"{op}s"] += 1
        if op == "step":
            self.step_seconds += time.monotonic() - started
        reply = {"protocol": PROTOCOL, "seq": request.seq, **result}
        session.last_seq, session.last_reply = request.seq, reply
        return reply

    # ------------------------------------------------------------------ benchmark mode: the run deals the tasks

    def _deal(self, session: _Session, request: Any) -> Callable[[gym.Env], dict[str, Any]]:
        """A benchmark session's reset: the episode in play (if any) ends as abandoned, the run deals the next."""
        assert self.run is not None
        for what, value in (("seed", request.seed), ("options", request.options)):
            if value is not None:
                self.counts["error_benchmark"] += 1
                raise Problem(403, _DEALT.format(what=what))
        self._end_episode(session)
        record = self.run.deal()
        if record is None:
            self.counts["error_run_over"] += 1
            raise Problem(
                409, f"every task of this benchmark run has been dealt ({self.run.episodes}): the run is over"
            )
        session.episode = record
        return _reset(session, record.reset.get("seed"), record.reset.get("options"))

    def _record(self, session: _Session, op: str, action: Any, raw: tuple, result: dict[str, Any]) -> None:
        """Add a benchmark session's reset or step to its episode's record; end the episode when it is over."""
        record = session.episode
        assert record is not None
        if op == "reset":
            observation, info = raw
            record.start(str(observation), info)
            return
        observation, reward, terminated, truncated, info = raw
        try:
            record.step(str(action), str(observation), reward, info)
        except ValueError as exc:  # a non-finite reward: the episode fails, as in agentgym eval
            self._end_episode(session, exc)
            raise Problem(500, f"step failed in the env: {str(exc)[:300]}; the episode is recorded as failed") from None
        if terminated or truncated or record.turns >= MAX_STEPS:
            record.terminated = bool(terminated)
            record.truncation = None if terminated else ("time_limit" if truncated else "max_steps")
            result["truncated"] = not terminated
            self._end_episode(session)

    def _end_episode(self, session: _Session, error: BaseException | str | None = None) -> None:
        """End a benchmark session's episode in play (failed with ``error``, else as it stands: abandoned if
        unfinished) and hand it to the run's record; nothing on a session with none."""
        record, session.episode = session.episode, None
        if record is None or self.run is None:
            return
        if error is not None:
            record.error = error if isinstance(error, str) else episode_error(error)
        self.run.end(record)

    async def _wait(self, session: _Session, future: concurrent.futures.Future, op: str) -> Any:
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.limits.step_timeout_s)
        except TimeoutError:
            self.counts["error_timeout"] += 1
            self._end_episode(
                session, f"TimeoutError: its {op} ran past step_timeout_s ({self.limits.step_timeout_s:g} s)"
            )
            with self._abandoned_lock:
                self.abandoned += 1
            future.add_done_callback(lambda _: self._release_abandoned())
            self._close(session, f"its {op} ran past step_timeout_s ({self.limits.step_timeout_s:g} s)")
            raise Problem(
                504, f"{op} ran past {self.limits.step_timeout_s:g} s (step_timeout_s); session closed"
            ) from None

    def _release_abandoned(self) -> None:
        with self._abandoned_lock:
            self.abandoned -= 1

    def close(self, session_id: str, why: str) -> None:
        self._close(self.get(session_id), why)

    def _close(self, session: _Session, why: str) -> None:
        self._end_episode(session)
        if self.open.pop(session.id, None) is not None:
            session.stop()
            self.closed[session.id] = why
            while len(self.closed) > 1024:
                self.closed.popitem(last=False)

    def reap(self) -> None:
        """Close sessions idle past ``idle_timeout_s``."""
        now = time.monotonic()
        for session in [s for s in self.open.values() if not s.busy]:
            if now - session.last_used > self.limits.idle_timeout_s:
                self.counts["reaped"] += 1
                self._close(session, f"idle for more than {self.limits.idle_timeout_s:g} s (idle_timeout_s)")

    def close_all(self) -> None:
        for session in list(self.open.values()):
            self._close(session, "the server stopped")
        if self.run is not None:
            self.run.close()  # episodes never dealt are recorded as not played; summary.json is written

    def metrics(self) -> str:
        """The counts as Prometheus text."""
        c = self.counts
        lines = [
            ("agentgym_env_sessions_open", "gauge", len(self.open)),
            ("agentgym_env_sessions_created_total", "counter", c["created"]),
            ("agentgym_env_sessions_refused_total", "counter", c["refused"]),
            ("agentgym_env_sessions_reaped_total", "counter", c["reaped"]),
            ("agentgym_env_resets_total", "counter", c["resets"]),
            ("agentgym_env_steps_total", "counter", c["steps"]),
            ("agentgym_env_step_seconds_total", "counter", round(self.step_seconds, 6)),
        ]
        text = "".join(f"# TYPE {name} {kind}\n{name} {value}\n" for name, kind, value in lines)
        errors = sorted((k.removeprefix("error_"), v) for k, v in c.items() if k.startswith("error_"))
        text += "# TYPE agentgym_env_errors_total counter\n"
        text += "".join(f'agentgym_env_errors_total{{kind="{kind}"}} {n}\n' for kind, n in errors)
        return text


def _extras(session: _Session, env: gym.Env, observation: Any) -> dict[str, Any]:
    """A reply's ``parts`` (text view) or ``menu`` (discrete view); remembers the text the oracle is asked about."""
    if session.view == "discrete":
        return {"menu": list(env.menu)}
    session.observation = observation
    parts = parts_of(env)
    return {"parts": None if parts is None else encode_parts(parts)}


def _reset(session: _Session, seed: int | None, options: dict[str, Any] | None) -> Callable[[gym.Env], dict[str, Any]]:
    def run(env: gym.Env) -> dict[str, Any]:
        observation, info = env.reset(seed=seed, options=options)
        return {"observation": encode(observation), "info": encode(info), **_extras(session, env, observation),
                "_raw": (observation, info)}  # fmt: skip

    return run


def _step(session: _Session, action: Any) -> Callable[[gym.Env], dict[str, Any]]:
    def run(env: gym.Env) -> dict[str, Any]:
        observation, reward, terminated, truncated, info = env.step(action)
        return {"observation": encode(observation), "reward": float(reward), "terminated": bool(terminated),
                "truncated": bool(truncated), "info": encode(info), **_extras(session, env, observation),
                "_raw": (observation, float(reward), bool(terminated), bool(truncated), info)}  # fmt: skip

    return run


def _oracle(session: _Session) -> Callable[[gym.Env], dict[str, Any]]:
    def run(env: gym.Env) -> dict[str, Any]:
        if session.view != "text" or not task_info(env).oracle:
            raise ValueError(f"no oracle here: a {session.view} view of {type(env.unwrapped).__name__}")
        if session.observation is None:
            raise gym.error.ResetNeeded("reset the session before asking its oracle")
        if session.oracle is None:
            session.oracle = env.unwrapped.oracle()
        action, _ = session.oracle.predict(session.observation)
        return {"action": encode(action), "_raw": ()}

    return run


# ---------------------------------------------------------------------------------------------- the ASGI app


def _json(status: int, body: dict[str, Any]) -> Response:
    return Response(dumps(body), status_code=status, media_type="application/json")


class RequestGuard:
    """ASGI middleware: the bearer token (HTTP and WebSocket handshakes), then the body's size and deadline.

    On a benchmark server (``run``), ``/v1/run`` opens with ``operator_token`` only: the clients' token gets 403.
    The body is read here, whole, before the app sees it: past ``max_body_bytes`` it is refused with 413 (at
    once when Content-Length says so), and a body slower than ``request_timeout_s`` with 408.
    """

    def __init__(
        self, app: Any, token: str | None, limits: ServerLimits, operator_token: str | None = None, run: bool = False
    ) -> None:
        self.app, self.token, self.limits, self.operator_token, self.run = app, token, limits, operator_token, run

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self.run and (scope["path"] == RUN or scope["path"].startswith(RUN + "/")):
            # the run's results are the operator's: the clients' token (the agent under test holds it) opens nothing
            if self.operator_token is None or not token_matches(headers.get("authorization"), self.operator_token):
                return await _refuse(scope, send, 403, _RUN_IS_THE_OPERATORS)
        elif self.token is not None and scope["path"] != "/health":
            if not token_matches(headers.get("authorization"), self.token):
                return await _refuse(scope, send, 401, "missing or wrong bearer token (Authorization: Bearer ...)")
        if scope["type"] == "websocket":
            return await self.app(scope, receive, send)
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.limits.max_body_bytes:
            return await _refuse(scope, send, 413, f"the body is {length} bytes; at most {self.limits.max_body_bytes}")
        try:
            body = await asyncio.wait_for(self._read_body(receive), self.limits.request_timeout_s)
        except TimeoutError:
            return await _refuse(
                scope, send, 408, f"the body did not arrive within {self.limits.request_timeout_s:g} s"
            )
        except Problem as problem:
            return await _refuse(scope, send, problem.status, problem.message)
        if body is None:
            return  # the client went away
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _read_body(self, receive: Callable) -> bytes | None:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            if len(body) > self.limits.max_body_bytes:
                raise Problem(413, f"the body exceeds {self.limits.max_body_bytes} bytes")
            if not message.get("more_body"):
                return bytes(body)


async def _refuse(scope: dict, send: Callable, status: int, message: str) -> None:
    body = dumps(_error(status, message))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    prefix = "websocket.http" if scope["type"] == "websocket" else "http"
    await send({"type": f"{prefix}.response.start", "status": status, "headers": headers})
    await send({"type": f"{prefix}.response.body", "body": body})


def build_app(sessions: Sessions, token: str | None = None, operator_token: str | None = None) -> Any:
    """The ASGI app: the endpoints of the module docstring over ``sessions``; ``operator_token`` opens a benchmark
    server's run directory (``GET /v1/run``), and nothing else opens it."""
    limits = sessions.limits

    async def reaper() -> None:
        while True:
            await asyncio.sleep(min(1.0, limits.idle_timeout_s / 4))
            sessions.reap()

    async def lifespan(app: FastAPI) -> Any:
        task = asyncio.create_task(reaper())
        yield
        task.cancel()
        sessions.close_all()

    app = FastAPI(title="agentgym env server", lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)

    async def answer(call: Any) -> Response:
        try:
            return _json(200, await call)
        except Problem as problem:
            return _json(problem.status, _error(problem.status, problem.message))

    async def body_of(request: Request) -> Any:
        raw = await request.body()
        try:
            return json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError) as exc:
            raise Problem(400, f"the body is not JSON: {str(exc)[:120]}") from None

    async def create(request: Request) -> dict[str, Any]:
        body = await body_of(request)
        if not isinstance(body, dict) or body.get("protocol", PROTOCOL) != PROTOCOL:
            raise Problem(422, f'this server speaks {PROTOCOL!r}; send {{"protocol": "{PROTOCOL}"}} or {{}}')
        if unknown := set(body) - {"protocol", "view"}:
            raise Problem(422, f"a session is created with protocol and view only, not {sorted(unknown)[0][:40]!r}")
        return await sessions.create(body.get("view", "text"))

    async def session_op(request: Request, session_id: str, op: str) -> dict[str, Any]:
        return await sessions.call(session_id, op, await body_of(request))

    @app.post(f"{API}/sessions")
    async def post_session(request: Request) -> Response:
        return await answer(create(request))

    @app.post(f"{API}/sessions/{{session_id}}/{{op}}")
    async def post_op(request: Request, session_id: str, op: str) -> Response:
        if op not in ("reset", "step", "oracle", "close"):
            return _json(404, _error(404, f"no operation {op[:40]!r}; use reset, step, oracle or close"))
        return await answer(session_op(request, session_id, op))

    @app.delete(f"{API}/sessions/{{session_id}}")
    async def delete_session(session_id: str) -> Response:
        return await answer(sessions.call(session_id, "close", {}))

    async def tools_of(session_id: str) -> dict[str, Any]:
        sessions.get(session_id)
        return {"protocol": PROTOCOL, "tools": sessions.description["tools"]}

    @app.get(f"{API}/sessions/{{session_id}}/tools")
    async def get_tools(session_id: str) -> Response:
        return await answer(tools_of(session_id))

    @app.get(f"{API}/env")
    async def get_env() -> Response:
        return _json(200, {"protocol": PROTOCOL, **sessions.description})

    @app.get(RUN)
    async def get_run() -> Response:
        if sessions.run is None:
            return _json(404, _error(404, "this server runs no benchmark (start it with --benchmark)"))
        return _json(200, {"protocol": PROTOCOL, **sessions.run.progress(), "files": sorted(sessions.run.files())})

    @app.get(f"{RUN}/{{name}}")
    async def get_run_file(name: str) -> Response:
        files = {} if sessions.run is None else sessions.run.files()
        if name not in files:
            return _json(404, _error(404, f"no run file {name[:40]!r}; the run has {sorted(files)}"))
        media = "application/x-ndjson" if name.endswith(".jsonl") else "application/json"
        return Response(files[name], media_type=media)

    @app.get("/health")
    async def health() -> Response:
        return _json(200, {"protocol": PROTOCOL, "status": "ok", "env_id": sessions.env_id})

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(sessions.metrics(), media_type="text/plain; version=0.0.4")

    @app.websocket(f"{API}/sessions/{{session_id}}/ws")
    async def websocket(ws: WebSocket, session_id: str) -> None:
        await ws.accept()
        try:
            while True:
                text = await ws.receive_text()
                reply = await ws_answer(session_id, text)
                await ws.send_text(dumps(reply).decode("utf-8"))
                if reply.get("closed"):
                    await ws.close()
                    return
        except WebSocketDisconnect:
            return

    async def ws_answer(session_id: str, text: str) -> dict[str, Any]:
        try:
            try:
                message = json.loads(text)
            except (ValueError, RecursionError) as exc:
                raise Problem(400, f"the message is not JSON: {str(exc)[:120]}") from None
            if not isinstance(message, dict) or message.get("op") not in ("reset", "step", "oracle", "close"):
                raise Problem(422, 'a message is {"op": "reset"|"step"|"oracle"|"close", ...}')
            op = message.pop("op")
            return await sessions.call(session_id, op, message)
        except Problem as problem:
            return _error(problem.status, problem.message)

    return RequestGuard(app, token, limits, operator_token, run=sessions.run is not None)


# ---------------------------------------------------------------------------------------------- the server


def _bounded_h11(head_timeout_s: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, plus a deadline for each request's head (uvicorn has none: a client sending its
    headers a byte a second would hold the connection for ever)."""

    class BoundedH11(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(head_timeout_s, self._head_expired)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_expired(self) -> None:
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            sock = transport.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                # uvicorn writes a response's head and body separately: with Nagle on, the body waits for the
                # client's delayed ACK (measured: 48 ms per HTTP step on loopback, vs 1 ms without)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return BoundedH11


def _ws_protocol() -> Any:
    """uvicorn's sans-I/O websockets protocol (uvicorn >= 0.35), bounded as below; else its older one.

    uvicorn answers each ping with a pong written at once, and keeps reading while it does: a client that floods
    pings and never reads its pongs grew the server's write buffer without end (measured: 300 MB in 20 s). Here,
    while the buffer is over its high-water mark (64 KiB), the socket is not read either, so such a client is held
    back by TCP, as one that floods messages already is (a reply waits for the buffer to drain)."""
    import importlib.util

    if not importlib.util.find_spec("uvicorn.protocols.websockets.websockets_sansio_impl"):
        return "websockets"
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

    class BoundedWebSocket(WebSocketsSansIOProtocol):
        _held = False  # reading paused until the pongs written so far are read

        def handle_ping(self) -> None:
            super().handle_ping()
            if not self.writable.is_set() and not self._held:
                self._held = True
                self.transport.pause_reading()

        def resume_writing(self) -> None:
            super().resume_writing()
            if self._held:
                self._held = False
                if not self.read_paused:
                    self.transport.resume_reading()

    return BoundedWebSocket


_WS_PROTOCOL = _ws_protocol()


class BoundedUvicorn:
    """An ASGI app served by uvicorn on ``host:port`` within ``limits`` (request heads, connections, WebSocket frames
    and flow control as the module docstring says): :meth:`serve_forever` blocks; ``with server:`` serves in a
    background thread (tests use port 0 and read :attr:`url`). The env server and the MCP server both run on it."""

    def __init__(self, app: Any, *, host: str, port: int, limits: ServerLimits) -> None:
        import uvicorn

        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.create_server((host, port), family=family, backlog=512)
        self.server_address = self._socket.getsockname()
        config = uvicorn.Config(
            app,
            http=_bounded_h11(limits.head_timeout_s),
            ws=_WS_PROTOCOL,
            ws_max_size=limits.max_body_bytes,
            ws_per_message_deflate=False,
            limit_concurrency=limits.max_connections,
            timeout_keep_alive=int(max(5, limits.head_timeout_s)),
            log_level="warning",
            access_log=False,
            lifespan="on",
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    def serve_forever(self) -> None:
        """Serve until Ctrl-C (or :meth:`shutdown`)."""
        self._server.run(sockets=[self._socket])

    def shutdown(self) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{type(self).__name__} at {self.url} did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.close()

    def close(self) -> None:
        """Close the listening socket (after :meth:`serve_forever` returns)."""
        self._socket.close()


class EnvServer(BoundedUvicorn):
    """``env_id`` (with ``env_kwargs``) served on ``host:port``: :meth:`serve_forever` blocks; ``with server:``
    serves in a background thread (tests use port 0 and read :attr:`url`). ``operator=True`` also serves the
    oracle and the discrete view (see the module docstring: never to an agent under test).

    ``benchmark=True`` serves one :class:`~agentgym.app.evaluation.benchmark.BenchmarkRun` of ``split`` (``episodes``,
    ``seed`` as in ``agentgym eval``; written to ``out_dir``; :attr:`run`): the server deals every task once, in a
    secret order, and ``operator_token`` opens its results at ``GET /v1/run`` (module docstring, "Benchmark mode")."""

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, Any] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        token: str | None = None,
        limits: ServerLimits | None = None,
        operator: bool = False,
        benchmark: bool = False,
        split: str | None = "test",
        episodes: int | None = None,
        seed: int = 0,
        out_dir: str | Path | None = None,
        operator_token: str | None = None,
    ) -> None:
        self.limits = limits or ServerLimits()
        self.env_id = resolve_env_id(env_id)
        env_kwargs = dict(env_kwargs or {})
        self.run: BenchmarkRun | None = None
        if benchmark:
            if operator:
                raise ValueError("a benchmark server serves no operator features (the oracle and the discrete view "
                                 "hand out answers); drop --operator")  # fmt: skip
            if operator_token is not None and operator_token == token:
                raise ValueError("the operator's token must not be the clients' token (it opens the run's results)")
            self.run = BenchmarkRun(
                self.env_id,
                split=split,
                env_kwargs=env_kwargs,
                episodes=episodes,
                seed=seed,
                out_dir=out_dir,
                agent="env-server",
                order="secret",
                each_task_once=True,
            )
            env_kwargs = self.run.env_kwargs
        elif any(v is not None for v in (episodes, out_dir, operator_token)):
            raise ValueError("episodes, out_dir and operator_token are for a benchmark server (benchmark=True)")
        self.sessions = Sessions(self.env_id, env_kwargs, self.limits, operator, self.run)
        app = build_app(self.sessions, token, operator_token)
        super().__init__(app, host=host, port=port, limits=self.limits)
