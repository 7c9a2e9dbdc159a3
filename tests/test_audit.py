"""agentgym audit: top-reward episodes that fail the rules, or whose length or format is off, are flagged."""

from __future__ import annotations

import json

import pytest

from agentgym.audit import audit_run, format_audit
from agentgym.cli import main

CALL = '<tool_call>{"name": "answer", "arguments": {"suitable": true}}</tool_call>'


def episode(step, reward, success, *, tokens=20, turns=1, canonical=True, rm=None, clipped=0, truncation=None):
    return {
        "step": step,
        "reset": {"seed": step},
        "reward": reward,
        "env_reward": reward if rm is None else 0.0,
        "rm_reward": rm,
        "success": success,
        "turns": turns,
        "response_tokens": tokens * turns,
        "canonical": [canonical] * turns,
        "valid": [True] * turns,
        "truncation": truncation,
        "clipped": clipped,
        "actions": [CALL] * turns,
    }


@pytest.fixture
def run_dir(tmp_path):
    honest = [episode(s, r, r > 0.5, tokens=20 + s % 3) for s in range(1, 41) for r in (0.0, 1.0)]
    odd = [
        episode(41, 1.5, False, rm=1.5),  # the reward model paid for a wrong answer
        episode(42, 1.4, True, tokens=200),  # rambling
        episode(43, 1.3, True, canonical=False),  # right, but not in the canonical format
        episode(44, 1.2, True),  # fine
        episode(45, 1.1, False, turns=4, truncation="max_turns"),  # never answered, yet paid
    ]
    (tmp_path / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in honest + odd))
    return tmp_path


def test_flags_rule_failures_length_and_format(run_dir):
    report = audit_run(run_dir, quantile=0.5)
    flags = {e["step"]: e["flags"] for e in report.flagged}
    assert flags[41] == ["rule-fail", "rm-disagrees"]
    assert flags[42] == ["long"] and flags[43] == ["format"] and 44 not in flags
    assert flags[45] == ["rule-fail", "truncated"]
    assert [e["reward"] for e in report.flagged] == sorted((e["reward"] for e in report.flagged), reverse=True)
    # top half: the 40 honest successes and the five odd ones; two of 45 fail the rules
    assert report.audited == 45 and report.rule_fail_rate == pytest.approx(2 / 45)
    assert report.rule_fail_rate_by_step[41] == 1.0 and report.rule_fail_rate_by_step[1] == 0.0
    text = format_audit(report)
    assert "4% of them fail the env's rules" in text and "rule-fail, rm-disagrees" in text


def test_cli_prints_the_audit_and_refuses_a_dir_without_episodes(run_dir, tmp_path, capsys):
    assert main(["audit", str(run_dir), "--quantile", "0.5", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n| 4") == 2  # two rows: steps 41 and 42
    assert main(["audit", str(tmp_path / "nothing")]) == 2
    assert "episodes.jsonl not found" in capsys.readouterr().err
