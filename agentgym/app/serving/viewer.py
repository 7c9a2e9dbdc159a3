"""``agentgym view [RUN_DIR ...]``: a local web page for runs and episodes, and a page to play an env by hand.

::

    agentgym eval --env WeatherRun-v0 --agent oracle --out runs/oracle
    agentgym view runs --port 8770        # open the printed URL

The server (FastAPI on uvicorn, the ``serve`` extra) reads the run folders given — every folder under them that
holds a ``summary.json``, an ``episodes.jsonl`` or a ``metrics.jsonl`` (what ``agentgym eval --out`` and the
trainers write) — and serves a page shipped in the package (``agentgym/app/serving/static``; nothing from a CDN):

- **Runs**: env, split, agent, episodes, success with its 95 % interval, mean return, provenance, per-tag results;
- **Episodes** of a run, a page at a time, filtered on the server (success, tag, truncated, invalid actions, a
  text search); one episode turn by turn: observation, action as written, the parsed call and the parser's
  format label (the run's env interprets the action again; interpretation is pure in the text), each reward
  component and the state summary;
- **Compare** two runs on the same task list: the tasks whose success flipped;
- **Curves** of a training run's ``metrics.jsonl``;
- **Play**: any registered env through its tool-call interface; an episode played there is written as an
  :class:`~agentgym.core.episode.EpisodeRecord` to ``PLAY_DIR/<env>/episodes.jsonl`` (with a ``run.json``), so it shows
  in the viewer and feeds ``agentgym data``.

Hostile files. Every string is shown as text (the page sets ``textContent``, never HTML). An ``episodes.jsonl`` is
indexed once (the byte offset of each line) and read a line at a time, so a run of 100,000 episodes opens in about
a second; the browser never gets the whole file. A line that is not an episode (torn, not UTF-8, not a record:
:meth:`EpisodeRecord.from_line` says why) is listed as such with its reason, never dropped or fatal. A line over
:data:`MAX_LINE_BYTES` is not read. The server binds 127.0.0.1 unless ``--host`` says otherwise.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import threading
import uuid
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import gymnasium as gym
from pydantic import BaseModel, Field

from agentgym.app.evaluation.reports import error_line, load_summary, to_json
from agentgym.app.serving.env_server import BoundedUvicorn, ServerLimits
from agentgym.core.episode import EpisodeRecord, append_episodes
from agentgym.core.registration import ENV_IDS, resolve_env_id
from agentgym.core.summary import RunConfig, episode_tasks
from agentgym.core.tool_env import tools_of, valid_utf8

__all__ = ["EpisodeIndex", "RunCatalog", "ViewerServer", "build_app"]

STATIC = Path(__file__).with_name("static")
RUN_FILES = ("summary.json", "episodes.jsonl", "metrics.jsonl")
MAX_LINE_BYTES = 16 << 20  # one episode line; a longer one is listed as unreadable, never loaded
MAX_PAGE = 200  # episodes per page
MAX_RUNS = 2000  # run folders found under the roots
MAX_DEPTH = 6  # folders below a root searched for runs
MAX_METRIC_ROWS = 2000  # points per curve sent to the browser (longer runs are thinned evenly)
MAX_SUMMARY_BYTES = 64 << 20
MAX_PLAY_SESSIONS = 16
MAX_SEARCH_CHARS = 200


# ---------------------------------------------------------------------------------------------- episodes files


@dataclass
class LineFacts:
    """What the filters need from one line (computed once per line, on the first filtered listing)."""

    ok: bool
    success: bool = False
    truncated: bool = False
    invalid: bool = False
    tags: tuple[tuple[str, str], ...] = ()
    task: Any = None


class EpisodeIndex:
    """The byte offsets of an ``episodes.jsonl``'s lines, found by one pass over the file (and extended when the
    file grows, as a running eval appends). :meth:`record` reads one line; the file is never loaded whole."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.starts = array("q")
        self.ends = array("q")
        self._scanned = 0  # bytes indexed so far (up to the last newline seen)
        self._lock = threading.Lock()
        self._tail = False  # the last indexed line has no newline yet
        self.facts: list[LineFacts | None] = []

    def refresh(self) -> int:
        """Index lines appended since the last call; the number of lines."""
        with self._lock:
            try:
                size = self.path.stat().st_size
            except OSError:
                return len(self.starts)
            if size < self._scanned:  # rewritten: start over
                self.starts, self.ends, self._scanned, self.facts, self._tail = array("q"), array("q"), 0, [], False
            if size > self._scanned or self._tail:
                if self._tail:  # index the unfinished last line again: it may have grown or ended
                    self.starts.pop(), self.ends.pop()
                    self.facts[len(self.starts) :] = []
                with self.path.open("rb") as f:
                    f.seek(self._scanned)
                    pos, start = self._scanned, self._scanned
                    while chunk := f.read(1 << 20):
                        at = chunk.find(b"\n")
                        while at != -1:
                            end = pos + at
                            if end > start:
                                self.starts.append(start)
                                self.ends.append(end)
                            start = end + 1
                            at = chunk.find(b"\n", at + 1)
                        pos += len(chunk)
                    self._scanned = start
                    if pos > start:  # a last line without its newline: shown (a torn line says so), not indexed
                        self.starts.append(start)
                        self.ends.append(pos)
                        self._tail = True  # indexed again next time, when it may be whole
                    else:
                        self._tail = False
            n = len(self.starts)
            self.facts.extend([None] * (n - len(self.facts)))
            del self.facts[n:]
            return n

    def raw(self, i: int, f: BinaryIO | None = None) -> bytes | str:
        """Line ``i``'s bytes, or why it is not read (``f``: the file, already open, for a pass over many lines)."""
        start, end = self.starts[i], self.ends[i]
        if end - start > MAX_LINE_BYTES:
            return f"line of {end - start:,} bytes, over the viewer's {MAX_LINE_BYTES:,}-byte limit"
        if f is None:
            with self.path.open("rb") as f:
                f.seek(start)
                return f.read(end - start)
        f.seek(start)
        return f.read(end - start)

    def record(self, i: int, f: BinaryIO | None = None) -> EpisodeRecord | str:
        """Line ``i`` as an :class:`EpisodeRecord`, or a one-line reason it is not one."""
        raw = self.raw(i, f)
        if isinstance(raw, str):
            return raw
        try:
            return EpisodeRecord.from_line(raw.decode("utf-8"))
        except ValueError as exc:  # UnicodeDecodeError, JSONDecodeError, pydantic's ValidationError
            torn = " (torn: the file ends without a newline)" if i == len(self.starts) - 1 and self._tail else ""
            reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else error_line(exc)
            return f"not an episode record{torn}: {reason}"


# ---------------------------------------------------------------------------------------------- runs


@dataclass
class Run:
    """One run folder: its summary or settings where present, its episodes index, its training curves."""

    id: str
    path: Path
    summary: dict[str, Any] | None = None
    problem: str | None = None
    config: dict[str, Any] | None = None
    episodes: EpisodeIndex | None = None
    _env: Any = field(default=None, repr=False)
    _env_tried: bool = False

    @property
    def env_id(self) -> str | None:
        for source in (self.summary, self.config):
            if source and isinstance(source.get("env_id"), str):
                return source["env_id"]
        return None

    def env(self) -> Any:
        """The run's env (``gym.make`` of its env id and kwargs), to interpret actions and read task tags; None
        when it cannot be made."""
        if not self._env_tried:
            self._env_tried = True
            source = self.summary or self.config or {}
            kwargs = source.get("env_kwargs") if isinstance(source.get("env_kwargs"), dict) else {}
            try:  # only agentgym's own ids: gym.make("module:Env") would import whatever module a file names
                self._env = gym.make(self.env_id, **kwargs) if self.env_id in ENV_IDS else None
            except Exception:  # a run of an env this install lacks, or kwargs it refuses: shown without them
                self._env = None
        return self._env


def _read_json(path: Path) -> dict[str, Any]:
    if path.stat().st_size > MAX_SUMMARY_BYTES:
        raise ValueError(f"{path.name} is over {MAX_SUMMARY_BYTES:,} bytes")
    data = json.loads(path.read_bytes().decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path.name} is not a JSON object")
    return data


class RunCatalog:
    """The runs under ``roots`` (a root that is itself a run counts), found again on each :meth:`scan`."""

    def __init__(self, roots: list[str | Path]) -> None:
        self.roots = [Path(r) for r in roots]
        self.runs: dict[str, Run] = {}
        self._lock = threading.Lock()

    def _folders(self) -> list[tuple[str, Path]]:
        found: list[tuple[str, Path]] = []
        for n, root in enumerate(self.roots):
            for here, dirs, files in os.walk(root):
                depth = len(Path(here).relative_to(root).parts)
                dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if depth < MAX_DEPTH else []
                if any(f in files for f in RUN_FILES):
                    rel = Path(here).relative_to(root).as_posix()
                    found.append((f"{n}:{rel}", Path(here)))
                    if len(found) >= MAX_RUNS:
                        return found
        return found

    def scan(self) -> list[Run]:
        """Find the runs (new folders added, known ones refreshed); sorted by path."""
        with self._lock:
            for run_id, path in self._folders():
                run = self.runs.get(run_id) or Run(run_id, path)
                self.runs[run_id] = run
                run.summary, run.problem = None, None
                if (path / "summary.json").is_file():
                    try:
                        run.summary = json.loads(to_json(load_summary(path)))
                    except (ValueError, OSError) as exc:
                        run.problem = error_line(exc)
                for name in ("run.json", "config.json"):
                    if run.config is None and (path / name).is_file():
                        try:
                            run.config = _read_json(path / name)
                        except (ValueError, OSError):
                            pass
                if run.episodes is None and (path / "episodes.jsonl").is_file():
                    run.episodes = EpisodeIndex(path / "episodes.jsonl")
            return sorted(self.runs.values(), key=lambda r: str(r.path))

    def get(self, run_id: str) -> Run:
        run = self.runs.get(run_id)
        if run is None:
            raise LookupError(f"no run {run_id!r}")
        return run


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def run_row(run: Run) -> dict[str, Any]:
    """A run as the runs page lists it."""
    s = run.summary or {}
    config = run.config or {}
    n = run.episodes.refresh() if run.episodes else 0
    provenance = ((s.get("timing") or {}).get("provenance")) or {}
    return {
        "id": run.id,
        "path": str(run.path),
        "env_id": run.env_id,
        "split": s.get("split", config.get("split")),
        "agent": s.get("agent") or _text(config.get("agent")) or _text(config.get("algorithm")),
        "model": _text((s.get("agent_settings") or {}).get("model")) or _text(config.get("model")),
        "episodes": s.get("episodes"),
        "lines": n,
        "success_rate": s.get("success_rate"),
        "success_ci95": s.get("success_ci95"),
        "mean_return": s.get("mean_return"),
        "data_checksum": s.get("data_checksum"),
        "package_version": s.get("package_version"),
        "git_commit": provenance.get("git_commit"),
        "by_tag": s.get("by_tag") or {},
        "has_metrics": (run.path / "metrics.jsonl").is_file(),
        "problem": run.problem,
    }


def _facts(run: Run, i: int, f: BinaryIO | None = None) -> LineFacts:
    index = run.episodes
    assert index is not None
    if (cached := index.facts[i]) is not None:
        return cached
    record = index.record(i, f)
    if isinstance(record, str):
        facts = LineFacts(ok=False)
    else:
        env = run.env()
        task = episode_tasks(env, [record.reset])[:1] if env is not None else []
        tags = tuple(sorted(task[0].tags.items())) if task and task[0] is not None else ()
        key = task[0].task if task and task[0] is not None else json.dumps(record.reset, sort_keys=True, default=str)
        facts = LineFacts(
            ok=True,
            success=record.success,
            truncated=record.truncation is not None,
            invalid=not all(record.valid),
            tags=tags,
            task=key,
        )
    index.facts[i] = facts
    return facts


def episode_row(run: Run, i: int) -> dict[str, Any]:
    """One line of a run's episodes list."""
    assert run.episodes is not None
    record = run.episodes.record(i)
    if isinstance(record, str):
        return {"line": i + 1, "problem": record}
    return {
        "line": i + 1,
        "index": record.index,
        "success": record.success,
        "total_reward": record.total_reward,
        "turns": record.turns,
        "truncation": record.truncation,
        "invalid": sum(not v for v in record.valid),
        "error": record.error,
        "task": valid_utf8(record.observations[0][:160]) if record.observations else "",
    }


class EpisodeQuery(BaseModel):
    """A page of a run's episodes, filtered: ``outcome`` success/failure, ``tag`` NAME=VALUE, ``truncated``,
    ``invalid`` (any invalid action), ``q`` (a text the line holds, case-insensitive)."""

    offset: int = Field(0, ge=0)
    limit: int = Field(50, ge=1, le=MAX_PAGE)
    outcome: str | None = Field(None, pattern="^(success|failure)$")
    tag: str | None = Field(None, max_length=400)
    truncated: bool | None = None
    invalid: bool | None = None
    q: str | None = Field(None, max_length=MAX_SEARCH_CHARS)


def list_episodes(run: Run, query: EpisodeQuery) -> dict[str, Any]:
    """The page of ``run``'s episodes ``query`` asks for, with the count of all that match."""
    if run.episodes is None:
        return {"total": 0, "lines": 0, "items": []}
    n = run.episodes.refresh()
    filtered = query.outcome or query.tag or query.truncated is not None or query.invalid is not None or query.q
    if not filtered:
        lines = range(query.offset, min(n, query.offset + query.limit))
        return {"total": n, "lines": n, "items": [episode_row(run, i) for i in lines]}
    needle = query.q.lower().encode("utf-8") if query.q else None
    escaped = json.dumps(query.q.lower())[1:-1].encode("utf-8") if query.q else None
    tag = tuple(query.tag.split("=", 1)) if query.tag and "=" in query.tag else None
    matched: list[int] = []
    with run.episodes.path.open("rb") as file:  # one pass over the lines, in file order
        for i in range(n):
            if _matches(run, i, file, needle, escaped, tag, query):
                matched.append(i)
    page = matched[query.offset : query.offset + query.limit]
    return {"total": len(matched), "lines": n, "items": [episode_row(run, i) for i in page]}


def _matches(
    run: Run, i: int, file: BinaryIO, needle: bytes | None, escaped: bytes | None, tag: Any, query: EpisodeQuery
) -> bool:
    assert run.episodes is not None
    if needle is not None and escaped is not None:
        raw = run.episodes.raw(i, file)
        text = raw.lower() if isinstance(raw, bytes) else b""
        if needle not in text and escaped not in text:
            return False
    if query.outcome or tag or query.truncated is not None or query.invalid is not None:
        f = _facts(run, i, file)
        if not f.ok:
            return False
        if query.outcome and f.success != (query.outcome == "success"):
            return False
        if tag and tag not in f.tags:
            return False
        if query.truncated is not None and f.truncated != query.truncated:
            return False
        if query.invalid is not None and f.invalid != query.invalid:
            return False
    return True


def _call_view(env: Any, action: str) -> dict[str, Any]:
    """How the env reads ``action``: its calls, the parser's format label, canonical or not, the error."""
    if env is None or not hasattr(env.unwrapped, "interpret"):
        return {"format": None, "canonical": None, "calls": [], "error": "the run's env is not available here"}
    try:
        interp = env.unwrapped.interpret(action)
    except Exception as exc:  # an env's fallback reader that fails is shown, not fatal
        return {"format": None, "canonical": None, "calls": [], "error": error_line(exc)}
    calls = [{"name": c.name, "arguments": c.arguments} for c in interp.parse.calls]
    return {
        "format": interp.parse.format,
        "canonical": interp.parse.canonical,
        "calls": json.loads(json.dumps(calls, default=str)),
        "error": interp.error,
    }


def episode_detail(run: Run, line: int) -> dict[str, Any]:
    """Line ``line`` (1-based) of ``run``'s episodes, turn by turn; a line that is not an episode says why."""
    if run.episodes is None or not 1 <= line <= run.episodes.refresh():
        raise LookupError(f"no episode at line {line}")
    record = run.episodes.record(line - 1)
    if isinstance(record, str):
        return {"line": line, "problem": record}
    env = run.env()
    data = json.loads(to_json(record))
    turns = []
    for t, action in enumerate(data["actions"]):
        turns.append(
            {
                "turn": t + 1,
                "observation": data["observations"][t] if t < len(data["observations"]) else "",
                "summary": data["summaries"][t] if t < len(data["summaries"]) else "",
                "action": action,
                "call": _call_view(env, action),
                "reward": data["rewards"][t] if t < len(data["rewards"]) else None,
                "components": data["reward_components"][t] if t < len(data["reward_components"]) else {},
                "valid": data["valid"][t] if t < len(data["valid"]) else None,
                "canonical": data["canonical"][t] if t < len(data["canonical"]) else None,
            }
        )
    n = len(data["actions"])
    final = {
        "observation": data["observations"][n] if n < len(data["observations"]) else None,
        "summary": data["summaries"][n] if n < len(data["summaries"]) else None,
    }
    keep = ("index", "reset", "success", "terminated", "truncation", "error", "attempt", "total_reward", "turns")
    return {"line": line, "run": run.id, "env_id": run.env_id, **{k: data[k] for k in keep}, "turns_": turns,
            "final": final}  # fmt: skip


def compare(a: Run, b: Run) -> dict[str, Any]:
    """Success on the tasks both runs played (matched by task, else by the reset that chose it); the flips."""

    def outcomes(run: Run) -> dict[str, bool]:
        out: dict[str, bool] = {}
        if run.episodes is not None:
            with run.episodes.path.open("rb") as file:
                facts = [_facts(run, i, file) for i in range(run.episodes.refresh())]
            for f in facts:
                if f.ok:
                    out[str(f.task)] = f.success  # the latest record of a task wins (resumed runs)
        return out

    oa, ob = outcomes(a), outcomes(b)
    both = [k for k in oa if k in ob]
    flips = [{"task": k, "a": oa[k], "b": ob[k]} for k in both if oa[k] != ob[k]]
    return {
        "a": a.id,
        "b": b.id,
        "shared": len(both),
        "only_a": len(oa) - len(both),
        "only_b": len(ob) - len(both),
        "a_success": sum(oa[k] for k in both),
        "b_success": sum(ob[k] for k in both),
        "gained": sum(1 for f in flips if f["b"]),
        "lost": sum(1 for f in flips if not f["b"]),
        "flips": flips[: MAX_PAGE * 5],
    }


def metric_curves(run: Run) -> dict[str, Any]:
    """The numeric (and true/false) columns of ``metrics.jsonl`` as curves over its step column (``step`` or
    ``episode``); at most :data:`MAX_METRIC_ROWS` rows, evenly spaced, of a longer log."""
    path = run.path / "metrics.jsonl"
    if not path.is_file():
        return {"x": None, "curves": {}}
    index = EpisodeIndex(path)  # the same line index: a long log is read a line at a time
    n = index.refresh()
    stride = max(1, -(-n // MAX_METRIC_ROWS))
    rows: list[dict[str, Any]] = []
    bad = 0
    for i in range(0, n, stride):
        raw = index.raw(i)
        try:
            row = json.loads(raw) if isinstance(raw, bytes) else None
        except ValueError:
            row = None
        if not isinstance(row, dict):
            bad += 1
            continue
        rows.append(row)
    x = next((k for k in ("step", "episode") if rows and all(k in r for r in rows)), None)
    curves: dict[str, list[list[float]]] = {}
    for j, row in enumerate(rows):
        xv = row.get(x) if x else j
        if isinstance(xv, bool) or not isinstance(xv, int | float) or not math.isfinite(xv):
            xv = j  # a step that is no number is drawn at its row
        for key, value in row.items():
            if key != x and isinstance(value, int | float) and math.isfinite(value):  # a bool (success) as 0/1
                curves.setdefault(valid_utf8(str(key))[:80], []).append([xv, float(value)])
    return {"x": x, "rows": n, "shown": len(rows), "unreadable": bad, "curves": dict(list(curves.items())[:64])}


# ---------------------------------------------------------------------------------------------- play by hand


class PlayStart(BaseModel):
    env_id: str = Field(max_length=200)
    seed: int | None = Field(None, ge=0, le=2**31 - 1)


class PlayStep(BaseModel):
    action: str = Field(max_length=1 << 17)


@dataclass
class PlaySession:
    env: Any
    env_id: str
    record: EpisodeRecord
    done: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class PlayRoom:
    """Episodes played by hand; each finished one is appended to ``out_dir/<env name>/episodes.jsonl``."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.sessions: dict[str, PlaySession] = {}
        self._lock = threading.Lock()

    def start(self, body: PlayStart) -> dict[str, Any]:
        env_id = resolve_env_id(body.env_id)
        if env_id not in ENV_IDS:
            raise ValueError(f"{body.env_id!r} is not an agentgym env; these are: {', '.join(ENV_IDS)}")
        seed = body.seed if body.seed is not None else secrets.randbelow(2**31)
        env = gym.make(env_id)
        observation, info = env.reset(seed=seed)
        record = EpisodeRecord(reset={"seed": seed, "options": None})
        record.start(observation, info)
        session_id = uuid.uuid4().hex
        with self._lock:
            if len(self.sessions) >= MAX_PLAY_SESSIONS:  # the oldest is dropped (never written: unfinished)
                self.sessions.pop(next(iter(self.sessions))).env.close()
            self.sessions[session_id] = PlaySession(env, env_id, record)
        tools = [t.schema for t in tools_of(env).values()]
        return {"session": session_id, "env_id": env_id, "seed": seed, "observation": observation,
                "summary": record.summaries[-1], "tools": tools}  # fmt: skip

    def step(self, session_id: str, body: PlayStep) -> dict[str, Any]:
        session = self.sessions.get(session_id)
        if session is None:
            raise LookupError("no such play session (it ended, or the viewer restarted)")
        with session.lock:
            if session.done:
                raise ValueError("this episode has ended; start a new one")
            observation, reward, terminated, truncated, info = session.env.step(body.action)
            session.record.step(body.action, observation, reward, info)
            written = None
            if terminated or truncated:
                session.done = True
                session.record.terminated = bool(terminated)
                session.record.truncation = None if terminated else "time_limit"
                written = self._write(session)
                with self._lock:
                    self.sessions.pop(session_id, None)
        return {
            "observation": observation,
            "reward": reward,
            "components": session.record.reward_components[-1],
            "summary": session.record.summaries[-1],
            "format": info.get("format"),
            "canonical": info.get("canonical"),
            "parse_error": info.get("parse_error"),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "success": session.record.success,
            "total_reward": session.record.total_reward,
            "written": written,
        }

    def _write(self, session: PlaySession) -> str:
        """Append the finished episode to its env's play run (and rewrite its ``run.json``)."""
        run_dir = self.out_dir / session.env_id.replace("/", "_")
        run_dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            episodes = run_dir / "episodes.jsonl"
            count = sum(1 for _ in episodes.open("rb")) if episodes.exists() else 0
            session.record.index = count
            append_episodes(episodes, [session.record])
            config = RunConfig(env_id=session.env_id, env_kwargs={}, split=None, agent="human", agent_settings={},
                               seed=0, episodes=count + 1, all_tasks=False)  # fmt: skip
            tmp = run_dir / "run.json.tmp"
            tmp.write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
            os.replace(tmp, run_dir / "run.json")
        session.env.close()
        return f"{episodes}:{count + 1}"


# ---------------------------------------------------------------------------------------------- the app


def build_app(catalog: RunCatalog, room: PlayRoom) -> Any:
    """The FastAPI app: the static page at ``/`` and its JSON API under ``/api``."""
    from fastapi import FastAPI, Query
    from fastapi.responses import FileResponse, JSONResponse
    from fastapi.staticfiles import StaticFiles

    app = FastAPI(title="agentgym view", docs_url=None, redoc_url=None, openapi_url=None)
    headers = {"Content-Security-Policy": "default-src 'self'; script-src 'self'; object-src 'none'",
               "X-Content-Type-Options": "nosniff"}  # fmt: skip

    @app.middleware("http")
    async def guard(request: Any, call_next: Any) -> Any:
        response = await call_next(request)
        response.headers.update(headers)
        return response

    def problem(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": valid_utf8(message)[:500]}, status_code=status)

    def answer(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except LookupError as exc:
            return problem(404, str(exc.args[0]) if exc.args else "not found")
        except (ValueError, gym.error.Error) as exc:
            return problem(400, error_line(exc))

    @app.get("/")
    def index() -> Any:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/api/runs")
    def runs() -> Any:
        return {"runs": [run_row(r) for r in catalog.scan()]}

    @app.get("/api/episodes")
    def episodes(
        run: str = Query(max_length=2000),
        offset: int = 0,
        limit: int = 50,
        outcome: str | None = None,
        tag: str | None = None,
        truncated: bool | None = None,
        invalid: bool | None = None,
        q: str | None = None,
    ) -> Any:
        def go() -> Any:
            query = EpisodeQuery(offset=offset, limit=limit, outcome=outcome or None, tag=tag or None,
                                 truncated=truncated, invalid=invalid, q=q or None)  # fmt: skip
            return list_episodes(catalog.get(run), query)

        return answer(go)

    @app.get("/api/episode")
    def episode(run: str = Query(max_length=2000), line: int = 1) -> Any:
        return answer(lambda: episode_detail(catalog.get(run), line))

    @app.get("/api/compare")
    def compare_runs(a: str = Query(max_length=2000), b: str = Query(max_length=2000)) -> Any:
        return answer(lambda: compare(catalog.get(a), catalog.get(b)))

    @app.get("/api/metrics")
    def metrics(run: str = Query(max_length=2000)) -> Any:
        return answer(lambda: metric_curves(catalog.get(run)))

    @app.get("/api/envs")
    def envs() -> Any:
        return {"envs": list(ENV_IDS)}

    @app.post("/api/play")
    def play(body: PlayStart) -> Any:
        return answer(room.start, body)

    @app.post("/api/play/{session_id}/step")
    def play_step(session_id: str, body: PlayStep) -> Any:
        return answer(room.step, session_id, body)

    return app


class ViewerServer(BoundedUvicorn):
    """The viewer of the runs under ``roots`` on ``host:port``; episodes played by hand go to ``play_dir`` (shown
    among the runs). :meth:`serve_forever` blocks; ``with server:`` serves in a background thread."""

    def __init__(
        self, roots: list[str | Path], *, play_dir: str | Path = "runs/play", host: str = "127.0.0.1", port: int = 8770
    ) -> None:
        for root in roots:
            if not Path(root).is_dir():
                raise ValueError(f"{root}: no such folder (give run folders written by agentgym eval or train)")
        self.play_dir = Path(play_dir)
        self.catalog = RunCatalog([*roots, self.play_dir])
        self.catalog.scan()
        app = build_app(self.catalog, PlayRoom(self.play_dir))
        super().__init__(app, host=host, port=port, limits=ServerLimits())
