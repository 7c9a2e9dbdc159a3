"""Serve an agentgym env to agent frameworks over MCP (``agentgym serve mcp``), scored like ``agentgym eval``.

A framework that speaks the Model Context Protocol plays an env's frozen task set through this server, and
the run it plays is written as an ``agentgym eval`` run directory (``run.json``, ``episodes.jsonl``,
``summary.json``), so ``agentgym report`` compares it with any other agent::

    agentgym serve mcp --env WeatherRun-v0 --split test --out runs/my-agent            # stdio (default)
    agentgym serve mcp --env WeatherRun-v0 --transport http --port 8765 --token-env MCP_TOKEN

Built on the official ``mcp`` SDK's low-level server (stdio, and streamable HTTP at ``/mcp``).

What the server exposes, and nothing else:

- **tools**: the env's own tools, with their names, descriptions and JSON input schemas
  (:attr:`agentgym.core.tools.Tool.parameters_schema`), and one control tool, ``next_task``. A call of an env tool
  is exactly one ``env.step`` with the call's canonical text (``ToolCall(name, arguments).to_text()``), so
  parsing, validation, errors and rewards are the env's own: a wrong argument costs what it costs in
  ``agentgym eval``. Its result is the observation text, and ``structuredContent`` with ``reward``,
  ``terminated``, ``truncated``, ``success``, ``episode_over``, ``return``, ``turns`` and ``task_index``;
  the result that ends an episode says the score in words too.
- **next_task**: starts the next task of the run and returns its first observation (the task, the tool list,
  the state). The run is an :class:`agentgym.app.evaluation.benchmark.BenchmarkRun`, the dealer ``agentgym serve env
  --benchmark`` uses too: each task is dealt once and never chosen by the client. Here they come in index order,
  ``task_index`` 0 to N-1, reset as ``agentgym eval`` resets them
  (episode i: ``seed + i`` and ``options={"task_index": i}`` on an env with a task list), so the run is the
  eval's frozen task set. Calling it before an episode is over ends that episode as played so far
  (``truncation: "abandoned"``, unsuccessful). After the last task it writes the summary and says so.
- **the prompt** ``task`` and **the resource** ``agentgym://task``: the current episode's first observation.
- **the resource** ``agentgym://score``: JSON with the progress (``played``, ``tasks``, ``current``, ``done``)
  and the summary of the finished episodes in ``agentgym eval``'s format (:class:`~agentgym.app.evaluation.reports.
  RunSummary`).

When the last task ends, or the server stops (the stdio client closes the pipe, Ctrl-C, SIGTERM), ``--out``
gets ``summary.json``; tasks never started count as failed episodes (``error: "NotPlayed: ..."``), so a
success rate is always over the whole task set. ``episodes.jsonl`` is appended as each episode ends.

Security. The server runs the env in its own process: a CodeSandbox program runs in the same sandbox as in a
local eval, whoever calls. Over HTTP it binds 127.0.0.1 unless told otherwise (``--host``), with the SDK's
DNS-rebinding protection on for loopback hosts; ``--token-env VAR`` requires ``Authorization: Bearer
<the value of VAR>`` on every request, compared in constant time (:func:`hmac.compare_digest`), else 401.
An HTTP request body is at most :data:`MAX_BODY_BYTES` (413) and must arrive within 20 s (408), a request head
within 10 s, sessions at most :data:`MAX_HTTP_SESSIONS` and a session idle for 300 s is closed
(:class:`MCPHTTPServer`, ``--idle-timeout``); an action is at most the env's ``max_action_length`` (longer is the
env's own invalid action), one call's time is the env's own step budget
(:meth:`agentgym.core.ToolEnv.call_time_limit`), and an episode ends after :data:`MAX_STEPS` calls whatever the
env's time limit. A client that goes away mid-call costs nothing more: the step it asked for is taken and
recorded, as every step of the run is. Over stdio the client is the process that
started the server, and trusted as such. The server holds one run: every client connected to it plays the
same task sequence (connect one framework). It exposes no file, no other env, and no way to choose a task out
of order or replay one.
"""

from __future__ import annotations

import hmac
import json
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import gymnasium as gym
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

import agentgym
from agentgym.app.evaluation.benchmark import ABANDONED, MAX_STEPS, NOT_PLAYED, BenchmarkRun
from agentgym.app.evaluation.reports import to_json
from agentgym.app.evaluation.runner import episode_error
from agentgym.app.serving.env_server import BoundedUvicorn, RequestGuard, ServerLimits
from agentgym.core import tools_of
from agentgym.core.episode import EpisodeRecord
from agentgym.core.registration import eval_kwargs, eval_resets
from agentgym.core.summary import RunSummary
from agentgym.core.tools import ToolCall

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_HTTP_SESSIONS",
    "MAX_STEPS",
    "NOT_PLAYED",
    "EpisodeHost",
    "MCPHTTPServer",
    "Reply",
    "bearer_guard",
    "build_server",
    "serve_http",
    "serve_stdio",
]

NEXT_TASK = "next_task"
TASK_URI = "agentgym://task"
SCORE_URI = "agentgym://score"
MAX_BODY_BYTES = 1 << 20
"""The largest HTTP request body (413 past it; the SDK's default is 4 MiB). An action is at most 32 768
characters (``max_action_length``), which JSON escaping makes at most 6 bytes each: 192 KiB, well inside."""
MAX_HTTP_SESSIONS = 16
"""MCP sessions open at once over HTTP (the SDK's default is 10 000): a server holds one run, played by one
framework, so 16 leave room for reconnections and no more."""


@dataclass
class Reply:
    """What a tool call returns: text for the model, data for the program, and whether it is an error."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    error: bool = False


class EpisodeHost:
    """One env playing a run's episodes, one after another, as a client calls (thread-safe).

    Transport-free: :func:`build_server` puts it behind MCP. The episodes are a
    :class:`~agentgym.app.evaluation.benchmark.BenchmarkRun`'s, dealt in index order (the rule ``agentgym serve env
    --benchmark`` follows too): ``episodes=None`` plays every task of an env with a task list once (else
    :data:`~agentgym.core.registration.DEFAULT_EPISODES` seeded episodes), exactly the resets ``agentgym eval`` plays;
    ``out_dir`` gets an eval run directory (refused if it already holds episodes).
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
        transport: str = "stdio",
    ) -> None:
        eval_resets(None, episodes)  # checks episodes
        kwargs = eval_kwargs(env_id, split, env_kwargs)
        self.env = gym.make(env_id, disable_env_checker=True, **kwargs)
        self.tools = tools_of(self.env)
        if not self.tools:
            self.env.close()
            raise ValueError(f"{env_id} is not a tool env: it has no tools to serve")
        if NEXT_TASK in self.tools:
            self.env.close()
            raise ValueError(f"{env_id} has a tool named {NEXT_TASK!r}, the name of the server's control tool")
        self.run = BenchmarkRun(
            env_id,
            split=split,
            env_kwargs=env_kwargs,
            episodes=episodes,
            seed=seed,
            out_dir=out_dir,
            agent="mcp",
            agent_settings={"transport": transport},
            order="index",
        )
        self.config = self.run.config
        self.out_dir = self.run.out_dir
        self.current: EpisodeRecord | None = None  # the episode in progress
        self._closed = False
        self._lock = threading.Lock()

    @property
    def records(self) -> list[EpisodeRecord]:
        """The episodes that ended, in the order they ended."""
        return self.run.records

    @property
    def finished(self) -> bool:
        return self.run.finished

    # ------------------------------------------------------------------ what a client sees

    def mcp_tools(self) -> list[types.Tool]:
        """The env's tools (name, description, input schema), then ``next_task``."""
        tools = [
            types.Tool(name=t.name, description=t.description, input_schema=json.loads(json.dumps(t.parameters_schema)))
            for t in self.tools.values()
        ]
        control = types.Tool(
            name=NEXT_TASK,
            description=(
                f"Start the next task of this run ({self.config.episodes} in all, in order) and return its task, "
                "tools and state. Call it first, and again after each episode is over."
            ),
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        )
        return [*tools, control]

    def instructions(self) -> str:
        split = f"{self.config.split} split" if self.config.split else "episodes"
        return (
            f"agentgym {self.config.env_id}, {split}: {self.config.episodes} tasks. Call {NEXT_TASK} to start a "
            f"task, then call the tools until a result says the episode is over, then call {NEXT_TASK} again. "
            f"{TASK_URI} holds the current task; {SCORE_URI} the score so far."
        )

    def call(self, name: str, arguments: dict[str, Any] | None) -> Reply:
        """A tool call by a client: ``next_task``, or one step of the env with the call's canonical text."""
        with self._lock:
            if name == NEXT_TASK:
                return self._next_task()
            return self._step(name, arguments or {})

    def task_text(self) -> str:
        """The current episode's first observation (task, tools, state); ValueError if none is in progress."""
        with self._lock:
            record = self.current or (self.records[-1] if self.records else None)
            if record is None or not record.observations:
                raise ValueError(f"no task has been started: call the {NEXT_TASK} tool")
            return record.observations[0]

    def score(self) -> dict[str, Any]:
        """Progress and the summary of the finished episodes (``agentgym eval``'s format; None before any)."""
        with self._lock:
            summary = self.run.summary()
            return {
                "played": len(self.records),
                "tasks": self.config.episodes,
                "current": None if self.current is None else self.current.index,
                "done": self.finished,
                "summary": None if summary is None else json.loads(to_json(summary)),
            }

    def finish(self) -> RunSummary:
        """End the run: the episode in progress as abandoned, unstarted tasks as not played; write the summary.
        Calling it again returns the same summary."""
        with self._lock:
            return self._finish()

    # ------------------------------------------------------------------ the run

    def _next_task(self) -> Reply:
        if self.current is not None:
            self._close(truncation=ABANDONED)
        record = self.run.deal()
        if record is None:
            summary = self._finish()
            return Reply(self._done_text(summary), {"done": True, "success_rate": summary.success_rate})
        index = record.index
        try:
            observation, info = self.env.reset(**record.reset)
        except Exception as exc:  # a task that cannot start fails its episode, never the run
            record.error = episode_error(exc)
            self.current = record
            self._close()
            return Reply(
                f"Task {index} failed to start ({record.error}); call {NEXT_TASK}.", {"task_index": index}, True
            )
        record.start(str(observation), info)
        self.current = record
        head = f"Task {index + 1} of {self.config.episodes} (task_index {index}).\n\n"
        return Reply(
            head + str(observation),
            {"task_index": index, "tasks": self.config.episodes, "observation": str(observation)},
        )

    def _step(self, name: str, arguments: dict[str, Any]) -> Reply:
        record = self.current
        if record is None:
            what = "every task has been played" if self.finished else "no task is in progress"
            return Reply(f"{what}: call {NEXT_TASK}.", {"episode_over": True}, True)
        action = ToolCall(name, arguments).to_text()
        try:
            observation, reward, terminated, truncated, info = self.env.step(action)
            record.step(action, str(observation), float(reward), info)
        except Exception as exc:  # an env that raises (or pays a non-finite reward) fails this episode
            record.error = episode_error(exc)
            self._close()
            return Reply(
                f"The env failed ({record.error}); the episode is over. Call {NEXT_TASK}.", {"episode_over": True}, True
            )
        over = bool(terminated or truncated) or record.turns >= MAX_STEPS
        data = {
            "observation": str(observation),
            "reward": float(reward),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "success": record.success,
            "episode_over": over,
            "return": record.total_reward,
            "turns": record.turns,
            "task_index": record.index,
        }
        text = str(observation)
        if over:
            record.terminated = bool(terminated)
            record.truncation = None if terminated else ("time_limit" if truncated else "max_steps")
            text += "\n\n" + self._over_text(record)
            self._close()
        return Reply(text, data, error=info.get("parse_error") is not None)

    def _over_text(self, record: EpisodeRecord) -> str:
        outcome = "success" if record.success else "not solved"
        how = "" if record.truncation is None else f", stopped by the {record.truncation.replace('_', ' ')}"
        last = record.index + 1 >= self.config.episodes
        then = "That was the last task: the run is scored." if last else f"Call {NEXT_TASK} for the next task."
        return (
            f"Episode over: {outcome}, return {record.total_reward:g} in {record.turns} turns{how} "
            f"(task {record.index + 1} of {self.config.episodes}). {then}"
        )

    def _close(self, truncation: str | None = None) -> None:
        """End the episode in progress and log it (after the last task the run finishes)."""
        record, self.current = self.current, None
        if record is not None:
            self.run.end(record, truncation)

    def _finish(self) -> RunSummary:
        self.current = None  # (the run records it as abandoned)
        summary = self.run.finish()
        if not self._closed:
            self._closed = True
            self.run.close()
            self.env.close()
        return summary

    def _done_text(self, summary: RunSummary) -> str:
        where = f"; summary written to {self.out_dir / 'summary.json'}" if self.out_dir is not None else ""
        return (
            f"Every task has been played: success {summary.success_rate:.1%} over {summary.episodes} episodes, "
            f"mean return {summary.mean_return:g}{where}. Read {SCORE_URI} for the full summary."
        )


# ---------------------------------------------------------------------------------------------------- MCP


def build_server(host: EpisodeHost) -> Server[Any]:
    """The MCP server over ``host``: its tools, the ``task`` prompt, and the task and score resources.
    Env steps run in a worker thread (a CodeSandbox program may take seconds), one at a time."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=host.mcp_tools())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        reply = await anyio.to_thread.run_sync(host.call, params.name, params.arguments)
        return types.CallToolResult(
            content=[types.TextContent(text=reply.text)], structured_content=reply.data, is_error=reply.error
        )

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        prompt = types.Prompt(name="task", description="The current episode's task, tools and state.")
        return types.ListPromptsResult(prompts=[prompt])

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        if params.name != "task":
            raise ValueError(f"no prompt {params.name!r}; this server has the prompt 'task'")
        text = await anyio.to_thread.run_sync(host.task_text)  # waits for a step in progress, off the event loop
        message = types.PromptMessage(role="user", content=types.TextContent(text=text))
        return types.GetPromptResult(description=f"{host.config.env_id}: the current task", messages=[message])

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(name="task", uri=TASK_URI, mime_type="text/plain", description="The current task."),
                types.Resource(
                    name="score", uri=SCORE_URI, mime_type="application/json", description="Progress and summary."
                ),
            ]
        )

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == TASK_URI:
            text, mime = await anyio.to_thread.run_sync(host.task_text), "text/plain"
        elif uri == SCORE_URI:
            score = await anyio.to_thread.run_sync(host.score)
            text, mime = json.dumps(score, ensure_ascii=False), "application/json"
        else:
            raise ValueError(f"no resource {uri!r}; this server has {TASK_URI} and {SCORE_URI}")
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=text, mime_type=mime)])

    return Server(
        "agentgym",
        version=agentgym.__version__,
        instructions=host.instructions(),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


def _stop_on_sigterm() -> None:
    """SIGTERM (how the SDK's stdio client stops a server that outlives its pipe) ends the run like Ctrl-C."""

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)


def serve_stdio(host: EpisodeHost) -> RunSummary:
    """Serve ``host`` on stdin/stdout until the client closes the pipe; then finish the run (its summary)."""
    server = build_server(host)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    _stop_on_sigterm()
    try:
        anyio.run(run)
    except KeyboardInterrupt:
        pass
    finally:
        summary = host.finish()
    return summary


Asgi = Callable[..., Any]


def bearer_guard(app: Asgi, token: str) -> Asgi:
    """``app`` behind ``Authorization: Bearer <token>``: any other HTTP request gets 401. The token is compared in
    constant time (:func:`hmac.compare_digest`: the time taken says nothing about how much of it matched)."""
    if not token:
        raise ValueError("the bearer token is empty")
    expected = token.encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            given = next((v for k, v in scope.get("headers", []) if k == b"authorization"), b"")
            scheme, _, credentials = given.partition(b" ")  # the scheme's case does not matter (RFC 9110 11.1)
            if not (hmac.compare_digest(credentials.strip(), expected) and scheme.lower() == b"bearer"):
                body = json.dumps({"error": "unauthorized: send Authorization: Bearer <token>"}).encode()
                headers = [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="agentgym"')]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


class MCPHTTPServer(BoundedUvicorn):
    """``host`` served over streamable HTTP at :attr:`mcp_url` (``http://bind:port/mcp``), on the env server's
    bounded uvicorn (request heads within ``head_timeout_s``, bodies within ``request_timeout_s`` and
    ``max_body_bytes``, at most ``max_connections``, WebSocket-free). ``limits.max_sessions`` MCP sessions at once
    (:data:`MAX_HTTP_SESSIONS` by default; the SDK refuses more) and one idle for ``limits.idle_timeout_s`` is closed
    (300 s; the SDK's default is 30 min, for which a client that never closes its sessions would hold every slot).
    ``with server:`` serves in a background thread; :meth:`serve_forever` blocks."""

    def __init__(
        self,
        host: EpisodeHost,
        *,
        bind: str = "127.0.0.1",
        port: int = 8000,
        token: str | None = None,
        limits: ServerLimits | None = None,
    ) -> None:
        self.limits = limits or ServerLimits(max_sessions=MAX_HTTP_SESSIONS)
        app: Asgi = build_server(host).streamable_http_app(
            host=bind,
            max_request_body_size=min(MAX_BODY_BYTES, self.limits.max_body_bytes),
            max_sessions=self.limits.max_sessions,
            session_idle_timeout=self.limits.idle_timeout_s,
        )
        app = RequestGuard(app, None, self.limits)
        if token is not None:
            app = bearer_guard(app, token)
        super().__init__(app, host=bind, port=port, limits=self.limits)

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"


def serve_http(
    host: EpisodeHost,
    *,
    bind: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    limits: ServerLimits | None = None,
    announce: Callable[[str], None] = print,
) -> RunSummary:
    """Serve ``host`` over streamable HTTP at ``http://bind:port/mcp`` (:class:`MCPHTTPServer`) until Ctrl-C or
    SIGTERM; then finish the run. ``port=0`` takes a free port; ``announce`` is told the URL once the socket is
    bound."""
    server = MCPHTTPServer(host, bind=bind, port=port, token=token, limits=limits)
    url = server.mcp_url
    if bind not in ("127.0.0.1", "localhost", "::1") and token is None:
        print(f"warning: {url} is reachable from other machines and has no --token-env", file=sys.stderr)
    announce(url)
    _stop_on_sigterm()  # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises it to the handler before it
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        summary = host.finish()
    return summary
