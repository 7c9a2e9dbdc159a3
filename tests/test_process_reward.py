"""Process rewards (``process_reward=p``) of WeatherRun and SQLLookup: paid once per required step, bounded by p per
episode, off by default with every reward unchanged; and the audit's replay check of the bound."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym  # noqa: F401  (registers the envs)
from agentgym.app.evaluation.audit import audit_run
from agentgym.core.tools import ToolCall


def call(tool: str, **arguments) -> str:
    return ToolCall(tool, arguments).to_text()


def play(env: gym.Env, actions: list[str], **reset) -> list[dict]:
    env.reset(**reset)
    infos = []
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        assert math.isclose(reward, sum(info["reward_components"].values()))
        infos.append(info)
        if terminated or truncated:
            break
    return infos


def process_of(infos: list[dict]) -> float:
    return sum(info["reward_components"].get("process", 0.0) for info in infos)


def oracle_infos(env: gym.Env, **reset) -> list[dict]:
    obs, _ = env.reset(**reset)
    oracle, infos = env.unwrapped.oracle(), []
    for _ in range(20):
        obs, _, terminated, truncated, info = env.step(oracle.predict(obs)[0])
        infos.append(info)
        if terminated or truncated:
            break
    return infos


@pytest.mark.parametrize("env_id", ["agentgym/WeatherRun-v0", "agentgym/SQLLookup-v0"])
def test_off_by_default_changes_nothing(env_id):
    plain, off = gym.make(env_id), gym.make(env_id, process_reward=0.0)
    for i in range(5):
        a, b = oracle_infos(plain, seed=i), oracle_infos(off, seed=i)
        assert [x["reward_components"] for x in a] == [x["reward_components"] for x in b]
        assert all("process" not in x["reward_components"] for x in a)
    assert plain.unwrapped.reward_bounds() == off.unwrapped.reward_bounds()
    assert off.unwrapped.process_reward == 0.0


@pytest.mark.parametrize("env_id", ["agentgym/WeatherRun-v0", "agentgym/SQLLookup-v0"])
def test_oracle_earns_the_whole_process_reward_and_the_same_success_reward(env_id):
    plain, on = gym.make(env_id), gym.make(env_id, process_reward=0.4)
    for i in range(5):
        a, b = oracle_infos(plain, seed=i), oracle_infos(on, seed=i)
        assert math.isclose(process_of(b), 0.4)
        without = [{k: v for k, v in x["reward_components"].items() if k != "process"} for x in b]
        assert without == [x["reward_components"] for x in a]  # the success reward is unchanged
        assert b[-1]["success"] and a[-1]["success"]


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "0.5", None])
@pytest.mark.parametrize("env_id", ["agentgym/WeatherRun-v0", "agentgym/SQLLookup-v0"])
def test_bad_process_reward_is_refused(env_id, bad):
    with pytest.raises(ValueError, match="process_reward"):
        gym.make(env_id, process_reward=bad)


@pytest.mark.parametrize("env_id", ["agentgym/WeatherRun-v0", "agentgym/SQLLookup-v0"])
def test_check_env_passes_with_process_reward(env_id):
    check_env(gym.make(env_id, process_reward=0.3).unwrapped, skip_render_check=True)


# ---------------------------------------------------------------------------------------------------- WeatherRun


def test_weather_each_required_tool_pays_once_for_the_right_city():
    env = gym.make("agentgym/WeatherRun-v0", process_reward=0.5)
    env.reset(seed=3)
    city = env.unwrapped.city
    other = next(c for c in ("Shanghai", "Paris", "Lagos", "Lima") if c.lower() != city.lower())
    infos = play(
        env,
        [
            call("get_weather", city=other),  # another city: nothing
            call("get_weather", city="Atlantis"),  # a failed lookup: nothing
            call("get_weather", city=city.upper()),  # the task's city (case-insensitive): 0.25
            call("get_weather", city=city),  # repeated: nothing
            call("get_air_quality", city=city) + call("get_air_quality", city=city),  # 0.25 once
        ],
        seed=3,
    )
    paid = [info["reward_components"].get("process", 0.0) for info in infos]
    assert paid == [0.0, 0.0, 0.25, 0.0, 0.25]
    assert env.unwrapped.rewarded == {"get_weather", "get_air_quality"}


def test_weather_process_reward_cannot_be_farmed():
    """Whatever an agent does, an episode's process reward stays within p, every reward within reward_bounds,
    and no process reward is paid without the lookups of the task's city."""
    env = gym.make("agentgym/WeatherRun-v0", process_reward=0.6, backend="random", synthetic_cities=True)
    low, high = env.unwrapped.reward_bounds()
    assert math.isclose(high, 1.5 + 0.6)  # two lookups and a correct answer in one action
    for seed in range(40):
        env.reset(seed=seed)
        city = env.unwrapped.city
        menu = [call("get_weather", city=city), call("get_air_quality", city=city), call("get_weather", city="Oslo")]
        env.action_space.seed(seed)
        total = 0.0
        for k in range(8):
            action = menu[(seed + k) % 3] * (1 + k % 3) if k % 2 else env.unwrapped.sample_action(seed * 10 + k)
            _, reward, terminated, truncated, info = env.step(action)
            assert low - 1e-9 <= reward <= high + 1e-9
            total += info["reward_components"].get("process", 0.0)
            if terminated or truncated:
                break
        assert total <= 0.6 + 1e-9


# ---------------------------------------------------------------------------------------------------- SQLLookup


def _gold_tables(env: gym.Env, index: int) -> int:
    env.reset(seed=0, options={"task_index": index})
    return len(env.unwrapped.gold_tables)


def test_sql_pays_once_per_distinct_gold_table():
    env = gym.make("agentgym/SQLLookup-v0", process_reward=0.6)
    index = next(i for i in range(env.unwrapped.num_tasks) if _gold_tables(env, i) == 2)
    env.reset(seed=0, options={"task_index": index})
    first, second = env.unwrapped.gold_tables
    other = next(t for t in env.unwrapped.table_names if t not in (first, second))
    infos = play(
        env,
        [
            call("run_sql", query=f"SELECT COUNT(*) FROM {other}"),  # not a gold table: nothing
            call("run_sql", query=f"SELECT '{first}' -- {second}"),  # names only in a string and a comment
            call("run_sql", query=f"SELECT * FROM {first} WHERE no_such_column = 1"),  # fails: nothing
            call("run_sql", query=f'SELECT COUNT(*) FROM "{first}"'),  # 0.3
            call("run_sql", query=f"SELECT COUNT(*) FROM {first}"),  # already paid: nothing
            call("describe_table", name=second),  # not a query: nothing
            call("run_sql", query=f"SELECT 1 FROM {first} JOIN {second} LIMIT 1"),  # the second table: 0.3
            call("run_sql", query=f"SELECT 1 FROM {first} JOIN {second} LIMIT 1"),  # repeated: nothing
        ],
        seed=0,
        options={"task_index": index},
    )
    paid = [info["reward_components"].get("process", 0.0) for info in infos]
    assert paid == pytest.approx([0, 0, 0, 0.3, 0, 0, 0.3, 0])
    assert env.unwrapped.errors == 1 and env.unwrapped.touched == {first, second}


def test_sql_process_reward_bound_holds_for_random_actions():
    env = gym.make("agentgym/SQLLookup-v0", process_reward=0.5)
    low, high = env.unwrapped.reward_bounds()
    for seed in range(15):
        env.reset(seed=seed)
        menu = env.unwrapped.action_menu()
        total = 0.0
        for k in range(12):
            action = menu[(seed * 7 + k) % len(menu)]
            if "answer_sql" in action:
                action = menu[0]
            _, reward, terminated, truncated, info = env.step(action * (1 + k % 2))
            assert low - 1e-9 <= reward <= high + 1e-9
            total += info["reward_components"].get("process", 0.0)
            if terminated or truncated:
                break
        assert total <= 0.5 + 1e-9


# ---------------------------------------------------------------------------------------------------- the audit


def write_run(tmp_path, episodes: list[dict], process_reward: float) -> None:
    config = {
        "env_id": "agentgym/WeatherRun-v0",
        "train_split": "train",
        "env_kwargs": {"backend": "random", "synthetic_cities": True, "process_reward": process_reward},
    }
    (tmp_path / "config.json").write_text(json.dumps({"algorithm": "grpo", "config": config}))
    lines = [json.dumps(e) for e in episodes]
    (tmp_path / "episodes.jsonl").write_text("\n".join(lines) + "\n")


def logged(env: gym.Env, seed: int, actions: list[str]) -> dict:
    infos = play(env, actions, seed=seed)
    total = sum(sum(i["reward_components"].values()) for i in infos)
    return {
        "step": 0,
        "reset": {"seed": seed},
        "reward": total,
        "env_reward": total,
        "success": infos[-1]["success"],
        "turns": len(infos),
        "response_tokens": 10 * len(infos),
        "canonical": [True] * len(infos),
        "valid": [True] * len(infos),
        "actions": actions[: len(infos)],
    }


def test_audit_replays_process_reward_within_bound(tmp_path):
    env = gym.make("agentgym/WeatherRun-v0", backend="random", synthetic_cities=True, process_reward=0.4)
    episodes = []
    for seed in range(6):
        env.reset(seed=seed)
        city = env.unwrapped.city
        farm = [call("get_weather", city=city)] * 3 + [call("get_air_quality", city=city)] * 3
        episodes.append(logged(env, seed, farm + [call("answer", suitable=seed % 2 == 0)]))
    write_run(tmp_path, episodes, 0.4)
    report = audit_run(tmp_path, quantile=0.0)
    assert report.replayed == 6 and report.process_bound == pytest.approx(0.4)
    assert report.process_max == pytest.approx(0.4) and report.process_over_bound == 0
    assert not any("replay-mismatch" in e["flags"] for e in report.flagged)


def test_audit_flags_a_log_the_env_does_not_reproduce(tmp_path):
    env = gym.make("agentgym/WeatherRun-v0", backend="random", synthetic_cities=True, process_reward=0.4)
    env.reset(seed=1)
    episode = logged(env, 1, [call("get_weather", city=env.unwrapped.city)])
    episode["env_reward"] = episode["reward"] = 5.0  # paid far more than the env pays
    write_run(tmp_path, [episode], 0.4)
    report = audit_run(tmp_path, quantile=0.0)
    assert "replay-mismatch" in report.flagged[0]["flags"]


def test_audit_flags_a_farmable_process_reward(tmp_path, monkeypatch):
    """An env whose process reward pays every repeated lookup (the bug the once-only rule prevents) is caught."""
    from agentgym.envs.weather.env import WeatherRunEnv

    env = gym.make("agentgym/WeatherRun-v0", backend="random", synthetic_cities=True, process_reward=0.4)
    env.reset(seed=2)
    farm = [call("get_weather", city=env.unwrapped.city)] * 6
    monkeypatch.setattr(WeatherRunEnv, "_paid", lambda self, name, city: {"process": self.process_reward / 2})
    write_run(tmp_path, [logged(env, 2, farm)], 0.4)
    report = audit_run(tmp_path, quantile=0.0)
    assert report.process_max == pytest.approx(1.2) and report.process_over_bound == 1
    assert "process-over-bound" in report.flagged[0]["flags"]


def test_audit_without_config_replays_nothing(tmp_path):
    env = gym.make("agentgym/WeatherRun-v0")
    write_run(tmp_path, [logged(env, 0, [call("answer", suitable=True)])], 0.0)
    (tmp_path / "config.json").unlink()
    report = audit_run(tmp_path, quantile=0.0)
    assert report.replayed == 0 and report.process_bound is None
