"""agentgym audit: top-reward episodes that fail the rules, or whose length or format is off, are flagged."""

from __future__ import annotations

import json

import pytest

from agentgym.app.cli import main
from agentgym.app.evaluation.audit import audit_run, format_audit

CALL = '<tool_call>{"name": "answer", "arguments": {"suitable": true}}</tool_call>'


def episode(step, reward, success, *, tokens=20, turns=1, canonical=True, rm=None, clipped=0, truncation=None):
    """A training log's line (an EpisodeRecord): the env paid ``reward`` at the last turn unless a reward model
    (``rm``) paid it."""
    return {
        "training_step": step,
        "reset": {"seed": step},
        "training_reward": reward,
        "rm_reward": rm,
        "observations": ["task"] * (turns + 1),
        "actions": [CALL] * turns,
        "rewards": [0.0] * (turns - 1) + [reward if rm is None else 0.0],
        "reward_components": [{}] * turns,
        "canonical": [canonical] * turns,
        "valid": [True] * turns,
        "success": success,
        "truncation": truncation,
        "completion_tokens": tokens * turns,
        "clipped": clipped,
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
    flags = {e["training_step"]: e["flags"] for e in report.flagged}
    assert flags[41] == ["rule-fail", "rm-disagrees"]
    assert flags[42] == ["long"] and flags[43] == ["format"] and 44 not in flags
    assert flags[45] == ["rule-fail", "truncated"]
    rewards = [e["training_reward"] for e in report.flagged]
    assert rewards == sorted(rewards, reverse=True) and "observations" not in report.flagged[0]
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


# ------------------------------------------------------------------ a damaged episodes.jsonl: one line naming file:line

GOOD = json.dumps(episode(1, 1.0, True))


@pytest.mark.parametrize(
    "line, problem",
    [
        (b'{"training_step": 1, "training_reward": ', "not JSON (Expecting value at column 41)"),
        (GOOD.replace('"Lima"', '"Lima"').replace("answer", "\xe9").encode("latin-1"), "not UTF-8 text"),
        (b"[1, 2, 3]", "expected a JSON object (an episode), got list"),
        (GOOD.replace('"training_reward": 1.0', '"training_reward": NaN').encode(),
         "training_reward: Input should be a finite number"),
        (GOOD.replace('"training_reward": 1.0, ', "").encode(), "training_reward: Field required"),
        (GOOD.replace('"success": true', '"success": [1]').encode(), "success: Input should be a valid boolean"),
        (GOOD.replace('"completion_tokens": 20', '"completion_tokens": -1').encode(),
         "completion_tokens: Input should be greater than or equal to 0"),
        (GOOD.replace('"actions": [', '"actions": {"a": ').replace("], \"rewards", "}, \"rewards").encode(),
         "actions: Input should be a"),
        (GOOD.replace('"training_step": 1', '"training_step": "one"').encode(),
         "training_step: Input should be a valid integer"),
    ],
    ids=["not-json", "not-utf8", "not-an-object", "nan-reward", "no-reward", "bad-success", "negative-tokens",
         "actions-not-a-list", "step-not-a-number"],
)  # fmt: skip
def test_a_damaged_episode_line_is_one_line_naming_file_line_and_field(tmp_path, capsys, line, problem):
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(f"{GOOD}\n{GOOD}\n".encode() + line + f"\n{GOOD}\n".encode())
    with pytest.raises(ValueError, match=rf"^{path}:3: not a logged episode \(") as info:
        audit_run(tmp_path)
    assert problem in str(info.value) and "\n" not in str(info.value), info.value
    assert main(["audit", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"agentgym: {info.value}\n"


def test_a_torn_last_line_is_skipped_and_text_that_splitlines_breaks_is_read_whole(tmp_path, capsys):
    odd = episode(2, 1.0, False)
    odd["actions"] = ["answer \u2028 now \x85 \ud800"]  # U+2028 and U+0085 split a str.splitlines() line
    path = tmp_path / "episodes.jsonl"
    text = json.dumps(odd, ensure_ascii=False).replace("\ud800", "\\ud800")  # as JSON spells a lone surrogate
    path.write_bytes(f"{GOOD}\n{text}\n".encode() + GOOD[:40].encode())  # killed while writing the third
    report = audit_run(tmp_path, quantile=0.0)
    assert report.episodes == 2 and report.flagged[0]["actions"] == ["answer \u2028 now \x85 \ufffd"]
    assert main(["audit", str(tmp_path), "--quantile", "0"]) == 0
    assert "rule-fail" in capsys.readouterr().out
    assert main(["audit", str(tmp_path), "--quantile", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["flagged"][0]["actions"] == ["answer \u2028 now \x85 \ufffd"]
