"""A small OpenAI-compatible chat-completions server for a local model or a scripted policy.

``agentgym serve model --model PATH`` serves a Hugging Face causal LM (a directory or hub id,
loaded with :meth:`agentgym.trainers.models.policy.LLMPolicy.from_pretrained`); ``agentgym serve model --scripted
oracle --env ID`` answers with the env's scripted expert after ``--latency-ms`` — a stand-in
endpoint with a known score and a fixed delay, to test any agent client and to benchmark
concurrency. Tests start it on 127.0.0.1 with port 0 (:class:`ModelServer` as a context manager).

Endpoints (the subset of the OpenAI API that agents use):

- ``GET /v1/models`` — the one model served.
- ``POST /v1/chat/completions`` — ``messages``, ``tools``, ``tool_choice`` (``"none"`` turns tool
  calls off), ``temperature`` (default 1; 0 is greedy), ``top_p``, ``max_tokens`` or
  ``max_completion_tokens``, ``seed``. The chat template renders the messages with the tools
  (templates without tool support get tool results as user messages and earlier tool calls as
  text). If the output holds a tool call (read by :func:`agentgym.parse_tool_calls` against the
  request's tool names), it is returned as ``tool_calls`` with ``finish_reason: "tool_calls"``,
  else as ``content``. ``usage`` counts prompt and completion tokens (scripted mode: words and
  punctuation marks). Streaming is not supported (400).

Requests are handled in threads; the model generates one request at a time (no batching).

What a client may send is bounded (:mod:`agentgym.app.serving.http_service` does the HTTP part, for every agentgym
server): bodies up to 1 MiB (413 past it, before the body is read), 8 MiB of bodies in the server at once
(503 + ``Retry-After``), 20 s for a request to arrive (408), 512 open connections and 32 requests answered
at once; ``ModelServer(..., limits=Limits(max_body_bytes=4 << 20))`` changes them (:data:`LIMITS` are the
defaults). The body is validated field by field (:class:`ChatRequest`): a wrong type or range anywhere is a
400 naming the field (``messages.0.content.str: Input should be a valid string``), never a 500. The scripted
oracle reads at most an observation's length (16 384 characters, the env's observation space): longer last
messages are a 400, since no env writes them and an oracle's parsing is not meant for them (WeatherRun's took
2.5 s on a 42 kB one). A local model's prompt must fit its context (``max_position_embeddings``; 400 past it)
and ``max_tokens`` is cut to what is left of it. Prompt token counting is linear and allocates no token list
(counting the tokens of a 50 MB body used to grow the server by 1 GB, in 20 s).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentgym.app.serving.http_service import HTTPService, Limits
from agentgym.core.parser import parse_tool_calls
from agentgym.core.tools import ToolCall

__all__ = [
    "LIMITS",
    "ChatRequest",
    "Completion",
    "LLMResponder",
    "Message",
    "ModelServer",
    "RequestError",
    "ScriptedResponder",
    "count_tokens",
    "to_choice",
]

# A 1 MiB body is ~50x a long agent conversation (WeatherRun: ~2 kB an observation) and more than a 128k-token
# context; parsed, 1 MiB of the smallest JSON objects takes ~30 MB and ~0.3 s, so 8 MiB in flight bound the
# server's memory to a few hundred MB however the clients shape their requests.
LIMITS = Limits(max_body_bytes=1 << 20, max_buffered_bytes=8 << 20)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")  # fields this server does not read are accepted and ignored


class ContentPart(_Open):
    """One part of a list-valued ``content``; parts without text (images, audio) contribute nothing."""

    type: str = "text"
    text: str | None = None


class FunctionCall(_Open):
    name: str
    arguments: str | dict[str, Any] = "{}"


class ToolCallItem(_Open):
    """A tool call of an earlier assistant turn."""

    id: str | None = None
    type: str = "function"
    function: FunctionCall


class Message(_Open):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCallItem] | None = None
    tool_call_id: str | None = None

    @property
    def text(self) -> str:
        """The content as one string (list parts joined; no content is "")."""
        if isinstance(self.content, list):
            return "".join(part.text or "" for part in self.content)
        return self.content or ""


class FunctionSpec(_Open):
    name: str = Field(min_length=1)
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ToolSpec(_Open):
    """An offered tool: ``{"type": "function", "function": {"name": ..., "parameters": ...}}`` (or the flat
    ``{"name": ..., "parameters": ...}`` some clients send)."""

    type: str = "function"
    function: FunctionSpec | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _named(self) -> ToolSpec:
        if self.function is None and not self.name:
            raise ValueError("a tool needs function.name")
        return self

    @property
    def tool_name(self) -> str:
        return self.function.name if self.function else str(self.name)


class ChatRequest(_Open):
    """The fields of a chat-completions request this server reads, with their types and ranges (a request
    that breaks them is answered 400 with the fields named)."""

    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    tools: list[ToolSpec] | None = None
    tool_choice: Literal["none", "auto", "required"] | dict[str, Any] | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    seed: int | None = Field(None, ge=-(2**63), lt=2**64)
    stream: bool = False

    @property
    def tool_names(self) -> list[str]:
        return [tool.tool_name for tool in self.tools or []]

    def tool_dicts(self) -> list[dict[str, Any]] | None:
        """The tools as the client sent them, for a chat template."""
        return None if self.tools is None else [tool.model_dump(exclude_unset=True) for tool in self.tools]


class RequestError(ValueError):
    """A request the responder cannot answer as sent (the client's error: HTTP 400)."""


def describe_errors(exc: ValidationError, most: int = 3) -> str:
    """One line naming the first ``most`` invalid fields, e.g. ``messages.0.content.str: Input should be ...``."""
    errors = exc.errors(include_url=False, include_input=False)
    parts = [f"{'.'.join(map(str, e['loc'])) or 'body'}: {' '.join(e['msg'].split())}" for e in errors[:most]]
    more = f" (and {len(errors) - most} more)" if len(errors) > most else ""
    return "; ".join(parts) + more


@dataclass
class Completion:
    """What a responder wrote, with token counts; ``finish_reason`` "length" if cut at the token limit."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: Literal["stop", "length"] = "stop"


class Responder(Protocol):
    name: str

    def complete(self, request: ChatRequest) -> Completion: ...


def _arguments(arguments: str | dict[str, Any]) -> Any:
    """A call's arguments as a dict when they are a JSON object (as sent otherwise)."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except (json.JSONDecodeError, RecursionError):
            return arguments
    return arguments


def _call_texts(message: Message) -> str:
    texts = []
    for call in message.tool_calls or []:
        arguments = _arguments(call.function.arguments)
        if isinstance(arguments, dict):
            texts.append(ToolCall(call.function.name, arguments).to_text())
    return "".join(texts)


class LLMResponder:
    """Answers with a local causal LM (an :class:`agentgym.trainers.models.policy.LLMPolicy`)."""

    def __init__(self, policy: Any, name: str = "local-model", max_new_tokens: int = 256) -> None:
        self.policy, self.name, self.max_new_tokens = policy, name, max_new_tokens
        self._lock = threading.Lock()

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, **kwargs: Any) -> LLMResponder:
        from agentgym.app.evaluation.runner import model_source
        from agentgym.trainers.models.policy import LLMPolicy

        kwargs.setdefault("name", str(name_or_path))
        return cls(LLMPolicy.from_pretrained(model_source(name_or_path)), **kwargs)

    def messages(self, request: ChatRequest) -> list[dict[str, Any]]:
        """The request's messages in a form the chat template takes."""
        native = self.policy.supports_tools
        out = []
        for m in request.messages:
            if m.role == "assistant" and m.tool_calls:
                if native:
                    calls = []
                    for call in m.tool_calls:
                        fn = {**call.function.model_dump(), "arguments": _arguments(call.function.arguments)}
                        calls.append({**call.model_dump(exclude_none=True), "function": fn})
                    out.append({"role": "assistant", "content": m.text, "tool_calls": calls})
                else:
                    out.append({"role": "assistant", "content": m.text + _call_texts(m)})
            elif m.role == "tool" and not native:
                out.append({"role": "user", "content": m.text})
            else:
                out.append({**m.model_dump(exclude_none=True), "content": m.text})
        return out

    def complete(self, request: ChatRequest) -> Completion:
        import torch
        from jinja2 import TemplateError

        policy = self.policy
        try:
            prompt = policy.chat_ids(self.messages(request), tools=request.tool_dicts())
        except TemplateError as exc:
            raise RequestError(f"the model's chat template refused the messages: {exc}") from None
        limit = request.max_completion_tokens or request.max_tokens or self.max_new_tokens
        context = getattr(policy.model.config, "max_position_embeddings", None)
        if context is not None:
            if len(prompt) >= context:
                raise RequestError(f"the prompt is {len(prompt)} tokens; this model reads at most {context - 1}")
            limit = min(limit, context - len(prompt))
        generator = torch.Generator().manual_seed(request.seed % 2**64) if request.seed is not None else None
        temperature = 1.0 if request.temperature is None else request.temperature
        with self._lock:  # one generation at a time: the model is not thread-safe
            (gen,) = policy.generate(
                [prompt], max_new_tokens=limit, temperature=temperature, top_p=request.top_p or 1.0, generator=generator
            )
        return Completion(
            policy.decode(gen.token_ids), len(prompt), len(gen.token_ids), "stop" if gen.stopped else "length"
        )


_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Words and punctuation marks: the scripted responder's token count (linear time; no list of tokens is
    built, so counting a 1 MB prompt does not allocate a string per word)."""
    return _TOKEN.subn("", text)[1]


class ScriptedResponder:
    """Answers with a scripted policy — the env's oracle — reading the last user or tool message as the observation.

    The oracles read only observation text (the task and the state summary), so one instance
    answers any number of concurrent conversations.
    """

    def __init__(self, env_id: str, *, split: str | None = None, env_kwargs: dict[str, Any] | None = None) -> None:
        from agentgym.core.registration import make_env

        env = make_env(env_id, split, env_kwargs)
        try:
            self.policy = env.unwrapped.oracle()
            self.max_observation_chars = int(env.observation_space.max_length)
        finally:
            env.close()
        self.name = f"{env_id}:oracle"

    def complete(self, request: ChatRequest) -> Completion:
        observation = next((m.text for m in reversed(request.messages) if m.role in ("user", "tool")), "")
        if len(observation) > self.max_observation_chars:
            raise RequestError(
                f"the last user/tool message is {len(observation)} characters; the oracle reads observations of "
                f"this env, which are at most {self.max_observation_chars}"
            )
        action, _ = self.policy.predict(observation)
        prompt = sum(count_tokens(m.text) for m in request.messages)
        return Completion(action, prompt, count_tokens(action))


def to_choice(text: str, tool_names: list[str] | None) -> tuple[dict[str, Any], str]:
    """``(message, finish_reason)`` for output ``text``: its tool calls as ``tool_calls`` when tools were
    offered and the text holds any, else the text as ``content``."""
    if tool_names:
        parsed = parse_tool_calls(text, tool_names)
        if parsed.ok:
            calls = [
                {
                    "id": f"call_{k}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments), ensure_ascii=False)},
                }
                for k, c in enumerate(parsed.calls)
            ]
            return {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"
    return {"role": "assistant", "content": text}, "stop"


class ModelServer(HTTPService):
    """Serve ``responder`` at ``http://host:port/v1`` (port 0 picks a free one; see :attr:`url`).

    ``latency_ms`` delays every completion by that much (in the request's thread, so concurrent
    requests wait in parallel). :attr:`requests` counts the completion requests answered. ``limits``
    bounds what a client may send (default :data:`LIMITS`; see the module docstring). Use as a
    context manager to run it in a background thread, or call :meth:`serve_forever`.
    """

    url_path = "/v1"  # the API root clients take as base_url

    def __init__(
        self,
        responder: Responder,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_ms: float = 0.0,
        *,
        limits: Limits | None = None,
    ) -> None:
        self.responder = responder
        self.latency_s = max(0.0, latency_ms) / 1000
        self.requests = 0
        self._count_lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: a client reuses its connections

            def setup(self) -> None:
                super().setup()
                # headers and body go out in separate writes: without this, Nagle + delayed ACK add ~40 ms
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path.rstrip("/") not in ("/v1/models", "/models"):
                    return self._error(404, f"no such endpoint GET {self.path}; use /v1/models or /v1/chat/completions")
                model = {"id": responder.name, "object": "model", "created": 0, "owned_by": "agentgym"}
                self._send(200, {"object": "list", "data": [model]})

            def do_POST(self) -> None:  # noqa: N802
                if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                    return self._error(404, f"no such endpoint POST {self.path}; use /v1/chat/completions")
                # HTTPService has checked Content-Length and buffered exactly that many bytes
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    request = ChatRequest.model_validate_json(body)
                except ValidationError as exc:
                    return self._error(400, f"invalid request: {describe_errors(exc)}")
                if request.stream:
                    return self._error(400, "streaming is not supported; send stream=false")
                start = time.perf_counter()
                try:
                    completion = responder.complete(request)
                except RequestError as exc:
                    return self._error(400, f"invalid request: {exc}")
                except Exception as exc:  # a model failure is the server's error, reported as one
                    return self._error(500, f"generation failed: {type(exc).__name__}: {exc}", "server_error")
                if (wait := server.latency_s - (time.perf_counter() - start)) > 0:
                    time.sleep(wait)
                names = request.tool_names if request.tool_choice != "none" else []
                message, finish = to_choice(completion.text, names)
                with server._count_lock:
                    server.requests += 1
                    number = server.requests
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{number}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": request.model or responder.name,
                        "choices": [
                            {
                                "index": 0,
                                "message": message,
                                "finish_reason": completion.finish_reason if finish == "stop" else finish,
                            }
                        ],
                        "usage": {
                            "prompt_tokens": completion.prompt_tokens,
                            "completion_tokens": completion.completion_tokens,
                            "total_tokens": completion.prompt_tokens + completion.completion_tokens,
                        },
                    },
                )

            def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
                self._send(status, {"error": {"message": message, "type": kind}})

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body, ensure_ascii=False).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (its timeout) or stopped reading (ours)
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:  # quiet by default
                pass

        super().__init__(Handler, host, port, limits=limits or LIMITS)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": kind}}
