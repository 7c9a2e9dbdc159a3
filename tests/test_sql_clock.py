"""The clock guard (envs/sql/clock.py): no date call reads the wall clock, and dates on stored values run natively."""

from __future__ import annotations

import sqlite3

import pytest

from agentgym.envs.sql.clock import ClockRefused, guard_dates, is_clock
from agentgym.envs.sql.dataset import DATABASE_V0
from agentgym.envs.sql.safety import QueryError, ReadOnlySQLite

# Every way found to hand a date function the clock: the word in any case, with spaces or a NUL after it, as a blob,
# built at run time, from a column, a subquery or a nested call, and the function named in every quoting SQLite reads.
HOSTILE = [
    "SELECT date(X'6E6F77')",
    "SELECT time('12:00', X'6c6f63616c74696d65')",
    "SELECT date(CAST(X'6E6F77' AS TEXT))",
    "SELECT date('now' || char(0))",
    "SELECT date(upper('now'))",
    "SELECT julianday(X'4E4F57')",
    "SELECT strftime('%s', 'n' || 'ow')",
    "SELECT datetime('2020-01-01', X'757463')",
    "SELECT unixepoch(' NOW ')",
    "SELECT timediff('now', '2020-01-01')",
    "WITH c(v) AS (SELECT 'now') SELECT date(v) FROM c",
    "WITH c(v) AS (SELECT 'now') SELECT date(c.v) FROM c",
    "WITH c(v) AS (SELECT 'now') SELECT date(a.v) FROM c AS a, c AS b",  # a CTE compiled twice: the checked way
    "SELECT date(v) FROM (SELECT 'now' || char(0) || 'x' AS v)",
    "SELECT date(v) FROM (SELECT X'6E6F7700' AS v)",
    "SELECT DATE(v, 'start of month') FROM (SELECT 'NoW' AS v)",
    "SELECT date((SELECT 'now'))",
    "SELECT date(date('now'))",
    "SELECT \"date\"('now')",
    "SELECT `DaTe`(('now'))",
    "SELECT [date]('2020-01-01', 'localtime')",
    "SELECT date/**/('now')",
    "SELECT date --\n('now')",
    "SELECT CAST(1 AS date(5)), date(v) FROM (SELECT 'now' AS v)",
    "WITH date(v) AS (SELECT 'now') SELECT date(v) FROM date",
    'SELECT date("now")',
    "SELECT strftime('%Y')",
]


@pytest.fixture(scope="module")
def db():
    with ReadOnlySQLite(DATABASE_V0) as db:
        yield db


@pytest.mark.parametrize("query", HOSTILE)
def test_no_date_call_reads_the_clock(db, query):
    with pytest.raises(QueryError, match="'now', 'localtime' or 'utc', is not available") as caught:
        db.query(query)
    assert caught.value.kind == "refused"


@pytest.mark.parametrize("space", ["\t", "\n", "\v", "\f", "\r", " "])
def test_a_clock_word_after_white_space_is_no_date_to_sqlite_either(db, space):
    # The fast check passes text that sorts before 'A' (white space included) to SQLite's own date functions; that is
    # sound because SQLite reads a clock word only from a value's first character. This pins that fact on this SQLite.
    for query in ("SELECT date(v) FROM (SELECT ? AS v)", "SELECT date('2020-01-01', v) FROM (SELECT ? AS v)"):
        for word in ("now", "localtime", "utc"):
            bare = sqlite3.connect(":memory:").execute(query, (space + word,)).fetchone()[0]
            assert bare is None, (space, word, bare)
    inline = db.query(f"SELECT date(v), date('2020-01-01', w) FROM (SELECT char({ord(space)}) || 'now' AS v, "
                      f"char({ord(space)}) || 'localtime' AS w)")  # fmt: skip
    assert inline.rows == ((None, None),)


TYPICAL = [
    "SELECT ROUND(AVG(julianday(shipped_date) - julianday(order_date)), 1) FROM orders "
    "WHERE strftime('%Y', order_date) = '2023'",
    "SELECT date(order_date, '+1 month', 'start of month'), time('12:00:05'), datetime(1700000000, 'unixepoch') "
    "FROM orders ORDER BY id LIMIT 5",
    "SELECT strftime('%m', order_date) AS m, count(*) FROM orders GROUP BY m ORDER BY m",
    "SELECT CAST(1 AS date(5)), date(X'323032302D30312D3031'), date(NULL), date(2460000.5), "
    "date('2024-01-31', '+1 day')",
    "SELECT date(order_date) FROM orders WHERE date(order_date) > date('2023-06-01', '-1 day') ORDER BY 1 LIMIT 5",
    "SELECT o.id, julianday(o.shipped_date) - julianday(o.order_date) FROM orders o ORDER BY 2 DESC, 1 LIMIT 5",
    "SELECT 'date(''now'')', \"date\" FROM (SELECT 1 AS \"date\") -- date('now')",
]


def test_dates_on_stored_values_match_bare_sqlite_and_run_natively():
    bare = sqlite3.connect(DATABASE_V0)
    with ReadOnlySQLite(DATABASE_V0) as db:
        for query in TYPICAL:
            assert db.query(query, max_rows=1000).rows == tuple(bare.execute(query).fetchall()), query
        assert db._checked_dates is None  # no query needed the connection with Python-checked date functions
        twice = "WITH x AS (SELECT date(order_date) d FROM orders) SELECT count(*) FROM x a, x b WHERE a.d = b.d"
        assert db.query(twice).rows == tuple(bare.execute(twice).fetchall())
        assert db._checked_dates is not None  # SQLite compiled the CTE twice: more calls than the text has


def test_a_view_that_reads_the_clock_is_caught_by_the_call_count(tmp_path):
    path = tmp_path / "view.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE VIEW today AS SELECT date('now') AS d, 1 AS n")
    conn.close()
    with ReadOnlySQLite(path) as db:
        assert db.query("SELECT 2").rows == ((2,),)
        with pytest.raises(QueryError, match="is not available"):
            db.query("SELECT * FROM today")  # no date call in the text; SQLite compiles the view's: the checked way


def test_guard_dates_rewrites_calls_and_leaves_the_rest():
    g = guard_dates("SELECT julianday(a.d) - julianday('2024-01-01'), strftime('%Y', d || '') FROM t a")
    assert g.calls == 3
    assert "julianday('2024-01-01')" in g.sql  # a literal is checked now and left alone
    assert "CASE WHEN a.d < 'A' OR a.d IS NULL THEN a.d ELSE agentgym_clock_guard(a.d) END" in g.sql
    assert "strftime('%Y', agentgym_clock_guard(d || ''))" in g.sql
    untouched = "SELECT 'date(x)', \"time\" FROM t /* date(x) */ WHERE x = 1 -- time(y)"
    assert guard_dates(untouched) == type(g)(untouched, 0)
    assert guard_dates("SELECT name FROM t").calls == 0
    assert guard_dates("SELECT date('x") is None  # not SQLite's tokens: the caller takes the checked way
    assert guard_dates("SELECT date(x") is None
    with pytest.raises(ClockRefused, match=r"^date\(\) without a date"):
        guard_dates("SELECT date()")


@pytest.mark.parametrize(
    "value, clock",
    [("now", True), (" NoW\n", True), (b"now", True), (b"utc\x00tail", True), ("now\x00", True), ("localtime", True),
     ("\x00now", False), ("2024-01-01", False), ("+1 day", False), (5, False), (None, False), (b"\xff\xfe", False)],
)  # fmt: skip
def test_is_clock(value, clock):
    assert is_clock(value) is clock
