"""SQLLookup's shipped data and its reader: the company database and the question files in ``data/`` with their
SHA-256 checksums, :class:`SQLTask` (one question with its gold SQL, a line of a tasks file) and :func:`load_tasks`,
which checks a shipped file's checksum before the env reads it.

``data/company_v0.sqlite`` is the database every split is asked about, ``data/sql_tasks_v0.jsonl`` and
``data/sql_tasks_v1.jsonl`` SQLLookup-v0's and -v1's questions, ``data/company_training.sqlite`` and
``data/sql_tasks_training.jsonl`` the training set (``task_set="training"``). They are generated from seeds by
:mod:`agentgym.envs.sql.build.generate` (``python -m agentgym.envs.sql.build.generate``), whose docstring describes
the schema, the question families, their splits and the training set; nothing there runs when an env is made.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentgym.core.data import read_jsonl, write_jsonl

__all__ = [
    "DATABASE_V0",
    "DATABASE_V0_CONTENT_SHA256",
    "DATABASE_V0_SHA256",
    "DATA_DIR",
    "DIFFICULTIES",
    "SQLTask",
    "TASKS_V0",
    "TASKS_V0_SHA256",
    "TASKS_V1",
    "TASKS_V1_SHA256",
    "TRAINING_DATABASE",
    "TRAINING_DATABASE_SHA256",
    "TRAINING_TASKS",
    "TRAINING_TASKS_SHA256",
    "content_sha256",
    "has_top_level_order_by",
    "load_tasks",
    "write_tasks",
]


DATA_DIR = Path(__file__).parent / "data"
DATABASE_V0 = DATA_DIR / "company_v0.sqlite"
TASKS_V0 = DATA_DIR / "sql_tasks_v0.jsonl"
DATABASE_V0_SHA256 = "4e9f4c2c4d335e21bc21d64ffcd250f11b7c201c390035bdbdb7fcaf20e90397"
DATABASE_V0_CONTENT_SHA256 = "07fea8108e1f2070e4dbba9b391a363b25ab6c0ce227a5302637de3b461b208d"
TASKS_V0_SHA256 = "b21ea03af19b7a54a01be0ceb22e0ed3efb3eac0decb161665f5a9b8da685b9b"
TASKS_V1 = DATA_DIR / "sql_tasks_v1.jsonl"
TASKS_V1_SHA256 = "9aba98dd9cd0da072d33618e9b9ab5bb61000062df2400f568a70345b1e094b8"
"""SQLLookup-v1's questions: on the v0 database, the families' instances drawn with another seed
(:func:`~agentgym.envs.sql.build.generate.build_tasks_v1`; rebuild with
``python -m agentgym.envs.sql.build.generate --v1``)."""

DIFFICULTIES = ("single_table", "join", "aggregate", "nested", "date")


def content_sha256(path: str | Path) -> str:
    """SHA-256 of a database's schema and rows (tables by name, rows in primary-key order), as JSON lines.

    Unlike the file's checksum, it does not depend on the SQLite version that wrote the file.
    """
    digest = hashlib.sha256()
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        schema = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()
        for entry in schema:
            digest.update(json.dumps(entry, ensure_ascii=False).encode() + b"\n")
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            for row in conn.execute(f'SELECT * FROM "{table}" ORDER BY 1, 2'):
                digest.update(json.dumps(row, ensure_ascii=False).encode() + b"\n")
    finally:
        conn.close()
    return digest.hexdigest()


class SQLTask(BaseModel):
    """One question with its gold SQL (a line of a tasks JSONL file).

    Only ``id``, ``question`` and ``gold_sql`` are required in a file of your own. ``ordered``
    defaults to whether the gold query has a top-level ``ORDER BY``; ``split`` to ``"train"``;
    ``distractors`` (wrong queries, at least 3 for the discrete view) to none.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    gold_sql: str = Field(min_length=1)
    difficulty: str | None = None
    split: str = "train"
    ordered: bool | None = None
    distractors: tuple[str, ...] = ()
    family: str | None = None

    @field_validator("difficulty")
    @classmethod
    def _known_difficulty(cls, value: str | None) -> str | None:
        if value is not None and value not in DIFFICULTIES:
            raise ValueError(f"difficulty must be one of {', '.join(DIFFICULTIES)} (or left out), got {value!r}")
        return value

    @property
    def is_ordered(self) -> bool:
        return has_top_level_order_by(self.gold_sql) if self.ordered is None else self.ordered


_SQL_NOISE = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", re.S)


def has_top_level_order_by(sql: str) -> bool:
    """Whether ``sql`` ends in an ``ORDER BY`` of its own (not one inside a subquery, CTE or window)."""
    text = _SQL_NOISE.sub(" ", sql)
    depth, flat = 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0:
            flat.append(ch)
    return re.search(r"\border\s+by\b", "".join(flat), re.I) is not None


TRAINING_DATABASE = DATA_DIR / "company_training.sqlite"
TRAINING_TASKS = DATA_DIR / "sql_tasks_training.jsonl"
TRAINING_DATABASE_SHA256 = "1eb1cea42c54cda024b7ab411a398dfc8c9a9c0932997f1ce172038ab8561928"
TRAINING_TASKS_SHA256 = "772bcc8aa76db5a033d7458888cf781815fe20a5ea6c94d243e81bc05f73b3e4"
"""The shipped training set (``task_set="training"``; :func:`~agentgym.envs.sql.build.generate.build_training_set`):
a database of the same schema with more values, and every family's instances there, none a frozen test question
or gold query."""


def write_tasks(tasks: list[SQLTask], path: str | Path) -> str:
    """Write tasks as JSON Lines (one canonical form: keys sorted, UTF-8) and return the file's SHA-256."""
    return write_jsonl(tasks, path)


def load_tasks(path: str | Path = TASKS_V0, sha256: str | None = None) -> list[SQLTask]:
    """Read a tasks JSONL file (see the module docstring); a shipped file's checksum (v0, v1) is always checked.

    Raises ``ValueError`` naming the file and line of a bad record, duplicate ids, or an empty file.
    """
    shipped = {
        TASKS_V0.resolve(): TASKS_V0_SHA256,
        TASKS_V1.resolve(): TASKS_V1_SHA256,
        TRAINING_TASKS.resolve(): TRAINING_TASKS_SHA256,
    }
    expected = shipped.get(Path(path).resolve())
    if sha256 is None:
        sha256 = expected
    # a shipped file: read and checked once per process (trainers make many envs)
    if expected is not None and sha256 == expected:
        key = (Path(path).resolve(), sha256)
        if key not in _SHIPPED_TASKS:
            _SHIPPED_TASKS[key] = read_jsonl(path, SQLTask, sha256=sha256, what="task", unique="id")
        return list(_SHIPPED_TASKS[key])
    return read_jsonl(path, SQLTask, sha256=sha256, what="task", unique="id")


_SHIPPED_TASKS: dict[tuple[Path, str], list[SQLTask]] = {}
