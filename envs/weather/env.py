"""WeatherRun: look up the weather and air quality, then decide whether it is a good day to run."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import Field

from agentgym import core
from agentgym.core import TaskInfo, ToolEnv
from agentgym.core.data import sha256_file
from agentgym.core.tools import ToolCall, ToolError, ToolResult, tool
from agentgym.core.wrappers import DiscreteView
from agentgym.envs.weather.backends import HTTPWeather, RandomWeather, SnapshotWeather, WeatherBackend
from agentgym.envs.weather.dataset import (
    AQI_LIMIT,
    SNAPSHOT_V0,
    TEMP_MAX,
    TEMP_MIN,
    city_key,
    is_suitable,
    load_snapshot,
)

__all__ = ["REQUIRED_TOOLS", "RewardWeights", "WeatherOracle", "WeatherRunEnv"]

REQUIRED_TOOLS = ("get_weather", "get_air_quality")
"""The lookups the decision rule needs; each pays ``process_reward / 2`` once per episode (when it is on)."""


class RewardWeights(core.RewardWeights):
    """WeatherRun's reward terms (R = α·success − β·cost, in the components below)."""

    correct: float = Field(1.0, description="A correct answer given after get_weather.")
    both_tools: float = Field(0.5, description="Added to a correct answer when both lookups were made.")
    no_tools: float = Field(-0.5, description="Answering without calling any tool.")
    tool_cost: float = Field(0.0, ge=0, description="Subtracted for every get_weather/get_air_quality call.")


class WeatherRunEnv(DiscreteView, ToolEnv):
    """WeatherRun: decide whether it is a good day to go running in a city, after looking it up.

    The agent is asked about one (city, date). A day is suitable iff ``10 ≤ temperature ≤ 25 °C``
    and ``AQI < 100``. The answer counts only if ``get_weather`` was called (for the task's city)
    before it.

    ## Tools
    - ``get_weather(city)``: temperature (°C), conditions, humidity, wind.
    - ``get_air_quality(city)``: US AQI and PM2.5.
    - ``answer(suitable, reason="")``: the decision; ends the episode.

    ## Rewards (``rewards=`` / :class:`RewardWeights`; all in ``info["reward_components"]``)
    ``correct`` +1.0 for a correct answer after ``get_weather``; ``both_tools`` +0.5 more when both
    lookups were made; ``no_tools`` −0.5 for answering without any tool call; ``tool_cost`` (default 0)
    charged per lookup; ``invalid_action`` (default 0) for an unreadable action. The maximum is 1.5.
    ``info["success"]`` is True after a correct answer.

    Process reward (``process_reward=p``, default 0: off, and every reward is as without it): each of the two
    required lookups — ``get_weather`` and ``get_air_quality`` for the task's city — pays ``p / 2`` the first
    time it succeeds, in the component ``"process"``. A repeated lookup, a lookup of another city and a failed
    lookup pay nothing, so an episode earns at most ``p`` of process reward (``env.unwrapped.process_reward`` is
    that bound), and the success reward is unchanged (success rates stay comparable).

    ## Observation and summary
    Text; the state summary reads ``Shanghai · temp 18.4°C · AQI 55 · decision pending``.
    Through :class:`~agentgym.core.wrappers.DiscreteToolActions`: 4 actions (get_weather,
    get_air_quality, answer true, answer false) and 13 states — the temperature seen (unknown, cold,
    ok, hot) × the AQI seen (unknown, good, bad), plus ``answered`` — so the rule is learnable by a
    table.

    ## Data (``backend=``)
    - ``"snapshot"`` (default): the frozen table shipped with the package (400 records, checksum
      verified; ``snapshot=PATH`` for your own). ``split="train"`` (30 cities) or ``"test"``
      (10 other cities). ``reset(seed=s)`` picks the task; ``options={"task_index": i}`` picks task i.
    - ``"random"``: weather drawn per episode from the env's seeded generator (training diversity);
      ``synthetic_cities=True`` also makes up a new city name every episode, so a learner cannot
      memorise names (how the tiny LLM learns to copy cities it will only meet in the test split);
      ``suitable_share=0.5`` balances suitable and unsuitable days (27 % suitable otherwise).
    - ``"http"``: a live API at ``base_url`` (see ``agentgym.envs.weather.backends``), with
      ``timeout``, ``retries`` and ``record=PATH`` to freeze what it fetched into a snapshot. A lookup, retries
      included, takes at most ``timeout × (retries + 1)`` plus its backoff pauses (6.45 s by default); one
      action's lookups share 1.5 × that, and calls reached after it is spent are not run.

    ## Episode end
    Terminates on ``answer``; truncates after 8 actions (``max_episode_steps``).

    ## Version history
    - v0: initial version (snapshot SHA-256 ``3031b819…``).
    """

    def __init__(
        self,
        *,
        backend: str = "snapshot",
        split: str = "train",
        snapshot: str | Path | None = None,
        base_url: str | None = None,
        record: str | Path | None = None,
        timeout: float = 2.0,
        retries: int = 2,
        synthetic_cities: bool = False,
        suitable_share: float | None = None,
        rewards: RewardWeights | dict[str, float] | None = None,
        tool_cost: float | None = None,
        process_reward: float = 0.0,
        history: int = 0,
        render_mode: str | None = None,
    ) -> None:
        self.rewards: RewardWeights
        super().__init__(
            rewards=RewardWeights.of(rewards, tool_cost=tool_cost),
            process_reward=process_reward,
            history=history,
            render_mode=render_mode,
        )
        self._cost = {"tool_cost": -self.rewards.tool_cost} if self.rewards.tool_cost else {}
        path = Path(snapshot) if snapshot else SNAPSHOT_V0
        self.data_checksum = sha256_file(path)
        if backend == "snapshot":
            self.backend: WeatherBackend = SnapshotWeather(load_snapshot(path), split)
        elif backend == "random":
            self.backend = RandomWeather(load_snapshot(path), split, synthetic_cities, suitable_share)
        elif backend == "http":
            if not base_url:
                raise ValueError("backend='http' needs base_url, e.g. 'http://127.0.0.1:8000'")
            self.backend = HTTPWeather(
                base_url, split=split, tasks_from=path, timeout=timeout, retries=retries, record=record
            )
        else:
            raise ValueError(f"backend must be 'snapshot', 'random' or 'http', got {backend!r}")
        if (synthetic_cities or suitable_share is not None) and backend != "random":
            raise ValueError("synthetic_cities and suitable_share need backend='random' (the snapshot is fixed)")
        self.split = split
        self.city, self.date = "", ""
        self._menu = self._menu_for(self.city)

    # ----------------------------------------------------------------- tools

    @tool
    def get_weather(self, city: str) -> ToolResult:
        """Current weather for a city: temperature (°C), conditions, humidity and wind.

        Args:
            city: City name, e.g. "Shanghai".
        """
        w = self._lookup(self.backend.weather, city)
        if isinstance(w, ToolResult):
            return w
        if city_key(city) == city_key(self.city):
            self.temperature = float(w["temperature_c"])
        text = (
            f"Weather in {w['city']} on {self.date}: {w['temperature_c']:g}°C, {w['conditions']}, "
            f"humidity {w['humidity_pct']}%, wind {w['wind_kph']:g} km/h."
        )
        return ToolResult(text, self._paid("get_weather", city))

    @tool
    def get_air_quality(self, city: str) -> ToolResult:
        """Current air quality for a city: US AQI (0-500, lower is cleaner) and PM2.5.

        Args:
            city: City name, e.g. "Shanghai".
        """
        a = self._lookup(self.backend.air_quality, city)
        if isinstance(a, ToolResult):
            return a
        if city_key(city) == city_key(self.city):
            self.aqi = int(a["aqi"])
        return ToolResult(
            f"Air quality in {a['city']} on {self.date}: AQI {a['aqi']}, PM2.5 {a['pm2_5']:g} µg/m³.",
            self._paid("get_air_quality", city),
        )

    @tool
    def answer(self, suitable: bool, reason: str = "") -> ToolResult:
        """Give the final decision; this ends the episode.

        Args:
            suitable: true if it is a good day to go running, else false.
            reason: One sentence explaining the decision.
        """
        self.decision = bool(suitable)
        rewards: dict[str, float] = {}
        if self.lookups == 0:
            rewards["no_tools"] = self.rewards.no_tools
        self.correct = self.temperature is not None and self._truth() == self.decision
        if self.correct:
            rewards["correct"] = self.rewards.correct
            if self.aqi is not None:
                rewards["both_tools"] = self.rewards.both_tools
        verdict = "correct" if self.correct else "wrong"
        if self.temperature is None:
            verdict += " (get_weather was not called first)"
        return ToolResult(f"Answer recorded: {'suitable' if suitable else 'not suitable'} — {verdict}.", rewards, True)

    def _paid(self, name: str, city: str) -> dict[str, float]:
        """The reward of a successful lookup: its cost, and the process reward the first time a required tool
        looks up the task's city."""
        reward = dict(self._cost)
        if self.process_reward and city_key(city) == city_key(self.city) and name not in self.rewarded:
            self.rewarded.add(name)
            reward["process"] = self.process_reward / len(REQUIRED_TOOLS)
        return reward

    def _lookup(self, fetch: Callable[..., dict[str, Any]], city: str) -> dict[str, Any] | ToolResult:
        """Count the call and fetch for the task's date; a failure is the tool's error result."""
        self.lookups += 1
        try:
            return fetch(city, self.date, deadline=self._call_deadline())
        except ToolError as exc:
            return ToolResult(f"Error: {exc}", self._cost, error=True)

    def call_time_limit(self) -> float | None:
        """The ``http`` backend's longest lookup (``timeout × (retries + 1)`` and the backoff pauses: 6.45 s by
        default), which one action's lookups share 1.5 × of; None for the snapshot and random backends."""
        return self.backend.call_time_limit if isinstance(self.backend, HTTPWeather) else None

    def _call_deadline(self) -> float | None:
        seconds = self.call_time()
        return None if seconds is None else time.monotonic() + seconds

    # ----------------------------------------------------------------- ToolEnv hooks

    def reward_bounds(self) -> tuple[float, float]:
        """Per action: up to ``max_calls_per_step`` calls, each lookup charged ``tool_cost``; an ``answer`` ends
        the action and pays ``no_tools`` (no lookup before it in the episode), nothing (wrong), ``correct`` or
        ``correct + both_tools``; ``m`` lookups earn up to ``min(m, 2) / 2`` of ``process_reward``. With the
        default weights: ``(-0.5, 1.5)``."""
        w, calls = self.rewards, self.max_calls_per_step
        answers = [w.no_tools, 0.0, w.correct, w.correct + w.both_tools]

        def paid(process: float) -> list[float]:  # the rewards m lookups (earning process for up to 2) may pay
            def lookups(m: int) -> float:
                return -w.tool_cost * m + process * min(m, len(REQUIRED_TOOLS)) / len(REQUIRED_TOOLS)

            rewards = [self.invalid_action_reward] + [lookups(m) for m in range(1, calls + 1)]  # lookups only
            return rewards + [lookups(m) + a for m in range(calls) for a in (answers if m == 0 else answers[1:])]

        return min(paid(0.0)), max(paid(self.process_reward))

    def _reset_task(self, options: dict[str, Any]) -> None:
        index = options.get("task_index")
        self.city, self.date = self.backend.sample_task(self.np_random, None if index is None else int(index))
        self.temperature: float | None = None
        self.aqi: int | None = None
        self.decision: bool | None = None
        self.correct = False
        self.lookups = 0
        self.rewarded: set[str] = set()
        """The required tools whose process reward this episode has paid."""
        self._menu = self._menu_for(self.city)

    @staticmethod
    def _menu_for(city: str) -> list[str]:
        return [
            ToolCall("get_weather", {"city": city}).to_text(),
            ToolCall("get_air_quality", {"city": city}).to_text(),
            ToolCall("answer", {"suitable": True}).to_text(),
            ToolCall("answer", {"suitable": False}).to_text(),
        ]

    def _truth(self) -> bool | None:
        """Whether the task's day is suitable, from the backend (None if the service cannot say)."""
        deadline = self._call_deadline()  # part of the answer call: within its time
        try:
            w = self.backend.weather(self.city, self.date, deadline=deadline)
            a = self.backend.air_quality(self.city, self.date, deadline=deadline)
        except ToolError:
            return None
        return is_suitable(float(w["temperature_c"]), int(a["aqi"]))

    def task_prompt(self) -> str:
        return (
            f"Is {self.date} a good day to go running in {self.city}? A day is good for running when the "
            f"temperature is between {TEMP_MIN:g} and {TEMP_MAX:g} °C (inclusive) and the air quality index "
            f"(AQI) is below {AQI_LIMIT}. Look up the weather and the air quality with the tools, then "
            "call answer with suitable=true or suitable=false."
        )

    def summary(self) -> str:
        temp = "?" if self.temperature is None else f"{self.temperature:g}°C"
        aqi = "?" if self.aqi is None else str(self.aqi)
        if self.decision is None:
            decision = "decision pending"
        else:
            verdict = "correct" if self.correct else "wrong"
            decision = f"decision: {'suitable' if self.decision else 'not suitable'} ({verdict})"
        return f"{self.city} · temp {temp} · AQI {aqi} · {decision}"

    @property
    def success(self) -> bool:
        return self.correct

    def feedback(self) -> str:
        """What was wrong with the episode so far, never the answer (read by :class:`~agentgym.core.wrappers.Retry`):
        a missing answer, a missing or miscopied lookup, or a decision that does not follow the rule from the
        numbers looked up (without saying which decision would)."""
        city = self.city
        if self.correct:
            return "The answer was correct."
        if self.decision is None:
            return f"No answer was given: look up {city}'s weather and air quality, then call answer."
        if self.temperature is None:
            return (
                f"The answer could not count: get_weather was not called for {city} (the task's city, spelled "
                "exactly) before answering."
            )
        if self.aqi is None:
            return f"The answer was wrong, and get_air_quality was never called for {city}: the rule needs the AQI too."
        return (
            f"The answer was wrong: it does not follow the rule from what you looked up (temperature "
            f"{self.temperature:g}°C, AQI {self.aqi}). Check each condition again: {TEMP_MIN:g} to {TEMP_MAX:g} °C "
            f"inclusive, and AQI below {AQI_LIMIT}."
        )

    @property
    def num_tasks(self) -> int | None:
        return len(self.backend.tasks) if not isinstance(self.backend, RandomWeather) else None

    @property
    def task_info(self) -> TaskInfo:
        return replace(super().task_info, split=self.split, data_checksum=self.data_checksum)

    def state_key(self) -> str:
        if self.decision is not None:
            return "answered"
        if self.temperature is None:
            temp = "temp ?"
        else:
            temp = "cold" if self.temperature < TEMP_MIN else "hot" if self.temperature > TEMP_MAX else "temp ok"
        aqi = "AQI ?" if self.aqi is None else "AQI good" if self.aqi < AQI_LIMIT else "AQI bad"
        return f"{temp} · {aqi}"

    def state_keys(self) -> list[str]:
        temps = ("temp ?", "cold", "temp ok", "hot")
        return [f"{t} · {a}" for t in temps for a in ("AQI ?", "AQI good", "AQI bad")] + ["answered"]

    def action_menu(self) -> list[str]:
        return self._menu

    def oracle(self) -> WeatherOracle:
        return WeatherOracle()

    def close(self) -> None:
        if isinstance(self.backend, HTTPWeather):
            self.backend.close()
        super().close()


_STATE = re.compile(r"State: (?P<city>.+?) · temp (?P<temp>\?|-?[\d.]+°C) · AQI (?P<aqi>\?|\d+) · decision pending")


class WeatherOracle:
    """The scripted expert: looks up the weather, then the air quality, then applies the rule
    (``answer`` with the numbers it used as the ``reason``, before the decision).

    It reads only the observation text (the state summary line), so it plays any WeatherRun env
    through the same interface a model does. ``predict(obs) -> (action_text, None)``.
    """

    def predict(self, observation: str, state: Any = None, deterministic: bool = True) -> tuple[str, None]:
        m = _STATE.match(observation.splitlines()[-1] if observation else "")  # anchored: linear time
        if m is None:
            return ToolCall("answer", {"suitable": False}).to_text(), None
        city = m["city"]
        if m["temp"] == "?":
            return ToolCall("get_weather", {"city": city}).to_text(), None
        if m["aqi"] == "?":
            return ToolCall("get_air_quality", {"city": city}).to_text(), None
        suitable = is_suitable(float(m["temp"].rstrip("°C")), int(m["aqi"]))
        reason = f"temp {m['temp']} · AQI {m['aqi']}"  # the evidence first, then the decision
        return ToolCall("answer", {"reason": reason, "suitable": suitable}).to_text(), None
