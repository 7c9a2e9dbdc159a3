"""CliffWalk-v0: spaces, dynamics, Gymnasium equivalence, rendering, determinism."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import agentgym
from agentgym.core.wrappers import DiscreteToolActions
from agentgym.envs.cliff.env import CLIFF, GOAL, CliffWalkEnv, draw_path

ENV_ID = "agentgym/CliffWalk-v0"


def move(direction: str) -> str:
    return agentgym.ToolEnv.canonical("move", direction=direction)


def test_module_prefix_registers_without_import():
    code = (
        "import gymnasium as gym; env = gym.make('agentgym:agentgym/CliffWalk-v0'); "
        "obs, info = env.reset(seed=0); print(info['summary'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "pos (3,0) · steps 0 · return 0"


def test_reset_observation_and_info():
    env = gym.make(ENV_ID)
    obs, info = env.reset(seed=0)
    assert "move(direction" in obs and "<tool_call>" in obs and obs.endswith("State: pos (3,0) · steps 0 · return 0")
    (schema,) = info["tools"]
    assert schema["function"]["name"] == "move"
    assert schema["function"]["parameters"]["properties"]["direction"]["enum"] == ["up", "right", "down", "left"]


def test_step_info_and_summary():
    env = gym.make(ENV_ID)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(move("up"))
    assert (reward, terminated, truncated) == (-1.0, False, False)
    assert info["tool_call"] == {"name": "move", "arguments": {"direction": "up"}}
    assert info["parse_error"] is None and info["canonical"] is True and info["format"] == "tool_call"
    assert info["summary"] == "pos (2,0) · steps 1 · return -1"
    assert info["reward_components"] == {"step": -1.0}
    assert info["success"] is False
    assert obs.endswith("State: pos (2,0) · steps 1 · return -1") and "Moved up to (2,0)" in obs


@pytest.mark.parametrize("alias", ["u", "UP", " North ", "n", 0, "Up"])
def test_direction_aliases(alias):
    env = gym.make(ENV_ID)
    env.reset(seed=0)
    action = f'<tool_call>{{"name": "move", "arguments": {{"direction": {alias!r}}}}}</tool_call>'.replace("'", '"')
    _, reward, _, _, info = env.step(action)
    assert info["parse_error"] is None, info["parse_error"]
    assert info["summary"].startswith("pos (2,0)")


def test_optimal_path_and_cliff():
    env = gym.make(ENV_ID)
    env.reset(seed=0)
    total = 0.0
    for d in ["up"] + ["right"] * 11 + ["down"]:
        _, r, terminated, _, info = env.step(move(d))
        total += r
    assert terminated and info["success"] and total == -13
    assert "at the goal" in info["summary"]

    env.reset(seed=0)
    _, r, terminated, _, info = env.step(move("right"))
    assert (r, terminated, info["success"]) == (-100.0, True, False)
    assert info["reward_components"] == {"cliff": -100.0}
    assert "fell off the cliff" in info["summary"]
    # stepping after the end is an explained no-op, not an exception
    obs, r, terminated, _, _ = env.step(move("up"))
    assert r == 0.0 and terminated and "episode is over" in obs


def test_walls_keep_agent_in_place():
    env = gym.make(ENV_ID)
    env.reset(seed=0)
    _, r, _, _, info = env.step(move("left"))
    assert r == -1.0 and info["summary"].startswith("pos (3,0)")


def test_time_limit_truncates():
    env = gym.make(ENV_ID)
    env.reset(seed=0)
    for _ in range(100):
        _, _, terminated, truncated, _ = env.step(move("left"))
    assert truncated and not terminated


@pytest.mark.parametrize("slippery", [False, True])
def test_matches_gymnasium_cliffwalking_transition_by_transition(slippery):
    ours = DiscreteToolActions(gym.make(ENV_ID, cliff_terminates=False, is_slippery=slippery, max_episode_steps=10**6))
    theirs = gym.make("CliffWalking-v1", is_slippery=slippery)
    rng = np.random.default_rng(123)
    for episode_seed in range(3):
        s_ours, _ = ours.reset(seed=episode_seed)
        s_theirs, _ = theirs.reset(seed=episode_seed)
        assert s_ours == s_theirs
        for a in rng.integers(0, 4, size=400):
            step_ours = ours.step(int(a))
            step_theirs = theirs.step(int(a))
            assert step_ours[:4] == step_theirs[:4], (episode_seed, int(a))
            if step_theirs[2]:
                break


def test_discrete_view_spaces_and_order():
    env = DiscreteToolActions(gym.make(ENV_ID))
    assert env.action_space == gym.spaces.Discrete(4) and env.observation_space == gym.spaces.Discrete(48)
    s, info = env.reset(seed=0)
    assert s == 36 and "State: pos (3,0)" in info["text"]
    assert [env.step(a)[0] for a in (0, 1, 2, 3)] == [24, 25, 37, 37]  # up, right, down (cliff: stays), -
    with pytest.raises(ValueError, match="action must be an int"):
        env.step(7)


def test_determinism_under_seed():
    def run(seed):
        env = gym.make(ENV_ID, is_slippery=True, cliff_terminates=False)
        obs, _ = env.reset(seed=seed)
        trace = [obs]
        for d in ["up", "right", "right", "down", "left", "up"] * 5:
            trace.append(env.step(move(d))[0])
        return trace

    assert run(7) == run(7)
    assert any(run(7) != run(seed) for seed in range(8, 12))


def test_render_modes():
    env = gym.make(ENV_ID, render_mode="ansi")
    env.reset(seed=0)
    text = env.render()
    assert text.splitlines()[3].split() == ["x"] + ["C"] * 10 + ["T"]
    env = gym.make(ENV_ID, render_mode="rgb_array")
    env.reset(seed=0)
    image = env.render()
    assert image.shape == (64, 192, 3) and image.dtype == np.uint8
    assert tuple(image[56, 8]) == (40, 90, 220)  # the agent's cell (3, 0)
    with pytest.raises(ValueError, match="render_mode"):
        CliffWalkEnv(render_mode="rgb")


def test_history_keeps_last_turns():
    env = gym.make(ENV_ID, history=2)
    env.reset(seed=0)
    for d in ["up", "right", "right", "right"]:
        obs, *_ = env.step(move(d))
    # two earlier turns (action + result), then this step's result and the summary
    assert obs.count("Action: ") == 2 and "Moved up" not in obs
    assert (
        obs.index("Moved right to (2,1)")
        < obs.index("Moved right to (2,2)")
        < obs.index("Result: Moved right to (2,3)")
    )


def test_draw_path():
    picture = draw_path([36, 24, 25, 26])
    rows = picture.splitlines()
    assert rows[3].split()[0] == "^" and rows[2].split()[:2] == [">", ">"] and rows[3].split()[-1] == "G"


def test_exploring_starts_cover_every_open_cell_by_seed_and_the_oracle_walks_home_from_each():
    env = gym.make(ENV_ID, exploring_starts=True)
    oracle = env.unwrapped.oracle()
    starts = {}
    for seed in range(400):
        env.reset(seed=seed)
        starts[seed] = env.unwrapped.pos
    assert set(starts.values()) == {(r, c) for r in range(4) for c in range(12)} - set(CLIFF) - {GOAL}
    assert all(env.reset(seed=s)[0] and env.unwrapped.pos == starts[s] for s in (3, 99))  # seeded
    for seed, pos in list(starts.items())[:60]:
        obs, _ = env.reset(seed=seed)
        assert f"pos ({pos[0]},{pos[1]})" in obs
        for _ in range(20):
            obs, reward, terminated, _, _ = env.step(oracle.predict(obs)[0])
            if terminated:
                break
        assert env.unwrapped.success and env.unwrapped.episode_return == -(abs(pos[0] - 2) + 11 - pos[1] + 1)
    plain = gym.make(ENV_ID)
    assert {plain.reset(seed=s) and plain.unwrapped.pos for s in range(20)} == {(3, 0)}  # off by default


def test_exploring_starts_is_a_probability():
    env = gym.make(ENV_ID, exploring_starts=0.5)
    at_start = sum(env.reset(seed=s) and env.unwrapped.pos == (3, 0) for s in range(400))
    assert 170 < at_start < 240  # ~205: half the resets at the start, plus the drawn ones that land on it
    with pytest.raises(ValueError, match="exploring_starts is a probability"):
        gym.make(ENV_ID, exploring_starts=2)
