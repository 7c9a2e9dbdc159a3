"""A hardened, read-only SQLite connection for running SQL that an agent wrote.

An agent's SQL is hostile input. Opening a file with ``mode=ro`` is not enough: on SQLite 3.40,
``ATTACH`` still creates files, ``CREATE TEMP TABLE`` still runs, ``PRAGMA query_only`` can be
switched back off and ``VACUUM INTO`` writes a copy of the database anywhere. :class:`ReadOnlySQLite`
stacks independent defences, so that each alone would stop a write:

1. **Read-only open**: the URI ``file:/abs/path?mode=ro`` (``uri=True``), autocommit, and
   ``PRAGMA query_only=1`` set before the authorizer is installed.
2. **Statement check** (:func:`check_statement`): one statement per call; it must start with
   ``SELECT``, ``WITH``, ``VALUES``, ``EXPLAIN`` or ``PRAGMA``; at most ``max_sql_chars``
   characters.
3. **Authorizer** (:func:`authorizer`): SQLite asks it about every table read, function and
   pragma while compiling a statement. Allowed: reads (``SELECT``, ``READ``, recursive CTEs),
   the functions in :data:`SAFE_FUNCTIONS`, and the schema pragmas in :data:`READ_PRAGMAS`
   (``table_info``, ``foreign_key_list``, …). Everything else is denied: INSERT/UPDATE/DELETE,
   every CREATE/DROP/ALTER (temp ones included), ATTACH/DETACH (so also ``VACUUM INTO``),
   transactions, pragma writes, ``load_extension``, the nondeterministic ``random()``,
   ``randomblob()``, ``current_date``/``current_time``/``current_timestamp``, and table-valued functions.
4. **Limits** (``Connection.setlimit``): no attached databases, strings and blobs at most
   ``max_value_bytes`` (10 kB), SQL text, expression depth, compound selects and LIKE patterns (100
   characters) capped. These bound the cost of any *single* function call, which no deadline can
   interrupt: with 10 kB values an ``instr`` or ``LIKE`` takes milliseconds.
5. **No clock, bounded printf**: the date functions refuse the clock and the time zone (``'now'``,
   ``X'6E6F77'``, ``date('n' || 'ow')``, a column holding it; the database is a frozen snapshot and answers
   must be reproducible): :mod:`~agentgym.envs.sql.clock` guards their arguments before SQLite compiles
   the query, so that they run natively, and a query it cannot vouch for runs on a second connection
   where they are checked versions of themselves (:class:`_GuardedFunctions`). ``printf``/``format``
   refuse ``*`` and widths over 1,000.
6. **Deadline**: a progress handler, called every 1,000 virtual-machine steps, aborts any statement that
   runs longer than ``time_limit`` seconds (a recursive CTE without end, a cross join of big tables), or
   than the shorter ``time_limit=`` a caller gives :meth:`~ReadOnlySQLite.query` (the rest of a budget).
7. **Bounded output**: rows are read in chunks of at most 64 values; the first ``max_rows`` are kept (at most
   ``max_result_bytes`` in all), the rest are only counted (up to ``max_count``), and at most
   ``max_columns`` result columns are accepted. Text that is not valid UTF-8 is decoded with U+FFFD
   replacement characters instead of failing.

Every refusal or failure is a :class:`QueryError` whose message says what happened and what is
allowed, never a crash, and nothing on disk changes. Example::

    db = ReadOnlySQLite("company.sqlite")
    result = db.query("SELECT name, budget FROM departments ORDER BY budget DESC", max_rows=5)
    result.columns, result.rows, result.total_rows
"""

from __future__ import annotations

import functools
import re
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .clock import CLOCK_GUARD, DATE_FUNCTIONS, ClockRefused, GuardedSQL, clock_guard, guard_dates, is_clock

__all__ = [
    "READ_PRAGMAS",
    "SAFE_FUNCTIONS",
    "Column",
    "QueryError",
    "QueryResult",
    "ReadOnlySQLite",
    "TableInfo",
    "authorizer",
    "check_statement",
]

READ_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list"}
)
"""Pragmas the agent may run, as ``PRAGMA table_info(t)``: schema reads only. (Table-valued functions such as
``pragma_table_info('t')`` and ``json_each`` are refused: SQLite asks to update ``sqlite_master`` to set them up.)"""

SAFE_FUNCTIONS = frozenset(
    # core scalar functions
    "abs char coalesce concat concat_ws format glob hex ifnull iif instr length like likelihood likely lower "
    "ltrim max min nullif octet_length printf quote replace round rtrim sign soundex substr substring trim "
    "typeof unhex unicode unlikely upper "
    # aggregates and window functions
    "avg count group_concat string_agg sum total row_number rank dense_rank percent_rank cume_dist ntile lag "
    "lead first_value last_value nth_value "
    # date and time (on stored dates; the clock is refused at run time), printf/format (widths bounded)
    "date time datetime julianday strftime unixepoch timediff "
    # math
    "acos acosh asin asinh atan atan2 atanh ceil ceiling cos cosh degrees exp floor ln log log10 log2 mod pi "
    "pow power radians sin sinh sqrt tan tanh trunc "
    # JSON
    "json json_array json_array_length json_extract json_group_array json_group_object json_insert json_object "
    "json_patch json_quote json_remove json_replace json_set json_type json_valid".split()
)
"""Functions the agent may call. Absent on purpose: ``load_extension``, ``random``, ``randomblob``,
``zeroblob``, ``current_date``/``current_time``/``current_timestamp``, ``changes``,
``last_insert_rowid``, ``sqlite_*`` introspection and ``fts3_tokenizer``."""

_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, getattr(sqlite3, "SQLITE_RECURSIVE", 33)})
_ACTION_NAMES = {
    getattr(sqlite3, name): name.removeprefix("SQLITE_").replace("_", " ")
    for name in dir(sqlite3)
    if name.startswith(("SQLITE_CREATE_", "SQLITE_DROP_"))
    or name
    in (
        "SQLITE_INSERT",
        "SQLITE_UPDATE",
        "SQLITE_DELETE",
        "SQLITE_ATTACH",
        "SQLITE_DETACH",
        "SQLITE_ALTER_TABLE",
        "SQLITE_REINDEX",
        "SQLITE_ANALYZE",
        "SQLITE_TRANSACTION",
        "SQLITE_SAVEPOINT",
        "SQLITE_PRAGMA",
        "SQLITE_FUNCTION",
    )
}
_READ_ONLY_HINT = "the database is read-only: run one SELECT query (WITH … SELECT, VALUES and EXPLAIN work too)"
_STATEMENTS = frozenset({"SELECT", "WITH", "VALUES", "EXPLAIN", "PRAGMA"})
_LEADING_NOISE = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$)|\()*", re.S)
_PRINTF_SPEC = re.compile(r"%[-+ 0#!,]*(\*|\d*)(?:\.(\*|\d*))?")
_MAX_PRINTF_WIDTH = 1_000


class QueryError(Exception):
    """A query was refused, stopped or failed. The message is meant for the agent; ``kind`` is one of
    ``"refused"`` (a safety rule), ``"timeout"`` (the deadline), ``"error"`` (SQLite's own error)."""

    def __init__(self, message: str, kind: str = "error") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class QueryResult:
    """The outcome of one query: column names, the first rows, and how many rows there were.

    ``total_rows`` is exact unless ``count_capped`` (then there were more than ``total_rows``).
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    total_rows: int
    count_capped: bool = False
    seconds: float = 0.0


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    not_null: bool = False
    primary_key: bool = False
    references: str | None = None
    """``"table.column"`` for a foreign key."""


@dataclass(frozen=True)
class TableInfo:
    """A table's (or view's) schema, row count and a few sample rows, for ``describe_table``."""

    name: str
    kind: str
    columns: tuple[Column, ...]
    row_count: int
    sample: QueryResult = field(repr=False)


def authorizer(action: int, arg1: str | None, arg2: str | None, db_name: str | None, source: str | None) -> int:
    """SQLite authorizer callback: allow reads, :data:`SAFE_FUNCTIONS` and :data:`READ_PRAGMAS`; deny the rest.

    Install with ``connection.set_authorizer(authorizer)``. It is consulted while a statement is
    compiled, for every table and column read, function, pragma, schema change, attach and
    transaction, so a denied statement never starts running.
    """
    if action in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_OK if (arg2 or "").lower() in SAFE_FUNCTIONS else sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA:
        return sqlite3.SQLITE_OK if (arg1 or "").lower() in READ_PRAGMAS else sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_DENY


def _denial(action: int, arg1: str | None, arg2: str | None) -> str:
    """Words for what the authorizer denied."""
    if action == sqlite3.SQLITE_FUNCTION:
        return f"the function {arg2}() is not allowed"
    if action == sqlite3.SQLITE_PRAGMA:
        setting = f" = {arg2}" if arg2 is not None else ""
        return f"PRAGMA {arg1}{setting} is not allowed (only {', '.join(sorted(READ_PRAGMAS))} may be read)"
    if action == sqlite3.SQLITE_UPDATE and arg1 in ("sqlite_master", "sqlite_schema"):
        return "table-valued functions (json_each, pragma_table_info, …) are not available; use PRAGMA table_info(name)"
    what = _ACTION_NAMES.get(action, f"action {action}")
    target = f" {arg1}" if arg1 else ""
    return f"{what}{target} is not allowed"


def check_statement(sql: str, max_sql_chars: int = 10_000) -> str:
    """The query, stripped, if it passes the statement rules; else :class:`QueryError` saying which rule.

    Rules: text (valid Unicode, no NUL), at most ``max_sql_chars`` characters, exactly one statement,
    starting with SELECT, WITH, VALUES, EXPLAIN or PRAGMA. (The clock is refused by
    :mod:`~agentgym.envs.sql.clock` and :class:`_GuardedFunctions`.)
    """
    if not isinstance(sql, str):
        raise QueryError(f"the query must be text, got {type(sql).__name__}", "refused")
    sql = sql.strip()
    if not sql:
        raise QueryError("the query is empty: write one SELECT statement", "refused")
    if len(sql) > max_sql_chars:
        raise QueryError(f"the query is {len(sql):,} characters long; the limit is {max_sql_chars:,}", "refused")
    if "\x00" in sql:
        raise QueryError("the query contains a NUL character", "refused")
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise QueryError(
            f"the query is not valid Unicode text (a lone surrogate {sql[exc.start]!r} at position {exc.start})",
            "refused",
        ) from None
    start = _LEADING_NOISE.match(sql).end()
    keyword = re.match(r"[A-Za-z_]+", sql[start:])
    word = keyword.group().upper() if keyword else sql[start : start + 10]
    if word not in _STATEMENTS:
        raise QueryError(f"{word!s} statements are refused: {_READ_ONLY_HINT}", "refused")
    return sql


class _GuardedFunctions:
    """SQLite's date and ``printf``/``format`` functions, replaced by checked versions of themselves.

    The real function runs on a private in-memory connection with the same length limit, after a check
    of its arguments: the date functions refuse a clock word (:func:`~agentgym.envs.sql.clock.is_clock`)
    and a call without a time value (which means now); ``printf`` refuses ``*`` and widths or precisions
    over 1,000 (``printf('%.*c', 2000000000, 'x')`` would run for seconds inside one call, where no
    deadline can stop it). :meth:`install` puts in the date functions only on the connection for queries
    that :func:`~agentgym.envs.sql.clock.guard_dates` cannot vouch for; the other gets
    ``agentgym_clock_guard`` instead.
    """

    def __init__(self, max_value_bytes: int) -> None:
        self.engine = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.engine.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_value_bytes)
        self.engine.text_factory = _decode_text
        self.refusal: str | None = None

    def install(self, conn: sqlite3.Connection, *, dates: bool) -> None:
        if dates:
            for name, clock_below in DATE_FUNCTIONS.items():
                conn.create_function(name, -1, self._date(name, clock_below), deterministic=True)
        else:
            conn.create_function(CLOCK_GUARD, 1, self._clock_guard, deterministic=True)
        for name in ("printf", "format"):
            conn.create_function(name, -1, self._printf(name), deterministic=True)

    def _refuse(self, reason: str) -> None:
        self.refusal = reason
        raise ValueError(reason)

    def _call(self, name: str, args: tuple) -> Any:
        marks = ", ".join("?" * len(args))
        return self.engine.execute(f"SELECT {name}({marks})", args).fetchone()[0]

    def _clock_guard(self, value: Any) -> Any:
        try:
            return clock_guard(value)
        except ClockRefused as exc:
            self._refuse(str(exc))

    def _date(self, name: str, clock_below: int):
        def guarded(*args: Any) -> Any:
            if len(args) < clock_below or any(map(is_clock, args)):
                self._refuse(str(ClockRefused(name)))
            return self._call(name, args)

        return guarded

    def _printf(self, name: str):
        def guarded(*args: Any) -> Any:
            if args and isinstance(args[0], str):
                for m in _PRINTF_SPEC.finditer(args[0]):
                    for part in m.groups():
                        if part == "*" or (part and int(part[:5]) > _MAX_PRINTF_WIDTH):
                            self._refuse(f"{name}() widths and precisions are limited to {_MAX_PRINTF_WIDTH} (no '*')")
            return self._call(name, args)

        return guarded

    def close(self) -> None:
        self.engine.close()


class ReadOnlySQLite:
    """A SQLite database file opened for reading agent-written SQL safely (see the module docstring).

    Args:
        path: The database file. It is never written; a file in WAL mode is refused (convert it with
            ``PRAGMA journal_mode=DELETE`` first, since reading WAL needs write access to its ``-shm`` file).
        time_limit: Seconds a statement may run before it is stopped.
        max_sql_chars: Longest query text accepted.
        max_value_bytes: Longest string or blob a query may produce (SQLite's ``SQLITE_LIMIT_LENGTH``).
        max_columns: Most result columns accepted.
        max_count: Rows beyond the kept ones are counted up to this number, then counting stops.
        max_result_bytes: Most bytes the kept rows may hold (text and blobs by length, numbers 8 each).

    Any thread may call it, one call at a time (an env is stepped so: the MCP server steps from worker threads).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        time_limit: float = 1.0,
        max_sql_chars: int = 10_000,
        max_value_bytes: int = 10_000,
        max_columns: int = 100,
        max_count: int = 100_000,
        max_result_bytes: int = 1_000_000,
    ) -> None:
        self._settings = {
            "time_limit": time_limit,
            "max_sql_chars": max_sql_chars,
            "max_value_bytes": max_value_bytes,
            "max_columns": max_columns,
            "max_count": max_count,
            "max_result_bytes": max_result_bytes,
        }
        self.path = Path(path).resolve()
        if not self.path.is_file():
            raise FileNotFoundError(f"no SQLite database at {self.path}")
        with self.path.open("rb") as f:
            header = f.read(100)
        if not header.startswith(b"SQLite format 3\x00"):
            raise ValueError(f"{self.path} is not a SQLite 3 database")
        if header[18:20] == b"\x02\x02":
            raise ValueError(
                f"{self.path} is in WAL mode, which cannot be read without writing its -shm file; "
                "convert it once with: sqlite3 FILE 'PRAGMA journal_mode=DELETE'"
            )
        if min(time_limit, max_sql_chars, max_value_bytes, max_columns, max_count, max_result_bytes) <= 0:
            raise ValueError(
                "time_limit, max_sql_chars, max_value_bytes, max_columns, max_count and max_result_bytes "
                "must be positive"
            )
        self.max_result_bytes = int(max_result_bytes)
        self.time_limit = float(time_limit)
        self.max_sql_chars = int(max_sql_chars)
        self.max_columns = int(max_columns)
        self.max_count = int(max_count)
        self._deadline = 0.0
        self._budget: float | None = None  # the caller's shorter time limit for the running statement, if any
        self._denied: str | None = None
        self._date_calls = 0  # date-function calls SQLite compiled in the running statement
        self._vouched: dict[str, None] = {}  # rewritten queries whose compiled calls matched the rewrite
        self._guarded = _GuardedFunctions(int(max_value_bytes))
        self._limits = {
            sqlite3.SQLITE_LIMIT_ATTACHED: 0,
            sqlite3.SQLITE_LIMIT_LENGTH: int(max_value_bytes),
            sqlite3.SQLITE_LIMIT_SQL_LENGTH: self.max_sql_chars * 4,  # bytes of UTF-8
            sqlite3.SQLITE_LIMIT_EXPR_DEPTH: 100,
            sqlite3.SQLITE_LIMIT_COMPOUND_SELECT: 50,
            sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: 100,
            sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH: 1,
            sqlite3.SQLITE_LIMIT_WORKER_THREADS: 0,
        }
        try:
            self._conn: sqlite3.Connection | None = self._connect(dates=False)
        except ValueError:
            self._guarded.close()
            raise
        self._checked_dates: sqlite3.Connection | None = None  # opened for the first query guard_dates cannot vouch for

    def _connect(self, *, dates: bool) -> sqlite3.Connection:
        """A hardened connection; ``dates``: with date functions checked in Python instead of SQLite's own."""
        # check_same_thread=False: before, every query of an env stepped from another thread than the one that made
        # it (the MCP server's workers) failed with "SQLite objects created in a thread can only be used in ...".
        conn = sqlite3.connect(f"{self.path.as_uri()}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA query_only = 1")
            for category, value in self._limits.items():
                conn.setlimit(category, value)
            conn.text_factory = _decode_text
            self._guarded.install(conn, dates=dates)
            conn.set_authorizer(self._authorize)
            conn.set_progress_handler(self._past_deadline, 1_000)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # fail now on a corrupt file
        except sqlite3.Error as exc:
            conn.close()
            raise ValueError(f"cannot read {self.path} as a SQLite database: {exc}") from None
        return conn

    # ------------------------------------------------------------------ internals

    def _authorize(self, action: int, arg1: Any, arg2: Any, db_name: Any, source: Any) -> int:
        if action == sqlite3.SQLITE_FUNCTION:
            if arg2 == CLOCK_GUARD:
                return sqlite3.SQLITE_OK
            if (arg2 or "").lower() in DATE_FUNCTIONS:
                self._date_calls += 1
        verdict = authorizer(action, arg1, arg2, db_name, source)
        if verdict != sqlite3.SQLITE_OK and self._denied is None:
            self._denied = _denial(action, arg1, arg2)
        return verdict

    def _stopped_by(self) -> str:
        """The limit the running statement was held to, in words."""
        if self._budget is not None:
            return f"the {self._budget:.2g} s left of its time budget"
        return f"the {self.time_limit:g} s limit"

    def _past_deadline(self) -> int:
        return time.monotonic() > self._deadline

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise QueryError("the database connection is closed", "error")
        return self._conn

    def _explain(self, exc: BaseException) -> QueryError:
        message = str(exc)
        if self._denied is not None:
            return QueryError(f"refused: {self._denied}; {_READ_ONLY_HINT}", "refused")
        if self._guarded.refusal is not None:
            return QueryError(f"refused: {self._guarded.refusal}", "refused")
        if message == "interrupted":
            return QueryError(
                f"stopped: the query ran longer than {self._stopped_by()} "
                "(an endless recursive CTE or a join without a join condition?)",
                "timeout",
            )
        if "one statement at a time" in message:
            return QueryError("refused: one SQL statement per call; remove everything after the first ';'", "refused")
        if isinstance(exc, sqlite3.DataError) or "too big" in message:
            return QueryError(
                f"refused: {message} (values are limited to {self._max_value_bytes():,} bytes)", "refused"
            )
        if "attached databases" in message or "readonly" in message or "query_only" in message:
            return QueryError(f"refused: {message}; {_READ_ONLY_HINT}", "refused")
        return QueryError(f"SQL error: {message}", "error")

    def _max_value_bytes(self) -> int:
        return self.conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)

    # ------------------------------------------------------------------ public

    def query(self, sql: str, max_rows: int = 20, *, time_limit: float | None = None) -> QueryResult:
        """Run one read-only statement; keep its first ``max_rows`` rows and count the rest.

        ``time_limit``: seconds it may run when less than the database's ``time_limit`` (what is left of a
        caller's budget, such as one agent action's); the timeout's message then names that budget. Raises
        :class:`QueryError` if it is refused, runs past the deadline or fails.
        """
        sql = check_statement(sql, self.max_sql_chars)
        started = time.monotonic()
        if time_limit is not None and time_limit < self.time_limit:
            self._budget = max(0.0, time_limit)
            self._deadline = started + self._budget
        else:
            self._budget = None
            self._deadline = started + self.time_limit
        try:
            guarded = _guard_dates(sql)
        except ClockRefused as exc:
            raise QueryError(f"refused: {exc}", "refused") from None
        conn = self.conn
        if guarded is not None and (
            guarded.calls == 0 or len(guarded.sql.encode()) <= self._limits[sqlite3.SQLITE_LIMIT_SQL_LENGTH]
        ):
            try:
                return self._run(conn, guarded, max_rows, started)
            except _Unvouched:
                pass
            except QueryError as exc:
                if exc.kind != "error":
                    raise
                # SQLite's own error: the slow way below reports it in the agent's words, not the rewrite's
        if self._checked_dates is None:
            self._checked_dates = self._connect(dates=True)
        return self._run(self._checked_dates, None, max_rows, started, sql)

    def _run(
        self, conn: sqlite3.Connection, guarded: GuardedSQL | None, max_rows: int, started: float, sql: str = ""
    ) -> QueryResult:
        """Run ``guarded.sql`` (raising :class:`_Unvouched` if SQLite compiled other date calls than it has), or
        ``sql`` on the connection with checked date functions."""
        self._denied = self._guarded.refusal = None
        self._date_calls = 0
        sql = guarded.sql if guarded is not None else sql
        cursor = None
        try:
            cursor = conn.execute(sql)
            if guarded is not None and sql not in self._vouched:
                if self._date_calls != guarded.calls:
                    raise _Unvouched
                if len(self._vouched) >= 256:
                    self._vouched.clear()
                self._vouched[sql] = None
            description = cursor.description or ()
            if len(description) > self.max_columns:
                raise QueryError(
                    f"refused: the result has {len(description)} columns; the limit is {self.max_columns}", "refused"
                )
            # Rows come in chunks of at most 64 values (each at most max_value_bytes): the first max_rows are kept
            # (their size bounded), the rest only counted, up to max_count.
            fetch, step = cursor.fetchmany, max(1, 64 // max(1, len(description)))
            rows: list[tuple] = []
            size, more = 0, True
            while more and len(rows) < max_rows:
                want = min(step, max_rows - len(rows))
                chunk = fetch(want)
                more = len(chunk) == want
                size += sum(len(v) if isinstance(v, (str, bytes)) else 8 for row in chunk for v in row)
                if size > self.max_result_bytes:
                    raise QueryError(
                        f"refused: the result is larger than {self.max_result_bytes:,} bytes; select fewer or "
                        "shorter columns, or fewer rows",
                        "refused",
                    )
                rows += chunk
            total, capped = len(rows), False
            if more and total == max_rows:
                while total < self.max_count and (chunk := fetch(min(step, self.max_count - total))):
                    total += len(chunk)
                capped = total >= self.max_count and bool(fetch(1))
        except (QueryError, _Unvouched):
            raise
        except (sqlite3.Error, ValueError, OverflowError, MemoryError) as exc:
            raise self._explain(exc) from None
        finally:
            if cursor is not None:
                cursor.close()
        columns = tuple([d[0] for d in description])
        return QueryResult(columns, tuple(rows), total, capped, time.monotonic() - started)

    def tables(self) -> list[str]:
        """Names of the tables and views, in alphabetical order (SQLite's internal ``sqlite_*`` tables left out)."""
        result = self.query(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
            "ORDER BY name",
            max_rows=10_000,
        )
        return [row[0] for row in result.rows]

    def describe(self, table: str, sample_rows: int = 3, *, time_limit: float | None = None) -> TableInfo:
        """Columns (type, NOT NULL, primary key, foreign keys), row count and the first ``sample_rows`` rows; its
        queries together run for at most ``time_limit`` seconds (default: the database's ``time_limit``)."""
        end = time.monotonic() + (self.time_limit if time_limit is None else min(time_limit, self.time_limit))

        def query(sql: str, max_rows: int) -> QueryResult:
            return self.query(sql, max_rows, time_limit=end - time.monotonic())

        names = {name.lower(): name for name in self.tables()}
        if table.lower() not in names:
            raise QueryError(f"no table named {table!r}", "error")
        name = names[table.lower()]
        ident = '"' + name.replace('"', '""') + '"'
        kind = query(f"SELECT type FROM sqlite_master WHERE name = '{_quote(name)}'", 1).rows[0][0]
        fks = {row[3]: f"{row[2]}.{row[4] or 'rowid'}" for row in query(f"PRAGMA foreign_key_list({ident})", 1000).rows}
        columns = tuple(
            Column(
                name=row[1],
                type=row[2] or "",
                not_null=bool(row[3]),
                primary_key=bool(row[5]),
                references=fks.get(row[1]),
            )
            for row in query(f"PRAGMA table_info({ident})", 10_000).rows
        )
        row_count = int(query(f"SELECT count(*) FROM {ident}", 1).rows[0][0])
        sample = query(f"SELECT * FROM {ident} LIMIT {int(sample_rows)}", sample_rows)
        return TableInfo(name, kind, columns, row_count, sample)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            if self._checked_dates is not None:
                self._checked_dates.close()
                self._checked_dates = None
            self._guarded.close()
            self._conn = None

    def __getstate__(self) -> dict[str, Any]:
        # A connection cannot be copied or pickled: a copy opens the same file anew with the same settings.
        return {"path": str(self.path), **self._settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        self.__init__(state.pop("path"), **state)

    def __enter__(self) -> ReadOnlySQLite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class _Unvouched(Exception):
    """SQLite compiled other date calls than :func:`~agentgym.envs.sql.clock.guard_dates` guarded."""


_guard_dates = functools.lru_cache(maxsize=256)(guard_dates)


def _decode_text(data: bytes) -> str:
    """SQLite TEXT → str; bytes that are not UTF-8 become U+FFFD instead of an exception."""
    return data.decode("utf-8", "replace")


def _quote(text: str) -> str:
    return text.replace("'", "''")
