"""Hostile SQL, round 2: one statement cannot outrun the deadline, read the clock, or hold memory."""

from __future__ import annotations

import os
import time

import pytest

from agentgym.core.tools import ToolCall
from agentgym.envs.sql.env import CACHE_BYTES, SQLLookupEnv

NINE_KB = "replace(printf('%.999c', 'a'), 'a', 'aaaaaaaaa')"  # 8,991 characters, built inside SQLite


def run_sql(env, query):
    obs, reward, terminated, _, _ = env.step(ToolCall("run_sql", {"query": query}).to_text())
    env.last = None  # the env refuses to run the same query twice in a row; these tests do on purpose
    return obs.split("Result: ", 1)[1].rsplit("\nState: ", 1)[0]


@pytest.fixture
def env():
    env = SQLLookupEnv()
    env.reset(seed=0)
    return env


EXPENSIVE = {
    "printf width": "SELECT printf('%.*c', 2000000000, 'x')",
    "printf literal width": "SELECT printf('%2000000000c', 'x')",
    "format width": "SELECT format('%.*c', 2000000000, 'x')",
    "instr ×99": f"WITH s(x) AS (SELECT {NINE_KB}) SELECT " + ", ".join(["instr(x, x || 'b')"] * 99) + " FROM s",
    "like ×9 (1,000 characters each)": "SELECT count(*) FROM employees WHERE "
    + " OR ".join([f"email LIKE '{'%a' * 500}'"] * 9),
    "growing string": "WITH RECURSIVE s(x) AS (SELECT 'ab' UNION ALL SELECT x || x FROM s) SELECT length(x) FROM s",
    "replace blow-up": f"SELECT replace({NINE_KB}, 'a', 'aaaa')",
    "group_concat": "SELECT length(group_concat(a.email || b.email)) FROM employees a, employees b",
}


@pytest.mark.parametrize("name", sorted(EXPENSIVE))
def test_no_single_statement_outruns_the_deadline(env, name):
    t0 = time.perf_counter()
    run_sql(env, EXPENSIVE[name])
    elapsed = time.perf_counter() - t0
    assert elapsed <= 1.5, f"{name}: {elapsed:.2f} s"  # the deadline is 1 s (these took 5–12 s before)
    assert "employees" in run_sql(env, "SELECT name FROM sqlite_master WHERE name = 'employees'")


@pytest.mark.parametrize(
    "query",
    [
        "SELECT date('n' || 'ow')",
        'SELECT date("now")',
        "SELECT datetime(char(110, 111, 119))",
        "SELECT date()",
        "SELECT strftime('%s')",
        "SELECT julianday(' NOW ')",
        "SELECT time('12:00', 'localtime')",
        "SELECT unixepoch('2024-01-01', 'utc')",
        "SELECT current_date",
        "SELECT current_timestamp",
    ],
)
def test_the_clock_and_the_time_zone_are_unreadable(env, query):
    result = run_sql(env, query)
    assert result.startswith("Error: refused"), result


def test_dates_on_stored_values_still_work(env):
    assert "2024-02-01" in run_sql(env, "SELECT date('2024-01-31', '+1 day')")
    assert "2460341" in run_sql(env, "SELECT julianday('2024-02-01')")
    assert "02" in run_sql(env, "SELECT strftime('%m', '2024-02-01')")
    assert "x    7" in run_sql(env, "SELECT printf('x%5d', 7)")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_wide_results_are_refused_by_size_and_memory_stays_bounded(env):
    wide = "SELECT " + ", ".join(["x"] * 100) + f" FROM (SELECT {NINE_KB} AS x), (SELECT 1 FROM employees LIMIT 20)"
    before = _rss()
    for k in range(4):
        result = run_sql(env, wide + f" LIMIT {20 - k}")
        assert "larger than 1,000,000 bytes" in result, result
        env.step(ToolCall("answer_sql", {"query": wide + f" LIMIT {10 - k}"}).to_text())
    assert _rss() - before <= 64 * 2**20


def test_the_query_cache_is_bounded_in_bytes(env):
    for k in range(12):  # ~0.9 MB each: more than the cache may hold
        run_sql(env, "SELECT " + ", ".join(["x"] * 100) + f" FROM (SELECT {NINE_KB} || '{k}' AS x)")
        assert env._cache_bytes <= CACHE_BYTES
    assert len(env._cache) < 12


@pytest.mark.parametrize("value", ["9" * 350, "1e400", "-1e400", '"' + "9" * 5000 + '"'])
def test_unscorable_answers_are_wrong_answers(env, value):
    action = f'<tool_call>{{"name": "answer", "arguments": {{"value": {value}}}}}</tool_call>'
    obs, reward, terminated, _, _ = env.step(action)
    assert terminated and reward == 0.0 and "Answer recorded" in obs and "wrong" in obs
