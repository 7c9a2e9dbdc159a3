"""``agentgym serve env --benchmark``: a served benchmark that a token holder cannot replay.

The server deals every task once per run, in its own secret order; clients choose nothing; the run is recorded
server-side as an eval run directory that only the operator's token downloads. Every server binds 127.0.0.1 on an
ephemeral port, in a thread of this process; the env is SQLLookup's test split (74 tasks, answered in ms).
"""

from __future__ import annotations

import json

import gymnasium as gym
import httpx
import pytest

import agentgym  # noqa: F401  (registers the ids)
from agentgym.app.cli import main
from agentgym.app.evaluation.benchmark import ABANDONED, NOT_PLAYED
from agentgym.app.serving.env_server import EnvServer
from agentgym.envs.remote import RemoteEnvError

ENV = "agentgym/SQLLookup-v0"
TOKEN, OPERATOR = "client-secret-1", "operator-secret-2"
CLIENT = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def tasks():
    """The test split's tasks, question -> gold query (what a client must never see)."""
    env = gym.make(ENV, split="test")
    gold = {t.question: t.gold_sql for t in env.unwrapped.tasks}
    env.close()
    return gold


def _server(**kwargs):
    return EnvServer(ENV, port=0, token=TOKEN, benchmark=True, operator_token=OPERATOR, **kwargs)


def _session(client: httpx.Client) -> str:
    reply = client.post("/v1/sessions", json={})
    assert reply.status_code == 200, reply.text
    return reply.json()["session"]


def _question(observation: str, tasks: dict[str, str]) -> str:
    return next(q for q in tasks if q in observation)


def _reset(client: httpx.Client, session: str, tasks: dict[str, str]) -> str:
    reply = client.post(f"/v1/sessions/{session}/reset", json={})
    assert reply.status_code == 200, reply.text
    return _question(reply.json()["observation"], tasks)


def _answer(client: httpx.Client, session: str, query: str) -> dict:
    reply = client.post(f"/v1/sessions/{session}/step", json={"action": f'answer_sql(query="{query}")'})
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_client_choices_are_refused_with_a_clear_4xx(tasks, monkeypatch):
    monkeypatch.setenv("AGENTGYM_TEST_TOKEN", TOKEN)
    with _server() as server, httpx.Client(base_url=server.url, headers=CLIENT) as client:
        session = _session(client)
        for body, status in [
            ({"options": {"task_index": 0}}, 403),
            ({"options": {}}, 403),
            ({"seed": 0}, 403),
            ({"seed": 1, "options": {"task_index": 3}}, 403),
            ({"task_index": 0}, 422),
        ]:
            reply = client.post(f"/v1/sessions/{session}/reset", json=body)
            assert reply.status_code == status, (body, reply.text)
            message = reply.json()["error"]["message"]
            assert "\n" not in message and ("benchmark server" in message or "task_index" in message), message
        # the refusals dealt nothing: the whole run is still to play
        assert server.run.progress() == {"episodes": 74, "played": 0, "in_play": 0, "left": 74, "done": False}
        # over the WebSocket, and from the Gymnasium client, the same refusal
        remote = gym.make("agentgym/Remote-v0", base_url=server.url, token_env="AGENTGYM_TEST_TOKEN")
        with pytest.raises(RemoteEnvError, match="benchmark server"):
            remote.reset(options={"task_index": 0})
        with pytest.raises(RemoteEnvError, match="benchmark server"):
            remote.reset(seed=5)
        observation, _ = remote.reset()  # the dealt task
        assert _question(observation, tasks)
        remote.close()
        # a step before any task is dealt is refused too: nothing is played outside the run
        fresh = _session(client)
        reply = client.post(f"/v1/sessions/{fresh}/step", json={"action": "list_tables()"})
        assert reply.status_code == 409 and "reset to be dealt" in reply.json()["error"]["message"]


def test_each_task_is_dealt_once_across_sessions_in_a_secret_order(tasks):
    with _server() as server, httpx.Client(base_url=server.url, headers=CLIENT) as client:
        sessions = [_session(client) for _ in range(3)]
        dealt = [_reset(client, sessions[i % 3], tasks) for i in range(len(tasks))]
        assert len(set(dealt)) == len(dealt) == len(tasks)  # no session is dealt a task another was dealt
        assert set(dealt) == set(tasks)
        for session in (*sessions, _session(client)):  # the run is over for every session, old or new
            reply = client.post(f"/v1/sessions/{session}/reset", json={})
            assert reply.status_code == 409 and "the run is over" in reply.json()["error"]["message"]
    assert dealt != list(tasks)  # not the index order (1 chance in 74! of failing)
    with _server() as other, httpx.Client(base_url=other.url, headers=CLIENT) as client:
        session = _session(client)
        again = [_reset(client, session, tasks) for _ in range(10)]
    assert again != dealt[:10]  # each run draws its own order from a server-side secret


def test_a_finished_task_cannot_be_replayed(tasks):
    with _server() as server, httpx.Client(base_url=server.url, headers=CLIENT) as client:
        session = _session(client)
        question = _reset(client, session, tasks)
        wrong = _answer(client, session, "SELECT 12345")
        assert wrong["terminated"] and wrong["reward"] < 1
        # the task is over: the answer cannot be retried on it, by this session or any other
        for action in ('answer_sql(query="SELECT 1")', "list_tables()"):
            reply = client.post(f"/v1/sessions/{session}/step", json={"action": action})
            assert reply.status_code == 409, reply.text
        side = _session(client)
        seen = {question}
        for _ in range(len(tasks) - 1):
            seen.add(_reset(client, side, tasks))
        assert len(seen) == len(tasks)  # the answered task never came back
        # a task abandoned by a reset, or by closing the session, is not dealt again either
        assert server.run.progress()["left"] == 0


def test_the_run_is_recorded_and_only_the_operator_downloads_it(tasks, tmp_path):
    out = tmp_path / "run"
    with _server(out_dir=out) as server, httpx.Client(base_url=server.url, headers=CLIENT) as client:
        session = _session(client)
        solved = 0
        for i in range(len(tasks)):
            question = _reset(client, session, tasks)
            if i % 2 == 0:
                step = _answer(client, session, tasks[question])
                assert step["terminated"] and step["info"]["success"]
                solved += 1
            elif i % 3 == 0:
                _answer(client, session, "SELECT 0")
            # else: abandoned by the next reset (the last one by the run's end: closing the session)
        client.delete(f"/v1/sessions/{session}")
        summary = json.loads((out / "summary.json").read_text())
        records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
        assert json.loads((out / "run.json").read_text())["agent"] == "env-server"
        assert len(records) == len(tasks) and sorted(r["index"] for r in records) == list(range(len(tasks)))
        assert summary["episodes"] == len(tasks) and summary["success_rate"] == pytest.approx(solved / len(tasks))
        assert sum(r["truncation"] == ABANDONED for r in records) > 0
        # the download: the operator's token only; the clients' token, none, or a wrong one are refused
        for headers in (CLIENT, {}, {"Authorization": "Bearer nope"}, {"Authorization": f"Bearer {OPERATOR}x"}):
            for path in ("/v1/run", "/v1/run/summary.json", "/v1/run/episodes.jsonl"):
                reply = httpx.get(server.url + path, headers=headers)
                assert reply.status_code == 403 and "operator" in reply.json()["error"]["message"], (path, headers)
        operator = {"Authorization": f"Bearer {OPERATOR}"}
        index = httpx.get(server.url + "/v1/run", headers=operator).json()
        assert index["done"] and index["files"] == ["episodes.jsonl", "run.json", "summary.json"]
        for name in index["files"]:
            reply = httpx.get(f"{server.url}/v1/run/{name}", headers=operator)
            assert reply.status_code == 200 and reply.content == (out / name).read_bytes(), name
        assert httpx.get(f"{server.url}/v1/run/..%2Fetc", headers=operator).status_code == 404
        # the operator's token opens only the run, not the sessions
        assert httpx.post(server.url + "/v1/sessions", json={}, headers=operator).status_code == 401


def test_a_server_that_stops_records_the_tasks_it_never_dealt(tasks, tmp_path):
    out = tmp_path / "run"
    with _server(out_dir=out) as server, httpx.Client(base_url=server.url, headers=CLIENT) as client:
        session = _session(client)
        _reset(client, session, tasks)  # in play when the server stops
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [r["truncation"] for r in records[:1]] == [ABANDONED]
    assert len(records) == len(tasks) and all(r["error"] == NOT_PLAYED for r in records[1:])
    assert json.loads((out / "summary.json").read_text())["success_rate"] == 0


def _keys(value) -> set[str]:
    """Every key of a decoded JSON value, at any depth."""
    if isinstance(value, dict):
        return set(value).union(*(_keys(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_keys(v) for v in value))
    return set()


def test_no_reply_carries_an_answer_or_the_oracle(tasks):
    golds = set(tasks.values())
    with _server() as server, httpx.Client(base_url=server.url, headers=CLIENT) as client:
        replies = [client.post("/v1/sessions", json={}).text, client.get("/v1/env").text]
        session = json.loads(replies[0])["session"]
        oracle = client.post(f"/v1/sessions/{session}/oracle", json={})
        assert oracle.status_code == 403
        assert client.post("/v1/sessions", json={"view": "discrete"}).status_code == 403  # its menu lists gold queries
        for _ in range(len(tasks)):
            reply = client.post(f"/v1/sessions/{session}/reset", json={})
            replies.append(reply.text)
            for action in ("list_tables()", 'run_sql(query="SELECT 1")', 'answer_sql(query="SELECT 1")'):
                replies.append(client.post(f"/v1/sessions/{session}/step", json={"action": action}).text)
        for text in replies:
            assert not any(gold in text for gold in golds)
            assert not {"task_index", "seed", "gold_sql", "oracle", "action"} & _keys(json.loads(text)), text[:300]
    with pytest.raises(ValueError, match="operator"):  # the oracle cannot be turned on in a benchmark
        EnvServer(ENV, port=0, benchmark=True, operator=True)
    with pytest.raises(ValueError, match="deals each task once"):  # seeded episodes may draw a task twice
        EnvServer(ENV, port=0, benchmark=True, episodes=5)


def test_the_cli_refuses_what_would_open_a_benchmark(capsys, monkeypatch):
    monkeypatch.setenv("T", TOKEN)
    for argv, why in [
        (["--benchmark", "--operator"], "operator"),
        (["--benchmark", "--token-env", "T", "--operator-token-env", "T"], "must not be the clients' token"),
        (["--operator-token-env", "T"], "needs --benchmark"),
        (["--out", "x"], "--benchmark"),
    ]:
        assert main(["serve", "env", "--env", ENV, "--port", "0", *argv]) != 0
        assert why in capsys.readouterr().err


def test_open_mode_is_unchanged_and_has_no_run(tasks):
    """Training's open mode: the client still chooses the task (and may replay it); there is no run to download."""
    with (
        EnvServer(ENV, {"split": "test"}, port=0, token=TOKEN) as server,
        httpx.Client(base_url=server.url, headers=CLIENT) as client,
    ):
        session = _session(client)
        first = [
            client.post(f"/v1/sessions/{session}/reset", json={"options": {"task_index": 3}}).json()["observation"]
            for _ in range(2)
        ]
        assert first[0] == first[1] and _question(first[0], tasks) == list(tasks)[3]
        reply = client.get("/v1/run")
        assert reply.status_code == 404 and "runs no benchmark" in reply.json()["error"]["message"]
        assert httpx.get(server.url + "/v1/run").status_code == 401  # and the token still guards it
