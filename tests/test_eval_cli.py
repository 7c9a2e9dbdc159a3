"""`agentgym eval` as a benchmarker runs it: exit status on failed episodes, a short table, suites, CliffWalk's
defaults, and resuming a finished run. Endpoints are real HTTP servers on 127.0.0.1 (`agentgym serve model`'s)."""

import importlib.util
import json
import sys
import threading
from pathlib import Path

import pytest

from agentgym.app.cli import main
from agentgym.app.evaluation.runner import default_suite
from agentgym.app.serving.model_server import ModelServer, ScriptedResponder
from agentgym.core.registration import DEFAULT_EPISODES, ENV_IDS

WEATHER = "agentgym/WeatherRun-v0"
ROOT = Path(__file__).resolve().parents[1]


def run_cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


class DyingResponder(ScriptedResponder):
    """WeatherRun's oracle that answers ``alive`` completions, then fails every request (a server whose GPU
    fell over: HTTP 500) until ``revive()``."""

    def __init__(self, alive: int) -> None:
        super().__init__(WEATHER, split="test")
        self.alive, self.answered, self.lock = alive, 0, threading.Lock()

    def revive(self) -> None:
        self.alive = 10**9

    def complete(self, request):
        with self.lock:
            if self.answered >= self.alive:
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
            self.answered += 1
        return super().complete(request)


def endpoint_eval(url, out, *more):
    argv = ["eval", "--env", WEATHER, "--split", "test", "--agent", f"openai:oracle@{url}", "--episodes", "5"]
    return [*argv, "--concurrency", "1", "--sampling", '{"max_retries": 0}', "--out", str(out), "--no-progress", *more]


# ------------------------------------------------------------------------------------------ 1. exit status


def test_episodes_failed_by_a_dying_endpoint_exit_1_with_a_line_saying_so(tmp_path, capsys):
    responder = DyingResponder(alive=6)  # 3 calls an episode: episodes 0 and 1 finish, 2-4 get HTTP 500
    with ModelServer(responder) as server:
        code, out, err = run_cli(capsys, *endpoint_eval(server.url, tmp_path / "run"))
        assert code == 1, err
        (line,) = [x for x in err.splitlines() if x.startswith("agentgym: ")]
        assert "3 of 5 episodes failed for an infrastructure reason" in line and "not a wrong answer" in line
        assert "--max-failures 0" in line and "--resume" in line
        assert "failures    3 of 5 episodes raised: HTTP 500: generation failed: RuntimeError: CUDA error" in out
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert summary["failures"] == 3 and summary["completed"] == 2  # the results are written all the same

        responder.alive, responder.answered = 6, 0
        code, out, err = run_cli(capsys, *endpoint_eval(server.url, tmp_path / "tolerant", "--max-failures", "3"))
        assert code == 0 and "agentgym: " not in err, err
        responder.alive, responder.answered = 6, 0
        code, out, err = run_cli(capsys, *endpoint_eval(server.url, tmp_path / "strict", "--max-failures", "2"))
        assert code == 1 and "more than --max-failures 2" in err

        responder.revive()
        code, out, err = run_cli(capsys, *endpoint_eval(server.url, tmp_path / "run", "--resume"))
    assert code == 0 and "agentgym: " not in err, err
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["failures"] == 0


def test_wrong_answers_are_no_failure_and_a_negative_max_failures_is_a_usage_error(capsys):
    code, out, err = run_cli(capsys, "eval", "--env", WEATHER, "--split", "test", "--agent", "random", "--no-progress")
    assert code == 0, err
    assert "failures    0" in out and "success     100.0%" not in out  # it got answers wrong, and that is fine
    code, out, err = run_cli(capsys, "eval", "--agent", "oracle", "--max-failures", "-1")
    assert code == 2 and out == "" and err.strip() == "agentgym: --max-failures must be at least 0, got -1"


# ------------------------------------------------------------------------------------------ 4. concise output


def test_eval_prints_a_short_table_and_the_json_stays_in_the_run_dir(tmp_path, capsys):
    code, out, err = run_cli(capsys, "eval", "--env", WEATHER, "--split", "test", "--agent", "oracle",
                             "--out", str(tmp_path / "a"), "--no-progress")  # fmt: skip
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) <= 8, out  # it printed the whole summary, every episode's return (100+ lines)
    assert lines[0] == "agentgym/WeatherRun-v0 · split test · agent oracle · seed 0 · 100 episodes"
    assert lines[1] == "success     100.0%  [96.3%, 100.0%] 95% CI"
    assert "return      1.500 ± 0.000" in out and "failures    0" in out and "returns" not in out
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert len(summary["returns"]) == 100 and summary["success_ci95"][0] == pytest.approx(0.963, abs=1e-3)

    code, out, err = run_cli(capsys, "eval", "--env", WEATHER, "--split", "test", "--agent", "oracle",
                             "--out", str(tmp_path / "b"), "--no-progress", "--json")  # fmt: skip
    assert code == 0 and json.loads(out) == json.loads((tmp_path / "b" / "summary.json").read_text())


# ------------------------------------------------------------------------------------------ 6. suites


def test_suite_plays_each_env_test_split_into_one_run_dir(tmp_path, capsys):
    out_dir = tmp_path / "suite"
    argv = ["eval", "--suite", "CliffWalk-v0,WeatherRun-v0,agentgym/SQLLookup-v0", "--agent", "oracle"]
    code, out, err = run_cli(capsys, *argv, "--episodes", "4", "--out", str(out_dir), "--no-progress")
    assert code == 0, err
    rows = out.strip().splitlines()
    assert rows[0].startswith("env") and len(rows) == 4, out
    assert rows[1].split()[:3] == ["agentgym/CliffWalk-v0", "-", "4"]  # CliffWalk has no split
    assert rows[2].split()[:4] == ["agentgym/WeatherRun-v0", "test", "4", "100.0%"]
    assert rows[3].split()[:4] == ["agentgym/SQLLookup-v0", "test", "4", "100.0%"]
    for name in ("CliffWalk-v0", "WeatherRun-v0", "SQLLookup-v0"):
        summary = json.loads((out_dir / name / "summary.json").read_text())
        assert summary["agent"] == "oracle" and summary["episodes"] == 4 and summary["success_rate"] == 1.0
    table = (out_dir / "suite.md").read_text()  # `agentgym report`'s table of the three runs
    assert table.startswith("| run | agent | env | split | episodes | success [95% CI]")
    assert "\n| CliffWalk-v0 | `oracle` | agentgym/CliffWalk-v0 | - | 4 |" in table
    assert "\n| WeatherRun-v0 | `oracle` | agentgym/WeatherRun-v0 | test | 4 |" in table
    assert "\n| SQLLookup-v0 | `oracle` | agentgym/SQLLookup-v0 | test | 4 |" in table

    code, out, err = run_cli(capsys, *argv, "--episodes", "4", "--out", str(out_dir), "--no-progress", "--resume")
    assert code == 0 and len(out.strip().splitlines()) == 4, err  # a finished suite resumes to its table


def test_the_default_suite_is_every_env_at_its_newest_version_and_bad_suites_are_one_line(tmp_path, capsys):
    suite = default_suite()
    names = {env_id.rpartition("-v")[0] for env_id in ENV_IDS}
    assert len(suite) == len(names) and {s.rpartition("-v")[0] for s in suite} == names
    for env_id in suite:
        name, _, version = env_id.rpartition("-v")
        assert all(int(v) <= int(version) for n, _, v in (e.rpartition("-v") for e in ENV_IDS) if n == name)
    for argv, message in [
        (["--suite", "--out", str(tmp_path), "--env", WEATHER], "--suite plays several envs: drop --env"),
        (["--suite"], "--suite needs --out DIR"),
        (["--suite", "CliffWalk-v0,Nope-v0", "--out", str(tmp_path)], "no env 'Nope-v0' in the suite; the agentgym"),
        (["--suite", "CliffWalk-v0,agentgym/CliffWalk-v0", "--out", str(tmp_path)], "names an env twice"),
    ]:
        code, out, err = run_cli(capsys, "eval", "--agent", "oracle", "--no-progress", *argv)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "CliffWalk-v0").exists()  # nothing was played before the bad id was found


# ------------------------------------------------------------------------------------------ 7. CliffWalk


def leaderboard_cliffwalk_episodes() -> int:
    spec = importlib.util.spec_from_file_location("leaderboard", ROOT / "benchmarks" / "leaderboard.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return next(e.episodes for e in module.ENVS if e.env_id == "agentgym/CliffWalk-v0")


def test_cliffwalk_eval_plays_the_leaderboards_episodes_and_takes_split_test(tmp_path, capsys):
    assert DEFAULT_EPISODES == leaderboard_cliffwalk_episodes() == 100
    summaries = {}
    for name, more in [("plain", []), ("test", ["--split", "test"])]:
        argv = ["eval", "--agent", "random", "--out", str(tmp_path / name), "--no-progress", *more]
        code, out, err = run_cli(capsys, *argv)
        assert code == 0 and "agentgym/CliffWalk-v0 · agent random · seed 0 · 100 episodes" in out, (out, err)
        summaries[name] = json.loads((tmp_path / name / "summary.json").read_text())
        summaries[name].pop("timing")
    assert summaries["plain"] == summaries["test"] and summaries["test"]["split"] is None
    assert len(set(summaries["test"]["returns"])) > 1  # 100 different seeded episodes, not one repeated
    code, out, err = run_cli(capsys, "eval", "--agent", "oracle", "--split", "train", "--no-progress")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "agentgym/CliffWalk-v0 has no splits: its test set is its one configuration over seeded episodes" in err


# ------------------------------------------------------------------------------------------ 8. resume a finished run


def test_resuming_a_finished_endpoint_run_prints_its_summary_and_plays_nothing(tmp_path, capsys):
    with ModelServer(ScriptedResponder(WEATHER, split="test")) as server:
        argv = endpoint_eval(server.url, tmp_path)
        assert run_cli(capsys, *argv)[0] == 0
        written, requests = (tmp_path / "summary.json").read_bytes(), server.requests
        code, out, err = run_cli(capsys, *argv, "--resume")
        assert code == 0, err  # it was 2: "Set of Tasks/Futures is empty"
        assert "success     100.0%" in out and "failures    0" in out
        code, out, err = run_cli(capsys, *argv, "--resume", "--json")
        assert code == 0 and json.loads(out) == json.loads(written), err
        assert server.requests == requests  # nothing was played again
    assert (tmp_path / "summary.json").read_bytes() == written  # its summary, timing included, as written
