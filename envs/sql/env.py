"""SQLLookup: answer a question about a SQLite database the agent has never seen, by exploring it with tools."""

from __future__ import annotations

import difflib
import json
import math
import random
import re
from collections.abc import Hashable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from pydantic import Field

from agentgym import core
from agentgym.core import TaskInfo, ToolEnv
from agentgym.core.data import TaskList, check_split, sha256_file
from agentgym.core.tools import ToolCall, ToolError, ToolResult, tool
from agentgym.core.wrappers import DiscreteView, candidate_state_key, candidate_state_keys
from agentgym.envs.sql.dataset import (
    DATABASE_V0,
    DATABASE_V0_SHA256,
    TASKS_V0,
    TASKS_V1,
    TRAINING_DATABASE,
    TRAINING_DATABASE_SHA256,
    TRAINING_TASKS,
    SQLTask,
    load_tasks,
)
from agentgym.envs.sql.safety import QueryError, QueryResult, ReadOnlySQLite, TableInfo

__all__ = [
    "REL_TOL",
    "ABS_TOL",
    "RewardWeights",
    "SQLDatabase",
    "SQLLookupEnv",
    "SQLOracle",
    "looks_empty",
    "results_match",
    "rows_from_value",
    "tables_in",
]

REL_TOL = 1e-6
ABS_TOL = 1e-6
"""Two numbers match when ``math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)``."""

MAX_ANSWER_ROWS = 10_000
"""An answer query may return at most this many rows (more is never a match for these questions)."""

CACHE_BYTES = 8_000_000
"""The query cache of one env holds at most this many bytes of results (then it starts over)."""

CANDIDATES = 4
"""Candidate queries per task in the discrete view: the gold query and three distractors."""

OUTCOMES = ("?", "error", "empty", "rows")
"""What the discrete view remembers of running a candidate: not run, failed, nothing (no rows, or only
0/NULL), or a real result."""


# ============================================================================ the database interface


class SQLDatabase(Protocol):
    """What the env needs from a database. :class:`~agentgym.envs.sql.safety.ReadOnlySQLite` is the
    SQLite implementation; another engine plugs in by implementing these four methods, raising
    :class:`~agentgym.envs.sql.safety.QueryError` (with a message for the agent) for a refused or
    failed query."""

    def tables(self) -> list[str]:
        """Table and view names, in a fixed order."""
        ...

    def describe(self, table: str, sample_rows: int = 3) -> TableInfo:
        """Columns, row count and the first ``sample_rows`` rows of a table (name matched case-insensitively)."""
        ...

    def query(self, sql: str, max_rows: int = 20) -> QueryResult:
        """Run one read-only statement; keep the first ``max_rows`` rows and count them all."""
        ...

    def close(self) -> None: ...


# ============================================================================ the matching rule

_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_GROUPED = re.compile(r"[-+]?\$?\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def _cell(value: Any) -> tuple[int, Any]:
    """A cell in comparable form: (0, None) for NULL, (1, float) for a number or numeric text, (2, text),
    (3, bytes)."""
    if value is None:
        return (0, None)
    if isinstance(value, bool | int | float):
        try:
            number = float(value)
        except OverflowError:  # an int beyond any float: no gold number is that large
            return (2, "overflow")
        return (1, number) if math.isfinite(number) else (2, str(value))
    if isinstance(value, bytes):
        return (3, value)
    text = str(value).strip()
    if _NUMBER.fullmatch(text):
        return (1, float(text))
    if _GROUPED.fullmatch(text):
        return (1, float(text.replace(",", "").replace("$", "")))
    return (2, text)


def _result_bytes(result: QueryResult | QueryError) -> int:
    """What a cached result holds, in bytes (text and blobs by length, other values 8)."""
    if isinstance(result, QueryError):
        return len(str(result))
    return sum(len(v) if isinstance(v, str | bytes) else 8 for row in result.rows for v in row)


def _cells_equal(a: tuple[int, Any], b: tuple[int, Any]) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == 1:
        return math.isclose(a[1], b[1], rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return a[1] == b[1]


def _sort_key(row: tuple[tuple[int, Any], ...]) -> tuple[Any, ...]:
    return tuple((kind, "" if value is None else value) for kind, value in row)


def results_match(got: Sequence[Sequence[Any]], gold: Sequence[Sequence[Any]], ordered: bool) -> bool:
    """The execution-match rule: ``got`` answers the question whose correct result is ``gold``.

    - Same number of rows, and each row has the same number of columns, in the same order (column
      names and aliases do not matter).
    - Rows are compared as a multiset, unless ``ordered`` (the gold query has a top-level ``ORDER BY``):
      then in order.
    - Cells: numbers match within ``REL_TOL``/``ABS_TOL`` (``42``, ``42.0`` and ``'42'`` are the same);
      text must be equal after trimming surrounding spaces (case matters); NULL matches only NULL.
    """
    if len(got) != len(gold):
        return False
    a = [tuple(_cell(v) for v in row) for row in got]
    b = [tuple(_cell(v) for v in row) for row in gold]
    if {len(row) for row in a} != {len(row) for row in b}:
        return False
    if not ordered:
        a.sort(key=_sort_key)
        b.sort(key=_sort_key)
    return all(_cells_equal(x, y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))


def rows_from_value(value: Any, gold: Sequence[Sequence[Any]] = ()) -> list[tuple[Any, ...]]:
    """An ``answer(value)`` as result rows.

    A scalar is a 1×1 result. A list of lists is rows. A flat list is one value per row — or, when the
    gold result is a single row with that many columns, that row. Text holding a JSON list is read as one.
    """
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = json.loads(value)
        except ValueError:
            pass
    if not isinstance(value, list | tuple):
        return [(value,)]
    if value and all(isinstance(v, list | tuple) for v in value):
        return [tuple(v) for v in value]
    if len(gold) == 1 and len(gold[0]) == len(value) > 1:
        return [tuple(value)]
    return [(v,) for v in value]


_SQL_TOKEN = re.compile(
    r"'(?:[^']|'')*(?:'|$)"  # a string literal (unterminated: to the end)
    r'|"(?P<dq>(?:[^"]|"")*)(?:"|$)'  # quoted identifiers: "x", `x`, [x]
    r"|`(?P<bq>[^`]*)(?:`|$)"
    r"|\[(?P<sq>[^\]]*)(?:\]|$)"
    r"|--[^\n]*"  # comments
    r"|/\*(?:[^*]|\*(?!/))*(?:\*/|$)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_$]*)",
)


def tables_in(sql: str, tables: Sequence[str]) -> list[str]:
    """The names in ``tables`` that ``sql`` names as identifiers (bare or quoted; case-insensitive), never inside
    a string literal or a comment, in order of first mention. One linear scan of the text."""
    lookup = {t.lower(): t for t in tables}
    found: dict[str, None] = {}
    for m in _SQL_TOKEN.finditer(sql):
        name = m["word"] or m["dq"] or m["bq"] or m["sq"]
        if name and (table := lookup.get(name.lower())) is not None:
            found[table] = None
    return list(found)


def looks_empty(result: QueryResult) -> bool:
    """No rows, or nothing but 0 and NULL in them (what ``COUNT`` over a wrong filter returns)."""
    return not result.rows or all(v is None or (isinstance(v, int | float) and v == 0) for r in result.rows for v in r)


# ============================================================================ the env


class RewardWeights(core.RewardWeights):
    """SQLLookup's reward terms (all reported in ``info["reward_components"]``)."""

    correct: float = Field(1.0, description="An answer whose result matches the gold result.")
    explore_query: float = Field(
        0.0, description="Process reward: the first run_sql of an episode that returns at least one row."
    )
    tool_cost: float = Field(
        0.0, ge=0, description="Subtracted for every list_tables, describe_table and run_sql call (a budget)."
    )


Answer = str | int | float | bool | None | list[str | int | float | bool | None | list[str | int | float | bool | None]]

_TASK_TEXT = (
    "Question: {question}\n\n"
    "Answer it from a SQLite database you have not seen yet. Explore it with list_tables, describe_table and "
    "run_sql (read-only, one statement per call), then call answer_sql with the query whose result answers "
    "the question (or answer with the value itself). The answer must match the result of a correct query: "
    "the same rows and columns (names do not matter), in the same order when the question asks for an order."
)


class SQLLookupEnv(DiscreteView, ToolEnv):
    """SQLLookup: answer a natural-language question about a SQLite database by exploring it with SQL.

    The agent sees a question ("How many customers are based in Germany?") about a database it has
    not seen, explores the schema and the data with tools, and answers. The answer is scored by
    execution, as in Spider and BIRD: its result is compared with the result of the task's gold query.

    ## Tools
    - ``list_tables()``: the table names.
    - ``describe_table(name)``: columns with types, primary and foreign keys, the row count and 3 sample rows.
    - ``run_sql(query)``: runs one read-only statement; shows at most ``max_rows`` rows as a compact
      table, plus the total row count.
    - ``answer_sql(query)``: the final answer as a query; the env runs it and compares results. Ends
      the episode (a query that fails or is refused does not: fix it and answer again).
    - ``answer(value)``: the final answer as a value — a number or text for a 1×1 result, a list for a
      column, a list of lists for rows. Ends the episode.

    ``answer_sql`` is the main answer tool: it is how Spider and BIRD score, it covers results longer
    than a ``run_sql`` page and it needs no copying of numbers. ``answer`` is there for agents that
    read the answer off a result (or know it) and for scalar questions; both use the same rule.

    ## The matching rule (:func:`results_match`)
    Same number of rows and columns, columns in the same order (names ignored); rows compared as a
    multiset unless the gold query has a top-level ``ORDER BY`` (the question then asks for an order);
    numbers equal within a relative and absolute tolerance of 1e-6 (``42``, ``42.0``, ``"42"``,
    ``"1,234"`` are numbers); text equal after trimming spaces, case-sensitive; NULL equals only NULL.
    A scalar answer is a 1×1 result.

    ## Rewards (``rewards=`` / :class:`RewardWeights`)
    ``correct`` +1.0 for a matching answer; ``explore_query`` (default 0, a process reward) for the first
    ``run_sql`` of an episode that returns at least one row; ``tool_cost`` (default 0) charged for each
    ``list_tables``/``describe_table``/``run_sql`` call; ``invalid_action`` (default 0) for an
    unreadable action. The maximum is 1.0 with the defaults. ``info["success"]`` is True after a
    matching answer.

    Process reward (``process_reward=p``, default 0: off, and every reward is as without it): a ``run_sql``
    that runs without an error (rows or none) pays, in the component ``"process"``, ``p / n`` for each of the
    ``n`` tables of the task's gold query it names that no earlier query of the episode named — once per
    distinct table (:func:`tables_in`: identifiers, not text inside strings or comments). Repeating a query,
    naming a table the gold query does not use, a failing query and the answer tools pay nothing, so an
    episode earns at most ``p`` (``env.unwrapped.process_reward`` is that bound). The success reward is
    unchanged (success rates stay comparable).

    ## Safety
    Every query runs through :class:`~agentgym.envs.sql.safety.ReadOnlySQLite`: read-only open, one
    statement, an authorizer that allows only reads and safe functions, size limits and a
    ``time_limit`` deadline (1 s). One action's queries share a budget of 1.5 × ``time_limit``: each may run
    for what is left of it, and calls reached after it is spent are not run (four slow queries in one action
    take 1.5 s, not 4 s). A refused, stopped or failed query is an ``Error: …`` observation that says why
    (which limit stopped it); the episode goes on and the database file never changes.

    ## Observation and summary
    Text; the state summary reads ``tables seen 3/6 · queries 2 (1 error) · last: 14 rows · answer pending``.
    Through :class:`~agentgym.core.wrappers.DiscreteToolActions`: ``1 + n_tables + 8`` actions — list the
    tables, describe each table, run each of 4 candidate queries, answer with each candidate (the
    gold query and the task's 3 distractors, in a fixed per-task shuffled order) — and 257 states:
    what running each candidate showed (not run / error / empty / rows) plus ``answered``. A table
    cannot read the question, so the best it can learn is to run candidates and avoid those that fail
    or come back empty (each task has one distractor of each kind, so that caps it at 50 %); more than
    chance, less than understanding, which is the point.

    ## Data
    Default: the frozen company database (6 tables, ~5,500 rows; ``agentgym.envs.sql.dataset``) and 180
    questions (106 train, 74 test) in five difficulties (single_table, join, aggregate, nested, date),
    each file verified against its SHA-256. ``split="train"``, ``"test"`` (other instances of the same
    question families) or ``"all"``. ``reset(seed=s)`` draws a task; ``options={"task_index": i}`` picks task ``i``.

    Your own data: ``db_path=`` (any SQLite file in rollback-journal mode; opened read-only) and
    ``tasks_path=`` (JSON Lines, one task a line)::

        {"id": "q1", "question": "How many users signed up in 2023?",
         "gold_sql": "SELECT COUNT(*) FROM users WHERE signup_date LIKE '2023-%'"}

    with optional ``split`` (default ``"train"``), ``ordered`` (default: whether ``gold_sql`` has a
    top-level ``ORDER BY``), ``difficulty`` (one of the five above), ``family`` and ``distractors``
    (wrong queries; 3 per task are needed for the discrete view). Every gold query is run when the env
    is made and must return a non-empty result. Or pass ``database=`` any object implementing
    :class:`SQLDatabase`.

    ``task_set="v1"`` (what ``agentgym/SQLLookup-v1`` passes): 432 questions on the same database (223 train, 209 test),
    up to 24 instances of each family (``agentgym.envs.sql.build.generate.build_tasks_v1``); same rules and reward.
    ``task_set="training"``: the shipped training set, for SFT and RL only (split ``"train"``; no frozen test task is in
    it, by what its SQL means to SQLite): 1,302 questions of the same families on a training database of the same schema
    with more values (``agentgym.envs.sql.build.generate.build_training_set``), small families listed again to ~40.

    ## Arguments
    ``split``, ``task_set``, ``db_path``, ``tasks_path``, ``database`` (above); ``max_rows`` (20) rows shown per
    ``run_sql``; ``time_limit`` (1.0 s) per query; ``rewards``; ``explore_reward`` and ``tool_cost``
    (shortcuts for ``rewards={"explore_query": x}`` and ``{"tool_cost": c}``); ``process_reward`` (above);
    ``query_cache`` (1024)
    results remembered per env — the database is read-only, so a repeated query needs no second run
    (0 turns it off); ``history``; ``render_mode``.

    ## Episode end
    Terminates on an answer; truncates after 12 actions (``max_episode_steps``).

    ## Version history
    - v0: initial version.
    - v1: the v1 question set (432 questions, 209 in the test split); same database, tools, rules and reward.
    """

    def __init__(
        self,
        *,
        split: str = "train",
        task_set: str = "v0",
        db_path: str | Path | None = None,
        tasks_path: str | Path | None = None,
        database: SQLDatabase | None = None,
        max_rows: int = 20,
        time_limit: float = 1.0,
        rewards: RewardWeights | dict[str, float] | None = None,
        explore_reward: float | None = None,
        tool_cost: float | None = None,
        process_reward: float = 0.0,
        query_cache: int = 1024,
        history: int = 0,
        render_mode: str | None = None,
    ) -> None:
        self.rewards: RewardWeights
        super().__init__(
            rewards=RewardWeights.of(rewards, explore_query=explore_reward, tool_cost=tool_cost),
            process_reward=process_reward,
            history=history,
            render_mode=render_mode,
        )
        if not isinstance(max_rows, int) or max_rows < 1:
            raise ValueError(f"max_rows must be a positive int, got {max_rows!r}")
        if not isinstance(query_cache, int) or query_cache < 0:
            raise ValueError(f"query_cache must be a non-negative int, got {query_cache!r}")
        self.max_rows = max_rows
        self.split = check_split(split)
        custom = db_path is not None or tasks_path is not None or database is not None
        if database is not None and db_path is not None:
            raise ValueError("pass db_path= or database=, not both")
        if database is None:
            training = task_set == "training"
            path = Path(db_path) if db_path is not None else TRAINING_DATABASE if training else DATABASE_V0
            expected = TRAINING_DATABASE_SHA256 if training else DATABASE_V0_SHA256
            if db_path is None and sha256_file(path) != expected:
                raise ValueError(f"{path} does not match its shipped checksum: the data changed")
            database = ReadOnlySQLite(path, time_limit=time_limit)
            self.data_checksum = sha256_file(path)
        else:
            self.data_checksum = None
        self.database: SQLDatabase = database
        task_files = {"v0": TASKS_V0, "v1": TASKS_V1, "training": TRAINING_TASKS}
        if task_set not in task_files:
            raise ValueError(f"task_set must be one of {', '.join(task_files)}, got {task_set!r}")
        all_tasks = load_tasks(tasks_path if tasks_path is not None else task_files[task_set])
        if task_set != "v0" and not custom:  # the v0 database with another question file: name the questions
            self.data_checksum = sha256_file(task_files[task_set])
        self.task_list = TaskList(all_tasks, split, self.data_checksum)
        self.tasks: list[SQLTask] = self.task_list.tasks
        self.table_names: list[str] = list(self.database.tables())
        if not self.table_names:
            raise ValueError("the database has no tables")
        self._cache: dict[tuple[str, int], QueryResult | QueryError] = {}
        self._cache_size = query_cache
        self._cache_bytes = 0
        self._gold: dict[str, QueryResult] = {}
        if custom:
            self.validate_tasks()
        short = [t.id for t in self.tasks if len(t.distractors) < CANDIDATES - 1]
        self._discrete_problem = (
            f"the discrete view needs {CANDIDATES - 1} distractors per task; tasks without them: "
            f"{', '.join(short[:5])}{' …' if len(short) > 5 else ''}"
            if short
            else None
        )
        self._start(self.tasks[0])

    # ----------------------------------------------------------------- queries

    def _query(self, sql: str, max_rows: int) -> QueryResult:
        """Run a query through the database, remembering results (the database never changes)."""
        key = (sql.strip(), max_rows)
        hit = self._cache.get(key)
        if hit is None:
            time_limit = self.call_time()
            try:
                hit = self.database.query(sql, max_rows=max_rows, time_limit=time_limit)
            except QueryError as exc:
                hit = exc
                if exc.kind == "timeout" and time_limit is not None and time_limit < self.database.time_limit:
                    raise  # stopped by what was left of an action's budget: it may run in full another time
            if self._cache_size:
                size = _result_bytes(hit) + len(key[0])
                if len(self._cache) >= self._cache_size or self._cache_bytes + size > CACHE_BYTES:
                    self._cache.clear()
                    self._cache_bytes = 0
                self._cache[key] = hit
                self._cache_bytes += size
        if isinstance(hit, QueryError):
            raise hit
        return hit

    def gold_result(self, task: SQLTask | None = None) -> QueryResult:
        """The result of a task's gold query (this episode's task by default)."""
        task = task or self.task
        if task.id not in self._gold:
            try:
                result = self._query(task.gold_sql, MAX_ANSWER_ROWS)
            except QueryError as exc:
                raise ValueError(f"task {task.id!r}: gold_sql fails: {exc}") from None
            if not result.rows:
                raise ValueError(f"task {task.id!r}: gold_sql returns no rows")
            self._gold[task.id] = result
        return self._gold[task.id]

    def validate_tasks(self) -> None:
        """Run every gold query of the split; ``ValueError`` for the first that fails or returns nothing."""
        for task in self.tasks:
            self.gold_result(task)

    # ----------------------------------------------------------------- tools

    def _cost(self) -> dict[str, float]:
        return {"tool_cost": -self.rewards.tool_cost} if self.rewards.tool_cost else {}

    @tool
    def list_tables(self) -> ToolResult:
        """List the tables in the database."""
        return ToolResult(f"Tables ({len(self.table_names)}): {', '.join(self.table_names)}", self._cost())

    @tool
    def describe_table(self, name: str) -> ToolResult:
        """Show a table's columns (type, keys, foreign keys), its row count and 3 sample rows.

        Args:
            name: Table name, as given by list_tables.
        """
        lookup = {t.lower(): t for t in self.table_names}
        table = lookup.get(name.strip().strip('"`[]').lower())
        if table is None:
            close = difflib.get_close_matches(name.lower(), list(lookup), n=1, cutoff=0.5)
            hint = f" Did you mean {lookup[close[0]]!r}?" if close else ""
            return ToolResult(
                f"Error: no table named {name!r}.{hint} Tables: {', '.join(self.table_names)}", self._cost(), error=True
            )
        try:
            info = self.database.describe(table, sample_rows=3, time_limit=self.call_time())
        except QueryError as exc:
            return ToolResult(f"Error: {exc}", self._cost(), error=True)
        self.seen.add(table)
        lines = [f"Table {info.name} ({info.kind}, {info.row_count:,} rows). Columns:"]
        for c in info.columns:
            notes = [c.type or "untyped"]
            if c.primary_key:
                notes.append("primary key")
            if c.not_null and not c.primary_key:
                notes.append("not null")
            if c.references:
                notes.append(f"→ {c.references}")
            lines.append(f"- {c.name}: {', '.join(notes)}")
        lines.append(f"First {len(info.sample.rows)} rows:")
        lines.append(_table(info.sample.columns, info.sample.rows))
        return ToolResult("\n".join(lines), self._cost())

    @tool
    def run_sql(self, query: str) -> ToolResult:
        """Run one read-only SQL query (SQLite dialect) and see its first rows and its row count.

        Args:
            query: One SELECT statement, e.g. "SELECT name FROM departments LIMIT 5".
        """
        self.queries += 1
        try:
            result = self._query(query, self.max_rows)
        except QueryError as exc:
            self.errors += 1
            self.last = "error"
            self.outcomes[query.strip()] = "error"
            return ToolResult(f"Error: {exc}", self._cost(), error=True)
        self.last = f"{result.total_rows:,}{'+' if result.count_capped else ''} row{'s' * (result.total_rows != 1)}"
        self.outcomes[query.strip()] = "empty" if looks_empty(result) else "rows"
        reward = self._cost()
        if self.rewards.explore_query and result.rows and not self.explored:
            self.explored = True
            reward["explore_query"] = self.rewards.explore_query
        if self.process_reward and (new := set(tables_in(query, self.gold_tables)) - self.touched):
            self.touched |= new
            reward["process"] = self.process_reward * len(new) / len(self.gold_tables)
        return ToolResult(_format_result(result, self.max_rows), reward)

    @tool
    def answer_sql(self, query: str) -> ToolResult:
        """Answer with a query whose result answers the question; this ends the episode.

        Args:
            query: One SELECT statement; its result is compared with the correct result.
        """
        try:
            result = self._query(query, MAX_ANSWER_ROWS)
        except QueryError as exc:
            raise ToolError(f"{exc} (the episode goes on: fix the query and answer again)") from None
        if result.count_capped or result.total_rows > len(result.rows):
            return self._judge([], f"{result.total_rows:,}+ rows")
        return self._judge(list(result.rows), _shape(result.rows))

    @tool
    def answer(self, value: Answer) -> ToolResult:
        """Answer with the value itself; this ends the episode.

        Args:
            value: A number or text for a single value, a list for one column, a list of lists for rows.
        """
        gold = self.gold_result().rows
        rows = rows_from_value(value, gold)
        return self._judge(rows, _shape(rows))

    def _judge(self, rows: list[Sequence[Any]], shape: str) -> ToolResult:
        gold = self.gold_result()
        self.correct = results_match(rows, gold.rows, self.task.is_ordered)
        self.answered = True
        reward = {"correct": self.rewards.correct} if self.correct else {}
        if self.correct:
            verdict = "correct"
        else:
            order = ", in order" if self.task.is_ordered else ""
            verdict = f"wrong (the correct result has {_shape(gold.rows)}{order})"
        return ToolResult(f"Answer recorded ({shape}): {verdict}.", reward, terminated=True)

    # ----------------------------------------------------------------- ToolEnv hooks

    def reward_bounds(self) -> tuple[float, float]:
        """Per action: up to ``max_calls_per_step`` calls; each exploring call (``list_tables``,
        ``describe_table``, ``run_sql``) is charged ``tool_cost``, one ``run_sql`` of the episode may earn
        ``explore_query`` and any of them all of ``process_reward``, and an answer that ends the action pays
        ``correct`` or nothing (an ``answer_sql`` that fails pays nothing and goes on). With the default weights:
        ``(0, 1)``."""
        w, calls = self.rewards, self.max_calls_per_step
        paid = [self.invalid_action_reward]
        for m in range(calls + 1):  # exploring calls in the action
            extras = (w.explore_query, self.process_reward, w.explore_query + self.process_reward) if m else ()
            for explore in (0.0, *extras):
                for answer in (0.0, w.correct if m < calls else 0.0):
                    paid.append(-w.tool_cost * m + explore + answer)
        return min(paid), max(paid)

    def _start(self, task: SQLTask) -> None:
        self.task = task
        self.seen: set[str] = set()
        self.queries = 0
        self.errors = 0
        self.last: str | None = None
        self.outcomes: dict[str, str] = {}
        self.explored = False
        self.gold_tables = tables_in(task.gold_sql, self.table_names)
        """The tables the gold query names (the process reward's targets)."""
        self.touched: set[str] = set()
        """The gold tables a query of this episode has named (each paid its process reward once)."""
        self.answered = False
        self.correct = False
        candidates = [task.gold_sql, *task.distractors[: CANDIDATES - 1]]
        random.Random(task.id).shuffle(candidates)
        self.candidates = candidates

    def _reset_task(self, options: dict[str, Any]) -> None:
        self._start(self.task_list.pick(options, self.np_random))
        self.gold_result()  # run the gold query now (once per task), never on the clock of an agent's action

    def call_time_limit(self) -> float:
        """A query's ``time_limit`` (1 s): one action's queries together run at most 1.5 × that."""
        return self.database.time_limit

    def task_prompt(self) -> str:
        return _TASK_TEXT.format(question=self.task.question)

    def summary(self) -> str:
        parts = [f"tables seen {len(self.seen)}/{len(self.table_names)}"]
        queries = f"queries {self.queries}"
        if self.errors:
            queries += f" ({self.errors} error{'s' * (self.errors != 1)})"
        parts.append(queries)
        if self.last is not None:
            parts.append(f"last: {self.last}")
        parts.append(("answer correct" if self.correct else "answer wrong") if self.answered else "answer pending")
        return " · ".join(parts)

    @property
    def success(self) -> bool:
        return self.correct

    @property
    def task_info(self) -> TaskInfo:
        return replace(
            super().task_info,
            discrete_view=not self._discrete_problem,
        )

    def state_key(self) -> Hashable:
        if self.answered:
            return "answered"
        return candidate_state_key("q", self.candidates, self.outcomes)

    def state_keys(self) -> list[Hashable]:
        if self._discrete_problem:
            raise ValueError(self._discrete_problem)
        return candidate_state_keys("q", CANDIDATES, OUTCOMES, "answered")

    def action_menu(self) -> list[str]:
        if self._discrete_problem:
            raise ValueError(self._discrete_problem)
        return (
            [ToolCall("list_tables", {}).to_text()]
            + [ToolCall("describe_table", {"name": t}).to_text() for t in self.table_names]
            + [ToolCall("run_sql", {"query": c}).to_text() for c in self.candidates]
            + [ToolCall("answer_sql", {"query": c}).to_text() for c in self.candidates]
        )

    def oracle(self, run_query: bool = True, describe: bool = True) -> SQLOracle:
        return SQLOracle(self.tasks, self.table_names, run_query=run_query, describe=describe)

    def render_text(self) -> str:
        return f"{self.task.question}\n{self.summary()}\n"

    def close(self) -> None:
        self.database.close()
        super().close()


def _shape(rows: Sequence[Sequence[Any]]) -> str:
    n_rows, n_cols = len(rows), len(rows[0]) if rows else 0
    return f"{n_rows} row{'s' * (n_rows != 1)} × {n_cols} column{'s' * (n_cols != 1)}"


def _cell_text(value: Any, width: int = 60) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.12g}"
    if isinstance(value, bytes):
        return f"<blob {len(value):,} bytes>"
    text = value if isinstance(value, str) else str(value)
    if "\n" in text or "\r" in text:
        text = text.replace("\n", "\\n").replace("\r", "\\r")
    return text if len(text) <= width else text[: width - 1] + "…"


def _table(columns: Sequence[str], rows: Sequence[Sequence[Any]], max_chars: int = 3_000) -> str:
    """Rows as ``a | b`` lines under a header line, cut at ``max_chars``."""
    lines = [" | ".join(_cell_text(c, 40) for c in columns)]
    size = len(lines[0])
    for k, row in enumerate(rows):
        line = " | ".join(_cell_text(v) for v in row)
        if size + len(line) > max_chars:
            lines.append(f"… ({len(rows) - k} more rows not shown: output limit)")
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def _format_result(result: QueryResult, max_rows: int) -> str:
    n = result.total_rows
    if result.count_capped:
        head = f"More than {n:,} rows (counting stopped); the first {len(result.rows)}:"
    elif n == 0:
        return f"0 rows (columns: {', '.join(result.columns)})"
    elif n > len(result.rows):
        head = f"{n:,} rows; the first {len(result.rows)}:"
    else:
        head = f"{n} row{'s' * (n != 1)}:"
    return f"{head}\n{_table(result.columns, result.rows)}"


_STATE = re.compile(r"tables seen (\d+)/\d+ · queries (\d+)")
_QUESTION = re.compile(r"Question: (.*)")


class SQLOracle:
    """The scripted expert: describes the tables the gold query uses, runs the gold query, answers with it.

    It reads only the observation text (the question and the state summary), and knows the tasks'
    gold queries, so it plays any SQLLookup env through the same interface a model does and scores
    100%. ``predict(obs) -> (action_text, None)``. For shorter demonstrations: ``run_query=False`` skips the
    ``run_sql`` turn (it looks up what the query needs with ``describe_table``, then answers); with ``describe=False``
    too it answers at once.
    """

    def __init__(
        self, tasks: Sequence[SQLTask], tables: Sequence[str], *, run_query: bool = True, describe: bool = True
    ) -> None:
        self.gold: dict[str, str] = {}
        for task in tasks:
            self.gold.setdefault(task.question, task.gold_sql)
        self.tables = list(tables)
        self.run_query = run_query
        self.describe = describe

    def tables_of(self, sql: str) -> list[str]:
        """The tables a query names, in order of first mention (:func:`tables_in`)."""
        return tables_in(sql, self.tables)

    def predict(self, observation: str, state: Any = None, deterministic: bool = True) -> tuple[str, None]:
        question = _QUESTION.search(observation or "")
        progress = list(_STATE.finditer(observation or ""))
        gold = self.gold.get(question.group(1).strip()) if question else None
        if gold is None or not progress:
            return ToolCall("list_tables", {}).to_text(), None
        seen, queries = int(progress[-1].group(1)), int(progress[-1].group(2))
        tables = self.tables_of(gold)
        if seen < len(tables) and self.describe:
            return ToolCall("describe_table", {"name": tables[seen]}).to_text(), None
        if queries == 0 and self.run_query:
            return ToolCall("run_sql", {"query": gold}).to_text(), None
        return ToolCall("answer_sql", {"query": gold}).to_text(), None
