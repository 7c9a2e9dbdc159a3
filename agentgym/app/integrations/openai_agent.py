"""An agent behind any OpenAI-compatible chat-completions endpoint, playing many episodes at once.

Works with OpenAI, vLLM, SGLang, llama.cpp's server, Ollama, and ``agentgym serve model``. Each
episode is one conversation: an optional system message, the env's first observation as the user
message, then the model's turns and the env's replies. With ``native_tools=True`` (the default) the
env's tool schemas (``info["tools"]``) go in the request's ``tools=``; a response with ``tool_calls``
becomes the canonical action text ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
(arguments that are not valid JSON go to the env as written, where the tolerant parser repairs them
or explains the problem) and the env's reply comes back as a ``tool`` message. A response with
plain content goes to the env as it is, and the reply comes back as a ``user`` message.

Episodes run concurrently (an ``asyncio.Semaphore`` holds ``concurrency`` in flight; the envs are
synchronous and fast, each in-flight episode has its own). Every request has a timeout and is
retried with exponential backoff and jitter on HTTP 429 (honouring ``Retry-After``), 5xx, connection
errors, dropped connections, timeouts and malformed responses; other 4xx answers are not retried.
An episode whose request still fails, or whose env raises (in ``reset`` too), is returned as failed,
with the reason, never raised; its env is closed and the next episode gets a fresh one. Text in a
response that no request can carry (a lone surrogate, which a JSON escape can spell) becomes U+FFFD.

A deterministic refusal is not a failure: a 4xx saying the conversation outgrew the model's context
(:func:`is_context_overflow`: OpenAI's, vLLM's and llama.cpp's wordings, or ``error.code``
``context_length_exceeded``) ends the episode where it stands, unsuccessful, with ``truncation:
"context_limit"`` (:data:`CONTEXT_LIMIT`); ``--resume`` does not play it again, since it would end the same
way. Timeouts, 429 and 5xx stay failures, whatever their body says (they may pass).

    import asyncio, gymnasium as gym
    from agentgym.app.integrations.openai_agent import OpenAIAgent, OpenAIConfig

    agent = OpenAIAgent(OpenAIConfig(model="qwen2.5-7b", base_url="http://127.0.0.1:8000/v1"))
    records = asyncio.run(agent.play_all(lambda: gym.make("agentgym/WeatherRun-v0", split="test"),
                                         [(i, {"seed": i}) for i in range(20)], concurrency=8))

``agentgym eval --agent openai:MODEL@BASE_URL`` does this and writes the report.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import os
import random
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import httpx
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentgym.app.evaluation.reports import error_line
from agentgym.core.episode import EpisodeRecord
from agentgym.core.tool_env import valid_utf8
from agentgym.core.tools import ToolCall

__all__ = [
    "CONTEXT_LIMIT",
    "ContextLengthExceeded",
    "EndpointError",
    "OpenAIAgent",
    "OpenAIConfig",
    "check_endpoint",
    "is_context_overflow",
    "parse_spec",
]

_RETRY_STATUS = frozenset({408, 409, 429})

CONTEXT_LIMIT = "context_limit"
"""The ``truncation`` of an episode the endpoint refused to continue because it outgrew the model's context."""

_CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
"""``error.code`` (OpenAI, llama-cpp-python) or ``error.type`` (llama.cpp's server) of a context overflow."""
_CONTEXT_WORDS = re.compile(
    r"maximum context length"  # OpenAI, vLLM, llama-cpp-python: "This model's maximum context length is 4096 tokens"
    r"|context[ _]length[ _]exceeded"
    r"|longer than the (?:model's|maximum) (?:context|model) length"  # vLLM: "longer than the model's context length"
    r"|exceeds? (?:the )?(?:available )?context (?:size|window)",  # llama.cpp: "exceeds the available context size"
    re.IGNORECASE,
)
_ERROR_TEXT_SCANNED = 4096  # characters of an error message searched for the wordings above


class EndpointError(ConnectionError):
    """The endpoint could not be reached, or kept failing after every retry; the message says why."""


class ContextLengthExceeded(Exception):
    """The endpoint refused the request because the conversation outgrew the model's context (a deterministic
    4xx: the same request would be refused again); the message is the endpoint's."""


class OpenAIConfig(BaseModel):
    """How to talk to the endpoint. In ``agentgym eval``: ``openai:MODEL@BASE_URL`` sets ``model`` and
    ``base_url``; ``--sampling '{"temperature": 0.7, "max_tokens": 256}'`` sets any other field."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="The model name the endpoint serves.")
    base_url: str = Field(description="The API root, e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1.")
    api_key_env: str = Field(
        "OPENAI_API_KEY", description="Environment variable holding the API key (no key is sent if it is unset)."
    )
    temperature: float = Field(0.0, ge=0, description="Sampling temperature; 0 is greedy.")
    top_p: float | None = Field(None, gt=0, le=1, description="Nucleus sampling mass (None: the server's default).")
    max_tokens: int | None = Field(512, ge=1, description="Longest response per turn (None: the server's default).")
    system_prompt: str | None = Field(None, description="A system message before the first observation.")
    native_tools: bool = Field(True, description="Send the tool schemas as tools= and read tool_calls.")
    max_turns: int | None = Field(None, ge=1, description="Stop an episode after this many actions (None: env limit).")
    timeout: float = Field(60.0, gt=0, description="Seconds to wait for a response (connect, read and write each).")
    max_retries: int = Field(4, ge=0, description="Retries of a failed request before the episode is failed.")
    backoff: float = Field(0.5, ge=0, description="Seconds before the first retry; doubled on each retry, jittered.")
    max_backoff: float = Field(20.0, ge=0, description="Longest wait between retries (also caps Retry-After).")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https://, got {url!r}")
        return url.rstrip("/")

    @property
    def uses_tls(self) -> bool:
        """Whether ``base_url`` is https (a plain-http client skips loading the CA bundle, ~50 ms)."""
        return self.base_url.startswith("https://")

    def settings(self) -> dict[str, Any]:
        """The fields that shape the results (for reports): everything but the transport knobs."""
        return self.model_dump(exclude={"timeout", "max_retries", "backoff", "max_backoff", "api_key_env"})


def parse_spec(spec: str) -> tuple[str, str]:
    """``"MODEL@BASE_URL"`` → ``(model, base_url)`` (the URL is after the last ``@``)."""
    model, sep, url = spec.rpartition("@")
    if not sep or not model or not url:
        raise ValueError(
            f"an openai agent is openai:MODEL@BASE_URL, e.g. openai:gpt-4o-mini@https://api.openai.com/v1; "
            f"got openai:{spec}"
        )
    return model, url


def check_endpoint(config: OpenAIConfig) -> None:
    """Raise :class:`EndpointError` if nothing answers at ``config.base_url`` (any HTTP answer counts)."""
    try:
        httpx.get(f"{config.base_url}/models", timeout=min(config.timeout, 10.0), verify=config.uses_tls)
    except httpx.HTTPError as exc:
        reason = _transport_text(exc, min(config.timeout, 10.0))
        raise EndpointError(f"cannot reach the endpoint at {config.base_url}: {reason}") from None


class _Retryable(Exception):
    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
        message = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(message, dict):
            message = message.get("message", message)
    except ValueError:
        message = response.text
    text = str(message).strip().replace("\n", " ")
    return f"HTTP {response.status_code}: {text[:200]}" if text else f"HTTP {response.status_code}"


def is_context_overflow(status: int, body: Any) -> bool:
    """Whether an HTTP ``status`` answer with JSON ``body`` says the prompt outgrew the model's context: a 4xx
    (other than the retried 408, 409 and 429) whose ``error.code`` or ``error.type`` is a context code
    (``context_length_exceeded``, llama.cpp's ``exceed_context_size_error``), or whose message has OpenAI's, vLLM's
    or llama.cpp's wording. ``body`` is ``{"error": {...}}`` or, as older vLLM sends it, the error object itself;
    a 5xx never counts, whatever it says (it may be transient)."""
    if not 400 <= status < 500 or status in _RETRY_STATUS:
        return False
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        kinds = {error.get("code"), error.get("type")}
        if any(isinstance(kind, str) and kind.lower() in _CONTEXT_CODES for kind in kinds):
            return True
        error = error.get("message")
    return isinstance(error, str) and _CONTEXT_WORDS.search(error[:_ERROR_TEXT_SCANNED]) is not None


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None


def _message(body: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """The assistant message and token usage of a chat-completions response; ValueError if malformed."""
    try:
        message = body["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise ValueError("no choices[0].message in the response") from None
    if not isinstance(message, dict):
        raise ValueError("choices[0].message is not an object")
    content = message.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if content is not None and not isinstance(content, str):
        raise ValueError("message.content is neither text nor null")
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ValueError("message.tool_calls is not a list")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    tokens = {k: int(v) for k in ("prompt_tokens", "completion_tokens") if isinstance(v := usage.get(k), int | float)}
    return {"content": valid_utf8(content or ""), "tool_calls": [_tool_call(call) for call in calls]}, tokens


def _tool_call(call: Any) -> dict[str, Any]:
    """A tool call of a response as ``{"id", "type", "function": {"name", "arguments"}}``, its text valid UTF-8
    (a lone surrogate, which JSON escapes can spell, becomes U+FFFD: the next request must be encodable) and its
    arguments a JSON string, as the API sends them; ValueError if malformed."""
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise ValueError("a tool call has no function name")
    arguments = fn.get("arguments", "{}")
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments, ensure_ascii=False)
    elif not isinstance(arguments, str):
        raise ValueError("a tool call's arguments are neither a JSON string nor an object")
    call_id = call.get("id")
    return {
        "id": valid_utf8(call_id) if isinstance(call_id, str) and call_id else None,
        "type": "function",
        "function": {"name": valid_utf8(fn["name"]), "arguments": valid_utf8(arguments)},
    }


def _call_text(name: str, arguments: str) -> str:
    """A native tool call as canonical action text (arguments that are not a JSON object: as written)."""
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        return valid_utf8(ToolCall(name, parsed).to_text())  # the arguments may escape a lone surrogate
    return f'<tool_call>{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {arguments}}}</tool_call>'


class OpenAIAgent:
    """Plays text envs through an OpenAI-compatible ``/chat/completions`` endpoint (see the module docstring).

    ``api_key`` defaults to the environment variable named by ``config.api_key_env``. ``seed`` seeds
    only the retry jitter. Use :meth:`play_all` (it opens and closes the HTTP client), or ``async with
    agent:`` around your own :meth:`play` calls.
    """

    def __init__(self, config: OpenAIConfig, *, api_key: str | None = None, seed: int = 0) -> None:
        self.config = config
        self.api_key = api_key if api_key is not None else os.environ.get(config.api_key_env)
        self._rng = random.Random(seed)
        self._client: httpx.AsyncClient | None = None
        self.requests = 0

    async def __aenter__(self) -> OpenAIAgent:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(self.config.timeout),
            headers=headers,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
            verify=self.config.uses_tls,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            raise RuntimeError("use `async with agent:` (or play_all) so the HTTP client is open")
        return self._client

    async def check(self) -> None:
        """Raise :class:`EndpointError` if nothing answers at ``base_url`` (any HTTP answer counts)."""
        timeout = min(self.config.timeout, 10.0)
        try:
            await self.client.get(f"{self.config.base_url}/models", timeout=timeout)
        except httpx.HTTPError as exc:
            reason = _transport_text(exc, timeout)
            raise EndpointError(f"cannot reach the endpoint at {self.config.base_url}: {reason}") from None

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict] | None, *, seed: int | None = None
    ) -> tuple[dict, dict[str, int]]:
        """One chat completion with retries: ``(message, usage)``; :class:`EndpointError` if it keeps failing.

        ``seed`` is sent when sampling (``temperature > 0``): servers that honour it (vLLM, OpenAI's
        best effort, ``agentgym serve model``) then sample the same way on every run.
        """
        cfg = self.config
        payload: dict[str, Any] = {"model": cfg.model, "messages": messages, "temperature": cfg.temperature}
        if cfg.max_tokens is not None:
            payload["max_tokens"] = cfg.max_tokens
        if cfg.top_p is not None:
            payload["top_p"] = cfg.top_p
        if tools:
            payload["tools"] = tools
        if seed is not None and cfg.temperature > 0:
            payload["seed"] = seed
        attempts = cfg.max_retries + 1
        for attempt in range(attempts):
            try:
                return await self._request(payload)
            except _Retryable as exc:
                reason, retry_after = str(exc), exc.retry_after
            if attempt + 1 < attempts:
                delay = cfg.backoff * 2**attempt * self._rng.uniform(0.5, 1.0)
                if retry_after is not None:
                    delay = max(delay, retry_after)
                await asyncio.sleep(min(delay, cfg.max_backoff))
        raise EndpointError(f"{reason} (after {attempts} attempt{'s' * (attempts != 1)})")

    async def _request(self, payload: dict[str, Any]) -> tuple[dict, dict[str, int]]:
        self.requests += 1
        try:
            response = await self.client.post(f"{self.config.base_url}/chat/completions", json=payload)
        except httpx.HTTPError as exc:
            raise _Retryable(_transport_text(exc, self.config.timeout)) from None
        if response.status_code >= 500 or response.status_code in _RETRY_STATUS:
            raise _Retryable(_error_text(response), _retry_after(response))
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = response.text
            if is_context_overflow(response.status_code, body):
                raise ContextLengthExceeded(_error_text(response))
            raise EndpointError(_error_text(response))
        try:
            return _message(response.json())
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            detail = str(exc) if not isinstance(exc, json.JSONDecodeError) else "not valid JSON"
            raise _Retryable(f"malformed response ({detail})") from None

    async def play(
        self, env: gym.Env, index: int, reset: dict[str, Any], *, worker: _EnvWorker | None = None
    ) -> EpisodeRecord:
        """Play one episode of ``env`` (reset with ``reset``); a failure is recorded, not raised. An endpoint that
        refuses a turn because the conversation outgrew its context ends the episode as truncated
        (:data:`CONTEXT_LIMIT`), not failed.

        With a ``worker``, the env is reset and stepped in the worker's thread, off the event loop.
        """
        cfg = self.config
        call = worker.call if worker is not None else _call_here
        record = EpisodeRecord(index=index, reset=reset)
        try:  # an env that fails to reset fails this episode, like any other failure
            observation, info = await call(env.reset, **reset)
            record.start(observation, info)
            tools = info.get("tools") if cfg.native_tools else None
            messages: list[dict[str, Any]] = []
            if cfg.system_prompt:
                messages.append({"role": "system", "content": cfg.system_prompt})
            messages.append({"role": "user", "content": valid_utf8(observation)})
            while True:
                seed = (int(reset.get("seed") or 0) * 1_000 + record.turns) % 2**31  # per episode and turn
                message, usage = await self.complete(messages, tools, seed=seed)
                record.prompt_tokens += usage.get("prompt_tokens", 0)
                record.completion_tokens += usage.get("completion_tokens", 0)
                calls = message["tool_calls"]
                if calls:
                    action = "".join(_call_text(c["function"]["name"], c["function"]["arguments"]) for c in calls)
                else:
                    action = message["content"]
                observation, reward, terminated, truncated, info = await call(env.step, action)
                record.step(action, observation, reward, info)
                if terminated:
                    record.terminated = True
                    break
                if truncated:
                    record.truncation = "time_limit"
                    break
                if cfg.max_turns is not None and record.turns >= cfg.max_turns:
                    record.truncation = "max_turns"
                    break
                messages += _turn_messages(message, valid_utf8(observation), record.turns)
        except ContextLengthExceeded:
            record.truncation = CONTEXT_LIMIT
        except EndpointError as exc:
            record.error = error_line(exc)
        except Exception as exc:  # an agent or env must not take the whole run down; say what happened
            record.error = error_line(f"{type(exc).__name__}: {error_line(exc)}")
        return record

    async def play_all(
        self,
        make_env: Callable[[], gym.Env],
        jobs: Sequence[tuple[int, dict[str, Any]]],
        *,
        concurrency: int = 8,
        on_episode: Callable[[EpisodeRecord], None] | None = None,
        check: bool = True,
    ) -> list[EpisodeRecord]:
        """Play ``(index, reset)`` jobs with at most ``concurrency`` in flight; records come back in job order.

        ``on_episode`` is called with each record as it finishes (write it to disk there). If it
        raises, it is called no more: no further episode starts or is reported (one that finished
        meanwhile is dropped, to be replayed on resume), the ones in flight are cancelled and the
        error propagates.
        ``check`` first makes sure something answers at ``base_url`` (:class:`EndpointError` if not).
        """
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        if not jobs:
            return []
        semaphore = asyncio.Semaphore(concurrency)
        idle: list[_EnvWorker] = []
        stopped = False
        async with self:
            if check:
                await self.check()

            async def one(index: int, reset: dict[str, Any]) -> EpisodeRecord | None:
                nonlocal stopped
                async with semaphore:
                    if stopped:
                        return None
                    worker = idle.pop() if idle else await _EnvWorker.start(make_env)
                    record = None
                    try:
                        record = await self.play(worker.env, index, reset, worker=worker)
                    finally:  # an env that failed may be left in any state: the next episode gets a fresh one
                        if record is not None and record.error is None:
                            idle.append(worker)
                        else:
                            worker.close()
                    if stopped:  # finished after on_episode raised: not reported
                        return None
                    if on_episode is not None:
                        try:
                            on_episode(record)
                        except BaseException:
                            stopped = True
                            raise
                    return record

            tasks = [asyncio.create_task(one(i, reset)) for i, reset in jobs]
            try:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                for worker in idle:
                    worker.close()
            for task in tasks:
                if not task.cancelled() and (error := task.exception()) is not None:
                    raise error
        return [r for t in tasks if (r := t.result()) is not None]


async def _call_here(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


class _EnvWorker:
    """One env and the one thread that makes, resets, steps and closes it.

    Env calls then never block the event loop (a CodeSandbox step runs a sandbox for a while), and
    each env stays on the thread that made it (a SQLite connection refuses any other thread).
    """

    def __init__(self) -> None:
        self.executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agentgym-env")
        self.env: gym.Env

    @classmethod
    async def start(cls, make_env: Callable[[], gym.Env]) -> _EnvWorker:
        worker = cls()
        try:
            worker.env = await worker.call(make_env)
        except BaseException:
            worker.executor.shutdown(wait=False)
            raise
        return worker

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        """Close the env (an env that raises on close is warned about, not raised) and end the thread."""
        try:
            self.executor.submit(self.env.close).result()
        except Exception as exc:
            warnings.warn(f"closing the env raised {exc!r}", RuntimeWarning, stacklevel=2)
        finally:
            self.executor.shutdown(wait=True)


def _turn_messages(message: dict[str, Any], observation: str, turn: int) -> list[dict[str, Any]]:
    """The assistant's turn and the env's reply, as the next request's messages."""
    calls = message["tool_calls"]
    if not calls:
        return [{"role": "assistant", "content": message["content"]}, {"role": "user", "content": observation}]
    normalized = [{**call, "id": call["id"] or f"call_{turn}_{k}"} for k, call in enumerate(calls)]
    out: list[dict[str, Any]] = [{"role": "assistant", "content": message["content"] or None, "tool_calls": normalized}]
    # the env answers all calls of a turn in one observation: it goes with the last call
    for k, call in enumerate(normalized):
        last = k == len(normalized) - 1
        content = observation if last else "(the results of all calls of this turn are in the last tool message)"
        out.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return out


def _transport_text(exc: httpx.HTTPError, timeout: float) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out after {timeout:g} s ({type(exc).__name__})"
    if isinstance(exc, httpx.ConnectError):
        return f"could not connect ({exc or 'connection refused'})"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"connection dropped mid-response ({exc})"
    return f"{type(exc).__name__}: {exc}"
