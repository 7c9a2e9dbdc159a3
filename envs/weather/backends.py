"""Where WeatherRun's tools get their data: a frozen snapshot, a seeded generator, or a live HTTP API.

Every backend answers ``weather(city, date)`` and ``air_quality(city, date)`` with a
:class:`~agentgym.envs.weather.dataset.WeatherRecord`-shaped dict, or raises
:class:`~agentgym.core.tools.ToolError` with a message the agent can read ("no data for Atlantis",
"the weather service timed out …"). ``sample_task`` picks an episode's (city, date).

The HTTP schema (served by ``agentgym serve weather``; shaped like Open-Meteo's ``current`` blocks)::

    GET {base_url}/v1/weather?city=Shanghai&date=2024-05-03
    200 {"city": "Shanghai", "date": "2024-05-03",
         "current": {"temperature_2m": 18.4, "relative_humidity_2m": 62, "wind_speed_10m": 11.0,
                     "conditions": "partly cloudy"},
         "current_units": {"temperature_2m": "°C", "relative_humidity_2m": "%", "wind_speed_10m": "km/h"}}

    GET {base_url}/v1/air-quality?city=Shanghai&date=2024-05-03
    200 {"city": "Shanghai", "date": "2024-05-03", "current": {"us_aqi": 55, "pm2_5": 16.5},
         "current_units": {"us_aqi": "USAQI", "pm2_5": "µg/m³"}}

    404 {"error": "no data for 'Atlantis' on 2024-05-03"}
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from pathlib import Path
from typing import Any, Protocol

import httpx
import numpy as np
from pydantic import BaseModel, ValidationError

from agentgym.core import deadline
from agentgym.core.tools import ToolError
from agentgym.envs.weather.dataset import (
    SNAPSHOT_V0,
    WeatherRecord,
    city_key,
    is_suitable,
    load_snapshot,
    write_snapshot,
)

__all__ = ["HTTPWeather", "RandomWeather", "SnapshotWeather", "WeatherBackend"]

MAX_RESPONSE_BYTES = 64 << 10
"""The most of one HTTP response :class:`HTTPWeather` reads (a record is a few hundred bytes)."""
WEATHER_FIELDS = ("temperature_c", "conditions", "humidity_pct", "wind_kph")
AIR_FIELDS = ("aqi", "pm2_5")


class WeatherBackend(Protocol):
    """``deadline`` (a ``time.monotonic()`` time, or None): when a lookup must have answered or failed."""

    def sample_task(self, rng: np.random.Generator, index: int | None = None) -> tuple[str, str]: ...
    def weather(self, city: str, date: str, deadline: float | None = None) -> dict[str, Any]: ...
    def air_quality(self, city: str, date: str, deadline: float | None = None) -> dict[str, Any]: ...


class SnapshotWeather:
    """Frozen records of one split; the same seed always gives the same task and the same data."""

    def __init__(self, records: list[WeatherRecord], split: str) -> None:
        self.split = split
        self.tasks = [r for r in records if r.split == split]
        if not self.tasks:
            splits = sorted({r.split for r in records})
            raise ValueError(f"no records in split {split!r}; the snapshot has {splits}")
        self._by_key = {(city_key(r.city), r.date): r for r in records}

    def sample_task(self, rng: np.random.Generator, index: int | None = None) -> tuple[str, str]:
        if index is None:
            index = int(rng.integers(len(self.tasks)))
        elif not 0 <= index < len(self.tasks):
            raise ValueError(f"task_index must be in [0, {len(self.tasks)}), got {index}")
        record = self.tasks[index]
        return record.city, record.date

    def _record(self, city: str, date: str) -> WeatherRecord:
        record = self._by_key.get((city_key(city), date))
        if record is None:
            raise ToolError(f"no data for {city!r} on {date}")
        return record

    def weather(self, city: str, date: str, deadline: float | None = None) -> dict[str, Any]:
        record = self._record(city, date)
        return {"city": record.city, "date": date, **record.model_dump(include=set(WEATHER_FIELDS))}

    def air_quality(self, city: str, date: str, deadline: float | None = None) -> dict[str, Any]:
        record = self._record(city, date)
        return {"city": record.city, "date": date, **record.model_dump(include=set(AIR_FIELDS))}


_ONSETS = "b c d f g h j k l m n p r s t v w z br ch cr gr kr pl sh st th tr".split() + [""] * 4
_NUCLEI = "a e i o u a e o ai ou ea io ia".split() + ["é", "ü", "ó", "ø", "ã"]
_CODAS = ["", "", "", "n", "r", "l", "s", "k", "m", "ng", "rd", "st"]


def synthetic_city(rng: random.Random) -> str:
    """A made-up, pronounceable city name (``"Brelo"``, ``"Tamsók Vir"``): 1–2 words of 1–3 syllables."""

    def word() -> str:
        syllables = "".join(rng.choice(_ONSETS) + rng.choice(_NUCLEI) for _ in range(rng.randint(1, 3)))
        return (syllables + rng.choice(_CODAS)).capitalize()

    return " ".join(word() for _ in range(1 if rng.random() < 0.8 else 2))


class RandomWeather(SnapshotWeather):
    """A fresh (city, date, weather, AQI) every episode, drawn from the env's seeded generator: the
    training-time randomness. One draw in five sits on a threshold edge; about 27 % of days are
    suitable, or ``suitable_share`` of them when set (balanced batches keep "always no" from being a
    good policy). Cities are the split's, or, with ``synthetic_cities=True``, a made-up name every
    episode (domain randomisation: an agent trained so cannot memorise city names and must read
    the one it is asked about)."""

    def __init__(
        self,
        records: list[WeatherRecord],
        split: str,
        synthetic_cities: bool = False,
        suitable_share: float | None = None,
    ) -> None:
        super().__init__(records, split)
        if suitable_share is not None and not 0.0 <= suitable_share <= 1.0:
            raise ValueError(f"suitable_share must be in [0, 1], got {suitable_share}")
        self._cities = sorted({r.city for r in self.tasks}, key=city_key)
        self.synthetic_cities = synthetic_cities
        self.suitable_share = suitable_share

    def sample_task(self, rng: np.random.Generator, index: int | None = None) -> tuple[str, str]:
        if index is not None:
            raise ValueError("the random backend has no fixed task list; task_index needs backend='snapshot'")
        city = self._cities[int(rng.integers(len(self._cities)))]
        if self.synthetic_cities:
            city = synthetic_city(random.Random(int(rng.integers(2**31))))
        day = int(rng.integers(1, 29))
        date = f"2024-{int(rng.integers(1, 13)):02d}-{day:02d}"
        want = None if self.suitable_share is None else bool(rng.random() < self.suitable_share)
        for _ in range(1000):  # rejection sampling when a share of suitable days is asked for
            temperature = float(rng.choice([9.9, 10.0, 25.0, 25.1])) if rng.random() < 0.2 else rng.uniform(-5, 38)
            aqi = int(rng.choice([99, 100])) if rng.random() < 0.2 else int(math.exp(rng.normal(4.2, 0.6)))
            if want is None or is_suitable(round(temperature, 1), max(5, aqi)) == want:
                break
        r = random.Random(int(rng.integers(2**31)))
        record = WeatherRecord(
            city=city,
            date=date,
            split=self.split,
            temperature_c=round(float(temperature), 1),
            conditions=r.choice(["clear", "partly cloudy", "overcast", "light rain", "fog"]),
            humidity_pct=r.randint(20, 95),
            wind_kph=round(r.uniform(0, 30), 1),
            aqi=max(5, aqi),
            pm2_5=round(max(5, aqi) * r.uniform(0.25, 0.45), 1),
        )
        self._by_key = {(city_key(city), date): record}
        return city, date


class _WeatherPayload(BaseModel):
    temperature_2m: float
    relative_humidity_2m: int
    wind_speed_10m: float
    conditions: str


class _AirPayload(BaseModel):
    us_aqi: int
    pm2_5: float


class HTTPWeather:
    """A live weather/air-quality HTTP API (schema in the module docstring), via ``httpx``.

    Tasks (city, date) come from a snapshot's split; values come from the service. Each request
    has a ``timeout``; connection errors, timeouts, 5xx/429 and malformed bodies are retried up to
    ``retries`` times with exponential backoff (``backoff · 2^attempt`` seconds, jittered); what still
    fails becomes a :class:`ToolError` that says what happened. With ``record=PATH`` every complete
    (city, date) fetched is written to a new snapshot file, freezing live data for later evaluation.
    """

    def __init__(
        self,
        base_url: str,
        *,
        split: str = "test",
        tasks_from: str | Path = SNAPSHOT_V0,
        timeout: float = 2.0,
        retries: int = 2,
        backoff: float = 0.1,
        record: str | Path | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.tasks = SnapshotWeather(load_snapshot(tasks_from), split).tasks
        self.split = split
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self.record_path = Path(record) if record else None
        self._recorded: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._client = deadline.client(timeout=self.timeout)
        self._jitter = random.Random(0)

    sample_task = SnapshotWeather.sample_task

    @property
    def call_time_limit(self) -> float:
        """The longest one lookup takes, retries and pauses included: ``timeout × (retries + 1)`` plus the longest
        backoff pauses (6.45 s with the defaults). A lookup given an earlier ``deadline`` stops at it."""
        return self.timeout * (self.retries + 1) + self.backoff * (2**self.retries - 1) * 1.5

    def _get(self, path: str, city: str, date: str, deadline: float | None = None) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        end = time.monotonic() + self.call_time_limit if deadline is None else deadline
        problem, attempts = "", 0
        for attempt in range(self.retries + 1):
            if attempt:
                pause = self.backoff * 2 ** (attempt - 1) * (0.5 + self._jitter.random())
                time.sleep(max(0.0, min(pause, end - time.monotonic())))
            wait = min(self.timeout, end - time.monotonic())
            if wait <= 0:
                problem += f"{'; ' if problem else ''}no time left in this action's time budget"
                break
            attempts += 1
            try:
                status, content = self._fetch(url, {"city": city, "date": date}, wait, end)
            except httpx.TimeoutException:
                problem = f"timed out after {wait:g} s"
                continue
            except httpx.HTTPError as exc:
                problem = f"could not connect ({type(exc).__name__})"
                continue
            if status == 404:
                raise ToolError(_error_text(content) or f"no data for {city!r} on {date}")
            if status >= 400:
                problem = f"HTTP {status}"
                if status in (429,) or status >= 500:
                    continue
                raise ToolError(f"the weather service refused the request: {problem} {_error_text(content)}")
            try:
                body = json.loads(content)
                return body if isinstance(body, dict) else {}
            except ValueError:
                problem = "the response was not valid JSON"
        raise ToolError(f"the weather service failed ({problem}) after {attempts} attempt(s); try again later")

    def _fetch(self, url: str, params: dict[str, str], wait: float, end: float) -> tuple[int, bytes]:
        """One GET: its status and body, read within ``wait`` seconds per read and by ``end`` in all (a server
        that trickles its head or body is cut off), at most :data:`MAX_RESPONSE_BYTES` of it."""
        with deadline.deadline(end), self._client.stream("GET", url, params=params, timeout=wait) as response:
            content = bytearray()
            for chunk in response.iter_bytes():
                content += chunk
                if len(content) > MAX_RESPONSE_BYTES:
                    return 502, b""  # a weather record is a few hundred bytes
            return response.status_code, bytes(content)

    def weather(self, city: str, date: str, deadline: float | None = None) -> dict[str, Any]:
        body = self._get("/v1/weather", city, date, deadline)
        try:
            p = _WeatherPayload.model_validate(body.get("current"))
        except ValidationError:
            raise ToolError("the weather service sent a response without the expected fields") from None
        values = {
            "temperature_c": p.temperature_2m,
            "conditions": p.conditions,
            "humidity_pct": p.relative_humidity_2m,
            "wind_kph": p.wind_speed_10m,
        }
        return self._remember(str(body.get("city") or city), date, values)

    def air_quality(self, city: str, date: str, deadline: float | None = None) -> dict[str, Any]:
        body = self._get("/v1/air-quality", city, date, deadline)
        try:
            p = _AirPayload.model_validate(body.get("current"))
        except ValidationError:
            raise ToolError("the air-quality service sent a response without the expected fields") from None
        return self._remember(str(body.get("city") or city), date, {"aqi": p.us_aqi, "pm2_5": p.pm2_5})

    def _remember(self, city: str, date: str, values: dict[str, Any]) -> dict[str, Any]:
        if self.record_path is not None:
            with self._lock:
                entry = self._recorded.setdefault((city_key(city), date), {"city": city, "date": date})
                entry.update(values)
                complete = [
                    {**r, "split": self.split}
                    for r in self._recorded.values()
                    if all(k in r for k in WEATHER_FIELDS + AIR_FIELDS)
                ]
                if complete:
                    write_snapshot(complete, self.record_path)
        return {"city": city, "date": date, **values}

    def close(self) -> None:
        self._client.close()


def _error_text(content: bytes) -> str:
    try:
        body = json.loads(content)
    except ValueError:
        return ""
    return str(body.get("error", ""))[:200] if isinstance(body, dict) else ""
