"""``TaskInfo``: every registered env declares facts that match what it does, and ``agentgym/Remote-v0`` declares
what its server said."""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import gymnasium as gym
import pytest
from pydantic import Field

import agentgym
from agentgym.app.serving.env_server import EnvServer
from agentgym.core import RewardWeights, TaskInfo, ToolEnv, task_info
from agentgym.core.data import sha256_file
from agentgym.core.registration import ENV_IDS, make_env, split_kwargs
from agentgym.core.wrappers import DiscreteToolActions, DiscreteView
from agentgym.envs.sandbox import layer_status
from agentgym.envs.sql.env import SQLLookupEnv

SHIPPED = {sha256_file(path) for path in Path(agentgym.envs.__file__).parent.glob("*/data/*")}
"""The checksums of the data files the package ships: a declared checksum is one of them."""

STATUS = layer_status()
needs_sandbox = pytest.mark.skipif(all(v is not None for v in STATUS.values()), reason=f"no sandbox: {STATUS}")
ENV_CASES = [pytest.param(i, marks=needs_sandbox if "CodeSandbox" in i else ()) for i in ENV_IDS]


def oracle_episode(env: gym.Env, task_index: int | None) -> tuple[list[float], list[dict[str, float]], bool]:
    """The oracle's rewards, reward components and success on one task (by index, or drawn from seed 0)."""
    options = None if task_index is None else {"task_index": task_index}
    obs, info = env.reset(seed=0, options=options)
    oracle, rewards, components = env.unwrapped.oracle(), [], []
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(oracle.predict(obs)[0])
        rewards.append(reward)
        components.append(info["reward_components"])
        done = terminated or truncated
    return rewards, components, info["success"]


@pytest.mark.parametrize("env_id", ENV_CASES)
def test_each_env_declares_what_it_does(env_id):
    env = make_env(env_id, "test")
    info = task_info(env)
    assert isinstance(info, TaskInfo) and info == env.unwrapped.task_info
    takes_split = "split" in split_kwargs(env_id, "test")
    assert info.split == ("test" if takes_split else None)

    # num_tasks: exactly the task indices reset accepts on the test split
    if info.num_tasks is not None:
        assert info.num_tasks > 0 and takes_split
        env.reset(seed=0, options={"task_index": info.num_tasks - 1})
        with pytest.raises(ValueError, match="task_index"):
            env.reset(seed=0, options={"task_index": info.num_tasks})
        train = task_info(make_env(env_id, "train")).num_tasks
        assert train is not None and train != info.num_tasks  # the count is the split's, not the whole set's

    # the oracle solves tasks, and every reward it is paid lies within the declared bounds
    assert info.oracle and info.reward_bounds is not None
    low, high = info.reward_bounds
    assert math.isfinite(low) and low <= high and math.isfinite(high)
    for task_index in (0, info.num_tasks - 1) if info.num_tasks else (None,):
        rewards, _, success = oracle_episode(env, task_index)
        assert success and all(low - 1e-9 <= r <= high + 1e-9 for r in rewards), (task_index, rewards)

    # frozen data: the checksum of a file the package ships; CliffWalk has none
    assert (info.data_checksum in SHIPPED) if "CliffWalk" not in env_id else info.data_checksum is None

    # CodeSandbox's work runs in sandbox processes, so its episodes may run in threads at once
    assert info.parallel_episodes == ("CodeSandbox" in env_id)

    # the discrete view: DiscreteToolActions wraps it and plays its menu
    assert info.discrete_view
    view = DiscreteToolActions(env)
    view.reset(seed=0)
    view.step(0)
    env.close()


@pytest.mark.parametrize("env_id", [case for case in ENV_CASES if "CliffWalk" not in case.values[0]])
def test_process_reward_is_the_bound_an_oracle_episode_stays_within(env_id):
    assert task_info(make_env(env_id, "test")).process_reward == 0.0  # off by default
    env = make_env(env_id, "test", {"process_reward": 0.5})
    info = task_info(env)
    assert info.process_reward == 0.5
    _, components, _ = oracle_episode(env, 0)
    earned = sum(c.get("process", 0.0) for c in components)
    assert 0 < earned <= info.process_reward + 1e-9
    env.close()


def test_the_base_class_declares_its_hooks_and_a_plain_env_declares_nothing():
    class Bare(ToolEnv):
        def _reset_task(self, options):
            pass

        def summary(self):
            return "-"

    assert Bare().task_info == TaskInfo()  # no task list, bounds, oracle or discrete view
    assert task_info(gym.make("CartPole-v1")) == TaskInfo()
    with pytest.raises(FrozenInstanceError):
        TaskInfo().num_tasks = 3
    # the discrete-view hooks live with the discrete view: a task without it has none, and the wrapper says why
    assert not any(hasattr(Bare(), hook) for hook in ("action_menu", "state_keys", "state_key"))
    with pytest.raises(TypeError, match="DiscreteView"):
        DiscreteToolActions(Bare())

    class Menu(DiscreteView, Bare):
        def state_keys(self):
            return ["-"]

        def action_menu(self):
            return ['<tool_call>{"name": "none", "arguments": {}}</tool_call>']

    assert Menu().task_info == TaskInfo(discrete_view=True) and Menu().state_key() == "-"  # the summary by default
    view = DiscreteToolActions(Menu())
    assert view.reset()[0] == 0 and view.action_space.n == 1


class Weights(RewardWeights):
    correct: float = 1.0
    tool_cost: float = Field(0.0, ge=0)


def test_reward_weights_are_one_mechanism_every_task_shares():
    assert Weights.of() == Weights() and Weights.of(None, tool_cost=None) == Weights()  # a None shortcut sets nothing
    assert Weights.of({"correct": 2.0}, tool_cost=0.1) == Weights(correct=2.0, tool_cost=0.1)
    assert Weights.of(Weights(correct=3.0)).correct == 3.0
    for bad, name in (({"corect": 1.0}, "corect"), ({"tool_cost": -1.0}, "tool_cost")):
        with pytest.raises(ValueError, match=name):
            Weights.of(bad)
    # each task's weights are these, with invalid_action paid by the loop and process_reward bounded by the base class
    for env_id in ("agentgym/WeatherRun-v0", "agentgym/SQLLookup-v0", "agentgym/CodeSandbox-v0"):
        env = gym.make(env_id, rewards={"invalid_action": -0.25}, process_reward=0.5)
        assert isinstance(env.unwrapped.rewards, RewardWeights) and env.unwrapped.process_reward == 0.5
        env.reset(seed=0)
        assert env.step("no call here")[1] == -0.25
        with pytest.raises(ValueError, match="process_reward"):
            gym.make(env_id, process_reward=-1)
        env.close()


def test_tasks_without_distractors_declare_no_discrete_view(tmp_path):
    db, tasks = tmp_path / "pets.db", tmp_path / "pets.jsonl"
    with sqlite3.connect(db) as conn:
        conn.executescript("CREATE TABLE pets (name TEXT, age INTEGER); INSERT INTO pets VALUES ('Rex', 3);")
    conn.close()
    tasks.write_text(json.dumps({"id": "p1", "question": "How many pets?", "gold_sql": "SELECT COUNT(*) FROM pets"}))
    env = SQLLookupEnv(db_path=db, tasks_path=tasks)
    info = env.task_info
    assert not info.discrete_view and info.num_tasks == 1 and info.data_checksum == sha256_file(db)
    with pytest.raises(ValueError, match="distractors"):
        DiscreteToolActions(env)
    env.close()


@pytest.mark.parametrize("operator", [True, False])
def test_remote_declares_what_its_server_said(operator):
    env_id, kwargs = "agentgym/WeatherRun-v0", {"split": "test", "process_reward": 0.5}
    served = task_info(gym.make(env_id, **kwargs))
    with EnvServer(env_id, kwargs, port=0, operator=operator) as server:
        remote = gym.make("agentgym/Remote-v0", base_url=server.url)
        info = task_info(remote)
        remote.close()
    # the facts the session reply carries; a discrete view and an oracle where the server serves them
    said = replace(served, split=None, process_reward=0.0, discrete_view=operator, oracle=operator)
    assert info == replace(said, parallel_episodes=True)  # the work is the server's
    assert info.num_tasks == 100 and info.data_checksum in SHIPPED
