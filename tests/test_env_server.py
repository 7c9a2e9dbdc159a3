"""``agentgym serve env`` and ``agentgym/Remote-v0``: remote play is local play, and the server holds its bounds.

Every server binds 127.0.0.1 on an ephemeral port, in a thread of this process.
"""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import httpx
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym  # noqa: F401  (registers the ids)
from agentgym.app.serving.env_server import EnvServer, ServerLimits
from agentgym.envs.remote import RemoteEnvError, RemoteEnvUnavailable, decode, encode

TASKS = ["agentgym/CliffWalk-v0", "agentgym/WeatherRun-v0", "agentgym/SQLLookup-v0", "agentgym/CodeSandbox-v0"]
STEPS = {"agentgym/CodeSandbox-v0": 3}  # each sandboxed program costs tens of ms


@pytest.fixture(scope="module")
def cliff():
    with EnvServer("agentgym/CliffWalk-v0", port=0) as server:
        yield server


def _actions(local: gym.Env, n: int) -> list[str]:
    """Random valid calls, plus the inputs a codec could lose: a malformed action, a tuple argument, Unicode."""
    base = local.unwrapped
    tool = next(iter(base.tools))
    odd = ["not a call at all", f"{tool}((1, 2), b'x', {{3: 4}})", f'{tool}("Zürich \\x1b 中文")']
    return odd + [base.sample_action(np.random.default_rng(i)) for i in range(n)]


@pytest.mark.parametrize("env_id", TASKS)
def test_remote_trajectories_are_the_local_ones(env_id):
    transports = ["ws", "http"] if env_id == "agentgym/CliffWalk-v0" else ["ws"]
    with EnvServer(env_id, port=0) as server:
        for transport in transports:
            local = gym.make(env_id)
            remote = gym.make("agentgym/Remote-v0", base_url=server.url, env_id=env_id, transport=transport)
            assert remote.observation_space.max_length == local.observation_space.max_length
            assert remote.action_space.max_length == local.action_space.max_length
            for seed in (0, 7):
                assert remote.reset(seed=seed) == local.reset(seed=seed)
                for action in _actions(local, STEPS.get(env_id, 12)):
                    want = local.step(action)
                    assert remote.step(action) == want, (env_id, transport, action)
                    if want[2] or want[3]:
                        break
            remote.close()
            local.close()


def test_time_limit_truncation_is_the_servers(cliff):
    local = gym.make("agentgym/CliffWalk-v0")
    remote = gym.make("agentgym/Remote-v0", base_url=cliff.url)
    local.reset(seed=1), remote.reset(seed=1)
    stay = local.unwrapped.canonical("move", direction="up")
    for _ in range(local.spec.max_episode_steps):
        want = local.step(stay)
        assert remote.step(stay) == want
    assert want[3] is True  # the 100th step truncates, on both
    remote.close()


def test_check_env_passes_on_the_remote_client(cliff):
    for transport in ("ws", "http"):
        env = gym.make("agentgym/Remote-v0", base_url=cliff.url, transport=transport)
        check_env(env.unwrapped, skip_render_check=True)
        env.close()


def test_the_codec_round_trips_what_json_cannot_carry():
    values = [(1, 2), {1, 2}, frozenset({3}), b"\x00\xff", {1: "a", "$agentgym": 2}, float("inf"), 1 + 2j, ...]
    values += [np.int64(3), np.arange(6, dtype=np.float32).reshape(2, 3), {"a": [(1,), {"b": None}]}, "Zürich"]
    for value in values:
        back = decode(json.loads(json.dumps(encode(value))))
        assert type(back) is type(value) and (
            np.array_equal(back, value) if isinstance(value, np.ndarray) else back == value
        )
    with pytest.raises(ValueError, match="nested more than"):
        encode(_nested(100))


def _nested(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


def test_64_sessions_are_held_and_the_65th_is_refused():
    with EnvServer("agentgym/CliffWalk-v0", port=0, limits=ServerLimits(max_sessions=64)) as server:

        def play(i):
            env = gym.make("agentgym/Remote-v0", base_url=server.url, transport="http")
            env.reset(seed=i)
            return env, env.step('<tool_call>{"name": "move", "arguments": {"direction": "up"}}</tool_call>')

        with ThreadPoolExecutor(16) as pool:
            played = list(pool.map(play, range(64)))
        assert all(step[4]["parse_error"] is None for _, step in played)
        with pytest.raises(RemoteEnvError, match="all 64 sessions are in use") as refused:
            gym.make("agentgym/Remote-v0", base_url=server.url, transport="http")
        assert refused.value.status == 429
        metrics = httpx.get(f"{server.url}/metrics").text
        assert "agentgym_env_sessions_open 64" in metrics and "agentgym_env_sessions_refused_total 1" in metrics
        played[0][0].close()  # a closed session frees its slot
        gym.make("agentgym/Remote-v0", base_url=server.url, transport="http").close()
        for env, _ in played[1:]:
            env.close()


def test_an_idle_session_is_closed():
    with EnvServer("agentgym/CliffWalk-v0", port=0, limits=ServerLimits(idle_timeout_s=0.4)) as server:
        env = gym.make("agentgym/Remote-v0", base_url=server.url, transport="http")
        env.reset(seed=0)
        time.sleep(1.6)  # the reaper looks every idle/4 s
        with pytest.raises(RemoteEnvError, match="idle for more than 0.4 s") as closed:
            env.step("move('up')")
        assert closed.value.status == 404
        assert "agentgym_env_sessions_reaped_total 1" in httpx.get(f"{server.url}/metrics").text


def test_a_body_over_the_limit_is_413(cliff):
    session = httpx.post(f"{cliff.url}/v1/sessions", json={}).json()["session"]
    big = json.dumps({"action": "x" * (1 << 20)})
    response = httpx.post(f"{cliff.url}/v1/sessions/{session}/step", content=big)
    assert response.status_code == 413 and "at most 1048576" in response.json()["error"]["message"]
    httpx.delete(f"{cliff.url}/v1/sessions/{session}")


def test_a_token_guards_everything_but_health(monkeypatch):
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    with EnvServer("agentgym/CliffWalk-v0", port=0, token="s3cret-token") as server:
        assert httpx.get(f"{server.url}/health").status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
            response = httpx.post(f"{server.url}/v1/sessions", json={}, headers=headers)
            assert response.status_code == 401 and "bearer token" in response.json()["error"]["message"]
            assert httpx.get(f"{server.url}/metrics", headers=headers).status_code == 401
        with pytest.raises(InvalidStatus) as denied:
            connect(server.url.replace("http", "ws") + "/v1/sessions/x/ws")
        assert denied.value.response.status_code == 401
        with pytest.raises(RemoteEnvError, match="401"):
            gym.make("agentgym/Remote-v0", base_url=server.url)
        monkeypatch.setenv("AGENTGYM_TEST_TOKEN", "s3cret-token")
        env = gym.make("agentgym/Remote-v0", base_url=server.url, token_env="AGENTGYM_TEST_TOKEN")
        assert "Task" in env.reset(seed=0)[0] or env.reset(seed=0)[0]
        env.step("move('up')")
        env.close()


@pytest.mark.parametrize("transport", ["ws", "http"])
def test_a_killed_server_is_a_clear_client_error(transport):
    server = EnvServer("agentgym/CliffWalk-v0", port=0).__enter__()
    env = gym.make("agentgym/Remote-v0", base_url=server.url, transport=transport, retries=3, backoff_s=0.05)
    env.reset(seed=0)
    env.step("move('up')")
    server.__exit__(None, None, None)
    started = time.monotonic()
    with pytest.raises(RemoteEnvUnavailable) as gone:
        env.step("move('up')")
    assert time.monotonic() - started < 3.0  # 4 tries, backoff 0.05 + 0.1 + 0.2 s
    message = str(gone.value)
    assert "\n" not in message and server.url in message and "unreachable: 4 tries" in message
    assert isinstance(gone.value, ConnectionError) and isinstance(gone.value, RuntimeError)
    env.close()  # closing after the server is gone does not raise


def test_malformed_messages_are_4xx_with_a_reason_and_the_server_stays_up(cliff):
    from websockets.sync.client import connect

    session = httpx.post(f"{cliff.url}/v1/sessions", json={}).json()["session"]
    step, reset = f"{cliff.url}/v1/sessions/{session}/step", f"{cliff.url}/v1/sessions/{session}/reset"
    cases = [
        (step, b"{not json", 400, "not JSON"),
        (step, b"[1, 2]", 422, "must be a JSON object"),
        (step, b"{}", 422, "action"),
        (step, b'{"action": "x", "extra": 1}', 422, "extra"),
        (reset, b'{"seed": -1}', 422, "seed"),
        (reset, b'{"seed": "1"}', 422, "seed"),
        (reset, b'{"options": "x"}', 422, "options must be an object"),
        (step, b'{"action": {"$agentgym": "nope"}}', 422, "unknown $agentgym tag"),
        (step, b'{"action": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, "not JSON"),
        (reset, b'{"seed": 340282366920938463463374607431768211456}', 422, "seed"),
        (f"{cliff.url}/v1/sessions/nope/step", b'{"action": "x"}', 404, "unknown session"),
        (f"{cliff.url}/v1/sessions", b'{"protocol": "agentgym-env/9"}', 422, "speaks 'agentgym-env/1'"),
    ]
    for url, body, status, words in cases:
        response = httpx.post(url, content=body)
        assert response.status_code == status, (body[:60], response.text)
        assert words in response.json()["error"]["message"], (body[:60], response.text)
    with connect(cliff.url.replace("http", "ws") + f"/v1/sessions/{session}/ws") as ws:
        for frame, status in (("garbage", 400), ('{"op": "fly"}', 422), ('{"op": "step"}', 422)):
            ws.send(frame)
            assert json.loads(ws.recv(timeout=5))["error"]["status"] == status
        ws.send('{"op": "reset", "seed": 0}')  # the socket stays usable
        assert "observation" in json.loads(ws.recv(timeout=5))
    assert httpx.get(f"{cliff.url}/health").json()["status"] == "ok"


def test_a_repeated_seq_is_answered_from_the_record_not_stepped_twice(cliff):
    session = httpx.post(f"{cliff.url}/v1/sessions", json={}).json()["session"]
    url = f"{cliff.url}/v1/sessions/{session}"
    httpx.post(f"{url}/reset", json={"seed": 0, "seq": 1})
    first = httpx.post(f"{url}/step", json={"action": "move('right')", "seq": 2}).json()
    again = httpx.post(f"{url}/step", json={"action": "move('right')", "seq": 2}).json()
    assert first == again and first["info"]["summary"] == again["info"]["summary"]
    after = httpx.post(f"{url}/step", json={"action": "move('right')", "seq": 3}).json()
    assert after["info"]["summary"] != first["info"]["summary"]  # one more move, not two
    assert httpx.post(f"{url}/step", json={"action": "move('up')", "seq": 1}).status_code == 409


def test_a_slow_request_head_is_dropped():
    with EnvServer("agentgym/CliffWalk-v0", port=0, limits=ServerLimits(head_timeout_s=0.5)) as server:
        sock = socket.create_connection(server.server_address[:2])
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # the head never ends
        started = time.monotonic()
        sock.settimeout(5)
        assert sock.recv(1024) == b""  # closed by the server
        assert time.monotonic() - started < 2.0
        sock.close()
        assert httpx.get(f"{server.url}/health").status_code == 200


def test_a_client_cannot_change_the_servers_env(cliff):
    with pytest.raises(RemoteEnvError, match="serves 'agentgym/CliffWalk-v0', not 'agentgym/SQLLookup-v0'"):
        gym.make("agentgym/Remote-v0", base_url=cliff.url, env_id="agentgym/SQLLookup-v0")
    with pytest.raises(RemoteEnvError, match="with env kwargs"):
        gym.make("agentgym/Remote-v0", base_url=cliff.url, history=3)


def test_the_serve_env_command_starts_answers_and_stops_on_sigterm():
    import re
    import signal
    import subprocess
    import sys
    from pathlib import Path

    agentgym_bin = Path(sys.executable).with_name("agentgym")
    command = [str(agentgym_bin), "serve", "env", "--env", "agentgym/CliffWalk-v0", "--port", "0"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()  # printed once the socket is bound
        url = re.search(r"at (http://127\.0\.0\.1:\d+) ", line).group(1)
        deadline = time.monotonic() + 20
        while True:
            try:
                health = httpx.get(f"{url}/health", timeout=2).json()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server never answered /health"
                time.sleep(0.1)
        assert health == {"protocol": "agentgym-env/1", "status": "ok", "env_id": "agentgym/CliffWalk-v0"}
        env = gym.make("agentgym/Remote-v0", base_url=url, env_id="agentgym/CliffWalk-v0")
        assert env.reset(seed=0) == gym.make("agentgym/CliffWalk-v0").reset(seed=0)
        env.close()
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=10) == 0
        assert "Traceback" not in server.stderr.read()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
