"""agentgym.core.wrappers.Retry: same task again after a failure, feedback without the answer, the discounted reward,
check_env on a wrapped env, and pass@1 / success-within-k in evaluation."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import agentgym  # noqa: F401  (registers the envs)
from agentgym.app.cli import main
from agentgym.app.evaluation.runner import evaluate_agent, retry_stats
from agentgym.core.episode import EpisodeRecord
from agentgym.core.tools import ToolCall
from agentgym.core.wrappers import RETRY_HEADER, Retry
from agentgym.envs.weather.dataset import is_suitable


def call(tool: str, **arguments) -> str:
    return ToolCall(tool, arguments).to_text()


def weather(attempts: int = 3, discount: float = 0.5, **kwargs) -> Retry:
    return Retry(gym.make("agentgym/WeatherRun-v0", **kwargs), attempts=attempts, discount=discount)


def truth(env: gym.Env) -> bool:
    base = env.unwrapped
    w = base.backend.weather(base.city, base.date)
    a = base.backend.air_quality(base.city, base.date)
    return is_suitable(float(w["temperature_c"]), int(a["aqi"]))


def lookups(env: gym.Env) -> list[str]:
    city = env.unwrapped.city
    return [call("get_weather", city=city), call("get_air_quality", city=city)]


def test_reward_is_the_final_attempts_discounted_by_hand():
    env = weather(attempts=3, discount=0.8)
    env.reset(seed=4)
    task = (env.unwrapped.city, env.unwrapped.date)
    right = truth(env)
    paid = []
    for attempt in (1, 2):  # two wrong answers after both lookups (the env pays 0 for them)
        for action in lookups(env):
            paid.append(env.step(action)[1])
        obs, reward, terminated, truncated, info = env.step(call("answer", suitable=not right))
        paid.append(reward)
        assert not terminated and not truncated and info["attempt"] == attempt + 1 and not info["success"]
        assert obs.startswith(RETRY_HEADER.format(failed=attempt, attempts=3))
        assert (env.unwrapped.city, env.unwrapped.date) == task  # the same task again
    env.step(lookups(env)[0])  # weather only, then a correct answer: correct 1.0, no both_tools
    obs, reward, terminated, _, info = env.step(call("answer", suitable=right))
    assert terminated and info["success"] and info["attempt"] == 3
    assert paid == [0.0] * 6
    assert reward == pytest.approx(1.0 * 0.8**2)
    assert info["reward_components"] == pytest.approx({"correct": 0.64})
    assert info["env_reward"] == pytest.approx(1.0)
    # a step after the end pays nothing
    assert env.step(call("answer", suitable=right))[1:3] == (0.0, True)


def test_first_try_success_keeps_its_reward_and_last_failure_is_paid_discounted():
    env = weather(attempts=2)
    env.reset(seed=1)
    for action in lookups(env):
        env.step(action)
    _, reward, terminated, _, info = env.step(call("answer", suitable=truth(env)))
    assert terminated and reward == pytest.approx(1.5) and info["attempt"] == 1
    env.reset(seed=1)
    env.step(call("answer", suitable=True))  # no tools: -0.5, retried
    _, reward, terminated, _, info = env.step(call("answer", suitable=True))  # again: the last attempt
    assert terminated and not info["success"] and reward == pytest.approx(-0.5 * 0.5)


def test_discount_applies_to_every_component_including_process():
    env = weather(attempts=2, process_reward=0.4)
    env.reset(seed=2)
    env.step(call("answer", suitable=not truth(env)))  # attempt 1 fails with no tools: -0.5 held back, not paid
    for action in lookups(env):
        assert env.step(action)[1] == 0.0  # held back until the attempt ends
    _, reward, _, _, info = env.step(call("answer", suitable=truth(env)))
    assert info["reward_components"] == pytest.approx({"process": 0.2, "correct": 0.5, "both_tools": 0.25})
    assert reward == pytest.approx(0.95)


@pytest.mark.parametrize("seed", range(12))
def test_feedback_never_gives_the_answer(seed):
    env = weather(attempts=2)
    env.reset(seed=seed)
    right = truth(env)
    plays = [lookups(env) + [call("answer", suitable=not right)], [call("answer", suitable=right)], lookups(env)[:1]]
    for actions in plays:
        env.reset(seed=seed)
        for action in actions + [call("answer", suitable=not right)]:
            obs, _, terminated, _, info = env.step(action)
            if info["attempt"] == 2 or terminated:
                break
        header = obs.split("\n\n", 1)[0]
        assert header.startswith("Attempt 1 of 2 failed. Feedback: ")
        for leak in ("suitable", "true", "false", "correct answer", "good day", "not a good"):
            assert leak not in header.lower()


def test_feedback_falls_back_to_the_last_result_without_the_gold_rows():
    env = Retry(gym.make("agentgym/SQLLookup-v0"), attempts=2)
    for seed in range(8):
        env.reset(seed=seed)
        gold = env.unwrapped.gold_result().rows
        obs, *_ = env.step(call("answer", value="no such value"))
        header = obs.split("\n\n", 1)[0]
        assert "Feedback: Answer recorded" in header and "wrong (the correct result has" in header
        values = {str(v) for row in gold for v in row if len(str(v)) > 3}
        assert not any(v in header for v in values)


def test_reset_without_seed_replays_one_task_per_episode():
    env = weather(attempts=2, backend="random", synthetic_cities=True)
    env.reset(seed=7)
    seen = set()
    for _ in range(5):
        env.reset()
        first = env.unwrapped.city
        env.step(call("answer", suitable=True))  # no tools: fails, retried
        assert env.unwrapped.city == first
        seen.add(first)
    assert len(seen) > 1  # episodes still differ
    a, b = weather(backend="random", synthetic_cities=True), weather(backend="random", synthetic_cities=True)
    a.reset(seed=3), b.reset(seed=3)
    assert [a.reset()[0] for _ in range(3)] == [b.reset()[0] for _ in range(3)]  # deterministic under a seed


def test_check_env_passes_on_a_wrapped_env():
    check_env(weather(attempts=3), skip_render_check=True)
    check_env(Retry(gym.make("agentgym/SQLLookup-v0"), attempts=2), skip_render_check=True)


@pytest.mark.parametrize("bad", [{"attempts": 0}, {"attempts": 1.5}, {"discount": 0}, {"discount": 1.5}])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError):
        Retry(gym.make("agentgym/WeatherRun-v0"), **bad)


def test_the_record_keeps_the_attempt_from_info_not_from_the_text():
    env = weather(attempts=3)
    obs, _ = env.reset(seed=4)
    record = EpisodeRecord(reset={"seed": 4}, observations=[obs])
    wrong = call("answer", suitable=not truth(env))
    for action in [*lookups(env), wrong, *lookups(env), wrong, *lookups(env), call("answer", suitable=truth(env))]:
        obs, reward, *_, info = env.step(action)
        record.step(action, "the text says nothing of attempts", reward, info)
    assert record.attempt == 3 and record.success
    assert retry_stats([record], attempts=3).success_within == [0.0, 0.0, 1.0]


def test_an_eval_line_written_before_attempt_was_kept_is_converted():
    headers = [RETRY_HEADER.format(failed=a, attempts=3) + " Feedback: x" for a in (1, 2)]
    old = {"index": 0, "reset": {"seed": 0}, "observations": ["task", *headers], "actions": ["a", "b"]}
    old |= {"rewards": [0.0, 0.0], "canonical": [True, True], "valid": [True, True]}
    record = EpisodeRecord.from_line(json.dumps(old))
    assert record.attempt == 3 and record.reward_components == [{}, {}]
    assert EpisodeRecord.from_line(json.dumps(old | {"observations": ["task", "x", "y"]})).attempt == 1


def test_retry_stats_by_hand():
    def record(attempts: int, success: bool) -> EpisodeRecord:
        return EpisodeRecord(index=0, reset={"seed": 0}, attempt=attempts, success=success)

    stats = retry_stats([record(1, True), record(2, True), record(3, False), record(3, True)], attempts=3)
    assert stats.pass_at_1 == 0.25 and stats.success_within == [0.25, 0.5, 0.75]
    assert stats.mean_attempts == pytest.approx(9 / 4)


def test_eval_with_retry_reports_pass_at_1_and_within_k(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(
        ["eval", "--env", "WeatherRun-v0", "--split", "test", "--agent", "random", "--retry", "3", "--out", str(out)]
        + ["--no-progress"]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    stats = json.loads((out / "retry.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    assert stats["pass_at_1"] <= stats["success_within"][1] <= stats["success_within"][2]
    assert math.isclose(stats["success_within"][2], summary["success_rate"])
    assert f"pass@1 {stats['pass_at_1']:.1%}" in printed
    assert json.loads((out / "run.json").read_text())["agent_settings"]["retry"] == 3
    # a resume of the finished run plays nothing and trusts its records (rewards paid per attempt, not per turn)
    again = evaluate_agent(
        "agentgym/WeatherRun-v0", "random", split="test", out_dir=out, resume=True, retry=3, retry_discount=0.5
    )
    assert again.success_rate == summary["success_rate"]
    with pytest.raises(ValueError, match="different run"):
        evaluate_agent("agentgym/WeatherRun-v0", "random", split="test", out_dir=out, resume=True, retry=2)


def test_oracle_never_retries():
    summary = evaluate_agent("agentgym/WeatherRun-v0", "oracle", split="test", retry=3)
    assert summary.success_rate == 1.0 and summary.mean_return == pytest.approx(1.5)
