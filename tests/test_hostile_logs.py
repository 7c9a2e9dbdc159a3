"""Hostile episode logs (issue 43, part 2): ``agentgym audit`` and ``agentgym data`` read them line by line, in
bounded memory, and every bad line is one line of explanation, never a traceback.

Before: a very long line was read whole (1.3–1.5 GB of RSS), deep nesting raised RecursionError, rewards whose sum
overflows raised OverflowError, and ``options`` of the wrong type went through unchecked. Now ``data`` skips and
counts each bad line (exit 0, the reasons in its report) and ``audit`` stops at the first with a one-line error
naming the file, the line and the bound (exit 2); ``data`` writes nothing when it fails.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agentgym.app.cli import main
from agentgym.core.episode import MAX_LINE_BYTES
from tests.test_audit import episode

GOOD = json.dumps(episode(1, 1.0, True))
BAD = {
    "long line": (json.dumps({**episode(2, 1.0, True), "actions": ["x" * MAX_LINE_BYTES]}), "longer than 4,194,304"),
    "deep nesting": ("[" * 100_000 + "]" * 100_000, "nested deeper than Python reads"),
    "deep object": ('{"reset": ' + '{"a": ' * 100_000 + "1" + "}" * 100_001, "nested deeper than Python reads"),
    "sum overflows": (json.dumps({**episode(2, 1.0, True, turns=2), "rewards": [1e308, 1e308]}),
                      "rewards: their sum is past the float range"),
    "non-finite": (GOOD.replace('"training_reward": 1.0', '"training_reward": Infinity'), "a finite number"),
    "huge integer": (GOOD.replace('"training_step": 1', '"training_step": ' + "9" * 5000), "4300 digits"),
    "options a string": (json.dumps({**episode(2, 1.0, True), "reset": {"options": "task"}}), "options an object"),
    "options a list": (json.dumps({**episode(2, 1.0, True), "reset": {"options": [1]}}), "options an object"),
    "reset a list": (json.dumps({**episode(2, 1.0, True), "reset": [1]}), "reset: Input should be a valid dictionary"),
    "seed a string": (json.dumps({**episode(2, 1.0, True), "reset": {"seed": "1"}}), "seed must be an integer"),
}  # fmt: skip


def _log(tmp_path, line):
    (tmp_path / "episodes.jsonl").write_text(f"{GOOD}\n{line}\n{GOOD}\n")
    return tmp_path / "episodes.jsonl"


@pytest.mark.parametrize("name", sorted(BAD))
def test_audit_names_the_bad_line_in_one_line(tmp_path, capsys, name):
    line, words = BAD[name]
    path = _log(tmp_path, line)
    assert main(["audit", str(tmp_path), "--max-replays", "0"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(f"agentgym: {path}:2: not a logged episode ("), captured.err
    assert words in captured.err and captured.err.count("\n") == 1 and len(captured.err) < 500, captured.err


@pytest.mark.parametrize("name", sorted(BAD))
def test_data_skips_and_counts_the_bad_line(tmp_path, capsys, name):
    line, words = BAD[name]
    path = _log(tmp_path, line)
    out = tmp_path / "out"
    assert main(["data", str(path), "--out", str(out), "--env", "agentgym/WeatherRun-v0", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["episodes"] == 2 and report["bad_lines"] == 1, report
    assert report["errors"][0].startswith(f"{path}:2: ") and words in report["errors"][0], report["errors"]
    assert sorted(p.name for p in out.iterdir()) == ["pairs.jsonl", "report.json", "report.md", "sft.jsonl"]


def test_a_failed_data_run_leaves_nothing_behind(tmp_path):
    path = _log(tmp_path, GOOD)
    out = tmp_path / "out"
    assert main(["data", str(path), "--out", str(out)]) == 2  # no run.json beside it and no --env: no tools to write
    assert not out.exists()
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["data", str(path), "--out", str(out)]) == 2
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]  # no partial files left in a folder of the user's


@pytest.mark.parametrize("command", ["audit", "data"])
def test_memory_stays_bounded_whatever_the_lines_hold(tmp_path, command):
    """A 300 MB line and a line of 2,000,000 turns: each command's peak RSS stays far below 512 MB."""
    path = tmp_path / "episodes.jsonl"
    with path.open("w") as f:  # written in pieces: this process stays small (a child's peak RSS starts at it)
        f.write(GOOD + "\n" + GOOD[:-1] + ', "error": "')
        for _ in range(300):
            f.write("x" * (1 << 20))
        f.write('"}\n' + GOOD.split('"observations"')[0] + '"observations": ["o"')
        for _ in range(200):
            f.write(', "o"' * 10_000)
        f.write("]}\n" + GOOD + "\n")  # a line of 2,000,000 observations
    args = ["audit", str(tmp_path), "--max-replays", "0"] if command == "audit" else [
        "data", str(path), "--out", str(tmp_path / "out"), "--env", "agentgym/WeatherRun-v0"]  # fmt: skip
    child = (  # VmHWM: this process's own peak (ru_maxrss would count the forked parent's RSS before exec)
        "import re, sys; from agentgym.app.cli import main; rc = main(sys.argv[1:]); "
        "print('peak', re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1), file=sys.stderr); "
        "sys.exit(rc)"
    )
    result = subprocess.run([sys.executable, "-c", child, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == (2 if command == "audit" else 0), result.stderr
    said = result.stderr if command == "audit" else (tmp_path / "out" / "report.md").read_text()
    assert "longer than 4,194,304 bytes" in said, said
    peak_mb = int(result.stderr.rsplit("peak ", 1)[1]) / 1024
    assert peak_mb < 512, f"peak RSS {peak_mb:.0f} MB"
