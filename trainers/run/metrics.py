"""Training metrics: one row per episode (or update) to JSONL and CSV, and TensorBoard where installed."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
from pathlib import Path
from typing import Any

from agentgym.core.tool_env import valid_utf8

__all__ = ["MetricsWriter", "read_rows"]


class MetricsWriter:
    """Append metric rows to ``DIR/metrics.jsonl`` as they come; ``DIR/metrics.csv`` on close.

    TensorBoard event files go to ``DIR/tb`` when the ``tensorboard`` package is installed
    (``tensorboard=None``) or when asked for (``tensorboard=True``). Rows stay in :attr:`rows` for
    plotting. ``resume_after=N`` keeps the existing rows whose ``step_key`` is at most N (a resumed
    run; see :func:`read_rows`). Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        tensorboard: bool | None = None,
        step_key: str = "episode",
        resume_after: int | None = None,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.step_key = step_key
        self.rows: list[dict[str, Any]] = []
        path = self.out_dir / "metrics.jsonl"
        if resume_after is not None and path.exists():  # keep the rows up to the checkpoint being resumed
            self.rows = [r for r in read_rows(path, step_key) if r.get(step_key, 0) <= resume_after]
        self._jsonl = path.open("w", encoding="utf-8")
        for row in self.rows:
            self._jsonl.write(_line(row))
        self._tb = None
        if tensorboard or (tensorboard is None and importlib.util.find_spec("tensorboard") is not None):
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(self.out_dir / "tb"))

    def write(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self._jsonl.write(_line(row))
        self._jsonl.flush()
        if self._tb is not None:
            step = int(row.get(self.step_key, len(self.rows)))
            for key, value in row.items():
                if isinstance(value, int | float) and key != self.step_key and math.isfinite(value):
                    self._tb.add_scalar(key, value, step)

    def close(self) -> None:
        if self._jsonl.closed:
            return
        self._jsonl.close()
        fields = list(dict.fromkeys(k for row in self.rows for k in row))
        with (self.out_dir / "metrics.csv").open("w", newline="", encoding="utf-8", errors="replace") as f:
            writer = csv.DictWriter(f, fieldnames=fields)
            writer.writeheader()
            writer.writerows(self.rows)
        if self._tb is not None:
            self._tb.close()

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_rows(path: str | Path, step_key: str = "episode") -> list[dict[str, Any]]:
    """The rows of a ``metrics.jsonl``, for a resumed run.

    Lines end at ``\\n`` only. A last line without its newline that is not a whole row is dropped (the run was
    killed while writing it). Any other line that is not a JSON object, or whose ``step_key`` is not a
    number, raises a one-line ``ValueError`` naming the file and the line.
    """
    path = Path(path)
    lines = path.read_bytes().split(b"\n")
    rows = []
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
        except ValueError as exc:  # not UTF-8 (UnicodeDecodeError), not JSON
            if n == len(lines):  # no newline after it: torn
                break
            reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else f"not JSON: {exc.args[0]}"
            raise ValueError(f"{path}:{n}: not a metrics row ({reason})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{n}: not a metrics row (a JSON object)")
        step = row.get(step_key, 0)
        if isinstance(step, bool) or not isinstance(step, int | float):
            raise ValueError(f"{path}:{n}: not a metrics row ({step_key!r} is {step!r}, not a number)")
        rows.append(row)
    return rows


def _line(row: dict[str, Any]) -> str:
    """A row as a JSON line of valid UTF-8 (a lone surrogate in a text value becomes U+FFFD)."""
    return valid_utf8(json.dumps(row, ensure_ascii=False)) + "\n"
