"""Frozen data files: SHA-256 checksums and JSON Lines records in one canonical form.

A ``-v0`` env's data ships with the package next to its checksum; :func:`read_jsonl` refuses a file
whose checksum differs, so frozen data cannot change silently. :func:`write_jsonl` writes one
canonical form (keys sorted, UTF-8, one record a line), so data rebuilt from its seed is
byte-identical.

:class:`TaskList` is the piece every env with a fixed task list shares: one split of the task set, the checksum of
the data it came from, and the ``reset(options={"task_index": i})`` rule.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

from pydantic import BaseModel, ValidationError

__all__ = ["MAX_FILE_BYTES", "SPLITS", "TaskList", "check_split", "read_jsonl", "sha256_file", "write_jsonl"]

Record = TypeVar("Record", bound=BaseModel)

MAX_FILE_BYTES = 64 * 2**20
"""The largest file :func:`read_jsonl` reads (64 MiB). The shipped files are at most 149 kB (the SQL tasks), so
a data set of your own may be 400 times larger, while a wrong path (a disk image, a log) is refused at once
instead of filling memory. Measured at the limit: 385,000 weather records take 7 s and 0.45 GB to read,
73,000 SQL tasks 1.5 s."""

_PROBLEM_CHARS = 200  # a validation problem is quoted up to this many characters


SPLITS = ("train", "test", "all")
"""The splits a task list is played on: its train or test tasks, or all of them."""

Task = TypeVar("Task")


def check_split(split: Any) -> str:
    """``split`` if it is one of :data:`SPLITS`; else ``ValueError`` naming them."""
    if split not in SPLITS:
        raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
    return split


class TaskList(Generic[Task]):
    """The tasks an env plays: those of ``split`` among ``tasks`` (each has a ``.split``), in order, with the
    SHA-256 of the data they came from (``data_checksum``, None for data without one); an env's ``task_info`` reads
    ``len``, ``split`` and ``data_checksum`` here, and its ``_reset_task`` calls :meth:`pick`.

    ``ValueError`` for an unknown split, or one with no tasks (naming the splits the tasks have)."""

    def __init__(self, tasks: Iterable[Task], split: str, data_checksum: str | None = None) -> None:
        every = list(tasks)
        self.split, self.data_checksum = check_split(split), data_checksum
        self.index: int | None = None
        """The index of the task :meth:`pick` last returned (None before the first)."""
        self.tasks: list[Task] = [t for t in every if split == "all" or getattr(t, "split", None) == split]
        if not self.tasks:
            splits = sorted({str(getattr(t, "split", None)) for t in every})
            raise ValueError(f"no tasks in split {split!r}; the tasks file has splits {splits} (or use split='all')")

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __getitem__(self, index: int) -> Task:
        return self.tasks[index]

    def pick(self, options: Mapping[str, Any], rng: Any) -> Task:
        """The task ``reset`` plays: ``options["task_index"]`` if given (``ValueError`` outside ``[0, len)``), else
        one drawn with the env's ``rng`` (``np_random``)."""
        index = options.get("task_index")
        if index is None:
            index = int(rng.integers(len(self.tasks)))
        elif not isinstance(index, int | float) or not 0 <= int(index) < len(self.tasks):
            raise ValueError(f"task_index must be in [0, {len(self.tasks)}), got {index!r}")
        self.index = int(index)
        return self.tasks[self.index]


def sha256_file(path: str | Path) -> str:
    """The SHA-256 of a file, read in 1 MiB chunks (memory does not grow with the file)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        while chunk := f.read(2**20):
            digest.update(chunk)
    return digest.hexdigest()


def write_jsonl(records: Iterable[BaseModel], path: str | Path) -> str:
    """Write ``records`` in the canonical form and return the file's SHA-256."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r.model_dump(mode="json"), ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    path.write_bytes(text.encode("utf-8"))
    return sha256_file(path)


@overload
def read_jsonl(
    path: str | Path, model: type[Record], *, sha256: str | None = ..., what: str = ..., unique: str | None = ...
) -> list[Record]: ...


@overload
def read_jsonl(
    path: str | Path, model: None = ..., *, sha256: str | None = ..., what: str = ..., unique: str | None = ...
) -> list[dict[str, Any]]: ...


def read_jsonl(
    path: str | Path,
    model: type[Record] | None = None,
    *,
    sha256: str | None = None,
    what: str = "record",
    unique: str | None = None,
) -> list[Record] | list[dict[str, Any]]:
    """Validate every line of ``path`` as ``model`` (without a model: as a JSON object, returned as a dict).

    Lines end at ``\\n`` only (a record's text may hold U+2028 and other characters ``str.splitlines`` breaks
    at); blank lines are skipped. With ``sha256``, a file with another checksum is refused ("the data
    changed"). With ``unique``, two records with the same value of that field are refused. A file larger
    than :data:`MAX_FILE_BYTES` is refused unread. Every refusal is a one-line ``ValueError`` (``FileNotFoundError``
    for a missing file) that names the file, and the line for a bad record.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no {what} file at {path}")
    content = _read_bounded(path, what)
    if sha256 and (actual := hashlib.sha256(content).hexdigest()) != sha256:
        raise ValueError(f"{what} file {path} has SHA-256 {actual}, expected {sha256}: the data changed")
    records: list[Any] = []
    seen = set()
    for n, raw in enumerate(content.split(b"\n"), 1):
        if not raw.strip():
            continue
        record = _parse_line(raw, model, f"{path}:{n}", what if what.endswith("record") else f"{what} record")
        if unique is not None:
            key = record.get(unique) if isinstance(record, dict) else getattr(record, unique)
            if key in seen:
                raise ValueError(f"{path}:{n}: duplicate {what} {unique} {key!r}")
            seen.add(key)
        records.append(record)
    if not records:
        raise ValueError(f"{what} file {path} holds no {what}s")
    return records


def _read_bounded(path: Path, what: str) -> bytes:
    """The file's bytes, refusing one over the limit by its size, or (a size ``stat`` does not know) as read."""
    limit = MAX_FILE_BYTES
    with path.open("rb") as f:
        if (size := os.fstat(f.fileno()).st_size) > limit:
            raise ValueError(f"{what} file {path} is {size:,} bytes; the limit is {limit:,}")
        content = f.read(limit + 1)
    if len(content) > limit:
        raise ValueError(f"{what} file {path} is more than {limit:,} bytes; the limit is {limit:,}")
    return content


def _parse_line(raw: bytes, model: type[BaseModel] | None, where: str, noun: str) -> Any:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        if model is not None:
            return model.model_validate_json(line)
        value = json.loads(line)
    except ValidationError as exc:
        raise ValueError(f"{where}: not a {noun} ({_first_problem(exc)})") from None
    except ValueError as exc:  # json.JSONDecodeError, or a validator's own error outside pydantic
        raise ValueError(f"{where}: not a {noun} ({_one_line(str(exc))})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{where}: not a {noun} (Input should be an object)")
    return value


def _first_problem(exc: ValidationError) -> str:
    """``field: message`` of the first problem, and how many more there are."""
    errors = exc.errors(include_url=False)
    if not errors:
        return _one_line(str(exc))
    loc = ".".join(map(str, errors[0]["loc"]))
    text = f"{loc}: {errors[0]['msg']}" if loc else str(errors[0]["msg"])
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return _one_line(text) + more


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    text = text.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate from a JSON escape, if quoted
    return text if len(text) <= _PROBLEM_CHARS else text[: _PROBLEM_CHARS - 1] + "…"
