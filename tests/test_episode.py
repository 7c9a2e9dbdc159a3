"""agentgym.core.episode.EpisodeRecord: the one episode record every episodes.jsonl holds, and run directories written
before it (tests/data/old_runs: an eval and a GRPO run of that time) still load, converted on read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.app.evaluation.audit import audit_run, read_logged_episodes
from agentgym.app.evaluation.reports import load_episodes, load_summary
from agentgym.app.evaluation.runner import evaluate_agent
from agentgym.core.episode import EpisodeRecord
from agentgym.trainers.llm.rollout import Episode

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


def test_one_writer_and_one_reader_with_the_torn_rule_and_one_set_of_rates(tmp_path):
    """append_episodes/read_episodes own episodes.jsonl: a torn last line is skipped or cut; a bad line is named or
    yielded; the trainers' and the reports' rates come from outcome_rates."""
    from agentgym.core.episode import append_episodes, outcome_rates, read_episodes
    from agentgym.core.summary import RunConfig, summarize
    from agentgym.trainers.llm.rollout import episode_metrics

    played = [
        EpisodeRecord(index=i, actions=["a"] * (i + 1), rewards=[1.0] * (i + 1), reward_components=[{}] * (i + 1),
                      canonical=[True] * (i + 1), valid=[i != 1] * (i + 1), observations=["o"] * (i + 2),
                      success=i == 0, truncation="time_limit" if i == 2 else None)
        for i in range(3)
    ]  # fmt: skip
    path = tmp_path / "episodes.jsonl"
    append_episodes(path, played)
    with path.open("ab") as f:
        f.write(played[0].to_line().encode()[:40])  # a writer killed mid-line
    assert [r for _, _, r in read_episodes(path)] == played and path.read_bytes().count(b"\n") == 3
    assert [r for _, _, r in read_episodes(path, torn="cut")] == played and path.read_bytes().endswith(b"}\n")
    append_episodes(path, played[:1])  # appends after whole records
    assert len(list(read_episodes(path))) == 4
    with path.open("ab") as f:
        f.write(b"not json\n")
    with pytest.raises(ValueError, match=r"episodes.jsonl:5: not an episode record \(not JSON"):
        list(read_episodes(path))
    assert isinstance(list(read_episodes(path, bad="yield"))[-1][2], str)
    rates = outcome_rates(played)
    assert rates == {"success": 1 / 3, "tool_call_validity": 4 / 6, "format_compliance": 1.0,
                     "truncation_rate": 1 / 3, "turns": 2.0}  # fmt: skip
    config = RunConfig(env_id="x", env_kwargs={}, split=None, agent="a", agent_settings={}, seed=0, episodes=3,
                       all_tasks=False)  # fmt: skip
    summary = summarize(played, config, env_version=0, data_checksum=None, package_version="0")
    assert (summary.success_rate, summary.tool_call_validity, summary.mean_turns) == (1 / 3, 4 / 6, 2.0)
    metrics = episode_metrics([Episode(**r.model_dump(exclude={"reset"})) for r in played])
    assert {k: metrics[k] for k in rates} == rates
