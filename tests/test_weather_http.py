"""WeatherRun's http backend against real HTTP servers on 127.0.0.1: the shipped one, and misbehaving ones."""

import json
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler

import gymnasium as gym
import httpx
import pytest

import agentgym
from agentgym.app.serving.http_service import HTTPService
from agentgym.app.serving.weather_server import WeatherServer
from agentgym.envs.weather.dataset import load_snapshot
from agentgym.envs.weather.env import WeatherOracle

ENV_ID = "agentgym/WeatherRun-v0"
call = agentgym.ToolEnv.canonical


def http_env(url, **kwargs):
    return gym.make(ENV_ID, backend="http", base_url=url, split="test", **kwargs)


def test_oracle_over_http_and_record_freezes_what_was_fetched(tmp_path):
    record = tmp_path / "recorded.jsonl"
    with WeatherServer() as server:
        env = http_env(server.url, record=record)
        for task in (0, 1, 2):
            obs, _ = env.reset(options={"task_index": task})
            done, total = False, 0.0
            while not done:
                obs, r, terminated, truncated, info = env.step(WeatherOracle().predict(obs)[0])
                total, done = total + r, terminated or truncated
            assert info["success"] and total == 1.5
    shipped = {(r.city, r.date): r for r in load_snapshot() if r.split == "test"}
    recorded = load_snapshot(record)
    assert len(recorded) == 3 and all(shipped[(r.city, r.date)] == r for r in recorded)
    # the recorded file is itself a snapshot an env can be frozen on
    frozen = gym.make(ENV_ID, snapshot=record, split="test")
    assert frozen.reset(seed=0)[1]["summary"].split(" · ")[0] in {r.city for r in recorded}


def test_unknown_city_over_http():
    with WeatherServer() as server:
        env = http_env(server.url)
        env.reset(seed=0)
        obs, _, terminated, _, info = env.step(call("get_weather", city="Atlantis"))
    assert "no data for 'Atlantis'" in obs and not terminated and "temp ?" in info["summary"]


class Misbehaving(BaseHTTPRequestHandler):
    mode = "500"
    hits = 0

    def do_GET(self):  # noqa: N802
        type(self).hits += 1
        if self.mode == "slow":
            time.sleep(0.5)
        if self.mode == "drop":
            self.wfile.write(b'HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{"cur')
            self.close_connection = True
            return
        body = b"{not json" if self.mode == "malformed" else b'{"error": "boom"}'
        try:
            self.send_response(200 if self.mode in ("malformed", "slow") else 500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first (the "slow" mode is meant to time out)

    def log_message(self, *args):
        pass


@pytest.fixture
def misbehaving():
    Misbehaving.hits = 0
    with HTTPService(Misbehaving, "127.0.0.1", 0) as server:
        yield server


@pytest.mark.parametrize(
    "mode, message",
    [
        ("500", "HTTP 500"),
        ("malformed", "the response was not valid JSON"),
        ("slow", "timed out after 0.2 s"),
        ("drop", "could not connect"),
    ],
)
def test_service_failures_are_observations(misbehaving, mode, message):
    Misbehaving.mode = mode
    env = http_env(misbehaving.url, timeout=0.2, retries=2)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(call("get_weather", city=env.unwrapped.city))
    assert f"weather service failed ({message}" in obs and "after 3 attempt(s)" in obs
    assert Misbehaving.hits == 3  # retried
    assert reward == 0.0 and not terminated and "temp ?" in info["summary"]
    # answering now cannot be graded correct: the answer came without weather data
    _, _, terminated, _, info = env.step(call("answer", suitable=True))
    assert terminated and not info["success"]


def test_server_down_is_an_observation():
    with WeatherServer() as server:
        url = server.url
    env = http_env(url, timeout=0.2, retries=1)  # nothing listens there any more
    env.reset(seed=0)
    obs, *_ = env.step(call("get_air_quality", city=env.unwrapped.city))
    assert "could not connect" in obs and "after 2 attempt(s)" in obs


def test_serve_command_serves_the_snapshot():
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentgym.app.cli", "serve", "weather", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline()
        url = line.split(" at ")[1].split()[0]
        body = httpx.get(f"{url}/v1/air-quality", params={"city": "lima", "date": "2024-08-07"}, timeout=5).json()
        assert body["city"] == "Lima" and body["current"] == {"us_aqi": 99, "pm2_5": 39.9}
        missing = httpx.get(f"{url}/v1/weather", params={"city": "Lima"}, timeout=5)
        assert missing.status_code == 400 and "required" in json.loads(missing.text)["error"]
    finally:
        proc.terminate()
        proc.wait(timeout=5)
