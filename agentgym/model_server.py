"""A small OpenAI-compatible chat-completions server for a local model or a scripted policy.

``agentgym serve model --model PATH`` serves a Hugging Face causal LM (a directory or hub id,
loaded with :meth:`agentgym.llm.LLMPolicy.from_pretrained`); ``agentgym serve model --scripted
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

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentgym.http_service import HTTPService
from agentgym.parser import parse_tool_calls
from agentgym.tools import ToolCall

__all__ = ["ChatRequest", "Completion", "LLMResponder", "ModelServer", "ScriptedResponder", "count_tokens", "to_choice"]


class ChatRequest(BaseModel):
    """The fields of a chat-completions request this server reads (others are accepted and ignored)."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    seed: int | None = None
    stream: bool = False

    @property
    def tool_names(self) -> list[str]:
        names = []
        for tool in self.tools or []:
            fn = tool.get("function", tool) if isinstance(tool, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                names.append(fn["name"])
        return names


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


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _call_texts(message: dict[str, Any]) -> str:
    texts = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function", {}) if isinstance(call, dict) else {}
        arguments = fn.get("arguments", {})
        try:
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        except json.JSONDecodeError:
            pass
        if isinstance(arguments, dict):
            texts.append(ToolCall(str(fn.get("name", "")), arguments).to_text())
    return "".join(texts)


class LLMResponder:
    """Answers with a local causal LM (an :class:`agentgym.llm.LLMPolicy`)."""

    def __init__(self, policy: Any, name: str = "local-model", max_new_tokens: int = 256) -> None:
        self.policy, self.name, self.max_new_tokens = policy, name, max_new_tokens
        self._lock = threading.Lock()

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, **kwargs: Any) -> LLMResponder:
        from agentgym.evaluation import model_source
        from agentgym.llm import LLMPolicy

        kwargs.setdefault("name", str(name_or_path))
        return cls(LLMPolicy.from_pretrained(model_source(name_or_path)), **kwargs)

    def messages(self, request: ChatRequest) -> list[dict[str, Any]]:
        """The request's messages in a form the chat template takes."""
        native = self.policy.supports_tools
        out = []
        for m in request.messages:
            role, content = str(m.get("role", "user")), _content(m)
            if role == "assistant" and m.get("tool_calls"):
                if native:
                    calls = []
                    for c in m["tool_calls"]:
                        fn = dict(c.get("function", {}))
                        if isinstance(fn.get("arguments"), str):
                            try:
                                fn["arguments"] = json.loads(fn["arguments"])
                            except json.JSONDecodeError:
                                pass
                        calls.append({**c, "function": fn})
                    out.append({"role": "assistant", "content": content, "tool_calls": calls})
                else:
                    out.append({"role": "assistant", "content": content + _call_texts(m)})
            elif role == "tool" and not native:
                out.append({"role": "user", "content": content})
            else:
                out.append({**m, "role": role, "content": content})
        return out

    def complete(self, request: ChatRequest) -> Completion:
        import torch

        policy = self.policy
        prompt = policy.chat_ids(self.messages(request), tools=request.tools)
        limit = request.max_completion_tokens or request.max_tokens or self.max_new_tokens
        generator = torch.Generator().manual_seed(request.seed) if request.seed is not None else None
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
    """Words and punctuation marks: the scripted responder's token count."""
    return len(_TOKEN.findall(text))


class ScriptedResponder:
    """Answers with a scripted policy — the env's oracle — reading the last user or tool message as the observation.

    The oracles read only observation text (the task and the state summary), so one instance
    answers any number of concurrent conversations.
    """

    def __init__(self, env_id: str, *, split: str | None = None, env_kwargs: dict[str, Any] | None = None) -> None:
        from agentgym.registration import make_env

        env = make_env(env_id, split, env_kwargs)
        try:
            self.policy = env.unwrapped.oracle()
        finally:
            env.close()
        self.name = f"{env_id}:oracle"

    def complete(self, request: ChatRequest) -> Completion:
        observation = next((_content(m) for m in reversed(request.messages) if m.get("role") in ("user", "tool")), "")
        action, _ = self.policy.predict(observation)
        prompt = sum(count_tokens(_content(m)) for m in request.messages)
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
    requests wait in parallel). :attr:`requests` counts the completion requests answered. Use as a
    context manager to run it in a background thread, or call :meth:`serve_forever`.
    """

    url_path = "/v1"  # the API root clients take as base_url

    def __init__(self, responder: Responder, host: str = "127.0.0.1", port: int = 0, latency_ms: float = 0.0) -> None:
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
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                    request = ChatRequest.model_validate_json(self.rfile.read(length))
                except ValidationError as exc:
                    problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
                    return self._error(400, f"invalid request: {problems}")
                except ValueError as exc:
                    return self._error(400, f"invalid request: {exc}")
                if request.stream:
                    return self._error(400, "streaming is not supported; send stream=false")
                start = time.perf_counter()
                try:
                    completion = responder.complete(request)
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
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (e.g. its timeout)

            def log_message(self, format: str, *args: Any) -> None:  # quiet by default
                pass

        # many clients connecting at once must not overflow the listen backlog
        super().__init__(Handler, host, port, request_queue_size=128)
