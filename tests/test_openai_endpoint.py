"""The OpenAI-compatible agent against real HTTP servers on 127.0.0.1: `agentgym serve model` (scripted
oracle and the tiny model), and purpose-built misbehaving servers. No mocked transport."""

import asyncio
import json
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler

import gymnasium as gym
import httpx
import pytest

from agentgym.app.cli import main
from agentgym.app.evaluation.reports import load_episodes
from agentgym.app.evaluation.runner import evaluate_agent
from agentgym.app.integrations.openai_agent import OpenAIAgent, OpenAIConfig
from agentgym.app.serving.http_service import HTTPService
from agentgym.app.serving.model_server import LLMResponder, ModelServer, ScriptedResponder, to_choice
from agentgym.envs.weather.env import WeatherRunEnv

WEATHER = "agentgym/WeatherRun-v0"
FAST_RETRIES = {"max_retries": 2, "backoff": 0.01, "max_backoff": 0.05}


@pytest.fixture(scope="module")
def oracle_server():
    with ModelServer(ScriptedResponder(WEATHER, split="test")) as server:
        yield server


def openai_eval(url, **kwargs):
    return evaluate_agent(WEATHER, f"openai:oracle@{url}", split="test", **kwargs)


def test_scripted_server_answers_with_native_tool_calls(oracle_server):
    env = gym.make(WEATHER, split="test")
    obs, info = env.reset(seed=0)
    body = {"model": "x", "messages": [{"role": "user", "content": obs}], "tools": info["tools"]}
    reply = httpx.post(f"{oracle_server.url}/chat/completions", json=body, timeout=5).json()
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": env.unwrapped.city}
    assert reply["usage"]["prompt_tokens"] > 50 and reply["usage"]["completion_tokens"] > 5
    plain = httpx.post(f"{oracle_server.url}/chat/completions", json={**body, "tools": None}, timeout=5).json()
    assert plain["choices"][0]["message"]["content"].startswith('<tool_call>{"name": "get_weather"')
    models = httpx.get(f"{oracle_server.url}/models", timeout=5).json()
    assert models["data"][0]["id"] == "agentgym/WeatherRun-v0:oracle"
    bad = httpx.post(f"{oracle_server.url}/chat/completions", json={"messages": []}, timeout=5)
    assert bad.status_code == 400 and "messages" in bad.json()["error"]["message"]


@pytest.mark.parametrize("native_tools", [True, False])
def test_oracle_through_the_endpoint_scores_like_the_oracle(oracle_server, tmp_path, native_tools):
    before = oracle_server.requests
    summary = openai_eval(
        oracle_server.url, episodes=10, concurrency=4, out_dir=tmp_path, sampling={"native_tools": native_tools}
    )
    assert summary.success_rate == 1.0 and summary.mean_return == 1.5 and summary.failures == 0
    assert summary.format_compliance == 1.0 and summary.tool_call_validity == 1.0
    assert oracle_server.requests - before == 30  # 3 calls an episode
    record = load_episodes(tmp_path / "episodes.jsonl")[0]
    assert record.prompt_tokens > 0 and record.completion_tokens > 0
    assert summary.prompt_tokens == sum(r.prompt_tokens for r in load_episodes(tmp_path / "episodes.jsonl"))
    assert summary.agent_settings["native_tools"] is native_tools and "timeout" not in summary.agent_settings


@pytest.mark.parametrize("env_id, split", [("agentgym/SQLLookup-v0", "test"), ("agentgym/CliffWalk-v0", None)])
def test_the_endpoint_client_plays_other_envs_like_the_oracle_in_process(env_id, split):
    # SQLLookup's env holds a SQLite connection bound to the thread that opened it: each env keeps its own thread
    with ModelServer(ScriptedResponder(env_id, split=split)) as server:
        served = evaluate_agent(env_id, f"openai:oracle@{server.url}", split=split, episodes=6, concurrency=3)
    direct = evaluate_agent(env_id, "oracle", split=split, episodes=6)
    assert served.failures == 0 and served.success_rate == direct.success_rate == 1.0
    assert served.returns == direct.returns and served.mean_turns == direct.mean_turns > 1


def test_concurrency_speeds_up_and_does_not_change_results(tmp_path):
    # 48 requests of 50 ms: ≥ 2.4 s one at a time, ~0.3 s of waiting 8 at a time. The latency dominates the
    # client's and server's CPU time (~3-10 ms a request here, sharing one process on a busy 2-core machine),
    # so the speed-up stays well above the bound (the benchmark measures ~7× on 600 requests).
    with ModelServer(ScriptedResponder(WEATHER, split="test"), latency_ms=50) as server:
        seconds, texts = {}, {}
        for concurrency in (1, 8):
            out = tmp_path / f"c{concurrency}"
            start = time.perf_counter()
            openai_eval(server.url, episodes=16, concurrency=concurrency, out_dir=out)
            seconds[concurrency] = time.perf_counter() - start
            texts[concurrency] = (out / "summary.json").read_text().partition('"timing"')[0]
    assert texts[1] == texts[8]
    assert seconds[1] >= 48 * 0.05 and seconds[1] / seconds[8] >= 2.5, seconds


class Crash(RuntimeError):
    pass


def test_killed_run_resumes_and_the_server_sees_only_the_rest(oracle_server, tmp_path):
    def crash_after_three(record):
        if record.index == 2:
            raise Crash("killed")

    start = oracle_server.requests
    with pytest.raises(Crash):
        openai_eval(oracle_server.url, episodes=6, concurrency=1, out_dir=tmp_path, callback=crash_after_three)
    assert oracle_server.requests - start == 9
    summary = openai_eval(oracle_server.url, episodes=6, concurrency=1, out_dir=tmp_path, resume=True)
    assert oracle_server.requests - start == 18  # 3 episodes × 3 requests more, none redone
    assert sorted(r.index for r in load_episodes(tmp_path / "episodes.jsonl")) == list(range(6))
    assert summary.success_rate == 1.0 and summary.timing.episodes_run == 3


def test_a_concurrent_run_killed_mid_flight_loses_no_finished_episode(tmp_path):
    with ModelServer(ScriptedResponder(WEATHER, split="test"), latency_ms=5) as server:

        def crash(record):
            if record.index == 5:
                raise Crash("killed")

        with pytest.raises(Crash):
            openai_eval(server.url, episodes=16, concurrency=4, out_dir=tmp_path, callback=crash)
        finished = sorted(r.index for r in load_episodes(tmp_path / "episodes.jsonl"))
        assert 5 in finished and len(finished) < 16
        played = []
        summary = openai_eval(
            server.url, episodes=16, concurrency=4, out_dir=tmp_path, resume=True, callback=played.append
        )
    assert sorted(r.index for r in played) == sorted(set(range(16)) - set(finished))
    assert summary.episodes == 16 and summary.success_rate == 1.0


def test_no_episode_is_reported_after_the_callback_raised(tmp_path):
    # 4 episodes in flight finish together; the one whose report raises must be the last on disk
    with ModelServer(ScriptedResponder(WEATHER, split="test")) as server:
        for kill_at in (1, 3, 6):
            reported = []

            def kill(record, reported=reported, kill_at=kill_at):
                reported.append(record.index)
                if len(reported) == kill_at:
                    raise Crash("killed")

            out = tmp_path / str(kill_at)
            with pytest.raises(Crash):
                openai_eval(server.url, episodes=16, concurrency=4, out_dir=out, callback=kill)
            assert len(reported) == kill_at
            assert sorted(r.index for r in load_episodes(out / "episodes.jsonl")) == sorted(reported)


def test_the_tiny_model_served_over_http(tiny_model_path, tmp_path):
    from agentgym.trainers.models.policy import LLMPolicy

    with ModelServer(LLMResponder(LLMPolicy.from_pretrained(tiny_model_path), name="tiny")) as server:
        assert httpx.get(f"{server.url}/models", timeout=5).json()["data"][0]["id"] == "tiny"
        summary = evaluate_agent(
            WEATHER,
            f"openai:tiny@{server.url}",
            split="test",
            episodes=2,
            sampling={"max_tokens": 8, "max_turns": 2},
            out_dir=tmp_path,
        )
        assert server.requests == 2 * summary.mean_turns
        # sampling: each request carries a seed derived from the episode's seed and the turn, so runs repeat
        sampled = [
            evaluate_agent(
                WEATHER,
                f"openai:tiny@{server.url}",
                split="test",
                episodes=2,
                sampling={"max_tokens": 8, "max_turns": 2, "temperature": 1.0},
            )
            for _ in range(2)
        ]
        assert sampled[0].model_dump(exclude={"timing"}) == sampled[1].model_dump(exclude={"timing"})
    assert summary.failures == 0 and 1 <= summary.mean_turns <= 2
    assert summary.prompt_tokens > 2 * 100 and 0 < summary.completion_tokens <= 2 * 2 * 8
    # the same model in-process (hf: agent, same prompt ids, greedy) writes the same first action
    evaluate_agent(
        WEATHER,
        f"hf:{tiny_model_path}",
        split="test",
        episodes=1,
        sampling={"max_new_tokens": 8, "max_turns": 1},
        out_dir=tmp_path / "hf",
    )
    (in_process,) = load_episodes(tmp_path / "hf" / "episodes.jsonl")
    served = next(r for r in load_episodes(tmp_path / "episodes.jsonl") if r.index == 0)
    assert served.observations[0] == in_process.observations[0] and served.actions[0] == in_process.actions[0]


def test_the_model_server_checks_what_the_model_is_given(tiny_model_path):
    from agentgym.trainers.models.policy import LLMPolicy

    with ModelServer(LLMResponder(LLMPolicy.from_pretrained(tiny_model_path), name="tiny")) as server:
        url = f"{server.url}/chat/completions"
        history = [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Lima?"}, {"type": "image_url"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c0", "function": {"name": "get_weather", "arguments": '{"city": "Lima"}'}}],
            },
            {"role": "tool", "tool_call_id": "c0", "content": "18 °C"},
        ]
        reply = httpx.post(url, json={"messages": history, "max_tokens": 4, "seed": 2**64 - 1}, timeout=30)
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] <= 4
        # longer than the model's 4096 positions: the client's error, not a failed generation
        long = httpx.post(url, json={"messages": [{"role": "user", "content": "weather " * 5000}]}, timeout=30)
        assert long.status_code == 400 and "this model reads at most 4095" in long.json()["error"]["message"]
        bad = httpx.post(url, json={"messages": [{"role": "user", "content": [{"text": 5}]}]}, timeout=30)
        assert bad.status_code == 400 and "messages.0.content" in bad.json()["error"]["message"]


def test_tool_calls_and_content_are_told_apart():
    message, finish = to_choice('Sure. get_weather(city="Lima")', ["get_weather", "answer"])
    assert finish == "tool_calls" and message["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Lima"}',
    }
    assert to_choice("I think it is sunny.", ["get_weather"]) == (
        {"role": "assistant", "content": "I think it is sunny."},
        "stop",
    )
    assert to_choice('get_weather(city="Lima")', None)[1] == "stop"  # no tools offered: plain content


# ------------------------------------------------------------------------------------------ misbehaving servers

VALID = {
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "answer(suitable=true)"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
}


class Misbehaving(BaseHTTPRequestHandler):
    mode = "500"
    failures = 10**6  # bad answers before good ones
    hits = 0

    def do_GET(self):  # noqa: N802  (GET /models: the endpoint is up)
        self._send(200, b'{"object": "list", "data": []}')

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        cls = type(self)
        cls.hits += 1
        if cls.hits > cls.failures:
            return self._send(200, json.dumps(VALID).encode())
        if self.mode == "slow":
            time.sleep(0.5)
            return self._send(200, json.dumps(VALID).encode())
        if self.mode == "drop":
            self.wfile.write(b'HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{"choi')
            self.close_connection = True
            return None
        if self.mode == "malformed":
            return self._send(200, b'{"choices": [{"message": ')
        if self.mode == "no_choices":
            return self._send(200, b'{"object": "chat.completion"}')
        if self.mode == "429":
            return self._send(429, b'{"error": {"message": "rate limited"}}', {"Retry-After": "0"})
        if self.mode == "400":
            return self._send(400, b'{"error": {"message": "model not found"}}')
        return self._send(500, b'{"error": {"message": "boom"}}')

    def _send(self, status, body, headers=()):
        try:
            self.send_response(status)
            for k, v in dict(headers).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first (the "slow" mode is meant to time out)

    def log_message(self, *args):
        pass


@pytest.fixture
def misbehaving():
    Misbehaving.hits, Misbehaving.failures = 0, 10**6
    with HTTPService(Misbehaving, "127.0.0.1", 0) as server:
        yield f"{server.url}/v1"


@pytest.mark.parametrize(
    "mode, reason, hits",
    [
        ("500", "HTTP 500: boom (after 3 attempts)", 3),
        ("429", "HTTP 429: rate limited (after 3 attempts)", 3),
        ("slow", "timed out after 0.2 s (ReadTimeout) (after 3 attempts)", 3),
        ("malformed", "malformed response (not valid JSON) (after 3 attempts)", 3),
        ("no_choices", "malformed response (no choices[0].message in the response) (after 3 attempts)", 3),
        ("drop", "connection dropped mid-response", 3),
        ("400", "HTTP 400: model not found", 1),  # a client error is not retried
    ],
)
def test_persistent_failures_are_recorded_not_raised(misbehaving, tmp_path, mode, reason, hits):
    Misbehaving.mode = mode
    summary = evaluate_agent(
        WEATHER,
        f"openai:m@{misbehaving}",
        split="test",
        episodes=1,
        out_dir=tmp_path,
        sampling={**FAST_RETRIES, "timeout": 0.2},
    )
    assert Misbehaving.hits == hits
    assert summary.failures == 1 and summary.completed == 0 and summary.success_rate == 0.0
    (failure,) = summary.failure_reasons
    assert reason in failure, failure
    (record,) = load_episodes(tmp_path / "episodes.jsonl")
    assert record.error == failure and record.turns == 0 and len(record.observations) == 1


@pytest.mark.parametrize("mode", ["500", "429", "drop", "malformed", "slow"])
def test_transient_failures_are_retried_until_success(misbehaving, tmp_path, mode):
    Misbehaving.mode, Misbehaving.failures = mode, 2
    summary = evaluate_agent(
        WEATHER,
        f"openai:m@{misbehaving}",
        split="test",
        episodes=1,
        out_dir=tmp_path,
        sampling={**FAST_RETRIES, "timeout": 0.2},
    )
    assert Misbehaving.hits == 3 and summary.failures == 0
    (record,) = load_episodes(tmp_path / "episodes.jsonl")
    assert record.actions == ["answer(suitable=true)"] and record.terminated and record.rewards == [-0.5]
    assert (record.prompt_tokens, record.completion_tokens) == (11, 3)


def test_a_failed_episode_is_played_again_on_resume(misbehaving, tmp_path):
    Misbehaving.mode = "500"
    first = evaluate_agent(
        WEATHER, f"openai:m@{misbehaving}", split="test", episodes=2, out_dir=tmp_path, sampling=FAST_RETRIES
    )
    assert first.failures == 2
    Misbehaving.failures = 0  # the endpoint recovered
    second = evaluate_agent(
        WEATHER,
        f"openai:m@{misbehaving}",
        split="test",
        episodes=2,
        out_dir=tmp_path,
        sampling=FAST_RETRIES,
        resume=True,
    )
    assert second.failures == 0 and second.completed == 2 and second.timing.episodes_run == 2
    assert len(load_episodes(tmp_path / "episodes.jsonl")) == 4  # append-only: the failed records stay


def test_agent_api_from_async_code(oracle_server):
    agent = OpenAIAgent(OpenAIConfig(model="oracle", base_url=oracle_server.url))

    async def main_coroutine():
        return await agent.play_all(
            lambda: gym.make(WEATHER, split="test"), [(i, {"seed": i}) for i in range(4)], concurrency=2
        )

    records = asyncio.run(main_coroutine())
    assert [r.index for r in records] == [0, 1, 2, 3] and all(r.success for r in records)


def test_serve_model_command_with_the_scripted_oracle(capsys):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentgym.app.cli",
            "serve",
            "model",
            "--scripted",
            "oracle",
            "--env",
            WEATHER,
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        url = line.split(" at ")[1].split()[0]
        argv = ["eval", "--env", WEATHER, "--split", "test", "--agent", f"openai:oracle@{url}", "--episodes", "5"]
        assert main([*argv, "--no-progress", "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["success_rate"] == 1.0 and summary["mean_return"] == 1.5 and summary["completion_tokens"] > 0
    finally:
        proc.terminate()
        proc.wait(timeout=5)


# ------------------------------------------------------------------------------------------ hostile replies, envs


def reply(content=None, calls=()):
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content, "tool_calls": list(calls)}}]}


SURROGATE_TURNS = [  # what the endpoint answers at turns 1, 2, 3: lone surrogates in every string it controls
    reply("let me think \ud800 first"),
    reply(calls=[
        {"id": "c\udfff", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Lima\ud800"}'}},
        {"function": {"name": "get_air_\udc00quality", "arguments": {"city": "Lima \ud83d"}}},
    ]),
    reply('<tool_call>{"name": "answer", "arguments": {"suitable": true, "reason": "\ud800"}}</tool_call>'),
]  # fmt: skip


class SurrogateMidEpisode(BaseHTTPRequestHandler):
    """An endpoint whose replies hold lone surrogates (JSON escapes can spell them) in turns that do not end the
    episode; it keeps every request body it receives."""

    bodies: list[bytes] = []

    def do_GET(self):  # noqa: N802
        self._send(b'{"object": "list", "data": []}')

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).bodies.append(body)
        turn = sum(m["role"] == "assistant" for m in json.loads(body)["messages"])
        self._send(json.dumps(SURROGATE_TURNS[turn]).encode())  # ASCII JSON: "\ud800" as an escape

    def _send(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_reply_with_lone_surrogates_mid_episode_does_not_fail_the_episode(tmp_path):
    SurrogateMidEpisode.bodies = []
    with HTTPService(SurrogateMidEpisode, "127.0.0.1", 0) as server:
        summary = evaluate_agent(WEATHER, f"openai:m@{server.url}/v1", split="test", episodes=1, out_dir=tmp_path)
    (record,) = load_episodes(tmp_path / "episodes.jsonl")
    assert record.error is None and summary.failures == 0, record.error
    assert record.turns == 3 and record.terminated and len(SurrogateMidEpisode.bodies) == 3
    sent = [json.loads(body.decode("utf-8")) for body in SurrogateMidEpisode.bodies]  # every request was UTF-8
    history = sent[2]["messages"]
    assert history[1] == {"role": "assistant", "content": "let me think \ufffd first"}
    calls = history[3]["tool_calls"]
    assert [c["id"] for c in calls] == ["c\ufffd", "call_2_1"]
    assert [c["function"]["name"] for c in calls] == ["get_weather", "get_air_\ufffdquality"]
    assert calls[0]["function"]["arguments"] == '{"city": "Lima\ufffd"}'
    assert json.loads(calls[1]["function"]["arguments"]) == {"city": "Lima \ufffd"}
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant", "tool", "tool"]


class ResetFailsWeather(WeatherRunEnv):
    """WeatherRun whose reset raises for odd seeds while ``broken`` is set."""

    broken = True

    def reset(self, *, seed=None, options=None):
        if type(self).broken and seed is not None and seed % 2:
            raise RuntimeError("the env broke in reset\nwith a second line")
        return super().reset(seed=seed, options=options)


RESET_FAILS = "agentgym-test/ResetFailsWeather-v0"
if RESET_FAILS not in gym.registry:
    gym.register(RESET_FAILS, entry_point=ResetFailsWeather, max_episode_steps=8)


def test_an_env_that_fails_to_reset_fails_that_episode_only_and_resume_replays_it(oracle_server, tmp_path):
    # the env that failed is not reused: Gymnasium's env checker breaks the next step of an env whose first
    # reset raised (it finds no previous reset to compare with), so episode 2 on it would fail too
    ResetFailsWeather.broken = True
    try:
        kwargs = {"split": "test", "episodes": 4, "out_dir": tmp_path, "concurrency": 2}
        summary = evaluate_agent(RESET_FAILS, f"openai:oracle@{oracle_server.url}", **kwargs)
        assert summary.completed == 2 and summary.success_rate == 0.5
        assert summary.failure_reasons == {"RuntimeError: the env broke in reset": 2}
        records = load_episodes(tmp_path / "episodes.jsonl")
        assert sorted((r.index, r.turns, r.observations) for r in records if r.error) == [(1, 0, []), (3, 0, [])]
        ResetFailsWeather.broken = False
        resumed = evaluate_agent(RESET_FAILS, f"openai:oracle@{oracle_server.url}", resume=True, **kwargs)
        assert resumed.timing.episodes_run == 2 and resumed.failures == 0 and resumed.success_rate == 1.0
    finally:
        ResetFailsWeather.broken = True


# ------------------------------------------------------------------------------ a context-length refusal (issue 43)

THINKING = {  # a turn that neither ends the episode nor calls a tool (WeatherRun answers it with a parse error)
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "let me think"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
}

CONTEXT_REFUSALS = {  # the bodies real servers send when a conversation outgrows the model's context
    "openai": (400, {"error": {"message": "This model's maximum context length is 8192 tokens. However, your "
                     "messages resulted in 9001 tokens. Please reduce the length of the messages.",
                     "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
    "openai_code_only": (400, {"error": {"message": "Request too large.", "code": "context_length_exceeded"}}),
    "llama_cpp_python": (400, {"error": {"message": "This model's maximum context length is 4096 tokens. However, "
                               "you requested 4133 tokens (3621 in the messages, 512 in the completion). Please "
                               "reduce the length of the messages or completion.", "type": "invalid_request_error",
                               "param": "messages", "code": "context_length_exceeded"}}),
    "vllm_flat": (400, {"object": "error", "message": "This model's maximum context length is 2048 tokens. However, "
                        "you requested 2100 tokens (1900 in the messages, 200 in the completion).",
                        "type": "BadRequestError", "param": None, "code": 400}),
    "vllm_input": (400, {"error": {"message": "The decoder prompt (length 5000) is longer than the model's context "
                         "length (4096 tokens)", "type": "BadRequestError", "code": 400}}),
    "llama_cpp": (400, {"error": {"code": 400, "message": "the request exceeds the available context size, try "
                        "increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}),
    "llama_cpp_counts": (400, {"error": {"code": 400, "message": "request (5000 tokens) exceeds the available context "
                               "size (4096 tokens), try increasing it", "type": "invalid_request_error"}}),
    "llama_cpp_type_only": (400, {"error": {"code": 400, "message": "", "type": "exceed_context_size_error"}}),
    "as_413": (413, {"error": {"message": "This model's maximum context length is 4096 tokens."}}),
}  # fmt: skip


class ContextRefusing(BaseHTTPRequestHandler):
    """Answers ``turns`` thinking turns, then refuses every request with ``refusal`` (status, body)."""

    refusal: tuple[int, dict] = CONTEXT_REFUSALS["openai"]
    turns = 1
    hits = 0

    def do_GET(self):  # noqa: N802
        self._send(200, {"object": "list", "data": []})

    def do_POST(self):  # noqa: N802
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        cls.hits += 1
        assistant_turns = sum(m["role"] == "assistant" for m in payload["messages"])
        if assistant_turns < cls.turns:
            return self._send(200, THINKING)
        self._send(*cls.refusal)

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def context_refusing():
    ContextRefusing.hits, ContextRefusing.turns = 0, 1
    with HTTPService(ContextRefusing, "127.0.0.1", 0) as server:
        yield f"{server.url}/v1"


@pytest.mark.parametrize("server_kind", sorted(CONTEXT_REFUSALS))
def test_a_context_length_refusal_truncates_the_episode_and_is_not_replayed(context_refusing, tmp_path, server_kind):
    ContextRefusing.refusal = CONTEXT_REFUSALS[server_kind]
    run = dict(split="test", episodes=2, out_dir=tmp_path, sampling=FAST_RETRIES, concurrency=1)
    summary = evaluate_agent(WEATHER, f"openai:m@{context_refusing}", **run)
    assert ContextRefusing.hits == 4  # one thinking turn, one refusal, per episode: a refusal is not retried
    assert summary.failures == 0 and summary.completed == 2 and summary.failure_reasons == {}
    assert summary.truncation_reasons == {"context_limit": 2} and summary.truncation_rate == 1.0
    assert summary.success_rate == 0.0
    records = load_episodes(tmp_path / "episodes.jsonl")
    for record in records:
        assert record.error is None and record.truncation == "context_limit" and not record.terminated
        assert record.turns == 1 and len(record.observations) == 2 and record.actions == ["let me think"]
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["truncation_reasons"] == {"context_limit": 2} and saved["failures"] == 0
    again = evaluate_agent(WEATHER, f"openai:m@{context_refusing}", resume=True, **run)
    assert ContextRefusing.hits == 4 and again.truncation_reasons == {"context_limit": 2}  # nothing replayed
    assert len(load_episodes(tmp_path / "episodes.jsonl")) == 2


def test_a_context_refusal_on_the_first_request_keeps_the_record_whole(context_refusing, tmp_path):
    ContextRefusing.refusal, ContextRefusing.turns = CONTEXT_REFUSALS["llama_cpp"], 0
    summary = evaluate_agent(
        WEATHER, f"openai:m@{context_refusing}", split="test", episodes=1, out_dir=tmp_path, sampling=FAST_RETRIES
    )
    (record,) = load_episodes(tmp_path / "episodes.jsonl")
    assert record.turns == 0 and len(record.observations) == 1 and record.truncation == "context_limit"
    assert summary.failures == 0 and summary.truncation_reasons == {"context_limit": 1}


def test_eval_exits_0_on_context_refusals_and_names_them(context_refusing, tmp_path, capsys):
    ContextRefusing.refusal = CONTEXT_REFUSALS["llama_cpp_python"]
    agent = f"openai:m@{context_refusing}"
    argv = ["eval", "--env", WEATHER, "--split", "test", "--agent", agent, "--episodes", "2", "--out", str(tmp_path),
            "--no-progress", "--max-failures", "0", "--sampling", json.dumps(FAST_RETRIES)]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "context_limit 2" in out and "failures    0" in out


@pytest.mark.parametrize(
    "status, body",
    [
        (500, CONTEXT_REFUSALS["openai"][1]),  # a 5xx may be transient, whatever it says
        (503, {"error": {"message": "overloaded", "code": "context_length_exceeded"}}),
        (429, CONTEXT_REFUSALS["llama_cpp"][1]),
        (400, {"error": {"message": "model not found", "code": "model_not_found"}}),
        (400, {"error": {"message": "invalid context: tokens exceed nothing", "code": 400}}),
        (401, {"error": "maximum context"}),
    ],
)
def test_other_errors_stay_failures_and_are_replayed(context_refusing, tmp_path, status, body):
    ContextRefusing.refusal, ContextRefusing.turns = (status, body), 0
    run = dict(split="test", episodes=1, out_dir=tmp_path, sampling=FAST_RETRIES)
    summary = evaluate_agent(WEATHER, f"openai:m@{context_refusing}", **run)
    assert summary.failures == 1 and summary.truncation_reasons == {}
    (record,) = load_episodes(tmp_path / "episodes.jsonl")
    assert record.error is not None and record.error.startswith(f"HTTP {status}") and record.truncation is None
    hits = ContextRefusing.hits
    evaluate_agent(WEATHER, f"openai:m@{context_refusing}", resume=True, **run)
    assert ContextRefusing.hits > hits  # a failure is played again
