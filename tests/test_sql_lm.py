"""``benchmarks/sql_lm.py``'s diagnosis of SQLLookup failures: test questions by what their literals need."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gymnasium as gym

import agentgym  # noqa: F401  (registers agentgym/*)
from agentgym.core.episode import EpisodeRecord

ROOT = Path(__file__).resolve().parents[1]


def load_sql_lm():
    spec = importlib.util.spec_from_file_location("sql_lm", ROOT / "benchmarks" / "sql_lm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def first(tasks, predicate) -> int:
    return next(i for i, t in enumerate(tasks) if predicate(t))


def test_literal_needs_sorts_test_questions_by_what_their_literals_ask(tmp_path):
    sql_lm = load_sql_lm()
    env = gym.make(sql_lm.ENV_ID, split="test")
    tasks = env.unwrapped.tasks
    env.close()
    picked = {
        # "How many customers are based in Brazil?" -> 'Brazil', copied from the question
        first(tasks, lambda t: t.family == "customers_in_country"): ("copied", True),
        # "May 2023" -> '2023-05': not in the question, and orders_in_month's training queries never hold it
        first(tasks, lambda t: t.family == "orders_in_month" and "May 2023" in t.question): ("derived, unseen", False),
        first(tasks, lambda t: t.family in (None, "", "one_off")): ("one-off", False),
    }
    records = [EpisodeRecord(reset={"options": {"task_index": i}}, success=ok) for i, (_, ok) in picked.items()]
    lines = [record.to_line() for record in records]
    (tmp_path / "episodes.jsonl").write_text("\n".join(lines) + "\n")
    needs = sql_lm.literal_needs(tmp_path)
    assert set(needs) == set(sql_lm.NEEDS)
    assert needs["copied"] == {"n": 1, "success": 1}
    assert needs["derived, unseen"] == {"n": 1, "success": 0}
    assert needs["one-off"] == {"n": 1, "success": 0}
    assert needs["derived, seen"] == {"n": 0, "success": 0}
