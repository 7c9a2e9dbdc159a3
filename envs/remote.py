"""``agentgym/Remote-v0``: a Gymnasium env that plays an env served by ``agentgym serve env``.

::

    agentgym serve env --env agentgym/CliffWalk-v0 --port 8765          # on the machine the env should run on

    env = gym.make("agentgym/Remote-v0", base_url="http://127.0.0.1:8765", env_id="agentgym/CliffWalk-v0")
    obs, info = env.reset(seed=0)                                        # the server's env, seeded: same text

It behaves like ``gym.make(env_id)`` on the server's machine: the same spaces (sizes from the server), and the
same observations, rewards, ``terminated``/``truncated`` and ``info`` for the same seeds and actions (the
server's env carries its own ``TimeLimit``, so truncation is the server's). ``env_id`` and ``env_kwargs``, when
given, are checked against what the server serves; a client never chooses kwargs (they can set a sandbox's
limits), only seeds and ``reset`` options.

Arguments: ``base_url`` (one URL, several as a list or a comma-separated string: this session goes to one of
them, round-robin per process, and stays there); ``transport`` ``"ws"`` (default: one WebSocket per session,
the low-latency path) or ``"http"``; ``token_env``: the name of an environment variable holding the server's
bearer token (the token itself never enters ``gym.make``'s kwargs, which reports record); ``timeout_s``: how
long one call waits for its answer, all of it: connecting, retries and every byte of the reply (a server that
trickles its reply is cut off; a CodeSandbox step can take up to 4 × 5 s); ``retries`` and ``backoff_s``:
a connection error is retried ``retries`` times after ``backoff_s``, ``2·backoff_s``, … (5 tries over 1.55 s by
default), then :class:`RemoteEnvUnavailable` is raised. Retrying is safe: every ``reset``/``step`` carries a
sequence number and the server answers a repeated one from its record instead of stepping twice.

What trainers and evaluators use besides ``reset``/``step`` comes over the protocol too:
:meth:`RemoteEnv.observation_parts` (so :func:`agentgym.core.parts_of` and the LLM rollout's summary prompts work
unchanged), :meth:`~RemoteEnv.task_prompt`, :meth:`~RemoteEnv.tools_prompt`, ``task_info`` (the served env's
task count, reward bounds and data checksum, as :class:`~agentgym.core.TaskInfo`), and, from a server started
with ``--operator`` (they hand out answers, so a server an agent under test reaches refuses them with 403),
:meth:`~RemoteEnv.oracle` (the server's oracle, played on the session's latest observation) and
:meth:`~RemoteEnv.discrete_view` (``view="discrete"``: the server wraps the session's env in
:class:`~agentgym.core.wrappers.DiscreteToolActions`, so the spaces are ``Discrete`` and trajectories are those of
``as_discrete(gym.make(env_id))``). :class:`RemoteVectorEnv` steps N sessions at once.

Errors: :class:`RemoteEnvError` (a ``RuntimeError``) for what the server refused, with its one-line reason, and
for a reply this client cannot read (a missing field, one of the wrong type, a reward that is not a finite number,
an observation outside the served space), naming the field;
:class:`RemoteEnvForbidden` (also a ``PermissionError``) for a wrong token or an operator-only feature;
:class:`RemoteEnvUnavailable` (also a ``ConnectionError``) when no server answers — an infrastructure failure,
not the agent's.

This module is also the protocol's one definition (:data:`PROTOCOL`, the value codec :func:`encode` /
:func:`decode`, the request models); the server (:mod:`agentgym.app.serving.env_server`, whose docstring documents
the messages) imports them from here, so client and server cannot drift.

The value codec. Messages are JSON. ``info`` and ``options`` hold Python values JSON lacks (a parsed call's
arguments can be a tuple, a set, bytes or a dict with int keys; NaN), so a value JSON cannot carry exactly is
sent as an object tagged ``"$agentgym"``: ``{"$agentgym": "tuple", "items": [...]}``, likewise ``"set"``,
``"frozenset"``, ``"dict"`` (``items`` as ``[key, value]`` pairs: non-string keys, or a key named
``"$agentgym"``), ``"bytes"`` (``base64``), ``"complex"`` (``value: [re, im]``), ``"float"`` (``value``:
``"nan"``, ``"inf"``, ``"-inf"``), ``"ellipsis"``, ``"ndarray"`` (``dtype``, ``shape``, ``data``; a NumPy scalar
has shape ``[]``) and, for anything else, ``"repr"`` (``value``: its ``repr``; decoded as that string — the one
lossy case). Decoding is the exact inverse, so trajectories compare equal with ``==``.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import itertools
import json
import math
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Literal

import gymnasium as gym
import httpx
import numpy as np
from gymnasium import spaces
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentgym.core import ObservationParts, TaskInfo, Turn, deadline
from agentgym.core.spaces import AnyText

__all__ = [
    "MAX_REPLY_BYTES",
    "PROTOCOL",
    "RemoteEnv",
    "RemoteEnvError",
    "RemoteEnvForbidden",
    "RemoteEnvUnavailable",
    "RemoteVectorEnv",
    "ResetRequest",
    "StepRequest",
    "decode",
    "describe_space",
    "encode",
    "space_from",
    "token_matches",
]

PROTOCOL = "agentgym-env/1"
"""The protocol's name and major version; a server and a client speak together only when they agree on it."""

API = "/v1"
"""Every session endpoint lives under this path (``/health`` and ``/metrics`` do not)."""

MAX_REPLY_BYTES = 16 << 20
"""The largest reply a client reads (an honest one holds one observation, its parts and ``info``: well under 1 MiB);
a server that sends more is refused with :class:`RemoteEnvError`, as is one whose reply is not a JSON object."""

_TAG = "$agentgym"
_MAX_DEPTH = 64  # a value nested deeper is refused (JSON from a client is attacker-shaped)


class RemoteEnvError(RuntimeError):
    """The env server refused a call, or answered something this client cannot read; the message says why."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RemoteEnvUnavailable(RemoteEnvError, ConnectionError):
    """No env server answered (after the retries): an infrastructure failure, not the agent's."""


class RemoteEnvForbidden(RemoteEnvError, PermissionError):
    """The env server refused this client (401: the token) or this feature (403: one for its operator only)."""


# ---------------------------------------------------------------------------------------------- the value codec


def encode(value: Any, _depth: int = 0) -> Any:
    """``value`` as JSON-ready data (see the module docstring for the tags); :func:`decode` inverts it."""
    if _depth > _MAX_DEPTH:
        raise ValueError(f"a value nested more than {_MAX_DEPTH} deep")
    if value is None or type(value) in (bool, str, int):
        return value
    if isinstance(value, str):  # a str subclass (np.str_) arrives as the str it equals
        return str(value)
    if type(value) is float:
        return value if np.isfinite(value) else {_TAG: "float", "value": repr(value)}
    if type(value) is list:
        return [encode(v, _depth + 1) for v in value]
    if type(value) is dict:
        if all(type(k) is str for k in value) and _TAG not in value:
            return {k: encode(v, _depth + 1) for k, v in value.items()}
        return {_TAG: "dict", "items": [[encode(k, _depth + 1), encode(v, _depth + 1)] for k, v in value.items()]}
    if type(value) in (tuple, set, frozenset):
        return {_TAG: type(value).__name__, "items": [encode(v, _depth + 1) for v in value]}
    if type(value) is bytes:
        return {_TAG: "bytes", "base64": base64.b64encode(value).decode("ascii")}
    if type(value) is complex:
        return {_TAG: "complex", "value": [encode(value.real), encode(value.imag)]}
    if value is Ellipsis:
        return {_TAG: "ellipsis"}
    if isinstance(value, (np.ndarray, np.generic)) and np.asarray(value).dtype.kind in "biufc":
        array = np.asarray(value)
        return {_TAG: "ndarray", "dtype": array.dtype.str, "shape": list(array.shape),
                "data": encode(array.ravel().tolist(), _depth + 1)}  # fmt: skip
    return {_TAG: "repr", "value": repr(value)}


def decode(data: Any, _depth: int = 0) -> Any:
    """The value :func:`encode` made ``data`` from; ``ValueError`` for data no encoder writes."""
    if _depth > _MAX_DEPTH:
        raise ValueError(f"a value nested more than {_MAX_DEPTH} deep")
    if isinstance(data, list):
        return [decode(v, _depth + 1) for v in data]
    if not isinstance(data, dict):
        return data
    if _TAG not in data:
        return {k: decode(v, _depth + 1) for k, v in data.items()}
    kind = data[_TAG]
    try:
        if kind in ("tuple", "set", "frozenset"):
            return {"tuple": tuple, "set": set, "frozenset": frozenset}[kind](
                decode(v, _depth + 1) for v in data["items"]
            )
        if kind == "dict":
            return {decode(k, _depth + 1): decode(v, _depth + 1) for k, v in data["items"]}
        if kind == "bytes":
            return base64.b64decode(data["base64"], validate=True)
        if kind == "complex":
            return complex(*map(float, decode(data["value"], _depth + 1)))
        if kind == "float":
            return float(data["value"])
        if kind == "ellipsis":
            return Ellipsis
        if kind == "ndarray":
            array = np.array(decode(data["data"], _depth + 1), dtype=np.dtype(data["dtype"]))
            array = array.reshape([int(n) for n in data["shape"]])
            return array[()] if array.ndim == 0 else array
        if kind == "repr":
            return str(data["value"])
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"malformed {_TAG} {kind!r} value: {type(exc).__name__}: {exc}") from None
    raise ValueError(f"unknown {_TAG} tag {str(kind)[:40]!r}")


def dumps(message: dict[str, Any]) -> bytes:
    """A message as UTF-8 JSON (its values already :func:`encode`\\ d)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


# ---------------------------------------------------------------------------------------------- spaces


def describe_space(space: gym.Space) -> dict[str, Any]:
    """A space as JSON: ``{"type": "AnyText", "min_length", "max_length"}`` or ``{"type": "Discrete", "n",
    "start"}``; ``ValueError`` for other spaces (the server refuses to serve them)."""
    if isinstance(space, AnyText):
        return {"type": "AnyText", "min_length": space.min_length, "max_length": space.max_length}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    raise ValueError(f"cannot serve an env with a {type(space).__name__} space (AnyText and Discrete are served)")


def space_from(description: dict[str, Any]) -> gym.Space:
    """The space :func:`describe_space` described."""
    if description.get("type") == "AnyText":
        return AnyText(int(description["max_length"]), min_length=int(description["min_length"]))
    if description.get("type") == "Discrete":
        return spaces.Discrete(int(description["n"]), start=int(description["start"]))
    raise RemoteEnvError(f"the server describes a space this client does not know: {str(description)[:120]}")


# ---------------------------------------------------------------------------------------------- requests


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    seq: int | None = Field(default=None, ge=0)
    """The client's count of calls in this session; a repeated ``seq`` is answered from the record (a retry)."""


class ResetRequest(_Request):
    """``reset``: ``{"seed": int | null, "options": encoded dict | null, "seq": int | null}``."""

    seed: int | None = Field(default=None, ge=0, lt=2**128)
    options: Any = None


class StepRequest(_Request):
    """``step``: ``{"action": <the action, encoded>, "seq": int | null}`` (a text env's action is a string)."""

    action: Any


class CloseRequest(_Request):
    """``close``: ``{}``."""


class OracleRequest(_Request):
    """``oracle``: ``{"seq": int | null}`` → the served env's oracle's action for the session's latest observation."""


REQUESTS: dict[str, type[_Request]] = {
    "reset": ResetRequest,
    "step": StepRequest,
    "close": CloseRequest,
    "oracle": OracleRequest,
}

VIEWS = ("text", "discrete")
"""What a session plays: the env's text spaces, or ``DiscreteToolActions`` over it (chosen when it is created)."""


def encode_parts(parts: ObservationParts) -> dict[str, Any]:
    """:class:`~agentgym.core.ObservationParts` as a reply's ``parts``: ``{"task", "summary", "tools", "turns":
    [[action, result], ...], "result"}`` (strings or null)."""
    return {"task": parts.task, "summary": parts.summary, "tools": parts.tools,
            "turns": [[t.action, t.result] for t in parts.turns], "result": parts.result}  # fmt: skip


def decode_parts(data: Any) -> ObservationParts:
    """The parts :func:`encode_parts` wrote; :class:`RemoteEnvError` for anything else."""
    try:
        texts = {k: data[k] for k in ("task", "tools", "result")}
        if not isinstance(data["summary"], str) or any(
            v is not None and not isinstance(v, str) for v in texts.values()
        ):
            raise TypeError("a part that is not a string")
        turns = tuple(Turn(str(a), str(r)) for a, r in data["turns"])
        return ObservationParts(
            texts["task"], data["summary"], tools=texts["tools"], turns=turns, result=texts["result"]
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RemoteEnvError(f"the server sent observation parts this client cannot read ({exc})") from None


def parse_request(op: str, body: Any) -> _Request:
    """The request ``body`` (decoded JSON) for ``op``; ``ValueError`` with a one-line reason if it is malformed."""
    if not isinstance(body, dict):
        raise ValueError(f"{op}: the body must be a JSON object, got {type(body).__name__}")
    try:
        request = REQUESTS[op].model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise ValueError(f"{op}: {where}: {first['msg']} ({exc.error_count()} error(s))") from None
    if isinstance(request, ResetRequest) and request.options is not None:
        request.options = decode(request.options)
        if not isinstance(request.options, dict):
            raise ValueError(f"reset: options must be an object, got {type(request.options).__name__}")
    if isinstance(request, StepRequest):
        request.action = decode(request.action)
    return request


def token_matches(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``Bearer <token>``, compared in constant time."""
    presented = (header or "").removeprefix("Bearer ").encode("utf-8", "replace")
    return (header or "").startswith("Bearer ") and hmac.compare_digest(presented, token.encode("utf-8"))


# ---------------------------------------------------------------------------------------------- the client

_ROUND_ROBIN = itertools.count()


def _urls(base_url: str | Sequence[str]) -> list[str]:
    urls = [u.strip().rstrip("/") for u in (base_url.split(",") if isinstance(base_url, str) else base_url)]
    urls = [u for u in urls if u]
    if not urls or any(not u.startswith(("http://", "https://")) for u in urls):
        raise ValueError(f"base_url must be one or more http(s):// URLs, got {base_url!r}")
    return urls


class RemoteEnv(gym.Env):
    """An env served by ``agentgym serve env``, played over HTTP or a WebSocket (see the module docstring)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        base_url: str | Sequence[str],
        env_id: str | None = None,
        *,
        transport: Literal["ws", "http"] = "ws",
        token_env: str | None = None,
        timeout_s: float = 60.0,
        retries: int = 4,
        backoff_s: float = 0.05,
        view: Literal["text", "discrete"] = "text",
        env_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if transport not in ("ws", "http"):
            raise ValueError(f"transport must be 'ws' or 'http', got {transport!r}")
        if view not in VIEWS:
            raise ValueError(f"view must be 'text' or 'discrete', got {view!r}")
        self._settings = {"env_id": env_id, "transport": transport, "token_env": token_env, "timeout_s": timeout_s,
                          "retries": retries, "backoff_s": backoff_s}  # fmt: skip
        self.view = view
        self._views: list[RemoteEnv] = []  # the discrete views opened from this env, closed with it
        self._parts: ObservationParts | None = None
        self._first_parts: ObservationParts | None = None
        self._menu: list[str] = []
        if retries < 0 or backoff_s < 0 or timeout_s <= 0:
            raise ValueError("retries and backoff_s must be >= 0 and timeout_s > 0")
        urls = _urls(base_url)
        self.base_url = urls[next(_ROUND_ROBIN) % len(urls)]  # sticky: the session lives on this server
        self.transport, self.timeout_s, self.retries, self.backoff_s = transport, timeout_s, retries, backoff_s
        headers = {"Content-Type": "application/json"}
        if token_env is not None:
            if not os.environ.get(token_env):
                raise ValueError(f"token_env={token_env!r} names an environment variable that is not set")
            headers["Authorization"] = f"Bearer {os.environ[token_env]}"
        self._headers = headers
        nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]  # a request's head and body leave at once
        self._http = deadline.client(
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 5.0)), headers=headers, socket_options=nodelay
        )
        self._ws: Any = None
        self._seq = 0
        self._closed = False
        body = {"protocol": PROTOCOL, **({"view": view} if view != "text" else {})}  # an older server knows no view
        created = self._with_retries(lambda: self._http_call("POST", f"{API}/sessions", body))
        try:
            with self._reading("session"):
                self._take_session(created)
            self._check_served(created, env_id, {**(env_kwargs or {}), **kwargs})
            if created.get("view", "text") != view:
                raise RemoteEnvError(
                    f"the env server at {self.base_url} does not serve a {view} view (an older server?)"
                )
        except RemoteEnvError:
            self.close()
            raise
        self.task_info = TaskInfo(
            num_tasks=self.num_tasks,
            reward_bounds=self._reward_bounds,
            data_checksum=self.data_checksum,
            parallel_episodes=True,
            discrete_view="discrete" in created.get("views", []),
            oracle=self.operator and view == "text",
        )
        """What the server said of its env (:class:`~agentgym.core.TaskInfo`): its task count, reward bounds and data
        checksum; a discrete view and an oracle where it serves them (``--operator``). Episodes run in parallel: their
        work is the server's."""
        self.success = False
        if isinstance(self.observation_space, AnyText):
            self.max_observation_length = self.observation_space.max_length
            """The served env's ``max_observation_length`` (the rollout's history budget, as for a ``ToolEnv``)."""

    def _take_session(self, created: dict[str, Any]) -> None:
        """What a new session's reply says of the served env."""
        self.session_id: str = _typed(created, "session", str)
        self.served_env_id: str = _typed(created, "env_id", str)
        self.operator: bool = _typed(created, "operator", bool, default=True)
        """Whether the server serves its operator's features, the oracle and the discrete view (an older server
        that does not say served them)."""
        self.observation_space = space_from(_typed(created, "observation_space", dict))
        self.action_space = space_from(_typed(created, "action_space", dict))
        self.tools: list[dict[str, Any]] = _typed(created, "tools", list)
        """The served env's tool schemas (OpenAI-style), as ``info["tools"]`` at reset holds them."""
        self.max_episode_steps: int | None = _typed(created, "max_episode_steps", int, type(None))
        self.num_tasks: int | None = _typed(created, "num_tasks", int, type(None))
        self.data_checksum: str | None = _typed(created, "data_checksum", str, type(None), default=None)
        """The served env's frozen-data checksum (reports record it), or None."""
        bounds = _typed(created, "reward_bounds", list, type(None))
        self._reward_bounds = None if bounds is None else (_finite(bounds[0]), _finite(bounds[1]))

    @contextlib.contextmanager
    def _reading(self, what: str) -> Iterator[None]:
        """Turns a reply that lacks a field, or holds one of the wrong kind, into a :class:`RemoteEnvError`."""
        try:
            yield
        except (
            KeyError,
            TypeError,
            ValueError,
            AttributeError,
            IndexError,
            OverflowError,
            RecursionError,
            AssertionError,
        ) as exc:  # fmt: skip  (AssertionError: gymnasium checks space sizes so)
            detail = f"no {exc.args[0]!r} field" if isinstance(exc, KeyError) else str(exc)[:200]
            raise RemoteEnvError(
                f"the env server at {self.base_url} sent a {what} reply this client cannot read: {detail}"
            ) from None

    def _check_served(self, created: dict[str, Any], env_id: str | None, env_kwargs: dict[str, Any]) -> None:
        with self._reading("session"):
            served_kwargs = decode(created.get("env_kwargs", {}))
        wrong = None
        if env_id is not None and env_id != self.served_env_id:
            wrong = f"it serves {self.served_env_id!r}, not {env_id!r}"
        elif env_kwargs and env_kwargs != served_kwargs:
            wrong = f"it serves {self.served_env_id} with env kwargs {served_kwargs}, not {env_kwargs}"
        if wrong:
            raise RemoteEnvError(f"the env server at {self.base_url}: {wrong} (start one with --env/--env-kwargs)")

    def reward_bounds(self) -> tuple[float, float] | None:
        """The served env's per-step reward bounds (:meth:`agentgym.ToolEnv.reward_bounds`), or None."""
        return self._reward_bounds

    def observation_parts(self) -> ObservationParts:
        """The parts of the latest observation, as the served env's ``observation_parts()`` gave them (so
        :func:`agentgym.core.parts_of` works on this env as on a local ``ToolEnv``)."""
        if self._parts is None:
            raise gym.error.ResetNeeded("call reset() before observation_parts() (a discrete view has no parts)")
        return self._parts

    def task_prompt(self) -> str:
        """The episode's instructions (the served env's ``task_prompt()``)."""
        return self.observation_parts().task or ""

    def tools_prompt(self) -> str:
        """The tool list and call format (the served env's ``tools_prompt()``, from the episode's first observation)."""
        self.observation_parts()
        return (self._first_parts.tools if self._first_parts else None) or ""

    def oracle(self) -> RemoteOracle:
        """The served env's scripted oracle, asked for each action over the protocol (``eval --agent oracle``; the
        server must run with ``--operator``, else the first ``predict`` raises :class:`RemoteEnvError`, 403)."""
        if self.view != "text":
            raise RemoteEnvError("the oracle plays the text view; use the env this discrete view was opened from")
        if not self.operator:
            raise RemoteEnvForbidden(
                f"the env server at {self.base_url} serves no oracle (it hands out answers): its operator starts it "
                "with `agentgym serve env --operator` for their own baselines",
                status=403,
            )
        return RemoteOracle(self)

    def discrete_view(self) -> RemoteEnv:
        """A new session on this env's server in ``view="discrete"`` (closed when this env is closed; the server must
        run with ``--operator``, else :class:`RemoteEnvError`, 403)."""
        view = RemoteEnv(self.base_url, view="discrete", **self._settings)
        self._views.append(view)
        return view

    @property
    def menu(self) -> list[str]:
        """Discrete view: the action strings that actions 0..n-1 send now (``DiscreteToolActions.menu``)."""
        if self.view != "discrete":
            raise AttributeError("menu: only a discrete view (view='discrete') has an action menu")
        return list(self._menu)

    # ------------------------------------------------------------------ the Gymnasium API

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        reply = self._call("reset", {"seed": seed, "options": encode(options)})
        with self._reading("reset"):
            observation, info = self._observation(reply), self._info(reply)
            self._take_extras(reply)
        self._first_parts = self._parts
        return observation, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        reply = self._call("step", {"action": encode(action)})
        with self._reading("step"):
            observation, info = self._observation(reply), self._info(reply)
            reward = _finite(reply["reward"])
            terminated, truncated = _typed(reply, "terminated", bool), _typed(reply, "truncated", bool)
            self._take_extras(reply)
        return observation, reward, terminated, truncated, info

    def _observation(self, reply: dict[str, Any]) -> Any:
        observation = decode(reply["observation"])
        if not self.observation_space.contains(observation):
            raise ValueError(f"the observation is not in the served observation space {self.observation_space}")
        return observation

    def _info(self, reply: dict[str, Any]) -> dict[str, Any]:
        info = decode(_typed(reply, "info", dict))
        self.success = bool(info.get("success", False))
        return info

    def _take_extras(self, reply: dict[str, Any]) -> None:
        """What a reply carries besides the Gymnasium values: a text view's ``parts``, a discrete view's ``menu``."""
        parts = reply.get("parts")
        self._parts = None if parts is None else decode_parts(parts)
        menu = reply.get("menu")
        self._menu = [str(a) for a in menu] if isinstance(menu, list) else []

    def close(self) -> None:
        """Close the session on the server (best effort: a server that is gone has nothing to close)."""
        if self._closed:
            return
        self._closed = True
        for view in self._views:
            view.close()
        try:
            if self._ws is not None:
                self._ws.close()
            if getattr(self, "session_id", None):
                with deadline.deadline(time.monotonic() + 2.0):
                    self._http.delete(f"{self.base_url}{API}/sessions/{self.session_id}", timeout=2.0)
        except (httpx.HTTPError, OSError):
            pass
        finally:
            self._http.close()

    # ------------------------------------------------------------------ transports

    def _call(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        if self._closed:
            raise RemoteEnvError(f"{op}() on a closed agentgym/Remote-v0 env")
        self._seq += 1
        message = {**payload, "seq": self._seq}
        if self.transport == "http":
            path = f"{API}/sessions/{self.session_id}/{op}"
            return self._with_retries(lambda: self._http_call("POST", path, message))
        return self._with_retries(lambda: self._ws_call({"op": op, **message}))

    def _with_retries(self, call: Any) -> dict[str, Any]:
        """``call()``, retried after a connection error with exponential backoff, all of it within ``timeout_s`` (a
        server that trickles its reply is cut off); :class:`RemoteEnvUnavailable` once ``retries`` retries have
        failed."""
        started = time.monotonic()
        with deadline.deadline(started + self.timeout_s):
            for attempt in range(self.retries + 1):
                try:
                    return call()
                except RemoteEnvError:  # the server answered (RemoteEnvForbidden is an OSError too): no retry
                    raise
                except (httpx.TransportError, OSError, _WSClosed) as exc:
                    timed_out = isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout)
                    self._drop_ws()
                    if timed_out or deadline.remaining() <= 0:
                        raise self._no_answer() from None
                    if attempt == self.retries:
                        raise RemoteEnvUnavailable(
                            f"the env server at {self.base_url} is unreachable: {self.retries + 1} tries over "
                            f"{time.monotonic() - started:.2f} s failed ({type(exc).__name__}: {str(exc)[:120]})"
                        ) from None
                    time.sleep(max(0.0, min(self.backoff_s * 2**attempt, deadline.remaining())))
        raise AssertionError("unreachable")

    def _no_answer(self) -> RemoteEnvError:
        return RemoteEnvError(
            f"the env server at {self.base_url} gave no answer within {self.timeout_s:g} s (timeout_s)"
        )

    def _http_call(self, method: str, path: str, message: dict[str, Any]) -> dict[str, Any]:
        with self._http.stream(method, f"{self.base_url}{path}", content=dumps(message)) as response:
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_REPLY_BYTES:
                    raise self._too_big()
            return self._reply(response.status_code, bytes(body))

    def _too_big(self) -> RemoteEnvError:
        return RemoteEnvError(f"the env server at {self.base_url} sent a reply over {MAX_REPLY_BYTES >> 20} MiB")

    def _ws_call(self, message: dict[str, Any]) -> dict[str, Any]:
        from websockets.exceptions import ConnectionClosed, InvalidStatus
        from websockets.sync.client import connect

        if self._ws is None:
            url = self.base_url.replace("http", "ws", 1) + f"{API}/sessions/{self.session_id}/ws"
            try:
                opening = connect(url, additional_headers=self._headers, open_timeout=deadline.remaining(5.0),
                                  max_size=MAX_REPLY_BYTES, compression=None, ping_interval=None)  # fmt: skip
                self._ws = opening.__enter__()  # websockets >= 17 wants a context manager; < 17 returns the socket
            except InvalidStatus as exc:
                body = exc.response.body or b""
                return self._reply(exc.response.status_code, body)
        try:
            self._ws.send(dumps(message).decode("utf-8"))
            text = self._ws.recv(timeout=max(0.0, deadline.remaining(self.timeout_s)))
        except TimeoutError:
            self._drop_ws()
            raise self._no_answer() from None
        except ConnectionClosed as exc:
            if any(close is not None and close.code == 1009 for close in (exc.sent, exc.rcvd)):  # over max_size
                self._drop_ws()
                raise self._too_big() from None
            raise _WSClosed(str(exc)) from None
        try:
            reply = json.loads(text)
        except (ValueError, RecursionError):
            return self._reply(200, text.encode("utf-8", "replace"))
        error = reply.get("error") if isinstance(reply, dict) else None
        status = error.get("status", 500) if isinstance(error, dict) else 200
        return self._reply(status if isinstance(status, int) else 500, reply)

    def _drop_ws(self) -> None:
        if self._ws is not None:
            try:
                self._ws.close()
            except Exception:  # noqa: BLE001 (a dead socket has nothing left to close)
                pass
            self._ws = None

    def _reply(self, status: int, body: bytes | dict[str, Any]) -> dict[str, Any]:
        try:
            reply = body if isinstance(body, dict) else json.loads(body)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than Python reads
            reply = {"error": {"message": bytes(body[:200]).decode("utf-8", "replace")}}
        if not isinstance(reply, dict):
            reply = {"error": {"message": f"a JSON {type(reply).__name__} where an object belongs"}}
        if status >= 400 or "error" in reply:
            error = reply.get("error")
            message = str(error.get("message", "") if isinstance(error, dict) else error)[:300]
            kind = RemoteEnvForbidden if status in (401, 403) else RemoteEnvError
            raise kind(f"the env server at {self.base_url} answered {status}: {message}", status=status)
        if reply.get("protocol") != PROTOCOL:
            raise RemoteEnvError(
                f"the env server at {self.base_url} speaks {reply.get('protocol')!r}; this client speaks {PROTOCOL!r}"
            )
        return reply


def _typed(reply: dict[str, Any], key: str, *kinds: type, **default: Any) -> Any:
    """``reply[key]`` if it is one of ``kinds`` (``KeyError`` if missing and no ``default`` is given, else
    ``TypeError``; ``True`` is no ``int`` here)."""
    value = reply.get(key, default["default"]) if default else reply[key]
    if not isinstance(value, kinds) or (type(value) is bool and bool not in kinds):
        raise TypeError(f"{key!r} is a {type(value).__name__}")
    return value


def _finite(value: Any) -> float:
    """A number the server sent, as a finite float (``ValueError`` for NaN, infinities and what is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{str(value)[:40]!r} is not a finite number")
    return float(value)


class _WSClosed(Exception):
    """The WebSocket closed under a call (retried like a connection error)."""


class RemoteOracle:
    """The served env's oracle (:meth:`RemoteEnv.oracle`): ``predict`` asks the server, which plays the oracle of the
    session's env on the session's latest observation (the one this client just got)."""

    def __init__(self, env: RemoteEnv) -> None:
        self.env = env

    def predict(self, observation: Any, state: Any = None, deterministic: bool = True) -> tuple[Any, None]:
        reply = self.env._call("oracle", {})
        with self.env._reading("oracle"):
            return decode(reply["action"]), None


class _Pending(gym.Wrapper):
    """A sub-env of :class:`RemoteVectorEnv` whose next ``reset``/``step`` may already be running on a thread: the
    call then returns that result (the vector env's bookkeeping is ``SyncVectorEnv``'s own)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.pending: Future | None = None

    def _result(self, call: Callable[[], Any]) -> Any:
        pending, self.pending = self.pending, None
        return pending.result() if pending is not None else call()

    def reset(self, **kwargs: Any) -> Any:
        return self._result(lambda: self.env.reset(**kwargs))

    def step(self, action: Any) -> Any:
        return self._result(lambda: self.env.step(action))


class RemoteVectorEnv(gym.vector.SyncVectorEnv):
    """``num_envs`` sessions of an ``agentgym serve env`` server (or of several: ``base_url`` as in
    :class:`RemoteEnv`, sessions spread round-robin), stepped concurrently, one thread per session::

        envs = RemoteVectorEnv("http://127.0.0.1:8765,http://127.0.0.1:8766", "agentgym/CodeSandbox-v0", num_envs=8)
        observations, infos = envs.reset(seed=0)          # a tuple of 8 texts; seeds 0..7
        observations, rewards, terminated, truncated, infos = envs.step(actions)

    Its results are those of ``gym.vector.SyncVectorEnv`` over ``num_envs`` local ``gym.make(env_id)`` (same
    autoreset modes, batched ``infos``), but a step takes as long as the slowest session's step, not their sum.
    ``kwargs`` go to each :class:`RemoteEnv` (``transport``, ``token_env``, ``view``, ...).
    """

    def __init__(
        self,
        base_url: str | Sequence[str],
        env_id: str | None = None,
        num_envs: int = 1,
        *,
        autoreset_mode: gym.vector.AutoresetMode | str = gym.vector.AutoresetMode.NEXT_STEP,
        **kwargs: Any,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        urls = _urls(base_url)
        starts = [urls[i % len(urls)] for i in range(num_envs)]  # spread evenly, whatever the global round-robin
        makers = [lambda url=url: _Pending(RemoteEnv(url, env_id, **kwargs)) for url in starts]
        super().__init__(makers, autoreset_mode=autoreset_mode)
        self._pool = ThreadPoolExecutor(num_envs, thread_name_prefix="agentgym-remote")

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None) -> Any:
        seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else seed or [None] * self.num_envs
        mask = (options or {}).get("reset_mask")
        rest = {k: v for k, v in (options or {}).items() if k != "reset_mask"} if options is not None else None
        if len(seeds) == self.num_envs:  # else SyncVectorEnv raises its own error
            for i, env in enumerate(self.envs):
                if mask is None or (isinstance(mask, np.ndarray) and mask.shape == (self.num_envs,) and mask[i]):
                    env.pending = self._pool.submit(env.env.reset, seed=seeds[i], options=rest)
        return self._collect(lambda: super(RemoteVectorEnv, self).reset(seed=seed, options=options))

    def step(self, actions: Any) -> Any:
        next_step = self.autoreset_mode == gym.vector.AutoresetMode.NEXT_STEP
        each = gym.vector.utils.iterate(self.action_space, actions)
        for i, (env, action) in enumerate(zip(self.envs, each, strict=True)):
            if next_step and self._autoreset_envs[i]:
                env.pending = self._pool.submit(env.env.reset)
            else:
                env.pending = self._pool.submit(env.env.step, action)
        # SAME_STEP: SyncVectorEnv then resets the finished sessions itself, one after another
        return self._collect(lambda: super(RemoteVectorEnv, self).step(actions))

    def _collect(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        finally:
            for env in self.envs:
                if env.pending is not None:  # not consumed (an error on the way): wait for it, drop it
                    try:
                        env.pending.result()
                    except Exception:  # noqa: BLE001 (the error that mattered is already raised)
                        pass
                    env.pending = None

    def close_extras(self, **kwargs: Any) -> None:
        super().close_extras(**kwargs)
        self._pool.shutdown(wait=True)
