"""`agentgym eval` against hostile episodes and damaged run directories: one episode's failure or text never
aborts a run, --resume trusts only records this run and env could have written, and every damaged file is one
line on stderr that names it (and the line, for episodes.jsonl), exit code 2, no traceback."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import gymnasium as gym
import numpy as np
import pytest

from agentgym.app.cli import main
from agentgym.app.evaluation.reports import load_episodes, to_json
from agentgym.app.evaluation.runner import evaluate_agent
from agentgym.app.serving.http_service import HTTPService
from agentgym.core import ToolEnv
from agentgym.core.episode import EpisodeRecord
from agentgym.envs.cliff.env import CliffWalkEnv, CliffWalkOracle
from agentgym.envs.sandbox import layer_status
from agentgym.envs.weather.dataset import is_suitable
from agentgym.trainers import PPO

FAULTY = "agentgym-test/FaultyCliffWalk-v0"


class FaultyCliffWalk(CliffWalkEnv):
    """CliffWalk whose odd-seeded episodes go wrong at turn 2 while ``faults_on`` is set: the oracle agent
    raises (``fault="agent"``), the env raises (``"env"``; ``"reset"`` in reset) or the env pays a NaN reward
    (``"nan"``). Its reward
    bounds, which ``--resume`` checks records against, are CliffWalk's: ``(-103, -1)`` an action."""

    faults_on = True

    def __init__(self, fault: str = "agent", fault_turn: int = 2, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fault, self.fault_turn, self.odd = fault, fault_turn, False

    def reset(self, *, seed=None, options=None):
        self.odd = seed is not None and seed % 2 == 1
        if type(self).faults_on and self.odd and self.fault == "reset":
            raise RuntimeError("the env broke at reset")
        return super().reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if self._faulty(at_step=self.fault_turn) and self.fault == "env":
            raise RuntimeError(f"the env broke at turn {self.fault_turn}")
        if self._faulty(at_step=self.fault_turn) and self.fault == "nan":
            reward = float("nan")
        return obs, reward, terminated, truncated, info

    def _faulty(self, at_step: int) -> bool:
        return type(self).faults_on and self.odd and self.steps == at_step

    def oracle(self):
        env = self

        class Oracle(CliffWalkOracle):
            def predict(self, observation, state=None, deterministic=True):
                if env._faulty(at_step=env.fault_turn - 1) and env.fault == "agent":
                    raise RuntimeError(f"the agent broke at turn {env.fault_turn}")
                return super().predict(observation, state, deterministic)

        return Oracle()


if FAULTY not in gym.registry:
    gym.register(FAULTY, entry_point=FaultyCliffWalk, max_episode_steps=100)


@pytest.fixture
def faults():
    FaultyCliffWalk.faults_on = True
    yield FaultyCliffWalk
    FaultyCliffWalk.faults_on = True


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_clear_line(err: str, *needles: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentgym: "), err
    assert "Traceback" not in err and all(n in lines[0] for n in needles), (needles, err)
    return lines[0]


# ------------------------------------------------------------------ one episode never aborts a run


@pytest.mark.parametrize(
    "fault, reason",
    [
        ("agent", "RuntimeError: the agent broke at turn 2"),
        ("env", "RuntimeError: the env broke at turn 2"),
        ("nan", "ValueError: the env returned the reward nan at turn 2"),
        ("reset", "RuntimeError: the env broke at reset"),  # and the next episodes on that env still play
    ],
)
def test_a_failing_episode_is_recorded_and_resume_replays_only_it(faults, tmp_path, capsys, fault, reason):
    argv = ["eval", "--env", FAULTY, "--env-kwargs", json.dumps({"fault": fault}), "--agent", "oracle"]
    argv += ["--episodes", "6", "--out", str(tmp_path), "--no-progress", "--json"]
    code, out, err = run_cli(capsys, *argv)
    assert code == 1 and "3 of 6 episodes failed for an infrastructure reason" in err, err  # and still a summary
    summary = json.loads(out)
    assert summary["episodes"] == 6 and summary["completed"] == 3 and summary["failures"] == 3
    assert summary["failure_reasons"] == {reason: 3} and summary["success_rate"] == 0.5
    failed = [r for r in load_episodes(tmp_path / "episodes.jsonl") if r.error]
    assert sorted(r.index for r in failed) == [1, 3, 5]
    played = 0 if fault == "reset" else 1  # what happened before the fault is kept
    assert all(r.turns == played and len(r.observations) == 2 * played for r in failed)

    faults.faults_on = False
    code, out, err = run_cli(capsys, *argv, "--resume")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["timing"]["episodes_run"] == 3 and summary["failures"] == 0 and summary["success_rate"] == 1.0
    assert summary["mean_return"] == -13


def test_a_failing_episode_of_a_language_model_batch_fails_alone(faults, tiny_model_path, tmp_path):
    # three episodes in one lock-step batch; episode 1 breaks the env at its first step, which fails the batch:
    # its episodes are played again one by one, so only the broken one is recorded as failed
    kwargs = {"env_kwargs": {"fault": "env", "fault_turn": 1}, "episodes": 3, "out_dir": tmp_path, "concurrency": 3}
    spec, sampling = f"hf:{tiny_model_path}", {"max_new_tokens": 4, "max_turns": 1, "device": "cpu"}
    summary = evaluate_agent(FAULTY, spec, sampling=sampling, **kwargs)
    assert summary.failures == 1 and summary.failure_reasons == {"RuntimeError: the env broke at turn 1": 1}
    records = load_episodes(tmp_path / "episodes.jsonl")
    assert [(r.index, r.error is None, r.turns) for r in sorted(records, key=lambda r: r.index)] == [
        (0, True, 1),
        (1, False, 0),
        (2, True, 1),
    ]
    faults.faults_on = False
    resumed = evaluate_agent(FAULTY, spec, sampling=sampling, resume=True, **kwargs)
    assert resumed.failures == 0 and resumed.timing.episodes_run == 1 and resumed.mean_turns == 1


REASON = "sunny \ud800 \u2028 \x85 day"  # a lone surrogate, and two characters str.splitlines() splits at
ANSWER = '<tool_call>{"name": "answer", "arguments": {"suitable": true, "reason": "' + REASON + '"}}</tool_call>'
REPLY = {"choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}]}


class SurrogateModel(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint whose every reply holds a lone surrogate and a line separator (U+2028)."""

    def do_GET(self):  # noqa: N802
        self._send(b'{"object": "list", "data": []}')

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self._send(json.dumps(REPLY).encode())  # "\ud800" in JSON: the client decodes it to a lone surrogate

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_reply_with_a_lone_surrogate_is_written_and_the_run_resumes(tmp_path, capsys):
    with HTTPService(SurrogateModel, "127.0.0.1", 0) as server:
        argv = ["eval", "--env", "agentgym/WeatherRun-v0", "--split", "test", "--agent", f"openai:m@{server.url}/v1"]
        argv += ["--episodes", "4", "--out", str(tmp_path), "--no-progress", "--json"]
        code, out, err = run_cli(capsys, *argv)
        assert code == 0, err
        assert json.loads(out)["episodes"] == 4
        records = load_episodes(tmp_path / "episodes.jsonl")
        assert len(records) == 4 and all(r.error is None and r.turns == 1 for r in records)
        assert records[0].actions[0] == ANSWER.replace("\ud800", "\ufffd")  # the one character JSON cannot hold
        code, out, err = run_cli(capsys, *argv, "--episodes", "5", "--resume")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["timing"]["episodes_run"] == 1 and summary["episodes"] == 5 and summary["failures"] == 0


# ------------------------------------------------------------------ --resume trusts only possible records


def impossible(kind: str, record: EpisodeRecord) -> str:
    """``record`` (episode 1 of a FaultyCliffWalk run) made impossible in one way, as a line of episodes.jsonl."""
    if kind == "too-many-turns":
        n = 101
        record.actions, record.observations = ["move(up)"] * n, ["obs"] * (n + 1)
        record.rewards, record.canonical, record.valid = [-1.0] * n, [True] * n, [True] * n
        record.reward_components = [{}] * n
    elif kind == "reward-above-max":
        record.rewards[-1] = 50.0
    elif kind == "reward-below-min":
        record.rewards[0] = -103.5
    elif kind == "rewards-not-per-action":
        record.rewards.append(-1.0)
    elif kind == "components-not-per-action":
        record.reward_components.pop()
    elif kind == "observations-not-per-action":
        record.observations.pop()
    elif kind == "other-seed":
        record.reset = {"seed": 99}
    elif kind == "terminated-and-truncated":
        record.terminated, record.truncation = True, "time_limit"
    text = to_json(record)
    if kind == "nan-reward":
        text = text.replace('"rewards":[-1.0', '"rewards":[NaN', 1)
    elif kind == "negative-tokens":
        text = text.replace('"prompt_tokens":0', '"prompt_tokens":-5', 1)
    return text


@pytest.mark.parametrize(
    "kind, message",
    [
        ("too-many-turns", "took 101 actions; this env ends an episode after 100"),
        ("reward-above-max", "was paid 50 at turn 13; this env pays [-103, -1] a turn"),
        ("reward-below-min", "was paid -103.5 at turn 1; this env pays [-103, -1] a turn"),
        ("rewards-not-per-action", "has 13 actions but 14 rewards"),
        ("components-not-per-action", "has 13 actions but 12 reward breakdowns"),
        ("observations-not-per-action", "has 13 actions but 13 observations (expected 14)"),
        ("other-seed", "was reset with {'seed': 99}; this run resets it with {'seed': 1}"),
        ("terminated-and-truncated", "both terminated and truncated"),
        ("nan-reward", "not an episode record (rewards.0: Input should be a finite number)"),
        ("negative-tokens", "not an episode record (prompt_tokens: Input should be greater than or equal to 0)"),
    ],
)
def test_resume_refuses_a_record_impossible_for_the_env_naming_file_and_line(faults, tmp_path, capsys, kind, message):
    faults.faults_on = False
    argv = ["eval", "--env", FAULTY, "--agent", "oracle", "--episodes", "3", "--out", str(tmp_path), "--no-progress"]
    assert run_cli(capsys, *argv)[0] == 0
    path = tmp_path / "episodes.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[1] = impossible(kind, EpisodeRecord.model_validate_json(lines[1]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err = run_cli(capsys, *argv, "--resume")
    assert code == 2 and out == ""
    one_clear_line(err, f"{path}:2: ", message)
    assert path.read_text(encoding="utf-8").splitlines() == lines  # nothing was lost or rewritten


# ------------------------------------------------------------------ each env's reward bounds: stated, tight, enforced

SANDBOX_STATUS = layer_status()
needs_sandbox = pytest.mark.skipif(
    all(SANDBOX_STATUS[layer] is not None for layer in ("bwrap", "unshare")),
    reason=f"no sandbox layer on this machine: {SANDBOX_STATUS}",
)

BOUND_CASES = [  # (env id, kwargs, the bounds its docstrings give, what a step of each kind is paid)
    pytest.param("agentgym/CliffWalk-v0", {}, (-103, -1), id="cliff"),
    pytest.param("agentgym/CliffWalk-v0", {"cliff_terminates": False}, (-400, -1), id="cliff-no-end"),
    pytest.param("agentgym/WeatherRun-v0", {}, (-0.5, 1.5), id="weather"),
    pytest.param("agentgym/WeatherRun-v0", {"rewards": {"tool_cost": 0.3, "invalid_action": -0.2}}, (-1.2, 1.5),
                 id="weather-costs"),
    pytest.param("agentgym/SQLLookup-v0", {}, (0, 1), id="sql"),
    pytest.param("agentgym/SQLLookup-v0", {"rewards": {"tool_cost": 0.1, "explore_query": 0.5}}, (-0.4, 1.4),
                 id="sql-costs"),
    pytest.param("agentgym/CodeSandbox-v0", {}, (0, 1), id="code", marks=needs_sandbox),
    pytest.param("agentgym/CodeSandbox-v0", {"rewards": {"test_improvement": 0.5, "invalid_action": -0.1}},
                 (-0.1, 1.5), id="code-costs", marks=needs_sandbox),
]  # fmt: skip


def test_every_registered_env_states_its_reward_bounds():
    from gymnasium.envs.registration import load_env_creator

    from agentgym.core import ToolEnv
    from agentgym.core.registration import CLIENT_IDS, ENV_IDS

    ids = [env_id for env_id in gym.registry if env_id.startswith("agentgym/") and env_id not in CLIENT_IDS]
    assert len(ids) >= 4 and set(ids) == set(ENV_IDS)  # every task; agentgym/Remote-v0 reports its server's bounds
    for env_id in ids:
        env_cls = load_env_creator(gym.spec(env_id).entry_point)
        assert issubclass(env_cls, ToolEnv) and env_cls.reward_bounds is not ToolEnv.reward_bounds, env_id
    assert ToolEnv.reward_bounds(CliffWalkEnv()) is None  # the base class states nothing (eval checks no bounds)


def _calls(*calls: tuple[str, dict]) -> str:
    return "".join(ToolEnv.canonical(name, **arguments) for name, arguments in calls)


def extreme_actions(env, case: str) -> tuple[list[str], list[str]]:
    """Two action sequences for the task ``reset(seed=0)`` drew (``env`` was just reset so), whose last action is
    paid the low and the high bound exactly."""
    base = env.unwrapped
    if case.startswith("cliff"):
        moves = ["left", "up", "right", "down"] if case == "cliff" else ["right"] * 4  # 3 moves then a fall; 4 falls
        return [_calls(*[("move", {"direction": d}) for d in moves])], [_calls(("move", {"direction": "up"}))]
    if case.startswith("weather"):
        city, date = base.city, base.date
        weather, air = base.backend.weather(city, date), base.backend.air_quality(city, date)
        right = _calls(("answer", {"suitable": is_suitable(weather["temperature_c"], air["aqi"])}))
        lookups = [_calls(("get_weather", {"city": city})), _calls(("get_air_quality", {"city": city}))]
        low = [_calls(*[("get_weather", {"city": city})] * 4)] if case == "weather-costs" else [right]  # no_tools
        return low, [*lookups, right]
    if case.startswith("sql"):
        gold = base.task.gold_sql
        low = [_calls(*[("list_tables", {})] * 4)]
        return low, [_calls(("run_sql", {"query": gold}), ("answer_sql", {"query": gold}))]
    solution = base.task.solution
    low = ["no tool call here"] if case == "code-costs" else [_calls(("submit", {"code": "x = 1"}))]
    return low, [_calls(("run_tests", {"code": solution}), ("submit", {"code": solution}))]


@pytest.mark.parametrize("env_id, kwargs, bounds", BOUND_CASES)
def test_the_reward_bounds_are_the_tightest_the_weights_allow(request, env_id, kwargs, bounds):
    env = gym.make(env_id, **kwargs)
    low, high = env.unwrapped.reward_bounds()
    assert (low, high) == pytest.approx(bounds)
    env.reset(seed=0)
    for actions, bound in zip(extreme_actions(env, request.node.callspec.id), (low, high), strict=True):
        env.reset(seed=0)
        rewards = [env.step(action)[1] for action in actions]
        assert rewards[-1] == pytest.approx(bound), (actions, rewards)  # each bound is paid: none is loose
    env.close()


@pytest.mark.parametrize("env_id, kwargs, bounds", BOUND_CASES)
def test_oracle_and_random_episodes_never_leave_the_reward_bounds(env_id, kwargs, bounds):
    sandboxed = env_id.startswith("agentgym/CodeSandbox")
    steps = 20 if sandboxed else 300  # a sandboxed call runs a program (~0.1 s)
    env = gym.make(env_id, **kwargs)
    low, high = env.unwrapped.reward_bounds()
    rng = np.random.default_rng(0)
    oracle, seen, n = env.unwrapped.oracle(), [], 0
    for episode in range(10**6):
        obs, _ = env.reset(seed=episode)
        menu, done = env.unwrapped.action_menu(), False
        while not done and n < steps:
            kind = "oracle" if episode % 3 == 0 else rng.choice(["menu", "several", "junk"], p=[0.5, 0.4, 0.1])
            if kind == "oracle":
                action = oracle.predict(obs)[0]
            elif kind == "junk":
                action = "no tool call here"
            else:  # one menu action, or 2 to 6 of them in one action (at most 4 are run)
                action = "".join(rng.choice(menu, size=1 if kind == "menu" else rng.integers(2, 7)))
            obs, reward, terminated, truncated, _ = env.step(action)
            seen.append(reward)
            done, n = terminated or truncated, n + 1
        if n >= steps:
            break
    env.close()
    assert len(seen) == steps and all(low - 1e-9 <= r <= high + 1e-9 for r in seen), (low, high, min(seen), max(seen))
    assert max(seen) > min(seen)  # the walk saw more than one kind of step


def test_resume_refuses_a_weather_record_paid_more_than_the_env_pays(tmp_path, capsys):
    argv = ["eval", "--env", "agentgym/WeatherRun-v0", "--split", "test", "--agent", "oracle", "--episodes", "3"]
    argv += ["--out", str(tmp_path), "--no-progress"]
    assert run_cli(capsys, *argv)[0] == 0
    path = tmp_path / "episodes.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    record = EpisodeRecord.model_validate_json(lines[2])
    record.rewards[-1] = 1.75  # above 1.5, the most an answer can earn
    lines[2] = to_json(record)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err = run_cli(capsys, *argv, "--episodes", "4", "--resume")
    assert code == 2 and out == ""
    one_clear_line(err, f"{path}:3: ", "episode 2 was paid 1.75 at turn 3; this env pays [-0.5, 1.5] a turn")


def test_a_last_line_without_its_newline_is_kept_if_whole_and_refused_if_damaged(faults, tmp_path, capsys):
    faults.faults_on = False
    argv = ["eval", "--env", FAULTY, "--agent", "oracle", "--out", str(tmp_path), "--no-progress", "--json"]
    assert run_cli(capsys, *argv, "--episodes", "2")[0] == 0
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # e.g. an editor that drops the final newline
    code, out, err = run_cli(capsys, *argv, "--episodes", "3", "--resume")
    assert code == 0 and json.loads(out)["timing"]["episodes_run"] == 1, err
    assert [r.index for r in load_episodes(path)] == [0, 1, 2]
    damaged = path.read_bytes() + b'{"index": 3, "reset": {"seed": 3}, "rewards": [1 2]}'  # not torn: refused
    path.write_bytes(damaged)
    code, out, err = run_cli(capsys, *argv, "--episodes", "4", "--resume")
    assert code == 2 and path.read_bytes() == damaged
    one_clear_line(err, f"{path}:4: not an episode record")


# ------------------------------------------------------------------ damaged files: one line naming the file

DAMAGE = {
    "empty": lambda good: b"",
    "truncated": lambda good: good[: len(good) // 2],
    "not-utf8": lambda good: b"\xff\xfe" + good,
    "not-an-object": lambda good: b"[1, 2, 3]\n",
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("name", ["run.json", "episodes.jsonl", "summary.json"])
def test_damaged_run_files_are_one_line_naming_the_file(faults, tmp_path, capsys, name, damage):
    faults.faults_on = False
    run = tmp_path / "run"
    argv = ["eval", "--env", FAULTY, "--agent", "oracle", "--episodes", "2", "--out", str(run), "--no-progress"]
    argv.append("--json")
    assert run_cli(capsys, *argv)[0] == 0
    path = run / name
    path.write_bytes(DAMAGE[damage](path.read_bytes()))
    if name == "summary.json":
        code, out, err = run_cli(capsys, "report", str(run), "--plot", str(tmp_path / "p.png"))
    else:
        code, out, err = run_cli(capsys, *argv, "--resume")
    if name == "episodes.jsonl" and damage in ("empty", "truncated"):
        # no records, or a torn last line: nothing to distrust; the missing episodes are played again
        assert code == 0 and json.loads(out)["completed"] == 2, err
        return
    assert code == 2 and out == ""
    one_clear_line(err, f"{path}:1: " if name == "episodes.jsonl" else f"{path}: ")


@pytest.mark.parametrize("damage", ["empty", "truncated", "not-utf8", "foreign-pickle", "missing-entries"])
def test_a_damaged_torch_agent_is_one_line_naming_the_file(tmp_path, capsys, damage):
    import pickle

    import torch

    path = PPO(gym.make("agentgym/CliffWalk-v0"), seed=0).save(tmp_path / "model.pt")
    good = path.read_bytes()
    if damage == "foreign-pickle":
        path.write_bytes(pickle.dumps({"algorithm": "ppo"}))
    elif damage == "missing-entries":
        torch.save({"algorithm": "ppo"}, path)
    else:
        path.write_bytes(DAMAGE[damage](good))
    code, out, err = run_cli(capsys, "eval", "--agent", f"torch:{path}", "--episodes", "1", "--no-progress")
    assert code == 2 and out == ""
    one_clear_line(err, str(path))
