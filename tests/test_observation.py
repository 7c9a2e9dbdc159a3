"""The observation contract: ``ObservationParts`` is what the env's text is rendered from, and what the rollout's
summary prompts and the TRL integration read — nobody parses the text back."""

from __future__ import annotations

import random
from dataclasses import replace

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the ids)
from agentgym.core import MAX_SHOWN_ACTION_CHARS, ObservationParts, Turn, parts_of, past_turn, recent_turns
from agentgym.trainers.llm.rollout import OracleTeacher, RolloutConfig, rollout
from agentgym.trainers.models.policy import LLMPolicy
from tests.test_core import Counter

ENV_IDS = ["agentgym/CliffWalk-v0", "agentgym/WeatherRun-v0", "agentgym/SQLLookup-v0"]


def play(env: gym.Env, steps: int, seed: int) -> list[tuple[str, ObservationParts]]:
    """Observations and their parts for a reset and ``steps`` random actions (menu, garbage, long, escapes)."""
    base = env.unwrapped
    rng = random.Random(seed)
    extra = ["garbage {", "x" * 900 + "\x1b[31m", "answer(suitable=true)"]
    obs, _ = env.reset(seed=seed)
    seen = [(obs, base.observation_parts())]
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(rng.choice(base.action_menu() + extra))
        seen.append((obs, base.observation_parts()))
        if terminated or truncated:
            obs, _ = env.reset(seed=seed + 1)
            seen.append((obs, base.observation_parts()))
    return seen


@pytest.mark.parametrize("history", [0, 1, 3])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_the_env_text_is_its_parts_rendered(env_id, history):
    env = gym.make(env_id, history=history)
    limit = env.unwrapped.max_observation_length
    seen = play(env, 12, seed=4)
    for obs, parts in seen:
        assert parts.render(limit) == obs
        assert len(parts.turns) <= history
    later = [parts for _, parts in seen if parts.result is not None]
    assert later and all(parts.tools is None for parts in later)
    assert history == 0 or max(len(parts.turns) for parts in later) >= min(history, 2)
    env.close()


def test_parts_layout_of_the_first_and_a_later_observation():
    env = Counter(history=2)
    obs, info = env.reset(seed=0)
    first = env.observation_parts()
    assert (first.task, first.summary, first.result, first.turns) == (Counter.task, info["summary"], None, ())
    assert obs == f"{Counter.task}\n\n{env.tools_prompt()}\n\nState: total 0 · steps 0"
    env.step("add(2)")
    obs, *_ = env.step("add(3)")
    parts = env.observation_parts()
    assert parts.turns == (Turn("add(2)", "total is 2"),)
    turns = "Action: add(2)\nResult: total is 2\n"
    assert obs == f"Task: {Counter.task}\n{turns}Result: total is 5\nState: total 5 · steps 2"
    assert replace(parts, task=None).render() == obs.split("\n", 1)[1]
    assert replace(first, tools=None).render() == f"{Counter.task}\n\nState: total 0 · steps 0"


def test_observation_parts_before_reset_is_a_clear_error():
    with pytest.raises(gym.error.ResetNeeded, match="reset"):
        Counter().observation_parts()


class SmallCounter(Counter):
    max_observation_length = 400


def test_history_keeps_the_last_turns_that_fit_the_observation_limit():
    """Each turn here renders to 135 characters; the fixed text (task line, result, state) to 75, so 400 characters
    leave room for 2 turns (270) of the 5 asked for — 3 would be 405 — and the oldest are the ones dropped."""
    env = SmallCounter(history=5)
    env.reset(seed=0)
    actions = [f"add({i % 2}) " + chr(97 + i) * 100 for i in range(6)]
    for action in actions:
        obs, *_ = env.step(action)
    parts = env.observation_parts()
    assert [len(t.render()) for t in parts.turns] == [135, 135]
    assert len(replace(parts, turns=()).render()) == 75
    assert [t.action for t in parts.turns] == actions[3:5]
    assert len(obs) == 75 + 270 <= 400 and parts.render(400) == obs


def test_recent_turns_takes_the_last_n_and_drops_the_oldest_past_the_budget():
    turns = [Turn(str(i), "r" * i) for i in range(1, 6)]  # "Action: i\nResult: rr…\n": 19 + i characters
    assert recent_turns(turns, 0) == ()
    assert recent_turns(turns, 3) == tuple(turns[2:])
    assert recent_turns(turns, 9) == tuple(turns)
    assert recent_turns(turns, 3, max_chars=22 + 23 + 24) == tuple(turns[2:])  # turns 3-5 take 69 characters
    assert recent_turns(turns, 3, max_chars=22 + 23 + 24 - 1) == tuple(turns[3:])
    assert recent_turns(turns, 3, max_chars=23 + 24) == tuple(turns[3:])
    assert recent_turns(turns, 3, max_chars=23) == ()  # the newest alone (24) does not fit
    assert recent_turns(turns, 3, max_chars=-1) == ()


def test_a_past_turn_shows_at_most_500_characters_of_the_action_as_safe_text():
    turn = past_turn("a" * 10_000 + "\x1b", "out\x07")
    assert MAX_SHOWN_ACTION_CHARS - 30 < len(turn.action) <= MAX_SHOWN_ACTION_CHARS
    assert turn.action.endswith(" …[9531 chars cut]") and "\x1b" not in turn.action
    assert turn.result == "out\\x07"
    env = Counter(history=1)
    env.reset(seed=0)
    env.step("add(1) " + "y" * 2_000)
    obs, *_ = env.step("add(1)")
    assert len(env.observation_parts().turns[0].action) <= 500 and "Action: add(1) yyy" in obs


# ---------------------------------------------------------------------------------------------- the rollout


def prompt_of(sample) -> list[int]:
    """The prompt ids of a summary-mode sample (everything before the policy's first token)."""
    return sample.input_ids[: sample.loss_mask.index(1)]


def test_summary_prompts_are_built_from_the_parts(tiny_model_path):
    """The oracle's 3 WeatherRun turns: the third prompt shows the first two as ``Action:``/``Result:`` pairs — the
    results as the env's observations show them (no ``Task:`` line, no ``State:`` line, no doubled ``Result:``)."""
    policy = LLMPolicy.from_pretrained(tiny_model_path)
    config = RolloutConfig(context="summary", history=2, max_new_tokens=64)
    env = gym.make("agentgym/WeatherRun-v0")
    (episode,) = rollout(policy, [env], [{"seed": 5}], config, teacher=OracleTeacher())
    assert episode.turns == 3 and episode.success
    twin = gym.make("agentgym/WeatherRun-v0")
    twin.reset(seed=5)
    first = twin.unwrapped.observation_parts()
    task, tools = first.task, first.tools
    results, summary = [], first.summary
    for i, sample in enumerate(episode.samples):
        history = "".join(f"Action: {a}\nResult: {r}\n" for a, r in zip(episode.actions[:i], results, strict=True))
        text = f"{task}\n\n{tools}\n\n{history}{chr(10) if history else ''}State: {summary}"
        assert prompt_of(sample) == policy.chat_ids([{"role": "user", "content": text}])
        obs, *_ = twin.step(episode.actions[i])
        parts = twin.unwrapped.observation_parts()
        assert obs == f"Task: {task}\nResult: {parts.result}\nState: {parts.summary}"  # what the text shows
        results.append(parts.result)
        summary = parts.summary
    last = policy.decode(prompt_of(episode.samples[-1]))
    assert "Result: Result:" not in last and last.count("State:") == 1 and last.count("Action:") == 2


def test_summary_history_keeps_to_the_envs_observation_limit(tiny_model_path):
    """SmallCounter (400 characters) asked for 5 turns of 135 characters shows the 2 newest that fit beside its
    latest observation's fixed text; without parts (a plain gym.Env) the history has no character limit."""
    policy = LLMPolicy.from_pretrained(tiny_model_path)
    config = RolloutConfig(context="summary", history=5, turn_template="{history}|{summary}", max_new_tokens=64)
    actions = [f"add({i % 2}) " + chr(97 + i) * 100 for i in range(6)] + ["finish()"]

    class Script:
        def act(self, env, observation):
            return actions[env.unwrapped.steps]

    (episode,) = rollout(policy, [SmallCounter()], [{"seed": 0}], config, teacher=Script())
    assert episode.actions == actions
    last = policy.decode(prompt_of(episode.samples[-1]))
    assert last.count("Action:") == 2 and f"Action: {actions[4]}\nResult: total is 2\n" in last
    assert f"Action: {actions[5]}\nResult: total is 3\n\n|total 3 · steps 6" in last


class PlainEnv(gym.Env):
    """Not a ToolEnv: three turns, observations ``"obs 1"``…, no ``observation_parts``."""

    def __init__(self) -> None:
        self.observation_space = agentgym.AnyText(100)
        self.action_space = agentgym.AnyText(100)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.turn = 0
        return "obs 0", {"summary": "turn 0"}

    def step(self, action):
        self.turn += 1
        return f"obs {self.turn}", 0.0, self.turn == 3, False, {"summary": f"turn {self.turn}"}


def test_parts_of_sees_through_wrappers_and_is_none_for_a_plain_env():
    env = gym.make("agentgym/CliffWalk-v0")  # TimeLimit, OrderEnforcing, PassiveEnvChecker around the ToolEnv
    obs, _ = env.reset(seed=0)
    assert parts_of(env) is env.unwrapped.observation_parts() and parts_of(env).render() == obs
    plain = PlainEnv()
    plain.reset(seed=0)
    assert parts_of(plain) is None


def test_summary_mode_on_an_env_without_parts_falls_back_to_the_text(tiny_model_path):
    policy = LLMPolicy.from_pretrained(tiny_model_path)
    config = RolloutConfig(context="summary", history=1, turn_template="{task}|{tools}|{history}|{summary}")

    class Say:
        def act(self, env, observation):
            return "hello"

    (episode,) = rollout(policy, [PlainEnv()], [{"seed": 0}], config, teacher=Say())
    prompts = [policy.decode(prompt_of(s)) for s in episode.samples]
    assert "\n|||turn 0\n" in prompts[0]  # no task, no tools, no history yet
    assert "\n||Action: hello\nResult: obs 2\n\n|turn 2\n" in prompts[2]


# ---------------------------------------------------------------------------------------------- TRL


def test_trl_tool_replies_are_the_observation_without_its_task_line():
    """Also when the env cuts a long observation (an ill-typed argument's error with the tool list, 353 characters,
    past a 300-character limit): the reply is the cut text from its second line on."""
    pytest.importorskip("trl")
    from agentgym.app.integrations.trl import AgentGymEnvironment

    class TinyCounter(Counter):
        max_observation_length = 300

    environment = AgentGymEnvironment(TinyCounter(history=1))
    assert environment.reset(prompt=[{"role": "user", "content": "hi"}]).startswith(Counter.task)
    env = environment.env
    head = f"Task: {Counter.task}\n"
    replies = [environment._call("add", {"amount": n}) for n in (1, 2, "lots")]
    observations = [env.observation_parts().render(300)]
    assert replies[0] == "Result: total is 1\nState: total 1 · steps 1"
    assert replies[1] == "Action: <tool_call>" + replies[1].split("<tool_call>", 1)[1]
    assert observations[0].endswith(" …[83 chars cut]") and len(observations[0]) <= 300
    assert replies[2] == observations[0][len(head) :]
