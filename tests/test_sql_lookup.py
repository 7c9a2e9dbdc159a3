"""SQLLookup-v0: frozen data, gold queries, the matching rule, the oracle, the discrete view, learning, and the
attack suite against the read-only SQLite layer."""

import copy
import json
import os
import shutil
import sqlite3
import time

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.wrappers import TimeLimit

from agentgym.app.evaluation.runner import RandomAgent, evaluate
from agentgym.core.data import sha256_file
from agentgym.core.tools import ToolCall
from agentgym.core.wrappers import DiscreteToolActions
from agentgym.envs.sql.build.generate import BUILT_WITH_SQLITE, build_database, build_tasks
from agentgym.envs.sql.dataset import (
    DATABASE_V0,
    DATABASE_V0_CONTENT_SHA256,
    DATABASE_V0_SHA256,
    DIFFICULTIES,
    TASKS_V0,
    TASKS_V0_SHA256,
    content_sha256,
    has_top_level_order_by,
    load_tasks,
    write_tasks,
)
from agentgym.envs.sql.env import SQLLookupEnv, looks_empty, results_match, rows_from_value
from agentgym.envs.sql.safety import QueryError, ReadOnlySQLite, check_statement
from agentgym.trainers import QLearning

MAX_STEPS = 12


def make(**kwargs):
    return TimeLimit(SQLLookupEnv(**kwargs), MAX_STEPS)


def call(tool_name, /, **arguments):
    return ToolCall(tool_name, arguments).to_text()


def result_text(observation):
    return observation.split("Result: ", 1)[1].rsplit("\nState: ", 1)[0]


@pytest.fixture(scope="module")
def tasks():
    return load_tasks()


# ----------------------------------------------------------------------------- frozen data


def test_shipped_files_match_their_checksums_and_rebuild_identically(tmp_path):
    assert sha256_file(DATABASE_V0) == DATABASE_V0_SHA256
    assert content_sha256(DATABASE_V0) == DATABASE_V0_CONTENT_SHA256
    assert sha256_file(TASKS_V0) == TASKS_V0_SHA256
    assert DATABASE_V0.stat().st_size < 1_000_000
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    assert build_database(a) == build_database(b)
    assert a.read_bytes() == b.read_bytes()
    assert content_sha256(a) == DATABASE_V0_CONTENT_SHA256
    if sqlite3.sqlite_version == BUILT_WITH_SQLITE:
        assert a.read_bytes() == DATABASE_V0.read_bytes()
    assert write_tasks(build_tasks(a), tmp_path / "t.jsonl") == TASKS_V0_SHA256
    assert sorted(os.listdir(tmp_path)) == ["a.sqlite", "b.sqlite", "t.jsonl"]  # no temp files left behind


def test_tampered_tasks_file_is_refused(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(TASKS_V0.read_text(encoding="utf-8").replace("Germany", "Gemany", 1), encoding="utf-8")
    with pytest.raises(ValueError, match="the data changed"):
        load_tasks(path, sha256=TASKS_V0_SHA256)


def test_question_set_shape(tasks):
    assert len(tasks) >= 120
    assert len({t.id for t in tasks}) == len(tasks) and len({t.question for t in tasks}) == len(tasks)
    for split in ("train", "test"):
        assert {t.difficulty for t in tasks if t.split == split} == set(DIFFICULTIES)
    assert sum(t.split == "test" for t in tasks) >= 50
    assert all(len(t.distractors) == 3 and t.gold_sql not in t.distractors for t in tasks)
    assert all(t.ordered == has_top_level_order_by(t.gold_sql) for t in tasks)
    assert 20 < sum(t.ordered for t in tasks) < len(tasks) - 20


def test_every_gold_query_runs_and_every_distractor_is_wrong_in_its_own_way(tasks):
    with ReadOnlySQLite(DATABASE_V0) as db:
        for task in tasks:
            gold = db.query(task.gold_sql, max_rows=1000)
            assert gold.rows and not looks_empty(gold), task.id
            logic, value, schema = task.distractors
            wrong = db.query(logic, max_rows=10_000)
            assert not looks_empty(wrong) and not results_match(wrong.rows, gold.rows, task.ordered), task.id
            assert looks_empty(db.query(value, max_rows=10_000)), task.id
            with pytest.raises(QueryError):
                db.query(schema)


def test_order_by_detection():
    assert has_top_level_order_by("SELECT a FROM t ORDER BY a")
    assert not has_top_level_order_by("SELECT a FROM (SELECT a FROM t ORDER BY a)")
    assert not has_top_level_order_by("SELECT rank() OVER (ORDER BY a) FROM t")
    assert not has_top_level_order_by("SELECT 'order by' FROM t -- order by")
    assert has_top_level_order_by("WITH c AS (SELECT 1 AS x) SELECT x FROM c ORDER BY x DESC LIMIT 1")


# ----------------------------------------------------------------------------- the matching rule


@pytest.mark.parametrize(
    "got, gold, ordered, expected",
    [
        ([(1,), (2,)], [(2,), (1,)], False, True),  # a multiset without ORDER BY
        ([(1,), (2,)], [(2,), (1,)], True, False),  # in order with ORDER BY
        ([(1,), (1,), (2,)], [(1,), (2,), (2,)], False, False),  # multiplicity counts
        ([(42,)], [(42.0,)], False, True),
        ([("42",)], [(42,)], False, True),  # numeric text is a number
        ([("1,234.50",)], [(1234.5,)], False, True),
        ([(0.1 + 0.2,)], [(0.3,)], False, True),  # tolerance
        ([(100.001,)], [(100.0,)], False, False),  # beyond 1e-6 relative
        ([("Engineering ",)], [("Engineering",)], False, True),  # surrounding space trimmed
        ([("engineering",)], [("Engineering",)], False, False),  # case matters
        ([(None,)], [(None,)], False, True),
        ([(None,)], [(0,)], False, False),
        ([("a", 1)], [(1, "a")], False, False),  # column order matters
        ([("a",)], [("a", 1)], False, False),
        ([], [(1,)], False, False),
    ],
)
def test_results_match(got, gold, ordered, expected):
    assert results_match(got, gold, ordered) is expected


def test_rows_from_value():
    assert rows_from_value(7) == [(7,)]
    assert rows_from_value([1, 2]) == [(1,), (2,)]
    assert rows_from_value(["Ann", "Lee"], gold=[("Ann", "Lee")]) == [("Ann", "Lee")]
    assert rows_from_value([["a", 1], ["b", 2]]) == [("a", 1), ("b", 2)]
    assert rows_from_value('[["a", 1]]') == [("a", 1)]


def find_task(env, predicate):
    for i, task in enumerate(env.unwrapped.tasks):
        if predicate(task):
            return i, task
    raise LookupError


def test_answer_value_scalar_and_list_and_wrong():
    env = make(split="all")
    i, task = find_task(env, lambda t: t.family == "customers_in_country")
    env.reset(options={"task_index": i})
    gold = env.unwrapped.gold_result().rows[0][0]
    _, reward, terminated, _, info = env.step(call("answer", value=gold))
    assert terminated and reward == 1.0 and info["success"] and info["summary"].endswith("answer correct")
    env.reset(options={"task_index": i})
    _, reward, terminated, _, info = env.step(call("answer", value=[str(gold)]))
    assert reward == 1.0 and info["success"]
    env.reset(options={"task_index": i})
    obs, reward, terminated, _, info = env.step(call("answer", value=gold + 1))
    assert terminated and reward == 0.0 and not info["success"] and "wrong (the correct result has 1 row" in obs


def test_answer_sql_order_rule():
    env = make(split="all")
    i, task = find_task(env, lambda t: t.family == "customers_without_email" and len(t.gold_sql) > 0)
    env.reset(options={"task_index": i})
    assert env.unwrapped.gold_result().total_rows >= 1 and task.ordered
    reversed_order = task.gold_sql.replace("ORDER BY company_name", "ORDER BY company_name DESC")
    if env.unwrapped.gold_result().total_rows > 1:
        _, reward, *_ = env.step(call("answer_sql", query=reversed_order))
        assert reward == 0.0
        env.reset(options={"task_index": i})
    reformatted = "  " + task.gold_sql.replace(" FROM ", "\n  FROM ").replace(" WHERE ", "\n WHERE ") + " ;"
    _, reward, terminated, _, info = env.step(call("answer_sql", query=reformatted))
    assert reward == 1.0 and terminated
    j, unordered = find_task(env, lambda t: t.family == "department_head")
    env.reset(options={"task_index": j})
    columns = unordered.gold_sql.split(" FROM ")[0]
    shuffled = unordered.gold_sql.replace(columns, "SELECT e.first_name AS who, e.last_name AS surname")
    _, reward, *_ = env.step(call("answer_sql", query=shuffled + " ORDER BY 2 DESC"))
    assert reward == 1.0  # aliases and an order nobody asked for do not matter


def test_failing_answer_sql_does_not_end_the_episode():
    env = make()
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(call("answer_sql", query="SELECT nope FROM nowhere"))
    assert not terminated and reward == 0.0 and "no such table: nowhere" in obs and "answer again" in obs
    assert info["summary"].endswith("answer pending")


# ----------------------------------------------------------------------------- the env


def test_summary_tools_and_process_reward():
    env = make(explore_reward=0.1)
    obs, info = env.reset(seed=3)
    assert info["summary"] == "tables seen 0/6 · queries 0 · answer pending" and "Question: " in obs
    obs, *_ = env.step(call("list_tables"))
    assert "customers, departments, employees, order_items, orders, products" in obs
    obs, *_ = env.step(call("describe_table", name="ORDERS"))
    assert "Table orders (table, 1,600 rows)" in obs and "customer_id: INTEGER, not null, → customers.id" in obs
    assert obs.count("\n") > 10
    obs, *_ = env.step(call("describe_table", name="order"))
    assert "no table named 'order'. Did you mean 'orders'?" in obs
    obs, reward, *_ = env.step(call("run_sql", query="SELECT id, name FROM departments ORDER BY id"))
    assert reward == pytest.approx(0.1) and result_text(obs).startswith("9 rows:\nid | name\n1 | Operations")
    _, reward, _, _, info = env.step(call("run_sql", query="SELECT * FROM orders"))
    assert reward == 0.0  # the process reward is paid once per episode
    _, _, _, _, info = env.step(call("run_sql", query="SELECT salary FROM staff"))
    assert info["summary"] == "tables seen 1/6 · queries 3 (1 error) · last: error · answer pending"
    obs, *_ = env.step(call("run_sql", query="SELECT * FROM order_items"))
    assert "3,3" in result_text(obs).split(" rows")[0] and result_text(obs).count("\n") == 21
    assert env.unwrapped.summary().endswith(" rows · answer pending")


def test_tool_cost():
    env = make(tool_cost=0.05)
    env.reset(seed=1)
    rewards = [
        env.step(a)[1] for a in (call("list_tables"), call("run_sql", query="SELECT 1"), call("run_sql", query="x"))
    ]
    assert rewards == pytest.approx([-0.05, -0.05, -0.05])


def test_oracle_scores_100_percent_with_maximum_reward_on_both_splits():
    for split in ("train", "test"):
        env = make(split=split)
        report = evaluate(env.unwrapped.oracle(), env, agent="oracle")
        assert report.episodes == env.unwrapped.num_tasks
        assert report.success_rate == 1.0 and report.mean_return == 1.0 and report.mean_turns <= 8


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
def test_check_env_text_and_discrete():
    check_env(SQLLookupEnv(), skip_render_check=True)
    discrete = DiscreteToolActions(SQLLookupEnv())
    check_env(discrete, skip_render_check=True)
    assert discrete.action_space.n == 1 + 6 + 8 and discrete.observation_space.n == 257


def test_env_can_be_copied_for_greedy_evaluation():
    env = make(split="test")
    env.reset(seed=0)
    copied = copy.deepcopy(env)  # what TabularAgent.greedy_rollout does; the copy opens the file anew
    copied.reset(options={"task_index": 3})
    obs, *_ = copied.step(call("run_sql", query="SELECT COUNT(*) FROM products"))
    assert result_text(obs) == "1 row:\nCOUNT(*)\n64"
    assert copied.unwrapped.database is not env.unwrapped.database


def test_same_seed_same_episode():
    def play(seed):
        env = make()
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for action in (call("describe_table", name="products"), call("run_sql", query="SELECT * FROM products")):
            out.append(env.step(action)[0])
        return out

    assert play(5) == play(5)
    assert len({play(s)[0] for s in range(8)}) > 4


def test_discrete_view_records_candidate_outcomes(tasks):
    env = DiscreteToolActions(SQLLookupEnv(split="test"))
    s, _ = env.reset(options={"task_index": 0})
    assert env.state_keys[s] == "q1 ? · q2 ? · q3 ? · q4 ?"
    base = env.unwrapped
    assert sorted(base.candidates) == sorted([base.task.gold_sql, *base.task.distractors])
    first_run = 1 + len(base.table_names)
    outcomes = []
    for k in range(4):
        s, *_ = env.step(first_run + k)
        outcomes.append(env.state_keys[s].split(" · ")[k].split()[1])
    assert sorted(outcomes) == ["empty", "error", "rows", "rows"]
    gold_slot = base.candidates.index(base.task.gold_sql)
    s, reward, terminated, _, info = env.step(first_run + 4 + gold_slot)
    assert terminated and reward == 1.0 and env.state_keys[s] == "answered"
    # the gold query's slot varies between tasks, so the menu does not give it away
    slots = set()
    for i in range(base.num_tasks):
        env.reset(options={"task_index": i})
        slots.add(base.candidates.index(base.task.gold_sql))
    assert slots == {0, 1, 2, 3}


def test_q_learning_beats_random_on_the_test_split():
    """Q-learning on the train split (tabular, via the discrete view) vs a uniform random agent, both
    evaluated on every test task. Measured: Q-learning 0.446, random 0.303 (mean of 5 seeds; 0.297 over 10, range
    0.22-0.37). Episode i of a run with seed s is reset with s + i and a random agent's draws follow it, so the
    random runs' seeds lie 1000 apart: seeds s and s + 1 would share all but one episode."""
    agent = QLearning(
        make(split="train", tool_cost=0.02),
        alpha=0.1,
        gamma=0.95,
        epsilon=0.3,
        epsilon_decay=0.999,
        epsilon_min=0.02,
        seed=0,
        eval_every=0,
    )
    agent.learn(3000)
    test = DiscreteToolActions(make(split="test", tool_cost=0.02))
    learned = evaluate(agent, test, seed=0).success_rate
    random_rates = [evaluate(RandomAgent(test.action_space), test, seed=1000 * s).success_rate for s in range(5)]
    print(f"Q-learning {learned:.3f} vs random {np.mean(random_rates):.3f} on {test.unwrapped.num_tasks} test tasks")
    assert learned >= np.mean(random_rates) + 0.1


# ----------------------------------------------------------------------------- your own data


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def user_db(tmp_path):
    path = tmp_path / "shop.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE pets (id INTEGER PRIMARY KEY, name TEXT, kind TEXT, age INTEGER);"
        "INSERT INTO pets VALUES (1, 'Rex', 'dog', 3), (2, 'Tom', 'cat', 5), (3, 'Kiki', 'bird', 1);"
    )
    conn.commit()
    conn.close()
    return path


def test_user_database_and_tasks(tmp_path, user_db):
    tasks_path = write_jsonl(
        tmp_path / "pets.jsonl",
        [
            {"id": "p1", "question": "How many pets are there?", "gold_sql": "SELECT COUNT(*) FROM pets"},
            {"id": "p2", "question": "Oldest pet?", "gold_sql": "SELECT name FROM pets ORDER BY age DESC LIMIT 1"},
        ],
    )
    before = sha256_file(user_db)
    env = make(db_path=user_db, tasks_path=tasks_path)
    assert env.unwrapped.num_tasks == 2 and env.unwrapped.table_names == ["pets"]
    report = evaluate(env.unwrapped.oracle(), env)
    assert report.success_rate == 1.0
    env.reset(options={"task_index": 0})
    _, reward, *_ = env.step(call("answer", value=3))
    assert reward == 1.0
    with pytest.raises(ValueError, match="3 distractors per task; tasks without them: p1, p2"):
        DiscreteToolActions(env)
    env.close()
    assert sha256_file(user_db) == before and sorted(os.listdir(tmp_path)) == ["pets.jsonl", "shop.db"]


@pytest.mark.parametrize(
    "records, message",
    [
        ([{"id": "a", "question": "?", "gold_sql": "SELECT * FROM nowhere"}], "task 'a': gold_sql fails"),
        ([{"id": "a", "question": "?", "gold_sql": "SELECT 1 WHERE 0"}], "task 'a': gold_sql returns no rows"),
        ([{"id": "a", "question": "?", "gold_sql": "DELETE FROM pets"}], "DELETE statements are refused"),
        ([{"id": "a", "question": "?", "gold": "SELECT 1"}], "pets.jsonl:1: not a task record"),
        ([{"id": "a", "question": "?", "gold_sql": "SELECT 1", "difficulty": "hard"}], "difficulty must be one of"),
        ([{"id": "a", "question": "?", "gold_sql": "SELECT 1"}] * 2, "duplicate task id 'a'"),
        ([{"id": "a", "question": "?", "gold_sql": "SELECT 1", "split": "dev"}], "no tasks in split 'train'"),
        ([], "holds no tasks"),
    ],
)
def test_bad_user_tasks_are_explained(tmp_path, user_db, records, message):
    path = write_jsonl(tmp_path / "pets.jsonl", records)
    with pytest.raises(ValueError, match=message):
        SQLLookupEnv(db_path=user_db, tasks_path=path)


def test_bad_config_is_explained(tmp_path, user_db):
    with pytest.raises(ValueError, match="split must be"):
        SQLLookupEnv(split="validation")
    with pytest.raises(ValueError, match="max_rows"):
        SQLLookupEnv(max_rows=0)
    with pytest.raises(FileNotFoundError, match="no SQLite database"):
        SQLLookupEnv(db_path=tmp_path / "missing.db")
    (tmp_path / "text.db").write_text("hello")
    with pytest.raises(ValueError, match="not a SQLite 3 database"):
        SQLLookupEnv(db_path=tmp_path / "text.db")
    wal = tmp_path / "wal.db"
    shutil.copy(user_db, wal)
    conn = sqlite3.connect(wal)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    with pytest.raises(ValueError, match="WAL mode"):
        SQLLookupEnv(db_path=wal)
    with pytest.raises(ValueError, match="not both"):
        SQLLookupEnv(db_path=user_db, database=ReadOnlySQLite(user_db))
    with pytest.raises(ValueError, match="tool_cost"):
        SQLLookupEnv(tool_cost=-1)
    with pytest.raises(ValueError, match="task_index"):
        SQLLookupEnv().reset(options={"task_index": 10_000})


# ----------------------------------------------------------------------------- the attack suite

TIMEOUT = "stopped: the query ran longer than the 1 s limit"
REFUSED = "the database is read-only"


def attacks(tmp):
    long_text = "SELECT 1 " + "-- padding\n" * 2_000
    return [
        ("DROP TABLE orders", "DROP statements are refused"),
        ("DELETE FROM orders", "DELETE statements are refused"),
        ("UPDATE employees SET salary = 0", "UPDATE statements are refused"),
        ("INSERT INTO departments VALUES (99, 'x', 'y', 1, NULL)", "INSERT statements are refused"),
        ("REPLACE INTO departments VALUES (1, 'x', 'y', 1, NULL)", "REPLACE statements are refused"),
        ("ALTER TABLE orders ADD COLUMN note TEXT", "ALTER statements are refused"),
        (f"ATTACH DATABASE '{tmp}/evil.db' AS evil", "ATTACH statements are refused"),
        ("ATTACH 'evil.db' AS evil", "ATTACH statements are refused"),
        ("DETACH DATABASE main", "DETACH statements are refused"),
        (f"VACUUM INTO '{tmp}/copy.db'", "VACUUM statements are refused"),
        ("VACUUM", "VACUUM statements are refused"),
        ("PRAGMA query_only = 0", "PRAGMA query_only = 0 is not allowed"),
        ("PRAGMA journal_mode = WAL", "PRAGMA journal_mode = WAL is not allowed"),
        ("PRAGMA writable_schema = ON", "PRAGMA writable_schema = ON is not allowed"),
        ("SELECT load_extension('/tmp/evil.so')", "the function load_extension() is not allowed"),
        ("CREATE TEMP TABLE t AS SELECT * FROM orders", "CREATE statements are refused"),
        ("CREATE TEMP VIEW v AS SELECT 1", "CREATE statements are refused"),
        ("CREATE TEMP TRIGGER tr AFTER INSERT ON orders BEGIN SELECT 1; END", "CREATE statements are refused"),
        ("BEGIN; DELETE FROM orders; COMMIT", "BEGIN statements are refused"),
        ("SELECT 1; DROP TABLE orders", "one SQL statement per call"),
        ("SELECT 1; SELECT 2", "one SQL statement per call"),
        ("SELECT 1\x00; DROP TABLE orders", "the query contains a NUL character"),
        ("WITH x AS (SELECT 1) DELETE FROM orders", "DELETE orders is not allowed"),
        ("WITH x AS (SELECT 1) INSERT INTO departments SELECT * FROM departments", "INSERT departments is not allowed"),
        ("EXPLAIN UPDATE orders SET status = 'x'", "UPDATE orders is not allowed"),
        ("SELECT * FROM pragma_writable_schema", "table-valued functions"),
        ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", TIMEOUT),
        ("SELECT count(*) FROM order_items a, order_items b, order_items c", TIMEOUT),
        ("SELECT group_concat(a.name || b.name) FROM products a, products b, products c, products d", TIMEOUT),
        ("SELECT randomblob(1000000000)", "the function randomblob() is not allowed"),
        ("SELECT zeroblob(1000000000)", "the function zeroblob() is not allowed"),
        ("SELECT printf('%.*c', 90000, 'x') || printf('%.*c', 90000, 'x')", "widths and precisions are limited"),
        ("SELECT replace(printf('%.999c', 'x'), 'x', 'xxxxxxxxxxxxxxxxxxxx')", "string or blob too big"),
        ("SELECT random()", "the function random() is not allowed"),
        ("SELECT date('now')", "the database is a frozen snapshot"),
        ("SELECT fts3_tokenizer('simple')", "the function fts3_tokenizer() is not allowed"),
        (long_text, "the limit is 10,000"),
        ("SELECT " + "(" * 3_000 + "1" + ")" * 3_000, "SQL error: parser stack overflow"),
        ("SELECT '\ud800'", "not valid Unicode text (a lone surrogate"),
        ("SELECT * FROM sqlite_master; PRAGMA writable_schema = 1", "one SQL statement per call"),
    ]


def test_attack_suite(tmp_path, monkeypatch):
    """Each attack is refused or stopped with a clear observation; nothing on disk changes; the env goes on."""
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    data_files = sorted(os.listdir(DATABASE_V0.parent))
    before = sha256_file(DATABASE_V0)
    env = make()
    env.reset(seed=0)
    suite = attacks(tmp_path)
    assert len(suite) >= 25
    for query, expected in suite:
        started = time.perf_counter()
        obs, reward, terminated, truncated, info = env.step(call("run_sql", query=query))
        elapsed = time.perf_counter() - started
        result = result_text(obs)
        assert result.startswith("Error: ") and expected in result, (query[:60], result)
        assert elapsed < 2.0 and not terminated and reward == 0.0
        assert sha256_file(DATABASE_V0) == before
        assert os.listdir(workdir) == [] and sorted(os.listdir(tmp_path)) == ["cwd"]
        assert sorted(os.listdir(DATABASE_V0.parent)) == data_files
        env.unwrapped.last = None
        obs, *_ = env.step(call("run_sql", query="SELECT COUNT(*) FROM departments"))
        assert result_text(obs) == "1 row:\nCOUNT(*)\n9", query[:60]
        if env.unwrapped.steps >= MAX_STEPS - 2:
            env.reset(seed=0)
    # an attack as the final answer is refused the same way, and the episode goes on
    obs, reward, terminated, *_ = env.step(call("answer_sql", query="DROP TABLE orders"))
    assert "DROP statements are refused" in obs and not terminated
    env.close()
    assert sha256_file(DATABASE_V0) == before


def test_runaway_query_stops_in_about_the_time_limit():
    with ReadOnlySQLite(DATABASE_V0, time_limit=0.5) as db:
        started = time.perf_counter()
        with pytest.raises(QueryError, match="longer than the 0.5 s limit") as info:
            db.query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c")
        assert info.value.kind == "timeout" and time.perf_counter() - started < 1.0
        # an endless CTE that streams rows is cut by the row count instead, quickly
        result = db.query("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c", 5)
        assert result.count_capped and result.total_rows == db.max_count and len(result.rows) == 5


def test_authorizer_and_limits_hold_without_the_statement_check():
    """Defence in depth: statements sent straight to the hardened connection (past check_statement)."""
    before = sha256_file(DATABASE_V0)
    with ReadOnlySQLite(DATABASE_V0) as db:
        for statement in (
            "ATTACH ':memory:' AS m",
            "VACUUM INTO '/tmp/agentgym-should-not-exist.db'",
            "CREATE TEMP TABLE t (x)",
            "PRAGMA query_only = 0",
            "DELETE FROM orders",
            "SELECT load_extension('x')",
            "BEGIN",
        ):
            with pytest.raises(sqlite3.DatabaseError, match="not authorized|authorization denied"):
                db.conn.execute(statement)
        assert db.conn.getlimit(sqlite3.SQLITE_LIMIT_ATTACHED) == 0
    assert not os.path.exists("/tmp/agentgym-should-not-exist.db") and sha256_file(DATABASE_V0) == before


def test_text_that_is_not_utf8_is_shown_not_raised():
    with ReadOnlySQLite(DATABASE_V0) as db:
        assert db.query("SELECT CAST(x'ff41' AS TEXT)").rows == (("\ufffdA",),)
    with pytest.raises(QueryError, match="lone surrogate"):
        check_statement("SELECT '\udc80'")
