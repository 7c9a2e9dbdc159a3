"""Frozen data files: SHA-256 checksums and JSON Lines records in one canonical form.

A ``-v0`` env's data ships with the package next to its checksum; :func:`read_jsonl` refuses a file
whose checksum differs, so frozen data cannot change silently. :func:`write_jsonl` writes one
canonical form (keys sorted, UTF-8, one record a line), so data rebuilt from its seed is
byte-identical.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

__all__ = ["read_jsonl", "sha256_file", "write_jsonl"]

Record = TypeVar("Record", bound=BaseModel)


def sha256_file(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_jsonl(records: Iterable[BaseModel], path: str | Path) -> str:
    """Write ``records`` in the canonical form and return the file's SHA-256."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r.model_dump(mode="json"), ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    path.write_bytes(text.encode("utf-8"))
    return sha256_file(path)


def read_jsonl(
    path: str | Path, model: type[Record], *, sha256: str | None = None, what: str = "record", unique: str | None = None
) -> list[Record]:
    """Validate every line of ``path`` as ``model``.

    With ``sha256``, a file with another checksum is refused ("the data changed"). With ``unique``,
    two records with the same value of that field are refused. Errors name the file and the line.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no {what} file at {path}")
    if sha256 and (actual := sha256_file(path)) != sha256:
        raise ValueError(f"{what} file {path} has SHA-256 {actual}, expected {sha256}: the data changed")
    records, seen = [], set()
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = model.model_validate_json(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: not a {what} record: {exc}") from None
        if unique is not None:
            key = getattr(record, unique)
            if key in seen:
                raise ValueError(f"{path}:{n}: duplicate {what} {unique} {key!r}")
            seen.add(key)
        records.append(record)
    if not records:
        raise ValueError(f"{what} file {path} holds no {what}s")
    return records
