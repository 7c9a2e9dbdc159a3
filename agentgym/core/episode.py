"""One episode record: what every part of agentgym writes for a played episode and reads back.

An :class:`EpisodeRecord` is one line of an ``episodes.jsonl`` — an evaluation's (``agentgym eval --out DIR``), a
training run's (GRPO, LLM PPO: ``RUN_DIR/episodes.jsonl``) or the MCP server's — and the base of the trainers'
in-memory rollout episode (which adds its token samples). The flywheel, the audit and the reports read it.

Per turn ``i`` (parallel lists): ``observations[i]`` is what the agent answered with ``actions[i]`` (the first
observation, then the one after every action, so there is one more observation than actions; ``summaries[i]`` is
the env's one-line state summary of ``observations[i]``, its ``info["summary"]``), ``rewards[i]`` and
``reward_components[i]`` what the step paid (``info["reward_components"]``), ``canonical[i]`` whether the call was
written in the canonical format, ``valid[i]`` whether its tool calls parsed and validated. The outcome is
``success``, ``terminated``, ``truncation`` (why the episode was cut, else None) and ``error`` (why it could not be
played to its end, else None). ``attempt`` is the attempt the episode ended in under the
:class:`~agentgym.core.wrappers.Retry` wrapper (its ``info["attempt"]``; 1 without it).

Files written before this record (an eval line without ``reward_components``; a training-log line with ``reward``,
``env_reward``, ``turns`` and ``response_tokens`` but no observations) are converted when
read (:meth:`EpisodeRecord.from_line`).

The file has one writer and one reader, used by every part: :func:`append_episodes` appends records (as valid UTF-8,
flushed as each episode ends) and :func:`read_episodes` reads them back. A log is untrusted input (a file from
another machine, a run killed mid-write), so at most :data:`MAX_LINES` lines of at most :data:`MAX_LINE_BYTES` bytes
are read, one at a time, and every line that is not an episode (not UTF-8, not JSON, nested past Python's reach,
numbers whose sum overflows, a field of the wrong type) is a one-line ``ValueError`` reason, never a traceback. A
last line without its newline whose JSON ends early is *torn* (the writer died mid-line): the reader's ``torn``
argument says whether to skip it or cut it off the file (a writer about to append, such as a resumed run).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError, computed_field, field_validator, model_validator

from agentgym.core.tool_env import valid_utf8_data

__all__ = [
    "MAX_LINES",
    "MAX_LINE_BYTES",
    "EpisodeRecord",
    "append_episodes",
    "components_of",
    "convert_old_line",
    "outcome_rates",
    "parse_line",
    "read_episodes",
    "read_line_at",
    "read_lines",
    "summary_of",
]

MAX_LINE_BYTES = 4 * 2**20
"""The longest log line read (4 MiB: an episode of 12 turns of 16 k-character observations is ~200 KB)."""
MAX_LINES = 200_000
"""Lines read per log file; the rest are not read (the readers say so)."""

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]

_OLD_RETRY_HEADER = re.compile(r"Attempt (\d+) of (\d+) failed\.")
"""How the Retry wrapper began a retry's observation; read only to convert eval lines written before ``attempt``."""


class EpisodeRecord(BaseModel):
    """One played episode: its task, per turn what was seen, done and paid, its outcome and token counts.

    See the module docstring for the per-turn lists. ``index`` is the episode's number in its run (an evaluation's
    episode ``i``; 0 where there is none), ``reset`` the ``env.reset`` arguments that chose its task (``seed`` and
    ``options``). Token counts are what the agent's endpoint or model reported (``completion_tokens``: the tokens
    the policy wrote; 0 for scripted and tabular agents). A training run's lines also carry ``training_step`` (the
    training step that played it), ``training_reward`` (the return the trainer optimised: env reward, reward-model
    score and penalties as it summed them), ``rm_reward`` (the reward model's score, if any) and ``clipped``
    (responses cut at the token limit).
    """

    index: int = Field(0, ge=0)
    reset: dict[str, Any] = Field(default_factory=dict)
    observations: list[str] = Field(default_factory=list)
    summaries: list[str] = Field(default_factory=list)
    actions: list[str] = Field(default_factory=list)
    rewards: list[FiniteFloat] = Field(default_factory=list)
    reward_components: list[dict[str, float]] = Field(default_factory=list)
    canonical: list[bool] = Field(default_factory=list)
    valid: list[bool] = Field(default_factory=list)
    attempt: int = Field(1, ge=1)
    success: bool = False
    terminated: bool = False
    truncation: str | None = None
    error: str | None = None
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    training_step: int | None = Field(None, ge=0)
    training_reward: FiniteFloat | None = None
    rm_reward: FiniteFloat | None = None
    clipped: int = Field(0, ge=0)

    @field_validator("reset")
    @classmethod
    def _reset_arguments(cls, reset: dict[str, Any]) -> dict[str, Any]:
        seed, options = reset.get("seed"), reset.get("options")
        if (seed is not None and type(seed) is not int) or (options is not None and not isinstance(options, dict)):
            raise ValueError("seed must be an integer or null and options an object or null")
        return reset

    @model_validator(mode="after")
    def _sums_are_finite(self) -> EpisodeRecord:
        try:
            math.fsum(self.rewards)
        except OverflowError:
            raise ValueError("rewards: their sum is past the float range") from None
        return self

    @computed_field
    @property
    def total_reward(self) -> float:
        """The episode's return in the env (the sum of ``rewards``)."""
        return math.fsum(self.rewards)

    @computed_field
    @property
    def turns(self) -> int:
        """How many actions the episode took."""
        return len(self.actions)

    def start(self, observation: str, info: dict[str, Any]) -> None:
        """Record the first observation and its ``info`` (as ``env.reset`` returns them)."""
        self.observations.append(observation)
        self.summaries.append(summary_of(info))

    def step(self, action: str, observation: str, reward: float, info: dict[str, Any]) -> None:
        """Append one env step (``info`` as ``ToolEnv.step`` returns it). A reward that is not a finite number raises
        ``ValueError`` before anything is appended (the record stays consistent)."""
        if not math.isfinite(reward := float(reward)):
            raise ValueError(f"the env returned the reward {reward} at turn {self.turns + 1}")
        self.actions.append(action)
        self.observations.append(observation)
        self.summaries.append(summary_of(info))
        self.rewards.append(reward)
        self.reward_components.append(components_of(info))
        self.canonical.append(bool(info.get("canonical", False)))
        self.valid.append(info.get("parse_error") is None and bool(info.get("tool_calls", True)))
        self.success = bool(info.get("success", False))
        self.attempt = int(info.get("attempt", self.attempt))

    def transcript(self, system_prompt: str | None = None) -> list[dict[str, str]]:
        """The episode as chat messages, ending with the last action (the env's verdict after it is left out)."""
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        for observation, action in zip(self.observations, self.actions, strict=False):
            messages += [{"role": "user", "content": observation}, {"role": "assistant", "content": action}]
        return messages

    def to_line(self) -> str:
        """The record as one JSON line (no newline), as ``episodes.jsonl`` files hold it; a lone surrogate a model
        wrote into an action becomes U+FFFD (no UTF-8 file holds one)."""
        try:
            return self.model_dump_json()
        except ValueError:  # pydantic refuses to encode a lone surrogate
            return type(self).model_validate(valid_utf8_data(self.model_dump())).model_dump_json()

    @classmethod
    def from_line(cls, line: str | bytes | dict[str, Any]) -> EpisodeRecord:
        """A line of any ``episodes.jsonl``: today's, or one written before this record, converted (see
        :func:`convert_old_line`). Raises ``ValueError`` (pydantic's ``ValidationError``, ``JSONDecodeError``) if it
        is not an episode."""
        if not isinstance(line, str | bytes):
            return cls.model_validate(convert_old_line(line))
        record = cls.model_validate_json(line)  # pydantic's errors for what is not a record at all
        if "reward_components" in record.model_fields_set:
            return record
        return cls.model_validate(convert_old_line(json.loads(line)))  # written before this record


def convert_old_line(data: Any) -> Any:
    """A line written before :class:`EpisodeRecord` (it has no ``reward_components``) in today's form; others as
    they are.

    - an old training-log line (``step``, ``reward``, ``env_reward``, ``response_tokens``; no observations): the
      step becomes ``training_step``, ``reward`` ``training_reward``, ``response_tokens`` ``completion_tokens``; the
      log kept no per-turn rewards, so its return (``env_reward``) becomes the last turn's reward;
    - an old eval line: ``attempt`` is counted from the retry headers its observations began with (the Retry wrapper
      did not report it otherwise then), and ``summaries`` are its observations' ``State:`` lines.
    """
    if not isinstance(data, dict) or "reward_components" in data:
        return data
    data = {k: v for k, v in data.items() if k not in ("turns", "total_reward")}
    if "env_reward" in data:  # an old training-log line
        turns = len(data.get("actions") or [])
        env_reward = data.pop("env_reward")
        data["training_step"] = data.pop("step", None)
        data["training_reward"] = data.pop("reward", None)
        data["completion_tokens"] = data.pop("response_tokens", 0)
        data["rewards"] = [0.0] * (turns - 1) + [env_reward] if turns else []
    observations = data.get("observations")
    if isinstance(observations, list) and "attempt" not in data:
        data["attempt"] = 1 + sum(isinstance(o, str) and bool(_OLD_RETRY_HEADER.match(o)) for o in observations)
    if isinstance(observations, list) and "summaries" not in data:
        data["summaries"] = [_old_summary(o) for o in observations]
    rewards = data.get("rewards")
    data["reward_components"] = [{} for _ in rewards] if isinstance(rewards, list) else []
    return data


def _old_summary(observation: Any) -> str:
    last = observation.rsplit("\n", 1)[-1] if isinstance(observation, str) else ""
    return last.removeprefix("State: ") if last.startswith("State: ") else ""


def summary_of(info: dict[str, Any]) -> str:
    """A step's ``info["summary"]`` (the env's one-line state summary), or "" where the env gives none."""
    summary = info.get("summary")
    return summary if isinstance(summary, str) else ""


def components_of(info: dict[str, Any]) -> dict[str, float]:
    """A step's ``info["reward_components"]`` as plain floats ({} where the env reports none)."""
    components = info.get("reward_components")
    if not isinstance(components, dict):
        return {}
    return {str(k): float(v) for k, v in components.items() if isinstance(v, int | float)}


def outcome_rates(records: Sequence[EpisodeRecord]) -> dict[str, float]:
    """What every report of played episodes states, computed once: the shares of episodes that succeeded
    (``success``) and were cut (``truncation_rate``), of actions whose calls validated (``tool_call_validity``) and
    were written canonically (``format_compliance``), and the mean ``turns`` (all 0 for no episodes)."""
    n, turns = len(records), sum(r.turns for r in records)
    return {
        "success": sum(r.success for r in records) / n if n else 0.0,
        "tool_call_validity": sum(sum(r.valid) for r in records) / turns if turns else 0.0,
        "format_compliance": sum(sum(r.canonical) for r in records) / turns if turns else 0.0,
        "truncation_rate": sum(r.truncation is not None for r in records) / n if n else 0.0,
        "turns": turns / n if n else 0.0,
    }


def append_episodes(path: str | Path, records: Iterable[EpisodeRecord]) -> None:
    """Append ``records`` to the ``episodes.jsonl`` at ``path`` (creating it and its folder), one line each, in one
    write that is flushed before returning, so a reader sees every episode as soon as it ended."""
    lines = [record.to_line() + "\n" for record in records]
    if lines:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write("".join(lines))


def read_episodes(
    path: str | Path,
    *,
    torn: Literal["skip", "cut"] = "skip",
    bad: Literal["raise", "yield"] = "raise",
    what: str = "an episode record",
    max_line_bytes: int | None = None,
    max_lines: int | None = None,
) -> Iterator[tuple[int, int, EpisodeRecord | str]]:
    """``(line number, byte offset, record)`` of an ``episodes.jsonl`` (none if the file does not exist), one line in
    memory at a time, within :func:`read_lines`' limits.

    A torn last line (see the module docstring) is skipped, or with ``torn="cut"`` cut off the file (and a whole last
    record without its newline gets one), so that the next append starts a line of its own. Any other line that is
    not a record raises ``ValueError("PATH:N: not <what> (<reason>)")``, or with ``bad="yield"`` is yielded as that
    message in place of the record (for a reader that counts bad lines and goes on)."""
    path = Path(path)
    if not path.exists():
        return
    if torn == "cut":
        _mend_tail(path)
    for n, offset, raw in read_lines(path, max_line_bytes, max_lines):
        if isinstance(raw, str):
            reason = raw
        else:
            try:
                yield n, offset, parse_line(raw)
                continue
            except ValueError as exc:
                if not raw.endswith(b"\n") and _tail_state(raw) == "torn":
                    return
                reason = str(exc)
                if reason.startswith("not an episode ("):  # parse_line's words; the caller names what it reads
                    reason = reason[len("not an episode (") : -1]
        message = f"{path}:{n}: not {what} ({reason})"
        if bad == "raise":
            raise ValueError(message)
        yield n, offset, message


def _mend_tail(path: Path) -> None:
    """End the file on a newline: cut a torn last line off, or give a whole last record its newline."""
    with path.open("r+b") as f:
        end = f.seek(0, os.SEEK_END)
        f.seek(max(0, end - MAX_LINE_BYTES - 1))
        tail = f.read()
        last = tail[tail.rfind(b"\n") + 1 :]
        if not last or (len(last) > MAX_LINE_BYTES) or (state := _tail_state(last)) == "damaged":
            return  # nothing to mend, or a bad line the reader reports
        if state == "whole":
            f.write(b"\n")
        else:
            f.truncate(end - len(last))


def _tail_state(line: bytes) -> str:
    """A last line without its newline: ``"whole"`` (a record), ``"torn"`` (a record cut off mid-write: its JSON
    ends early) or ``"damaged"`` (anything else, reported as not a record)."""
    try:
        EpisodeRecord.model_validate_json(line.decode("utf-8", "ignore"))  # a cut may split a character
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        return "torn" if first["type"] == "json_invalid" and "EOF while parsing" in first["msg"] else "damaged"
    return "whole"


def read_lines(
    path: str | Path, max_line_bytes: int | None = None, max_lines: int | None = None
) -> Iterator[tuple[int, int, bytes | str]]:
    """``(line number, byte offset, raw line)`` of a log file (blank lines skipped), or ``(n, offset, reason)`` for a
    line past the limits: at most ``max_lines`` lines (:data:`MAX_LINES`; then one last reason) of
    ``max_line_bytes`` bytes (:data:`MAX_LINE_BYTES`; a longer one is skipped unread); memory is bounded by one line.
    A raw line keeps its ``\n`` (a torn last line has none); :func:`read_line_at` reads it again by its offset."""
    max_line_bytes = MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes
    max_lines = MAX_LINES if max_lines is None else max_lines
    with Path(path).open("rb") as f:
        n, offset = 0, 0
        while raw := f.readline(max_line_bytes + 1):
            n, start = n + 1, offset
            offset += len(raw)
            if n > max_lines:
                yield n, start, f"more than {max_lines:,} lines: the rest of the file was not read"
                return
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                while (more := f.readline(max_line_bytes)) and not more.endswith(b"\n"):  # skip the rest of it
                    offset += len(more)
                offset += len(more)
                yield n, start, f"longer than {max_line_bytes:,} bytes"
                continue
            if raw.strip():
                yield n, start, raw


def read_line_at(path: str | Path, offset: int, max_line_bytes: int | None = None) -> bytes:
    """The raw line that starts at byte ``offset`` (as :func:`read_lines` gave it), at most ``max_line_bytes``."""
    with Path(path).open("rb") as f:
        f.seek(offset)
        return f.readline((MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes) + 1)


def parse_line(raw: bytes) -> EpisodeRecord:
    """One log line as an :class:`EpisodeRecord` (converted if written before it), its text made valid UTF-8 (a JSON
    escape can spell a lone surrogate, which printing or writing it back would fail on); a one-line ``ValueError``
    with the reason if it is not one."""
    try:
        data = valid_utf8_data(json.loads(raw.rstrip(b"\r\n").decode("utf-8")))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ValueError("nested deeper than Python reads") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise ValueError(f"not JSON ({' '.join(str(exc).split())[:120]})") from None
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object (an episode), got {type(data).__name__}")
    try:
        return EpisodeRecord.from_line(data)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(map(str, error["loc"]))
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        text = " ".join(f"{where}: {error['msg']}".removeprefix(": ").replace("Value error, ", "").split())
        raise ValueError(f"not an episode ({text[:200]}{more})") from None
    except (ValueError, TypeError, KeyError, OverflowError, RecursionError) as exc:  # from converting an old line
        raise ValueError(f"not an episode ({type(exc).__name__}: {' '.join(str(exc).split())[:160]})") from None
