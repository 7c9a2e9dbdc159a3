"""agentgym data (agentgym.app.integrations.flywheel): episodes → SFT data, preference pairs and a report, from eval
runs and training logs, with filters, and bounded, explained handling of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the envs)
from agentgym.app.cli import main
from agentgym.app.evaluation.runner import evaluate_agent
from agentgym.app.integrations import flywheel
from agentgym.app.integrations.flywheel import DataConfig, build_data
from agentgym.core.tools import ToolCall
from agentgym.trainers.llm.preferences import read_pairs
from agentgym.trainers.llm.rollout import Episode
from agentgym.trainers.run.run_dir import EpisodeLog

ENV = "agentgym/WeatherRun-v0"
OLD_RUNS = Path(__file__).parent / "data" / "old_runs"
"""Run directories written before the one episode record (an eval, a GRPO run)."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    oracle = evaluate_agent(ENV, "oracle", split="test", out_dir=root / "oracle")
    rand = evaluate_agent(ENV, "random", split="test", out_dir=root / "random")
    return root, oracle, rand


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_sft_keeps_successes_and_pairs_rank_the_same_task(runs, tmp_path):
    root, oracle, rand = runs
    files = [root / "oracle" / "episodes.jsonl", root / "random" / "episodes.jsonl"]
    report = build_data(files, tmp_path / "data", DataConfig(dedupe=False))  # two seeds may draw one task
    sft = lines(tmp_path / "data" / "sft.jsonl")
    random_successes = round(rand.success_rate * 100)
    assert report.episodes == 200 and report.sft_episodes == len(sft) == 100 + random_successes
    assert report.dropped == {"not successful": 100 - random_successes}
    for example in sft:
        assert example["messages"][0]["role"] == "user" and example["messages"][-1]["role"] == "assistant"
        assert {t["function"]["name"] for t in example["tools"]} == {"get_weather", "get_air_quality", "answer"}
    pairs = lines(tmp_path / "data" / "pairs.jsonl")
    assert report.tasks == 100 and len(pairs) == report.pairs == 100 - report.pair_skips.get(
        "rewards tie (within min_margin)", 0
    )
    for pair in pairs:
        assert pair["chosen_reward"] > pair["rejected_reward"]
        assert pair["chosen"][0] == pair["rejected"][0]  # the same task's prompt
        assert pair["chosen"][-1]["role"] == "assistant"  # the verdict after the last action is left out
    assert len(read_pairs(tmp_path / "data" / "pairs.jsonl")) == len(pairs)  # what dpo / reward-model read
    assert "kept" in (tmp_path / "data" / "report.md").read_text()


def test_filters_and_dedupe(runs, tmp_path):
    root, _, _ = runs
    file = root / "oracle" / "episodes.jsonl"
    report = build_data([file, file], tmp_path / "a")  # the same episodes twice
    assert report.sft_episodes == 100 and report.dropped == {"duplicate": 100}
    assert report.pairs == 0 and report.pair_skips == {"rewards tie (within min_margin)": 100}
    assert build_data([file, file], tmp_path / "b", DataConfig(dedupe=False)).sft_examples == 200
    assert build_data([file], tmp_path / "c", DataConfig(min_reward=2.0)).dropped == {"reward below 2": 100}
    assert build_data([file], tmp_path / "d", DataConfig(max_turns=2)).dropped == {"more than 2 turns": 100}
    other = build_data([file], tmp_path / "e", DataConfig(env_id="agentgym/CliffWalk-v0"))
    assert other.episodes == 0 and other.dropped == {"another env": 100}


def test_summary_context_writes_one_example_per_turn_in_the_recipes_prompt(runs, tmp_path):
    root, _, _ = runs
    template = "{signatures}\n{summary}"
    config = DataConfig(context="summary", turn_template=template, dedupe=False)
    report = build_data([root / "oracle" / "episodes.jsonl"], tmp_path / "s", config)
    sft = lines(tmp_path / "s" / "sft.jsonl")
    assert report.sft_examples == len(sft) == 3 * 100  # weather, air quality, answer
    first = sft[0]["messages"]
    assert len(first) == 2 and first[0]["content"].startswith("get_weather(city), get_air_quality(city), answer(")
    assert first[0]["content"].endswith("· temp ? · AQI ? · decision pending")
    # the summary is the one the env reported, kept in the record: nothing is read back out of the observation text
    records = lines(root / "oracle" / "episodes.jsonl")
    assert all(len(r["summaries"]) == len(r["observations"]) and all(r["summaries"]) for r in records)
    for r in records:
        r["observations"] = [o.replace("State:", "Status:") for o in r["observations"]]
    (tmp_path / "edited").mkdir()
    (tmp_path / "edited" / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "edited" / "run.json").write_text((root / "oracle" / "run.json").read_text())
    build_data([tmp_path / "edited" / "episodes.jsonl"], tmp_path / "e", config)
    assert lines(tmp_path / "e" / "sft.jsonl") == sft
    with pytest.raises(ValueError, match="turn_template"):
        build_data([root / "oracle" / "episodes.jsonl"], tmp_path / "t", DataConfig(turn_template="{task}"))


def training_run(tmp_path):
    """A training run directory as GRPO writes it: config.json and its episode log (EpisodeLog)."""
    kwargs = {"backend": "random", "synthetic_cities": True}
    (tmp_path / "config.json").write_text(
        json.dumps({"algorithm": "grpo", "config": {"env_id": ENV, "train_split": "train", "env_kwargs": kwargs}})
    )
    env = gym.make(ENV, split="train", **kwargs)
    episodes = []
    for seed in range(6):
        obs, info = env.reset(seed=seed % 3)  # three tasks, each played twice (a GRPO group of 2)
        episode = Episode({"seed": seed % 3})
        episode.start(obs, info)
        actions = [ToolCall("get_weather", {"city": env.unwrapped.city}).to_text()]
        actions.append(ToolCall("answer", {"suitable": seed < 3}).to_text())
        for action in actions:
            obs, reward, terminated, _, info = env.step(action)
            episode.step(action, obs, reward, info)
            episode.terminated = terminated
        episodes.append(episode)
    log = EpisodeLog(tmp_path / "episodes.jsonl")
    log.record(0, episodes, [e.rewards for e in episodes])
    log.append(log.take())
    return episodes


def test_training_logs_are_read_with_their_observations(tmp_path):
    episodes = training_run(tmp_path)
    report = build_data([tmp_path / "episodes.jsonl"], tmp_path / "out")
    assert report.inputs[str(tmp_path / "episodes.jsonl")]["kind"] == "training"
    assert report.episodes == 6 and report.sft_episodes == sum(e.success for e in episodes) > 0
    sft = lines(tmp_path / "out" / "sft.jsonl")
    firsts = {e.observations[0] for e in episodes if e.success}
    assert {ex["messages"][0]["content"] for ex in sft} == firsts  # the logged observations, as played
    assert report.pairs == 3  # each task: the right answer against the wrong one


def test_a_training_log_written_before_observations_were_kept_is_dropped_not_replayed(tmp_path):
    report = build_data([OLD_RUNS / "grpo" / "episodes.jsonl"], tmp_path / "out")
    assert report.bad_lines == 0 and report.episodes == 0
    assert report.dropped == {"no observations (a training log written before they were kept)": 4}


BAD_LINES = [
    b"not json",
    b"[1, 2]",
    b'{"index": 0, "reset": {"seed": 0}, "actions": ["a"], "observations": ["x"], "rewards": [0.0]}',
    b'{"index": -1, "reset": {}}',
    b"\xff\xfe",
    b'{"step": 0, "reward": "lots"}',
]


def test_bad_lines_are_skipped_with_one_line_reasons(runs, tmp_path, monkeypatch):
    root, _, _ = runs
    good = (root / "oracle" / "episodes.jsonl").read_bytes().splitlines()[:3]
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_bytes((root / "oracle" / "run.json").read_bytes())
    limit = max(map(len, good)) + 10
    long = b'{"x": "' + b"x" * limit + b'"}'
    (run / "episodes.jsonl").write_bytes(b"\n".join([good[0], *BAD_LINES, long, *good[1:]]) + b"\n")
    monkeypatch.setattr(flywheel, "MAX_LINE_BYTES", limit)
    report = build_data([run / "episodes.jsonl"], tmp_path / "out")
    assert report.episodes == 3 and report.sft_episodes == 3  # the good lines around the bad ones are used
    assert report.bad_lines == len(BAD_LINES) + 1
    assert all("\n" not in e and str(run / "episodes.jsonl") in e for e in report.errors)
    reasons = " | ".join(report.errors)
    for part in (
        "not JSON",
        "expected a JSON object",
        "observations",
        "not UTF-8",
        f"longer than {limit:,} bytes",
        "not an episode",
    ):
        assert part in reasons


def test_line_count_is_bounded(runs, tmp_path, monkeypatch):
    root, _, _ = runs
    monkeypatch.setattr(flywheel, "MAX_LINES", 5)
    report = build_data([root / "oracle" / "episodes.jsonl"], tmp_path / "out")
    assert report.episodes == 5 and report.bad_lines == 1 and "more than 5 lines" in report.errors[0]


def test_cli(runs, tmp_path, capsys):
    root, _, _ = runs
    assert main(["data", str(root / "random" / "episodes.jsonl"), "--out", str(tmp_path / "o"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 100
    assert main(["data", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")]) == 2
    assert "no episodes file" in capsys.readouterr().err
    bare = tmp_path / "bare.jsonl"
    bare.write_bytes((root / "oracle" / "episodes.jsonl").read_bytes())
    assert main(["data", str(bare), "--out", str(tmp_path / "p")]) == 2  # SFT needs the env for its tools
    assert "name its env with --env" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()
    assert main(["data", str(bare), "--out", str(tmp_path / "q"), "--env", "WeatherRun-v0"]) == 0
    assert len(lines(tmp_path / "q" / "sft.jsonl")) == 100
