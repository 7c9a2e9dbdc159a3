"""``ToolEnv``: the Gymnasium env every agentgym task is built on.

The env owns the loop; a task only declares what is specific to it::

    action text ─► parse ─► validate ─► execute tool ─► reward ─► summarise ─► observation text

A task subclasses :class:`ToolEnv` and defines

- its tools, as ``@tool``-decorated methods (they change the task state and return text or a
  :class:`~agentgym.core.tools.ToolResult` carrying reward components and termination);
- ``task`` (or :meth:`ToolEnv.task_prompt`), :meth:`ToolEnv._reset_task`, :meth:`ToolEnv.summary`
  and :attr:`ToolEnv.success`;
- its reward terms, as a :class:`RewardWeights` subclass passed to ``ToolEnv.__init__`` (with the episode's
  ``process_reward`` bound, when it pays process rewards);
- for the discrete view, :class:`~agentgym.core.wrappers.DiscreteView` mixed in, with its state keys and action menu;
- optionally :meth:`ToolEnv.fallback_call`, to read text its agents write that holds no tool call;
- the facts it declares about itself, :attr:`ToolEnv.task_info` (a :class:`TaskInfo`: task count, split, reward
  bounds, data checksum, …), which evaluators, trainers and servers read through :func:`task_info`.

:meth:`ToolEnv.sample_action` draws a valid random action (a canonical call with schema-valid random arguments);
``action_space.sample()`` stays Gymnasium's random member of the text space. ``render_mode``: ``"ansi"`` or
``"human"`` (prints the text at every step).

Spaces: actions and observations are :class:`~agentgym.core.spaces.AnyText`. Observations: the first
holds the task, the tools, the call format and the state summary; each later one holds the task,
the last ``history`` turns (action and result), the result of this step and the state summary — the
one-line summary is the memory that replaces a long transcript. The observation text is rendered from
an :class:`ObservationParts` (``env.unwrapped.observation_parts()``): a trainer or an integration that
needs the task, the tools, the turns or the summary takes them from there, never by parsing the text.

``info`` at every step: ``tool_call`` (the first call as a dict, or None), ``tool_calls``,
``parse_error`` (why the action was rejected, or None), ``format`` and ``canonical`` (which call
syntax was recognised, and whether it was the canonical one), ``summary``, ``reward_components``
(the reward split by named term; ``reward`` is their sum) and ``success``.

A malformed action is never an exception: nothing is executed, the observation explains the
error, and the reward is ``invalid_action_reward``.

Bounds on what an action can cost: the parser's work is linear in the action (at most
``max_action_length`` characters), at most ``max_calls_per_step`` calls of one action are executed (the
rest are reported as not run), and one action's calls share one time budget: a task whose tools do timed
work declares :meth:`ToolEnv.call_time_limit` (the longest one call may run), its tools ask
:meth:`ToolEnv.call_time` how long the call running now may take, and a step ends within
``step_time_factor`` (1.5) × that limit, plus the time it takes to stop the last call, however its calls
are combined. Observations and the text in ``info``
are always valid UTF-8 with no raw control characters: lone surrogates become U+FFFD and control
characters other than newline and tab are shown escaped (``\\x1b``), so a program's output cannot
drive the terminal or the log that displays it.
"""

from __future__ import annotations

import copy
import json
import re
import sys
import time
import warnings
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, NamedTuple, Self

import gymnasium as gym
import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from agentgym.core.data import TaskList
from agentgym.core.parser import MAX_ACTION_CHARS, ParseResult, format_instructions, parse_tool_calls
from agentgym.core.spaces import AnyText
from agentgym.core.tools import Tool, ToolCall, ToolError, ToolResult

__all__ = [
    "MAX_SHOWN_ACTION_CHARS",
    "Interpretation",
    "ObservationParts",
    "RewardWeights",
    "TaskInfo",
    "ToolEnv",
    "Turn",
    "past_turn",
    "parts_of",
    "process_reward_weight",
    "recent_turns",
    "task_info",
    "tools_of",
]

_CACHE_SIZE = 512  # distinct action strings whose interpretation is memoised per env
_MEMO_MAX_ACTION_CHARS = 4096
"""Longest action string whose interpretation is memoised; a longer one is parsed afresh at every step. With
:data:`_CACHE_SIZE` keys this bounds the memo's keys at 512 × 4096 characters (2 MiB of ASCII); the actions a
policy repeats (menu actions, short calls) are far shorter."""

MAX_SHOWN_ACTION_CHARS = 500
"""An action is cut to this many characters where a later observation shows it as a past turn (``history``), so
that ``history`` turns of a policy that writes long actions cost at most ``history`` × 500 characters of action
text (the whole observation is cut to ``max_observation_length`` in any case)."""


@dataclass(frozen=True)
class Interpretation:
    """What :meth:`ToolEnv.interpret` makes of an action string: it is pure in the text, so it is memoised.

    ``parse`` is the parser's result (calls, format, canonical); ``calls`` pairs each call's tool with its validated
    arguments; ``error`` says why the action is rejected (parse or validation), or is None for a valid action.
    """

    parse: ParseResult
    calls: tuple[tuple[Tool, dict[str, Any]], ...] = ()
    error: str | None = None


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def valid_utf8(text: str) -> str:
    """``text`` with lone surrogates (which no UTF-8 file or JSON encoder accepts) replaced by U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # valid surrogate pairs are joined first, then lone ones replaced
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def valid_utf8_data(value: Any) -> Any:
    """``value`` (JSON-like data: dicts, lists, tuples, strings) with every string, keys too, made
    :func:`valid_utf8`; tuples become lists."""
    if isinstance(value, str):
        return valid_utf8(value)
    if isinstance(value, dict):
        return {valid_utf8_data(k): valid_utf8_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [valid_utf8_data(v) for v in value]
    return value


def safe_text(text: str) -> str:
    """``text`` as valid UTF-8 with control characters (other than newline and tab) escaped as ``\\xNN``."""
    if text.isprintable():  # no control character and no lone surrogate (neither is printable): nothing to do
        return text
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", valid_utf8(text))


_SCALARS = (str, int, float, bool, type(None))


def _fresh(value: Any) -> Any:
    """A copy of ``value`` that shares nothing a caller can mutate: dicts and lists are rebuilt, immutable scalars
    kept as they are, anything else deep-copied (the same result as ``copy.deepcopy`` at a fraction of its cost on
    the JSON values calls and schemas hold)."""
    kind = type(value)
    if kind is dict:
        return {k: _fresh(v) for k, v in value.items()}
    if kind is list:
        return [_fresh(v) for v in value]
    return value if kind in _SCALARS else copy.deepcopy(value)


def _call_dict(call: ToolCall) -> dict[str, Any]:
    """``call.to_dict()`` sharing nothing mutable with ``call`` (the parse memo keeps ``call`` for later steps)."""
    arguments = dict(call.arguments)
    for name, value in arguments.items():
        if type(value) not in _SCALARS:
            arguments[name] = _fresh(value)
    return {"name": call.name, "arguments": arguments}


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 30] + f" …[{len(text) - limit + 30} chars cut]"


class Turn(NamedTuple):
    """One past turn as an observation shows it: the action (see :func:`past_turn`) and the result it got."""

    action: str
    result: str

    def render(self) -> str:
        """``"Action: {action}\\nResult: {result}\\n"``."""
        return f"Action: {self.action}\nResult: {self.result}\n"


def past_turn(action: Any, result: str) -> Turn:
    """``action`` and its ``result`` as a past turn is shown: the action cut to :data:`MAX_SHOWN_ACTION_CHARS`,
    both as safe text (:func:`safe_text`)."""
    return Turn(safe_text(_clip(str(action), MAX_SHOWN_ACTION_CHARS)), safe_text(result))


def recent_turns(turns: Sequence[Turn], n: int, max_chars: int | None = None) -> tuple[Turn, ...]:
    """The last ``n`` of ``turns`` (none when ``n`` is 0), less the oldest ones while their text (:meth:`Turn.render`)
    is longer than ``max_chars`` (None: no limit). The one "last N turns" rule, for ``ToolEnv(history=)`` and the
    rollout's summary prompts alike."""
    kept = list(turns)[-n:] if n > 0 else []
    sizes = [len(turn.render()) for turn in kept]
    total, first = sum(sizes), 0
    while max_chars is not None and first < len(kept) and total > max_chars:
        total -= sizes[first]
        first += 1
    return tuple(kept[first:])


def _step_text(task: str | None, turns: Sequence[Turn], result: str, summary: str, max_chars: int | None) -> str:
    """The text of a later observation (:meth:`ObservationParts.render` with a ``result``)."""
    head = "" if task is None else f"Task: {task}\n"
    shown = "".join(turn.render() for turn in turns) if turns else ""
    text = f"{head}{shown}Result: {result}\nState: {summary}"
    return text if max_chars is None else _clip(text, max_chars)


@dataclass(frozen=True)
class ObservationParts:
    """The parts an observation text is made of; :meth:`render` writes the text the env returns.

    The first observation of an episode (``result`` is None) is ``"{task}\\n\\n{tools}\\n\\nState: {summary}"``; each
    later one is ``"Task: {task}\\n"``, the past ``turns`` (``"Action: …\\nResult: …\\n"`` each), then
    ``"Result: {result}\\nState: {summary}"``. A part that is None is left out with its separator (e.g.
    ``replace(parts, tools=None)`` for a prompt whose chat template shows the tools). All text is safe text
    (:func:`safe_text`): the env sanitises each part before it keeps it.
    """

    task: str | None
    """The episode's instructions (:meth:`ToolEnv.task_prompt`)."""
    summary: str
    """The one-line state summary (also ``info["summary"]``)."""
    tools: str | None = None
    """The tool list and call format (:meth:`ToolEnv.tools_prompt`); in the first observation only."""
    turns: tuple[Turn, ...] = ()
    """Past turns shown before the latest result (``ToolEnv(history=)``; empty by default)."""
    result: str | None = None
    """The output of the latest action (its tools' results, or an error); None in the first observation."""

    def render(self, max_chars: int | None = None) -> str:
        """The observation text, cut to ``max_chars`` characters (None: not cut) with a note of what was cut."""
        if self.result is None:
            text = "\n\n".join(p for p in (self.task, self.tools, f"State: {self.summary}") if p is not None)
            return text if max_chars is None else _clip(text, max_chars)
        return _step_text(self.task, self.turns, self.result, self.summary, max_chars)

    def outcome(self) -> str:
        """The latest result and the state summary on one line, ``"{result} (state: {summary})"``: what the agent
        was last shown of where it stands (:meth:`ToolEnv.feedback`'s default)."""
        return f"{self.result} (state: {self.summary})"

    def with_history(self, turns: Sequence[Turn], n: int, max_chars: int | None = None) -> ObservationParts:
        """These parts showing the last ``n`` of ``turns`` that fit, beside the rest of the text, in ``max_chars``
        characters (:func:`recent_turns`; the oldest turns are dropped first)."""
        if n <= 0 or not turns:  # no history asked for (or none yet): nothing to fit
            return replace(self, turns=()) if self.turns else self
        budget = None if max_chars is None else max_chars - len(replace(self, turns=()).render())
        return replace(self, turns=recent_turns(turns, n, budget))


def process_reward_weight(value: object) -> float:
    """A task's ``process_reward`` option checked: a finite number ≥ 0 (0 turns process rewards off), as a float.

    ``ToolEnv.__init__`` keeps this bound on what one episode can earn from process rewards in
    ``env.unwrapped.process_reward`` and declares it as :attr:`TaskInfo.process_reward` (``agentgym audit``
    checks logged episodes against it)."""
    if not isinstance(value, int | float) or not 0 <= value < float("inf"):
        raise ValueError(f"process_reward must be a finite number >= 0 (0: off), got {value!r}")
    return float(value)


class RewardWeights(BaseModel):
    """A task's reward terms. A task subclasses it with its own terms (each a float with a default and a
    description), builds them with :meth:`of` and passes them to ``ToolEnv.__init__``; every term it pays is
    reported by name in ``info["reward_components"]``. Unknown names are refused."""

    model_config = ConfigDict(extra="forbid")

    invalid_action: float = Field(0.0, description="An action that cannot be parsed or validated.")

    @classmethod
    def of(cls, rewards: RewardWeights | Mapping[str, float] | None = None, **shortcuts: float | None) -> Self:
        """The weights ``rewards`` gives (weights, a dict of some of them, or None: the defaults), with each
        shortcut that is not None set: a task's ``tool_cost=c`` option is ``rewards={"tool_cost": c}``. Raises
        pydantic's ``ValidationError`` (a ``ValueError``) naming a bad or unknown term."""
        weights = rewards.model_dump() if isinstance(rewards, RewardWeights) else dict(rewards or {})
        weights.update({name: value for name, value in shortcuts.items() if value is not None})
        return cls.model_validate(weights)


@dataclass(frozen=True)
class TaskInfo:
    """The facts a task declares about itself, in one record: ``env.unwrapped.task_info`` on a :class:`ToolEnv`
    (on ``agentgym/Remote-v0``, what its server said), or :func:`task_info` for any env. Evaluators, trainers and
    servers read them here rather than probing the env for attributes. The defaults declare nothing."""

    num_tasks: int | None = None
    """Size of the env's fixed task list, the tasks of its :attr:`split` (``reset(options={"task_index": i})``
    plays task i), or None: the env draws its task from the seed."""
    split: str | None = None
    """The split the env plays (``"train"``, ``"test"`` or ``"all"``), or None for a task without splits."""
    reward_bounds: tuple[float, float] | None = None
    """The lowest and highest reward one action can be paid (:meth:`ToolEnv.reward_bounds`), or None."""
    data_checksum: str | None = None
    """SHA-256 of the frozen data the env plays (reports record it), or None."""
    process_reward: float = 0.0
    """The most process reward one episode can earn (:func:`process_reward_weight`; 0: none)."""
    parallel_episodes: bool = False
    """Whether episodes played at once in threads run in parallel: their work runs outside this process
    (CodeSandbox's programs in sandbox processes; a served env's on its server)."""
    discrete_view: bool = False
    """Whether the env has a discrete view: a ``ToolEnv`` with an action menu and state keys
    (:class:`~agentgym.core.wrappers.DiscreteToolActions`), or a server that serves one."""
    oracle: bool = False
    """Whether ``oracle()`` gives a scripted expert (:meth:`ToolEnv.oracle`)."""


def task_info(env: gym.Env) -> TaskInfo:
    """The facts ``env`` declares, through any wrappers (``env.unwrapped.task_info``); for an env that declares
    none (a plain ``gym.Env``), the defaults."""
    info = getattr(env.unwrapped, "task_info", None)
    return info if isinstance(info, TaskInfo) else TaskInfo()


def tools_of(env: gym.Env) -> dict[str, Tool]:
    """The tools ``env`` declares by name (its :class:`ToolEnv`'s ``@tool`` methods, through any wrappers); ``{}``
    for any other env (a served env's tools are the schemas its reset lists in ``info["tools"]``)."""
    base = env.unwrapped
    return dict(base.tools) if isinstance(base, ToolEnv) else {}


def parts_of(env: gym.Env) -> ObservationParts | None:
    """The parts of ``env``'s latest observation (through any wrappers), or None when ``env`` is not a
    :class:`ToolEnv` (a plain ``gym.Env``: its observation text is all there is)."""
    observation_parts = getattr(env.unwrapped, "observation_parts", None)
    return observation_parts() if callable(observation_parts) else None


class ToolEnv(gym.Env[str, str]):
    """Base class for an environment whose actions are tool calls written as text."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "render_fps": 4}
    """``"ansi"``: ``render()`` returns :meth:`render_text`; ``"human"``: :meth:`render_text` is printed to stdout at
    every ``reset`` and ``step`` (and by ``render()``), as Gymnasium's toy-text envs do. A task that declares its own
    ``render_modes`` (CliffWalk adds ``"rgb_array"``) gets ``"human"`` added, since every task has a text."""

    task: ClassVar[str] = ""
    """Instructions shown to the agent (override :meth:`task_prompt` for per-episode text)."""
    tools: ClassVar[dict[str, Tool]] = {}
    """The task's tools by name, collected from its ``@tool`` methods."""
    task_list: TaskList | None = None
    """The env's fixed task list (its split of the task set), for a task that has one (SQLLookup, CodeSandbox);
    None for a task that draws its instance from the seed."""
    invalid_action_reward: float = 0.0
    """Reward for an action that cannot be parsed or validated (``rewards.invalid_action`` when the task has
    :class:`RewardWeights`)."""
    max_action_length: ClassVar[int] = MAX_ACTION_CHARS
    max_observation_length: ClassVar[int] = 16_384
    max_output_chars: ClassVar[int] = 4_000
    """A tool's output is cut to this many characters in the observation."""
    max_calls_per_step: ClassVar[int] = 4
    """Calls of one action that are executed; the rest are reported and skipped."""
    step_time_factor: ClassVar[float] = 1.5
    """One action's calls together run for at most this × :meth:`call_time_limit` seconds (see there)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.tools = {t.name: t for klass in reversed(cls.__mro__) for t in vars(klass).values() if isinstance(t, Tool)}
        modes = list(cls.metadata.get("render_modes", []))
        if "human" not in modes:  # a copy: the base class's dict is shared by every task that does not override it
            cls.metadata = {**cls.metadata, "render_modes": [*modes, "human"]}

    def __init__(
        self,
        *,
        rewards: RewardWeights | None = None,
        process_reward: float = 0.0,
        history: int = 0,
        render_mode: str | None = None,
    ) -> None:
        """``rewards``: the task's reward terms (:class:`RewardWeights`), kept as ``self.rewards``;
        ``process_reward``: the most process reward one episode can earn (0: none; :func:`process_reward_weight`);
        ``history``: past turns shown in each observation; ``render_mode``: ``"ansi"``, ``"human"`` or None."""
        self.rewards = rewards
        if rewards is not None:
            self.invalid_action_reward = rewards.invalid_action
        self.process_reward = process_reward_weight(process_reward)
        """The most process reward an episode can earn (0: none)."""
        if not isinstance(history, int) or history < 0:
            raise ValueError(f"history must be a non-negative int (turns kept in the observation), got {history!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.history = history
        self.render_mode = render_mode
        self.action_space = AnyText(self.max_action_length)
        self.observation_space = AnyText(self.max_observation_length)
        self._interpretations: dict[Any, Interpretation] = {}
        self._turns: deque[Turn] = deque(maxlen=history or None)
        self._parts: ObservationParts | None = None
        self._latest: tuple[str, str, str] | None = None  # (task, summary, result) of parts not built yet
        self.steps = 0
        """Actions taken in this episode (valid or not)."""
        self.episode_return = 0.0
        """Sum of rewards in this episode so far."""
        self._done = False
        self._step_deadline: float | None = None  # when this action's time budget ends (during a step)
        self._task_text: tuple[str | None, str] = (None, "")  # the latest task prompt and its safe text
        tool_list = list(self.tools.values())
        self._tools_text = "\n".join(f"- {t.signature}: {t.description}" for t in tool_list)
        self._format_text = format_instructions(tool_list)
        self._error_hint = f"Available tools: {', '.join(t.signature for t in tool_list)}.\n{self._format_text}"

    # ------------------------------------------------------------------ what a task defines

    def _reset_task(self, options: dict[str, Any]) -> None:
        """Start a new episode's task state (draw randomness from ``self.np_random``)."""
        raise NotImplementedError

    def summary(self) -> str:
        """The one-line state summary, e.g. ``"pos (3,1) · steps 1 · return -1"``."""
        raise NotImplementedError

    @property
    def success(self) -> bool:
        """Whether the task has been solved in this episode."""
        return False

    def task_prompt(self) -> str:
        """This episode's instructions."""
        return self.task

    @property
    def num_tasks(self) -> int | None:
        """Size of the env's fixed task list (``reset(options={"task_index": i})`` picks task i), or None."""
        return len(self.task_list) if self.task_list is not None else None

    def reward_bounds(self) -> tuple[float, float] | None:
        """The lowest and highest reward one action can be paid, ``(low, high)``, or None if the task does not say.

        A task derives them from its reward weights and :attr:`max_calls_per_step` (an action runs at most that
        many calls), as tight as it can: every reward of an episode lies within them, so ``turns · low <=
        return <= turns · high``. ``agentgym eval --resume`` refuses a recorded episode paid outside them. (A
        step after the episode is over pays 0 and is not part of the episode.)
        """
        return None

    @property
    def task_info(self) -> TaskInfo:
        """The facts this task declares (:class:`TaskInfo`). The base class declares :attr:`num_tasks`, the split
        and data checksum of its :attr:`task_list`, :meth:`reward_bounds`, :attr:`process_reward` and an oracle
        where the task defines :meth:`oracle` (a :class:`~agentgym.core.wrappers.DiscreteView` adds its discrete view);
        a task adds what else it knows, e.g. ``replace(super().task_info, parallel_episodes=True)``."""
        tasks = self.task_list
        return TaskInfo(
            num_tasks=self.num_tasks,
            split=tasks.split if tasks is not None else None,
            data_checksum=tasks.data_checksum if tasks is not None else None,
            reward_bounds=self.reward_bounds(),
            process_reward=self.process_reward,
            oracle=type(self).oracle is not ToolEnv.oracle,
        )

    def call_time_limit(self) -> float | None:
        """The longest one tool call of this task may run, in seconds, or None (the default) when no tool does work
        that needs a clock (SQLLookup: a query's ``time_limit``; CodeSandbox: a program's ``timeout``).

        With a limit, one action's calls share a budget of :attr:`step_time_factor` × this: each call may take
        :meth:`call_time` (the limit, or what is left of the budget when that is less), and calls reached once the
        budget is spent are not run, which the observation says. So one step ends within twice the single-call
        limit, however many slow calls its action combines.
        """
        return None

    def call_time(self) -> float | None:
        """Seconds the tool call running now may take: :meth:`call_time_limit`, or what is left of this action's
        budget when that is less (never below 1 ms); None outside a step, or for a task without a limit. A tool that
        does timed work passes it on (to a query's deadline, a program's wall clock)."""
        limit = self.call_time_limit()
        if limit is None or self._step_deadline is None:
            return limit
        return max(0.001, min(limit, self._step_deadline - time.monotonic()))

    def oracle(self) -> Any:
        """A scripted expert for this task with SB3's ``predict(obs) -> (action_text, None)``, reading only
        the observation text (used by ``agentgym eval --agent oracle`` and to make demonstrations)."""
        raise NotImplementedError(f"{type(self).__name__} has no scripted oracle")

    def feedback(self) -> str:
        """What went wrong in the episode so far, as a sentence for the agent's next attempt (read by
        :class:`~agentgym.core.wrappers.Retry`); it must never give the answer away. The base class: the latest result
        and the state summary. A task that can say more overrides it (WeatherRun names the missing lookup)."""
        return self.observation_parts().outcome()

    def tools_prompt(self) -> str:
        """The tool list and the call-format instructions, as the first observation shows them."""
        return f"Tools:\n{self._tools_text}\n\n{self._format_text}"

    def render_text(self) -> str:
        """What ``render()`` returns in ``"ansi"`` mode (and prints in ``"human"`` mode)."""
        return self.summary() + "\n"

    def fallback_call(self, text: str) -> tuple[ToolCall, str] | None:
        """A call read from an action in which the parser found no call of a known tool, or None (the default:
        the parse error stands).

        A task overrides this for text its agents write that is no tool-call syntax but has one obvious meaning
        (CodeSandbox reads a bare fenced ``python`` block as ``run_python``). Return the call and a format name
        for ``info["format"]``; the call is validated like any other and is never canonical. It is consulted
        only when no known tool's name was read as a call (``ParseResult.no_call``), so a malformed call of a
        real tool keeps its error. It must depend on ``text`` alone (interpretations are memoised) and take time
        linear in it (``text`` has at most :attr:`max_action_length` characters).
        """
        return None

    # ------------------------------------------------------------------ the loop

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.steps = 0
        self.episode_return = 0.0
        self._done = False
        self._turns.clear()
        self._reset_task(dict(options or {}))
        summary = safe_text(self.summary())
        self._parts = ObservationParts(safe_text(self.task_prompt()), summary, tools=safe_text(self.tools_prompt()))
        self._latest = None
        info = {
            "tools": [_fresh(t.schema) for t in self.tools.values()],  # the tools' own schemas stay intact
            "summary": summary,
            "success": self.success,
        }
        if self.render_mode == "human":
            self.render()
        return self._parts.render(self.max_observation_length), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        interp = self.interpret(action)
        self.steps += 1
        rewards: dict[str, float] = {}
        terminated = False
        if self._done:
            output = "Error: the episode is over; call reset() to start a new one."
            terminated = True
        elif interp.error is not None:
            output = f"Error: {interp.error}\n{self._error_hint}"
            rewards["invalid_action"] = self.invalid_action_reward
        elif len(interp.calls) == 1 and self.call_time_limit() is None:  # the common case: no budget to keep
            result = self._execute(*interp.calls[0])
            output, terminated = _clip(result.output, self.max_output_chars), result.terminated
            rewards = dict(result.reward)
        else:
            output, rewards, terminated = self._run_calls(interp)
        self._done = self._done or terminated
        reward = float(sum(rewards.values()))
        self.episode_return += reward
        summary = safe_text(self.summary())
        observation = self._observe(action, safe_text(output), summary)
        calls = interp.parse.calls  # memoised across steps: each info gets its own copy of the arguments
        info = {
            "tool_call": _call_dict(calls[0]) if calls else None,
            "tool_calls": [_call_dict(c) for c in calls],
            "parse_error": None if interp.error is None else safe_text(interp.error),
            "format": interp.parse.format,
            "canonical": interp.parse.canonical,
            "summary": summary,
            "reward_components": rewards,
            "success": self.success,
        }
        if self.render_mode == "human":
            self.render()
        return observation, reward, terminated, False, info

    def render(self) -> Any:
        """``"ansi"``: the text (:meth:`render_text`); ``"human"``: prints it and returns None; otherwise None."""
        if self.render_mode == "ansi":
            return self.render_text()
        if self.render_mode == "human":
            sys.stdout.write(self.render_text())
            sys.stdout.flush()
        return None

    def observation_parts(self) -> ObservationParts:
        """The parts of the latest observation (``reset`` or ``step``): the text is ``parts.render(
        self.max_observation_length)``. A trainer builds its own prompts from these, never from the text."""
        if self._parts is None:
            if self._latest is None:
                raise gym.error.ResetNeeded("call reset() before observation_parts()")
            task, summary, result = self._latest
            self._parts = ObservationParts(task, summary, result=result)
        return self._parts

    # ------------------------------------------------------------------ internals

    def interpret(self, action: Any) -> Interpretation:
        """Parse and validate an action (memoised per action string of at most 4096 characters)."""
        key = action if isinstance(action, str) and len(action) <= _MEMO_MAX_ACTION_CHARS else None
        if key is not None and (hit := self._interpretations.get(key)) is not None:
            return hit
        parse = parse_tool_calls(action, self.tools.values(), max_chars=self.max_action_length)
        if parse.no_call and (fallback := self.fallback_call(action)) is not None:
            call, fmt = fallback
            if call.name not in self.tools:
                raise ValueError(f"{type(self).__name__}.fallback_call returned an unknown tool {call.name!r}")
            parse = ParseResult(calls=(call,), format=fmt, canonical=False)
        if parse.error is not None:
            interp = Interpretation(parse, error=parse.error)
        else:
            try:
                bound = tuple((self.tools[c.name], self.tools[c.name].validate(c.arguments)) for c in parse.calls)
                interp = Interpretation(parse, bound)
            except ToolError as exc:
                interp = Interpretation(parse, error=str(exc))
        if key is not None:
            if len(self._interpretations) >= _CACHE_SIZE:
                self._interpretations.clear()
            self._interpretations[key] = interp
        return interp

    def _run_calls(self, interp: Interpretation) -> tuple[str, dict[str, float], bool]:
        """Run an action's calls in order within its time budget: (output, reward components, terminated)."""
        rewards: dict[str, float] = {}
        terminated = False
        outputs = []
        calls = interp.calls[: self.max_calls_per_step]
        limit = self.call_time_limit()
        budget = None if limit is None else self.step_time_factor * limit
        self._step_deadline = None if budget is None else time.monotonic() + budget
        try:
            for k, (tool, kwargs) in enumerate(calls):
                if k and self._step_deadline is not None and time.monotonic() >= self._step_deadline:
                    outputs.append(
                        f"({len(interp.calls) - k} more call(s) not run: this action's calls used up its time "
                        f"budget of {budget:g} s, {self.step_time_factor:g} × the {limit:g} s limit of one call)"
                    )
                    break
                result = self._execute(tool, kwargs)
                outputs.append(_clip(result.output, self.max_output_chars))
                for name, value in result.reward.items():
                    rewards[name] = rewards.get(name, 0.0) + value
                if result.terminated:
                    terminated = True
                    if k + 1 < len(interp.calls):
                        outputs.append(f"({len(interp.calls) - k - 1} more call(s) skipped: the episode is over)")
                    break
            else:
                if len(interp.calls) > len(calls):
                    outputs.append(
                        f"({len(interp.calls) - len(calls)} more call(s) not run: at most "
                        f"{self.max_calls_per_step} calls per action)"
                    )
        finally:
            self._step_deadline = None
        return "\n".join(outputs), rewards, terminated

    def _execute(self, tool: Tool, kwargs: dict[str, Any]) -> ToolResult:
        try:
            result = tool.fn(self, **kwargs) if tool.is_method else tool.fn(**kwargs)
        except ToolError as exc:
            return ToolResult(f"Error: {exc}", error=True)
        except Exception as exc:  # a bug in the tool must not end the run; say it loudly
            warnings.warn(f"tool {tool.name!r} raised {exc!r}", RuntimeWarning, stacklevel=2)
            return ToolResult(f"Error: {tool.name} failed: {type(exc).__name__}: {exc}", error=True)
        if isinstance(result, ToolResult):
            return result
        return ToolResult(result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str))

    def _observe(self, action: Any, output: str, summary: str) -> str:
        prompt = self.task_prompt()
        if prompt is not self._task_text[0]:  # sanitised once per prompt string, not once per step
            self._task_text = (prompt, safe_text(prompt))
        task = self._task_text[1]
        if not self.history:  # the parts are built only if asked for (observation_parts()): most steps never are
            self._parts, self._latest = None, (task, summary, output)
            return _step_text(task, (), output, summary, self.max_observation_length)
        parts = ObservationParts(task, summary, result=output)
        self._parts = parts.with_history(self._turns, self.history, self.max_observation_length)
        self._turns.append(past_turn(action, output))
        return self._parts.render(self.max_observation_length)

    def sample_action(self, rng: np.random.Generator | int | None = None) -> str:
        """A random valid action: the canonical call of a uniformly drawn tool, with random arguments that pass
        its schema (:meth:`~agentgym.core.tools.Tool.sample_arguments`: enum choices, bools, bounded numbers, short
        strings; optional arguments half the time).

        It always parses and validates (``info["parse_error"]`` is None), though a tool may still refuse it (a
        random city is unknown): a random agent that exercises the tools. ``action_space.sample()`` stays
        Gymnasium's random member of the text space, which is almost never a call. ``rng``: a NumPy generator, or
        a seed for one; by default the action space's generator, so ``env.action_space.seed(s)`` makes the draws
        repeat as it does for ``sample()``.
        """
        if not self.tools:
            raise ValueError(f"{type(self).__name__} has no tools to sample")
        if rng is None:
            rng = self.action_space.np_random
        elif not isinstance(rng, np.random.Generator):
            rng = np.random.default_rng(rng)
        tools = list(self.tools.values())
        chosen = tools[int(rng.integers(len(tools)))]
        return ToolCall(chosen.name, chosen.sample_arguments(rng)).to_text()

    @staticmethod
    def canonical(name: str, **arguments: Any) -> str:
        """The canonical action text for a call, e.g. ``ToolEnv.canonical("move", direction="up")``."""
        return ToolCall(name, arguments).to_text()
