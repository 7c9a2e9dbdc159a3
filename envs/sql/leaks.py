"""Whether a training question is a test question, judged by what it means to SQLite, not by its text.

Two texts can ask SQLite the same thing: keywords and identifiers are case-insensitive, an identifier may be quoted
four ways, white space and comments are nothing, and ``LIKE`` ignores ASCII case (``LIKE 'd%'`` and ``LIKE 'D%'``
are one query). :func:`sql_key` writes a query in one form that keeps only what SQLite reads.

A training task leaks a frozen test task (:class:`LeakCheck`) when

- its question is a test question (white space aside), or its gold query has a test gold query's :func:`sql_key`;
- or its question is a near-duplicate of a test question (the same :func:`question_key`: case, white space and
  the final punctuation aside) and both gold queries return the same rows, in any order, on every database the
  check is given (SQLLookup's: v0's and the training database). A near-duplicate whose rows differ somewhere
  asks something else: ``= 'D'`` and ``= 'd'`` pick different rows.
"""

from __future__ import annotations

import re
import sqlite3
import string
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["LeakCheck", "question_key", "sql_key"]

_TOKEN = re.compile(
    r"""--[^\n]*|/\*.*?(?:\*/|\Z)"""  # comments: dropped
    r"""|'(?:[^']|'')*'"""  # a string literal
    r"""|"(?:[^"]|"")*"|\[[^\]]*\]|`(?:[^`]|``)*`"""  # quoted identifiers
    r"""|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"""  # numbers
    r"""|\w+|<>|!=|==|<=|>=|<<|>>|\|\||\S""",
    re.S,
)
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_SAME_OPERATOR = {"==": "=", "<>": "!="}
_MAX_ROWS = 10_000


def sql_key(query: str) -> str:
    """``query`` in one form for every text SQLite reads alike: tokens one space apart, comments and a final ``;``
    dropped, keywords and identifiers (quoted or not) in ASCII lower case, ``==``/``<>`` as ``=``/``!=``, and the
    pattern after ``LIKE`` in ASCII lower case (SQLite's ``LIKE`` ignores ASCII case; ``GLOB`` and ``=`` do not)."""
    tokens: list[str] = []
    for match in _TOKEN.finditer(query):
        token = match.group()
        first = token[0]
        if token.startswith(("--", "/*")):
            continue
        if first == "'":
            if tokens and tokens[-1] == "like":
                token = token.translate(_ASCII_LOWER)
        elif first in '"[`':
            token = token[1:-1].replace(first * 2, first) if first != "[" else token[1:-1]
            token = token.translate(_ASCII_LOWER)
        else:
            token = _SAME_OPERATOR.get(token, token).translate(_ASCII_LOWER)
        tokens.append(token)
    while tokens and tokens[-1] == ";":
        tokens.pop()
    return " ".join(tokens)


def question_key(question: str) -> str:
    """A question with case, runs of white space and its final punctuation made alike: near-duplicates share it."""
    return " ".join(question.casefold().split()).rstrip(" ?.!")


class LeakCheck:
    """Every way a training task can be one of ``test`` (tasks with ``question`` and ``gold_sql``), on
    ``databases`` (the files whose gold results decide near-duplicates). :meth:`reason` says why a candidate
    leaks, or None; :meth:`assert_none` raises for the first leak of a list."""

    def __init__(self, test: Iterable[Any], databases: Sequence[str | Path]) -> None:
        self._test = list(test)
        self._texts = {" ".join(t.question.split()) for t in self._test}
        self._queries = {sql_key(t.gold_sql) for t in self._test}
        self._near: dict[str, list[str]] = {}
        for t in self._test:
            self._near.setdefault(question_key(t.question), []).append(t.gold_sql)
        self._connections = [sqlite3.connect(f"{Path(db).resolve().as_uri()}?mode=ro", uri=True) for db in databases]
        self._results: dict[tuple[int, str], list[str] | None] = {}

    def close(self) -> None:
        for conn in self._connections:
            conn.close()

    def __enter__(self) -> LeakCheck:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reason(self, question: str, gold_sql: str) -> str | None:
        """Why a task asking ``question`` with ``gold_sql`` is a test task, or None if it is not."""
        if " ".join(question.split()) in self._texts:
            return "its question is a test question"
        if sql_key(gold_sql) in self._queries:
            return "its gold query means a test gold query (SQLite's case, quoting and LIKE rules)"
        for test_sql in self._near.get(question_key(question), ()):
            results = [(self._rows(k, gold_sql), self._rows(k, test_sql)) for k in range(len(self._connections))]
            if all(mine is not None and mine == theirs for mine, theirs in results):
                return "its question is a near-duplicate of a test question with the same gold result on every database"
        return None

    def assert_none(self, tasks: Iterable[Any]) -> None:
        """``ValueError`` naming the first of ``tasks`` that is a test task, and why."""
        for task in tasks:
            if (why := self.reason(task.question, task.gold_sql)) is not None:
                raise ValueError(f"training task {task.id!r} is a test question ({why}): {task.question!r}")

    def _rows(self, k: int, query: str) -> list[str] | None:
        """The rows ``query`` returns on database ``k`` as a sorted list of their reprs (order ignored), or None if
        it fails there or returns more than 10,000 rows. Memoised."""
        key = (k, query)
        if key not in self._results:
            try:
                rows = self._connections[k].execute(query).fetchmany(_MAX_ROWS + 1)
                self._results[key] = None if len(rows) > _MAX_ROWS else sorted(map(repr, rows))
            except sqlite3.Error:
                self._results[key] = None
        return self._results[key]
