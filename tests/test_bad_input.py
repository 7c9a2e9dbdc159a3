"""Malformed actions sent to CliffWalk: never an exception, always an explained, penalised no-op."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the agentgym/* ids)


def tagged(body: str) -> str:
    return f"<tool_call>{body}</tool_call>"


def move_with(arguments: str) -> str:
    return tagged(f'{{"name": "move", "arguments": {arguments}}}')


VALID = tagged('{"name": "move", "arguments": {"direction": "up"}}')

# (action, a fragment the parse error must contain)
BAD_ACTIONS = {
    "empty": ("", "empty"),
    "whitespace": (" \n\t \r\n ", "empty"),
    "null-bytes-only": ("\x00" * 64, "empty"),
    "one-megabyte": ("a" * 1_048_576, "limit"),
    "one-megabyte-of-valid-calls": (VALID * (1_048_576 // len(VALID)), "limit"),
    "forty-kb-of-braces": ("{" * 40_960, "limit"),
    "thirty-kb-of-braces": ("{" * 30_000, "no tool call"),
    "deep-brackets": ("[" * 10_000, "no tool call"),
    "deep-brackets-in-tag": (tagged("[" * 10_000), "nested too deeply"),
    "deep-name-objects-in-tag": (tagged('{"name": ' * 3_000), "nested too deeply"),
    "deep-parens-in-call": ("move(" + "(" * 5_000 + "'up'" + ")" * 5_001, "nested deeper than Python"),
    "deep-list-argument": ("move(direction=" + "[" * 3_000 + "]" * 3_000 + ")", "nested deeper than Python"),
    "invalid-json-in-tag": (tagged('{"name": "move", "arguments": {"direction": @up}}'), "JSON"),
    "json-without-name-in-tag": (tagged('{"direction": "up"}'), '"name"'),
    "empty-tag": (tagged(""), "empty"),
    "only-closing-tag": ("</tool_call>", "no tool call"),
    "only-opening-tag": ("<tool_call>", "empty"),
    "unknown-tool": (
        tagged('{"name": "walk", "arguments": {"direction": "up"}}'),
        "unknown tool 'walk'",
    ),
    "unknown-tool-typo": (
        tagged('{"name": "mvoe", "arguments": {"direction": "up"}}'),
        "Did you mean 'move'?",
    ),
    "direction-float": (move_with('{"direction": 5.5}'), "argument 'direction' must be one of"),
    "direction-list": (move_with('{"direction": ["up"]}'), "argument 'direction' must be one of"),
    "direction-out-of-range-int": (move_with('{"direction": 7}'), "argument 'direction'"),
    "direction-bool": (move_with('{"direction": true}'), "argument 'direction'"),
    "direction-null": (move_with('{"direction": null}'), "argument 'direction'"),
    "direction-object": (move_with('{"direction": {"to": "up"}}'), "argument 'direction'"),
    "direction-unknown-word": (move_with('{"direction": "diagonal"}'), '"diagonal"'),
    "missing-argument": (move_with("{}"), "missing required argument 'direction'"),
    "extra-argument": (move_with('{"direction": "up", "speed": 2}'), "unexpected argument 'speed'"),
    "arguments-is-list": (move_with('["up"]'), "must be a JSON object"),
    "python-kwargs-splat": ('move(**{"direction": "up"})', "**kwargs"),
    "python-too-many-positional": ('move("up", "down")', "takes 1 argument"),
    "python-unclosed": ('move(direction="up"', "unclosed parenthesis"),
    "python-non-literal": (
        "move(direction=__import__('os').getcwd())",
        "could not read the argument",
    ),
    "unicode-garbage": ("\u202e\ufeff\U0001f600\u0301\ud7ff中文 ∑∫ \u200b", "no tool call"),
    "lone-surrogates": ("\ud800\udfff{\udc00", "no tool call"),
    "null-bytes-in-garbage": ("{\x00[\x00(\x00'\x00", "no tool call"),
    "prose-only": ("I think I should go up now.", "no tool call"),
    "too-many-calls": (VALID * 17, "limit is 16"),
    "react-list-input": ('Action: move\nAction Input: ["up"]', "must be a JSON object"),
}


@pytest.fixture
def env():
    env = gym.make("agentgym/CliffWalk-v0")
    yield env
    env.close()


@pytest.mark.parametrize(("action", "fragment"), BAD_ACTIONS.values(), ids=BAD_ACTIONS.keys())
def test_bad_action_is_a_penalised_no_op(env, action: str, fragment: str) -> None:
    env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step(action)

    assert isinstance(observation, str)
    assert "Error" in observation
    assert env.observation_space.contains(observation)
    assert isinstance(info["parse_error"], str) and info["parse_error"]
    assert fragment in info["parse_error"]
    assert info["parse_error"] in observation
    assert reward == -1.0
    assert info["reward_components"] == {"invalid_action": -1.0}
    assert info["summary"].startswith("pos (3,0)")
    assert info["summary"] == "pos (3,0) · steps 1 · return -1"
    assert not terminated and not truncated
    assert info["success"] is False
    assert env.unwrapped.pos == (3, 0)

    # the episode goes on: a valid move after the bad one still works
    observation, reward, terminated, truncated, info = env.step(VALID)
    assert info["parse_error"] is None
    assert info["reward_components"] == {"step": -1.0}
    assert reward == -1.0
    assert info["summary"] == "pos (2,0) · steps 2 · return -2"
    assert "Error" not in observation
    assert env.observation_space.contains(observation)


@pytest.mark.parametrize("action", [None, 3, b"move up", ["up"], {"direction": "up"}])
def test_non_text_action_is_a_penalised_no_op(env, action) -> None:
    env.reset(seed=0)
    observation, reward, _, _, info = env.step(action)
    assert "Error" in observation
    assert "must be text" in info["parse_error"]
    assert reward == -1.0
    assert info["reward_components"] == {"invalid_action": -1.0}
    assert env.unwrapped.pos == (3, 0)


def test_many_bad_actions_in_a_row_then_the_goal(env) -> None:
    """Bad actions cost -1 each and leave the agent in place; the episode still reaches the goal."""
    env.reset(seed=0)
    bad = [action for action, _ in BAD_ACTIONS.values() if len(action) < 5_000]
    total = 0.0
    for action in bad:
        _, reward, terminated, truncated, info = env.step(action)
        total += reward
        assert info["parse_error"] and not terminated and not truncated
    assert total == -len(bad)
    assert env.unwrapped.pos == (3, 0)

    path = ["up"] + ["right"] * 11 + ["down"]
    for direction in path:
        _, reward, terminated, _, info = env.step(move_with(json.dumps({"direction": direction})))
        assert info["parse_error"] is None
    assert terminated and info["success"]
    assert env.unwrapped.episode_return == -len(bad) - len(path)


def test_repeated_bad_action_is_served_from_the_cache_consistently(env) -> None:
    env.reset(seed=0)
    action = move_with('{"direction": 5.5}')
    first = env.step(action)
    second = env.step(action)
    assert first[4]["parse_error"] == second[4]["parse_error"]
    assert second[1] == -1.0
    assert second[4]["summary"] == "pos (3,0) · steps 2 · return -2"
