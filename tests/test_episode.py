"""agentgym.episode.EpisodeRecord: the one episode record every episodes.jsonl holds, and run directories written
before it (tests/data/old_runs: an eval and a GRPO run of that time) still load, converted on read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.app.audit import audit_run, read_logged_episodes
from agentgym.app.evaluation import evaluate_agent
from agentgym.app.reports import load_episodes, load_summary
from agentgym.episode import EpisodeRecord
from agentgym.trainers.rollout import Episode

OLD_RUNS = Path(__file__).parent / "data" / "old_runs"


def test_step_keeps_what_the_env_reported_per_turn():
    env = gym.make("agentgym/WeatherRun-v0")
    obs, _ = env.reset(seed=0)
    record = EpisodeRecord(reset={"seed": 0}, observations=[obs])
    oracle = env.unwrapped.oracle()
    while True:
        action, _ = oracle.predict(obs)
        obs, reward, terminated, truncated, info = env.step(action)
        record.step(action, obs, reward, info)
        if terminated or truncated:
            break
    assert record.turns == 3 and len(record.observations) == 4 and record.success
    assert record.reward_components[-1] == info["reward_components"] != {}
    assert record.total_reward == pytest.approx(sum(sum(c.values()) for c in record.reward_components))
    assert EpisodeRecord.from_line(record.to_line()) == record  # a line reads back as the same record
    with pytest.raises(ValueError, match="reward nan at turn 4"):
        record.step("again", "obs", float("nan"), {})
    assert record.turns == 3  # a refused step leaves the record as it was


def test_a_rollout_episode_is_a_record_plus_its_samples():
    episode = Episode({"seed": 3}, observations=["task", "done"], actions=["a"], rewards=[1.0], canonical=[True])
    record = episode.record(training_step=2, training_reward=0.5)
    assert isinstance(episode, EpisodeRecord) and type(record) is EpisodeRecord
    assert "samples" not in json.loads(record.to_line()) and "env_seconds" not in json.loads(record.to_line())
    assert (record.training_step, record.training_reward, record.observations) == (2, 0.5, ["task", "done"])


def test_an_old_eval_directory_loads_resumes_and_summarises_as_before(tmp_path):
    old = OLD_RUNS / "eval"
    records = load_episodes(old / "episodes.jsonl")
    assert [r.index for r in records] == [0, 1, 2] and all(r.success and r.attempt == 1 for r in records)
    assert all(len(r.reward_components) == r.turns == 3 for r in records)  # filled in: one {} a turn
    run = tmp_path / "run"
    shutil.copytree(old, run)
    evaluate_agent("agentgym/WeatherRun-v0", "oracle", episodes=5, out_dir=run, resume=True)
    lines = (run / "episodes.jsonl").read_text().splitlines()
    assert lines[:3] == (old / "episodes.jsonl").read_text().splitlines()  # the old lines are kept as they were
    assert [json.loads(line)["index"] for line in lines[3:]] == [3, 4]  # only the missing episodes were played
    assert load_summary(run / "summary.json").success_rate == 1.0


def test_an_old_training_log_is_converted_and_audits_as_before(tmp_path):
    old = OLD_RUNS / "grpo"
    lines = [json.loads(line) for line in (old / "episodes.jsonl").read_text().splitlines()]
    records = read_logged_episodes(old / "episodes.jsonl")
    for line, record in zip(lines, records, strict=True):
        assert (record.training_step, record.training_reward) == (line["step"], line["reward"])
        assert record.total_reward == line["env_reward"] and record.turns == line["turns"]
        assert record.completion_tokens == line["response_tokens"] and record.observations == []
    empty = {"step": 3, "reset": {"seed": 1}, "reward": -0.5, "env_reward": 0.0, "success": False, "turns": 0}
    record = EpisodeRecord.from_line(json.dumps(empty | {"response_tokens": 0, "actions": []}))  # cut before acting
    assert (record.training_step, record.training_reward, record.rewards) == (3, -0.5, [])
    report = audit_run(old, quantile=0.0, max_replays=0)
    assert report.episodes == len(lines) and report.rule_fail_rate == 1.0  # no episode of that run succeeded
    assert [e["training_step"] for e in report.flagged] == [1] * len(lines)
