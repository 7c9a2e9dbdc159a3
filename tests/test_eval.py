"""Benchmark runs: `agentgym eval` / `evaluate_agent`, reproducible summaries, resume, reports, and clear errors."""

import itertools
import json
import math
import platform
import socket
from datetime import UTC, datetime, timedelta

import gymnasium as gym
import pytest

from agentgym.app.cli import main
from agentgym.app.evaluation.reports import load_episodes, load_summary
from agentgym.app.evaluation.runner import evaluate_agent
from agentgym.core.summary import mean_interval, wilson_interval
from agentgym.envs.weather.dataset import SNAPSHOT_V0_SHA256

WEATHER = "agentgym/WeatherRun-v0"


def eval_cli(capsys, out, *argv):
    assert main(["eval", "--env", WEATHER, "--split", "test", "--out", str(out), "--no-progress", "--json", *argv]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed) == json.loads((out / "summary.json").read_text())
    return json.loads(printed)


def indices(run_dir):
    return sorted(r.index for r in load_episodes(run_dir / "episodes.jsonl"))


def without_timing(text):
    """The summary text before its timing block (the last field)."""
    head, sep, _ = text.partition('"timing"')
    assert sep, "summary.json has no timing block"
    return head


def test_wilson_and_mean_intervals():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.7225, abs=1e-4)
    lo, hi = wilson_interval(5, 10)
    assert (lo, hi) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(100, 100)[0] == pytest.approx(0.9630, abs=1e-4)
    assert mean_interval([1.0]) == (1.0, 1.0)
    assert mean_interval([0.0, 2.0]) == pytest.approx((1 - 1.96, 1 + 1.96), abs=1e-3)


def test_oracle_on_the_weatherrun_test_split(tmp_path, capsys):
    summary = eval_cli(capsys, tmp_path, "--agent", "oracle")
    assert summary["episodes"] == 100 and summary["success_rate"] == 1.0 and summary["mean_return"] == 1.5
    assert summary["success_ci95"][0] == pytest.approx(0.963, abs=1e-3) and summary["success_ci95"][1] == 1.0
    assert summary["tool_call_validity"] == 1.0 and summary["format_compliance"] == 1.0 and summary["mean_turns"] == 3
    assert summary["failures"] == 0 and summary["std_return"] == 0 and summary["return_ci95"] == [1.5, 1.5]
    assert (summary["env_id"], summary["env_version"], summary["split"]) == (WEATHER, 0, "test")
    assert summary["data_checksum"] == SNAPSHOT_V0_SHA256 and summary["package_version"] == "0.1.0"
    assert summary["agent"] == "oracle" and summary["seed"] == 0
    assert summary["timing"]["episodes_run"] == 100 and summary["timing"]["concurrency"] == 1
    records = load_episodes(tmp_path / "episodes.jsonl")
    assert [r.index for r in records] == list(range(100))
    first = records[0]
    assert first.reset == {"seed": 0, "options": {"task_index": 0}} and len(first.observations) == 4
    assert first.actions[0].startswith('<tool_call>{"name": "get_weather"') and first.rewards[-1] == 1.5
    assert json.loads((tmp_path / "run.json").read_text())["all_tasks"] is True


@pytest.mark.parametrize("agent", ["oracle", "random"])
def test_same_agent_and_seed_give_the_same_summary_apart_from_timing(agent, tmp_path, capsys):
    texts = []
    for run in ("a", "b"):
        eval_cli(capsys, tmp_path / run, "--agent", agent, "--episodes", "30", "--seed", "7")
        texts.append((tmp_path / run / "summary.json").read_text())
    assert without_timing(texts[0]) == without_timing(texts[1])
    summary = json.loads(texts[0])
    assert list(summary)[-1] == "timing" and summary["episodes"] == 30
    if agent == "random":  # a seeded random agent: not a constant result, so the equality above means something
        assert 0 < summary["success_rate"] < 1 and len(set(summary["returns"])) > 1
        assert summary["format_compliance"] == 1.0  # it picks from the menu of canonical calls


def test_hf_agent_is_reproducible_and_counts_tokens(tiny_model_path, tmp_path):
    spec = f"hf:{tiny_model_path}"
    sampling = {"max_new_tokens": 8, "max_turns": 2}
    runs = [
        evaluate_agent(WEATHER, spec, split="test", episodes=3, seed=5, sampling=sampling, out_dir=tmp_path / run)
        for run in ("a", "b")
    ]
    texts = [(tmp_path / run / "summary.json").read_text() for run in ("a", "b")]
    assert without_timing(texts[0]) == without_timing(texts[1])
    summary = runs[0]
    assert summary.agent_settings["temperature"] == 0.0 and summary.agent_settings["max_new_tokens"] == 8
    assert summary.completed == 3 and summary.mean_turns <= 2
    assert 0 < summary.completion_tokens <= 3 * 2 * 8 and summary.prompt_tokens > 3 * 100  # WeatherRun's prompt
    record = load_episodes(tmp_path / "a" / "episodes.jsonl")[0]
    assert record.turns == len(record.actions) == len(record.observations) - 1 >= 1


class Crash(RuntimeError):
    pass


def test_a_killed_run_resumes_without_redoing_finished_episodes(tmp_path):
    def crash_after_three(record):
        if record.index == 2:
            raise Crash("killed")

    with pytest.raises(Crash):
        evaluate_agent(WEATHER, "oracle", split="test", episodes=8, out_dir=tmp_path, callback=crash_after_three)
    assert indices(tmp_path) == [0, 1, 2] and not (tmp_path / "summary.json").exists()
    played = []
    summary = evaluate_agent(
        WEATHER, "oracle", split="test", episodes=8, out_dir=tmp_path, resume=True, callback=played.append
    )
    assert [r.index for r in played] == [3, 4, 5, 6, 7]
    assert indices(tmp_path) == list(range(8))
    assert summary.episodes == 8 and summary.success_rate == 1.0 and summary.timing.episodes_run == 5


def test_a_killed_concurrent_local_run_stops_and_reports_nothing_after(tmp_path):
    # CodeSandbox plays concurrency episodes at once in worker threads; a raising callback stops them all
    reported = []

    def crash_at_the_second(record):
        reported.append(record.index)
        if len(reported) == 2:
            raise Crash("killed")

    with pytest.raises(Crash):
        evaluate_agent(
            "agentgym/CodeSandbox-v1",
            "oracle",
            split="test",
            episodes=8,
            concurrency=2,
            out_dir=tmp_path,
            callback=crash_at_the_second,
        )
    assert len(reported) == 2 and indices(tmp_path) == sorted(reported)
    assert not (tmp_path / "summary.json").exists()


def test_resume_grows_a_run_and_drops_a_torn_line(tmp_path, capsys):
    eval_cli(capsys, tmp_path, "--agent", "random", "--episodes", "4", "--seed", "1")
    full = eval_cli(capsys, tmp_path / "straight", "--agent", "random", "--episodes", "6", "--seed", "1")
    with (tmp_path / "episodes.jsonl").open("a") as f:
        f.write('{"index": 4, "reset": {"se')  # the process died while writing episode 4
    resumed = eval_cli(capsys, tmp_path, "--agent", "random", "--episodes", "6", "--seed", "1", "--resume")
    assert resumed["timing"]["episodes_run"] == 2 and indices(tmp_path) == list(range(6))
    # random actions are seeded per episode, so a resumed run equals one played straight through
    assert {k: v for k, v in resumed.items() if k != "timing"} == {k: v for k, v in full.items() if k != "timing"}


def test_resume_refuses_another_run_and_a_full_dir_needs_resume(tmp_path, capsys):
    eval_cli(capsys, tmp_path, "--agent", "oracle", "--episodes", "2")
    argv = ["eval", "--env", WEATHER, "--split", "test", "--agent", "oracle", "--out", str(tmp_path)]
    assert main([*argv, "--episodes", "2"]) == 2
    assert "already holds episodes; resume that run (--resume)" in capsys.readouterr().err
    assert main([*argv, "--episodes", "2", "--seed", "3", "--resume"]) == 2
    assert "holds a different run (seed is 0 there, 3 here)" in capsys.readouterr().err


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["eval", "--agent", "telepathy"], "unknown agent spec 'telepathy'"),
        (["eval", "--agent", "hf:/does/not/exist"], "no model directory at /does/not/exist"),
        (["eval", "--agent", "openai:m@http://127.0.0.1:{port}/v1"], "cannot reach the endpoint at http://127.0.0.1"),
        (["eval", "--agent", "openai:gpt-4o"], "openai:MODEL@BASE_URL"),
        (["eval", "--agent", "openai:m@localhost:8000"], "must start with http:// or https://"),
        (["eval", "--agent", "oracle", "--sampling", '{"temperature": 1}'], "sampling settings apply to hf:"),
        (["eval", "--agent", "hf:/tmp", "--sampling", '{"tempreature": 1}'], "invalid setting: tempreature"),
        (["eval", "--agent", "oracle", "--resume"], "resume needs out_dir"),
        (["eval", "--agent", "oracle", "--episodes", "0"], "episodes must be at least 1"),
        (["eval", "--agent", "openai:m@http://x/v1", "--api-key-env", "AGENTGYM_NO_SUCH_VAR"], "is not set"),
        (["serve", "model", "--model", "/does/not/exist"], "no model directory at /does/not/exist"),
        (["serve", "model"], "needs --model PATH_OR_HUB_ID or --scripted oracle"),
        (["report", "/does/not/exist"], "no summary.json in /does/not/exist"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(argv, message, capsys):
    argv = [a.replace("{port}", str(free_port())) for a in argv]
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentgym: ") and message in lines[0], captured.err
    assert "Traceback" not in captured.err and captured.out == ""


def test_report_compares_runs_in_a_table_and_a_plot(tmp_path, capsys):
    for agent in ("oracle", "random"):
        eval_cli(capsys, tmp_path / agent, "--agent", agent, "--episodes", "20")
    plot = tmp_path / "cmp.png"
    assert main(["report", str(tmp_path / "oracle"), str(tmp_path / "random"), "--plot", str(plot)]) == 0
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert lines[0].startswith("| run | agent | env | split | episodes | success [95% CI] | reward")
    assert len(lines) == 4 and lines[2].startswith("| oracle | `oracle` | agentgym/WeatherRun-v0 | test | 20 |")
    assert "100.0% [83.9%, 100.0%]" in lines[2] and "1.500 ± 0.000" in lines[2] and lines[3].startswith("| random |")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and str(plot) in captured.err


# ---------------------------------------------------------------------- provenance, breakdowns, pass@k (issue 17)

SQL = "agentgym/SQLLookup-v0"


def test_summary_and_report_break_success_down_by_tag(tmp_path, capsys):
    sql = evaluate_agent(SQL, "oracle", split="test", out_dir=tmp_path / "sql")
    code = evaluate_agent("agentgym/CodeSandbox-v0", "oracle", split="test", out_dir=tmp_path / "code")
    kinds = sql.by_tag["difficulty"]
    assert {k: v.episodes for k, v in kinds.items()} == {
        "aggregate": 14, "date": 14, "join": 16, "nested": 12, "single_table": 18
    }  # fmt: skip
    for v in kinds.values():
        assert v.success_rate == 1.0 and v.success_ci95 == wilson_interval(v.episodes, v.episodes)
    assert {k: v.episodes for k, v in code.by_tag["difficulty"].items()} == {"easy": 9, "hard": 1, "medium": 8}
    assert sum(v.episodes for v in code.by_tag["topic"].values()) == code.episodes == 18
    assert sql.pass_at_k is None and code.pass_at_k is None  # every task played once: no pass@k
    stored = json.loads((tmp_path / "sql" / "summary.json").read_text())
    assert "pass_at_k" not in stored
    assert stored["by_tag"]["difficulty"]["join"]["successes"] == 16 and list(stored)[-1] == "timing"
    assert main(["report", str(tmp_path / "sql"), str(tmp_path / "code"), "--plot", str(tmp_path / "r.png")]) == 0
    out = capsys.readouterr().out
    assert "success by difficulty:" in out and "| run | aggregate | date | easy | hard | join | medium |" in out
    assert "| sql | 100.0% [78.5%, 100.0%] n=14 | 100.0% [78.5%, 100.0%] n=14 | - | - |" in out
    assert "success by topic:" in out


def test_pass_at_k_over_tasks_played_several_times(tmp_path):
    summary = evaluate_agent(SQL, "random", split="test", episodes=150, seed=3, out_dir=tmp_path)
    # which task each seed drew, found independently of the summary: reset the env the way the run did
    env = gym.make(SQL, split="test")
    drawn = []
    for record in load_episodes(tmp_path / "episodes.jsonl"):
        env.reset(seed=record.reset["seed"])
        drawn.append((env.unwrapped.task.id, record.success))
    by_task = {}
    for task, success in drawn:
        by_task.setdefault(task, []).append(success)
    p = summary.pass_at_k
    assert (p.min_samples, p.max_samples) == (min(map(len, by_task.values())), max(map(len, by_task.values())))
    twice = [wins for wins in by_task.values() if len(wins) >= 2]
    assert p.tasks["1"] == len(by_task) and p.tasks["2"] == len(twice) > 10
    assert p.values["1"] == pytest.approx(sum(sum(w) / len(w) for w in by_task.values()) / len(by_task))
    # pass@2 by its definition: the share of pairs of a task's samples holding a success
    pairs = [sum(a or b for a, b in itertools.combinations(w, 2)) / math.comb(len(w), 2) for w in twice]
    assert p.values["2"] == pytest.approx(sum(pairs) / len(pairs))
    assert p.values["1"] < p.values["2"] < p.values["5"] < 1  # a random agent: more tries, more tasks solved


def test_provenance_is_in_the_timing_block_and_the_rest_stays_byte_identical(tmp_path, capsys):
    texts = []
    for run in ("a", "b"):
        evaluate_agent(SQL, "random", split="test", episodes=40, seed=2, out_dir=tmp_path / run)
        texts.append((tmp_path / run / "summary.json").read_text())
    assert without_timing(texts[0]) == without_timing(texts[1]) and '"pass_at_k"' in without_timing(texts[0])
    summary = json.loads(texts[0])
    timing = summary["timing"]
    started, finished = (datetime.fromisoformat(timing[k]) for k in ("started_at", "finished_at"))
    assert started.utcoffset() == finished.utcoffset() == timedelta(0) and started <= finished
    assert abs((datetime.now(UTC) - finished).total_seconds()) < 120
    facts = timing["provenance"]
    assert facts["python"].endswith(platform.python_version()) and facts["packages"]["gymnasium"] == gym.__version__
    assert facts["cpu_count"] >= 1 and facts["platform"] == platform.platform()
    assert facts["git_commit"] is None or len(facts["git_commit"]) == 40
    assert not set(facts) & set(summary) and list(summary)[-1] == "timing"
    # an untagged env's summary has exactly the fields it had before breakdowns and pass@k existed
    weather = eval_cli(capsys, tmp_path / "w", "--agent", "oracle", "--episodes", "3")
    assert list(weather) == [
        "env_id", "env_version", "split", "env_kwargs", "data_checksum", "package_version", "agent",
        "agent_settings", "seed", "episodes", "completed", "failures", "failure_reasons", "success_rate",
        "success_ci95", "mean_return", "std_return", "return_ci95", "tool_call_validity", "format_compliance",
        "mean_turns", "truncation_rate", "prompt_tokens", "completion_tokens", "total_tokens", "returns", "timing",
    ]  # fmt: skip
    before = dict(weather, timing={k: weather["timing"][k] for k in ("wall_s", "episodes_run", "episodes_per_s")})
    before["timing"]["concurrency"] = 1
    (tmp_path / "w" / "summary.json").write_text(json.dumps(before))  # a summary written before provenance existed
    loaded = load_summary(tmp_path / "w")
    assert loaded.timing.provenance is None and loaded.timing.started_at is None and loaded.episodes == 3


def test_one_rule_for_which_episodes_an_evaluation_plays():
    from types import SimpleNamespace

    from agentgym.app.evaluation.runner import evaluate
    from agentgym.core.registration import DEFAULT_EPISODES, eval_kwargs, eval_resets
    from agentgym.trainers.llm.config import EvalConfig
    from agentgym.trainers.llm.rollout import evaluate_split

    # the in-memory loop and the benchmark runner play the same episodes: every test task once, or 100 seeds
    for env_id, split, n in (
        ("agentgym/WeatherRun-v0", "test", 100),
        ("agentgym/CliffWalk-v0", None, DEFAULT_EPISODES),
    ):
        env = gym.make(env_id, **eval_kwargs(env_id, split))
        memory = evaluate(env.unwrapped.oracle(), env, seed=5)
        runner = evaluate_agent(env_id, "oracle", split=split, seed=5)
        assert memory.episodes == runner.episodes == n and memory.returns == runner.returns
    assert eval_resets(3, None, 7) == [{"seed": 7 + i, "options": {"task_index": i}} for i in range(3)]
    assert eval_resets(3, 2, 7) == [{"seed": 7}, {"seed": 8}]  # a count draws tasks from the seeds
    with pytest.raises(ValueError, match="at least 1"):
        eval_resets(None, 0)
    # one split rule for trainers and applications: an env without splits has only its test configuration
    assert eval_kwargs("agentgym/CliffWalk-v0", "test") == {}
    config = EvalConfig(env_id="agentgym/CliffWalk-v0", eval_split="train")
    for play in (
        lambda: evaluate_agent("agentgym/CliffWalk-v0", "oracle", split="train"),
        lambda: evaluate_split(SimpleNamespace(), config),
    ):  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="has no splits"):
            play()
