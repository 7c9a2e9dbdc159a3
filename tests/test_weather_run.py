"""WeatherRun-v0: the rule, rewards, frozen snapshot, splits, oracle, discrete view and tabular learning."""

import time

import gymnasium as gym
import numpy as np
import pytest
import torch
from pydantic import ValidationError

import agentgym
from agentgym.app.evaluation.runner import evaluate
from agentgym.core.wrappers import DiscreteToolActions
from agentgym.envs.weather.build.snapshot import generate_snapshot
from agentgym.envs.weather.dataset import (
    SNAPSHOT_V0,
    SNAPSHOT_V0_SHA256,
    city_key,
    is_suitable,
    load_snapshot,
    sha256_file,
    write_snapshot,
)
from agentgym.envs.weather.env import WeatherOracle
from agentgym.trainers import PPO, REINFORCE, QLearning

ENV_ID = "agentgym/WeatherRun-v0"
call = agentgym.ToolEnv.canonical


def play(env, actions):
    """Step through actions; return (total reward, merged reward components, last info)."""
    total, components, info = 0.0, {}, {}
    for action in actions:
        _, r, terminated, truncated, info = env.step(action)
        total += r
        for k, v in info["reward_components"].items():
            components[k] = components.get(k, 0.0) + v
        if terminated or truncated:
            break
    return total, components, info


def test_rule_edges():
    assert is_suitable(10.0, 99) and is_suitable(25.0, 0)
    assert not is_suitable(9.9, 50) and not is_suitable(25.1, 50) and not is_suitable(18, 100)


def test_snapshot_is_rebuilt_bit_identically(tmp_path):
    assert sha256_file(SNAPSHOT_V0) == SNAPSHOT_V0_SHA256
    assert write_snapshot(generate_snapshot(0), tmp_path / "w.jsonl") == SNAPSHOT_V0_SHA256
    assert (tmp_path / "w.jsonl").read_bytes() == SNAPSHOT_V0.read_bytes()


def test_snapshot_coverage_and_disjoint_splits():
    records = load_snapshot()
    assert len(records) == 400
    by_split = {s: [r for r in records if r.split == s] for s in ("train", "test")}
    assert {city_key(r.city) for r in by_split["train"]}.isdisjoint({city_key(r.city) for r in by_split["test"]})
    for rows in by_split.values():
        temps, aqis = {r.temperature_c for r in rows}, {r.aqi for r in rows}
        assert {10.0, 25.0} <= temps and {99, 100} <= aqis
        assert any(t < 10 for t in temps) and any(t > 25 for t in temps)
        assert 0.3 < np.mean([r.suitable for r in rows]) < 0.6


def test_tampered_snapshot_is_refused(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_bytes(SNAPSHOT_V0.read_bytes().replace(b'"aqi": 55', b'"aqi": 56', 1))
    with pytest.raises(ValueError, match="the data changed"):
        load_snapshot(path, sha256=SNAPSHOT_V0_SHA256)


def test_oracle_episode_rewards_and_summary():
    env = gym.make(ENV_ID, split="test")
    obs, info = env.reset(seed=0)
    city = env.unwrapped.city
    assert info["summary"] == f"{city} · temp ? · AQI ? · decision pending" and city in obs
    oracle = WeatherOracle()
    total, info = 0.0, {}
    for _ in range(3):
        obs, r, terminated, _, info = env.step(oracle.predict(obs)[0])
        total += r
    assert terminated and info["success"] and total == 1.5
    assert info["reward_components"] == {"correct": 1.0, "both_tools": 0.5}
    assert info["summary"].endswith("(correct)") and "AQI ?" not in info["summary"]


def test_oracle_solves_every_test_task_with_maximum_reward():
    env = gym.make(ENV_ID, split="test")
    n_tasks = len(env.unwrapped.backend.tasks)
    assert n_tasks == 100
    oracle, returns, successes = WeatherOracle(), [], []
    for i in range(n_tasks):
        obs, _ = env.reset(options={"task_index": i})
        total, done = 0.0, False
        while not done:
            obs, r, terminated, truncated, info = env.step(oracle.predict(obs)[0])
            total, done = total + r, terminated or truncated
        returns.append(total)
        successes.append(info["success"])
    assert all(successes) and np.mean(returns) == 1.5


def truth_action(env):
    return call("answer", suitable=env.unwrapped._truth())


def test_answer_without_tools_is_penalised_and_wrong():
    env = gym.make(ENV_ID)
    env.reset(seed=3)
    total, components, info = play(env, [truth_action(env)])
    assert components == {"no_tools": -0.5} and total == -0.5 and not info["success"]
    assert info["summary"].endswith("(wrong)")


def test_answer_before_get_weather_scores_as_wrong():
    env = gym.make(ENV_ID)
    env.reset(seed=3)
    city = env.unwrapped.city
    total, components, info = play(env, [call("get_air_quality", city=city), truth_action(env)])
    assert total == 0.0 and components == {} and not info["success"]


def test_weather_only_correct_answer_gets_base_reward():
    env = gym.make(ENV_ID)
    env.reset(seed=3)
    total, components, info = play(env, [call("get_weather", city=env.unwrapped.city), truth_action(env)])
    assert components == {"correct": 1.0} and info["success"]


def test_wrong_answer_scores_zero():
    env = gym.make(ENV_ID)
    env.reset(seed=3)
    city = env.unwrapped.city
    wrong = call("answer", suitable=not env.unwrapped._truth())
    total, _, info = play(env, [call("get_weather", city=city), call("get_air_quality", city=city), wrong])
    assert total == 0.0 and not info["success"] and info["summary"].endswith("(wrong)")


def test_tool_cost_and_custom_weights():
    env = gym.make(ENV_ID, tool_cost=0.1, rewards={"both_tools": 0.25})
    env.reset(seed=5)
    city = env.unwrapped.city
    total, components, _ = play(
        env, [call("get_weather", city=city), call("get_air_quality", city=city), truth_action(env)]
    )
    assert components == pytest.approx({"tool_cost": -0.2, "correct": 1.0, "both_tools": 0.25})
    assert total == pytest.approx(1.05)
    with pytest.raises(ValidationError, match="tool_cost"):
        gym.make(ENV_ID, tool_cost=-1)
    with pytest.raises(ValidationError, match="bonus"):
        gym.make(ENV_ID, rewards={"bonus": 1})


def test_city_names_match_case_and_accents_and_unknown_city_is_explained():
    env = gym.make(ENV_ID, split="test")
    for i in range(100):
        env.reset(options={"task_index": i})
        if env.unwrapped.city == "Zürich":
            break
    _, _, _, _, info = env.step('get_weather("ZURICH")')
    assert "temp ?" not in info["summary"]
    obs, reward, terminated, _, info = env.step('get_air_quality(city="Atlantis")')
    assert "no data for 'Atlantis'" in obs and not terminated and "AQI ?" in info["summary"]


def test_same_seed_same_task_byte_for_byte():
    a, b = gym.make(ENV_ID), gym.make(ENV_ID)
    assert a.reset(seed=11)[0] == b.reset(seed=11)[0]
    action = call("get_weather", city=a.unwrapped.city)
    assert a.step(action)[0] == b.step(action)[0]
    assert len({gym.make(ENV_ID).reset(seed=s)[0] for s in range(10)}) > 5


def test_random_backend_is_seeded_and_varied():
    def first_weather(seed):
        env = gym.make(ENV_ID, backend="random")
        env.reset(seed=seed)
        return env.step(call("get_weather", city=env.unwrapped.city))[0]

    assert first_weather(1) == first_weather(1)
    assert len({first_weather(s) for s in range(8)}) == 8
    with pytest.raises(ValueError, match="task_index"):
        gym.make(ENV_ID, backend="random").reset(options={"task_index": 0})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"backend": "ftp"}, "backend must be"),
        ({"split": "validation"}, "no records in split"),
        ({"backend": "http"}, "base_url"),
    ],
)
def test_bad_env_config_is_explained(kwargs, message):
    with pytest.raises(ValueError, match=message):
        gym.make(ENV_ID, **kwargs)


def test_discrete_view():
    env = DiscreteToolActions(gym.make(ENV_ID))
    assert env.action_space.n == 4 and env.observation_space.n == 13
    s, _ = env.reset(seed=0)
    assert env.state_keys[s] == "temp ? · AQI ?"
    assert env.menu[0] == call("get_weather", city=env.unwrapped.city)
    s, *_ = env.step(0)
    assert env.state_keys[s].split(" · ")[0] in ("cold", "temp ok", "hot")
    s, *_ = env.step(1)
    assert env.state_keys[s].endswith(("AQI good", "AQI bad"))
    s, _, terminated, _, _ = env.step(2)
    assert terminated and env.state_keys[s] == "answered"


@pytest.mark.parametrize(
    "agent_cls, settings, budget",
    [
        (QLearning, {"alpha": 0.5, "gamma": 0.99, "epsilon": 0.2, "eval_every": 0}, 1000),
        (REINFORCE, {"eval_every": 0}, 1000),
        (PPO, {"eval_every": 0}, 5000),  # env steps
    ],
    ids=["q-learning", "reinforce", "ppo"],
)
def test_learners_generalise_to_the_test_split(agent_cls, settings, budget):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks: threads only add overhead
    try:
        agent = agent_cls(gym.make(ENV_ID, split="train"), seed=0, **settings).learn(budget)
    finally:
        torch.set_num_threads(threads)
    report = evaluate(agent, DiscreteToolActions(gym.make(ENV_ID, split="test")))
    assert report.episodes == 100 and report.success_rate >= 0.95, report


def test_stable_baselines3_check_env():
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    for env_id in (ENV_ID, "agentgym/CliffWalk-v0"):
        sb3_checker.check_env(DiscreteToolActions(gym.make(env_id)), warn=True)


def test_the_oracle_reads_a_hostile_observation_in_linear_time():
    # 16 384 characters (the longest observation) of "State: " took 0.5 s: a search retried at every "State: "
    oracle = WeatherOracle()

    def seconds(chars):
        text = ("State: " * chars)[:chars]
        start = time.perf_counter()
        assert oracle.predict(text)[0].startswith('<tool_call>{"name": "answer"')
        return time.perf_counter() - start

    small = min(seconds(2048) for _ in range(3))
    large = min(seconds(16_384) for _ in range(3))
    assert large <= 20 * small + 0.005 and large <= 0.05, (small, large)
