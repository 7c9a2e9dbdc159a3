"""WeatherRun's data: weather and air-quality records, the frozen ``-v0`` snapshot, and the running rule.

A record is one (city, date) observation::

    {"city": "Shanghai", "date": "2024-05-03", "split": "train", "temperature_c": 18.4,
     "conditions": "partly cloudy", "humidity_pct": 62, "wind_kph": 11.0, "aqi": 55, "pm2_5": 16.5}

The snapshot shipped with the package (``data/weather_v0.jsonl``) is made by :func:`generate_snapshot`
from a fixed seed, so it can be rebuilt bit-identically (``python -m agentgym.envs.weather.dataset``);
:func:`load_snapshot` checks its SHA-256 against :data:`SNAPSHOT_V0_SHA256`. It covers both sides of
both thresholds and their edge values (10.0 and 25.0 °C, AQI 99 and 100). The ``train`` and ``test``
splits have disjoint cities.
"""

from __future__ import annotations

import math
import random
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentgym.data import read_jsonl, sha256_file, write_jsonl

__all__ = [
    "SNAPSHOT_V0",
    "SNAPSHOT_V0_SHA256",
    "WeatherRecord",
    "city_key",
    "generate_snapshot",
    "is_suitable",
    "load_snapshot",
    "sha256_file",
    "write_snapshot",
]

SNAPSHOT_V0 = Path(__file__).parent / "data" / "weather_v0.jsonl"
SNAPSHOT_V0_SHA256 = "3031b8190596ed1f31bfeef33c17f468ba3a4895e0c181d57fac67e5d862c99e"

TEMP_MIN, TEMP_MAX, AQI_LIMIT = 10.0, 25.0, 100


def is_suitable(temperature_c: float, aqi: float) -> bool:
    """The running rule: suitable iff 10 ≤ temperature ≤ 25 °C and AQI < 100."""
    return TEMP_MIN <= temperature_c <= TEMP_MAX and aqi < AQI_LIMIT


def city_key(name: str) -> str:
    """A city name folded for lookup: case, accents and surrounding space ignored ("zurich" = "Zürich")."""
    decomposed = unicodedata.normalize("NFKD", name.strip().casefold())
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).split())


class WeatherRecord(BaseModel):
    """One city on one date: what ``get_weather`` and ``get_air_quality`` report (finite numbers only: a NaN
    temperature would silently make every answer about that day wrong)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    city: str
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    split: str = "train"
    temperature_c: float
    conditions: str
    humidity_pct: int = Field(ge=0, le=100)
    wind_kph: float = Field(ge=0)
    aqi: int = Field(ge=0)
    pm2_5: float = Field(ge=0)

    @property
    def suitable(self) -> bool:
        return is_suitable(self.temperature_c, self.aqi)


# (city, mean annual temperature °C, seasonal amplitude °C, typical AQI). Values are invented for
# the task; only their spread matters.
_CITIES: tuple[tuple[str, float, float, int], ...] = (
    ("Shanghai", 17, 10, 80),
    ("Beijing", 13, 15, 110),
    ("Tokyo", 16, 9, 45),
    ("Seoul", 13, 14, 75),
    ("Delhi", 25, 9, 170),
    ("Mumbai", 27, 3, 120),
    ("Singapore", 28, 1, 50),
    ("Sydney", 18, 6, 30),
    ("Melbourne", 15, 6, 28),
    ("Auckland", 15, 5, 20),
    ("Cairo", 22, 7, 140),
    ("Lagos", 27, 2, 130),
    ("Nairobi", 19, 2, 60),
    ("Cape Town", 17, 5, 35),
    ("Istanbul", 15, 9, 70),
    ("Moscow", 6, 14, 55),
    ("Berlin", 10, 9, 40),
    ("Paris", 12, 8, 45),
    ("London", 11, 7, 40),
    ("Madrid", 15, 10, 50),
    ("Lisbon", 17, 6, 35),
    ("Rome", 16, 9, 55),
    ("Oslo", 6, 10, 25),
    ("Reykjavik", 5, 6, 15),
    ("New York", 13, 12, 50),
    ("Chicago", 10, 14, 55),
    ("Los Angeles", 18, 5, 85),
    ("Mexico City", 17, 4, 105),
    ("Lima", 19, 4, 90),
    ("Buenos Aires", 18, 7, 50),
    ("São Paulo", 20, 4, 75),
    ("Toronto", 9, 13, 40),
    ("Vancouver", 11, 7, 25),
    ("Denver", 10, 12, 45),
    ("Dubai", 28, 7, 120),
    ("Bangkok", 29, 2, 95),
    ("Jakarta", 28, 1, 135),
    ("Zürich", 10, 9, 30),
    ("Kraków", 9, 10, 95),
    ("Ulaanbaatar", 0, 20, 150),
)
_TEST_CITIES = frozenset(
    {"Seoul", "Cape Town", "Madrid", "Oslo", "Chicago", "Lima", "Vancouver", "Bangkok", "Zürich", "Kraków"}
)
_DATES_PER_CITY = 10
_TEMP_EDGES = (9.9, 10.0, 10.1, 24.9, 25.0, 25.1)
_AQI_EDGES = (98, 99, 100, 101)


def _conditions(rng: random.Random, temperature: float) -> str:
    options = ["clear", "partly cloudy", "overcast", "light rain", "rain", "fog"]
    if temperature < 2:
        options += ["snow", "snow"]
    if temperature > 24:
        options += ["clear", "humid"]
    return rng.choice(options)


def generate_snapshot(seed: int = 0) -> list[WeatherRecord]:
    """The records of the ``-v0`` snapshot (``seed=0``): 40 cities × 10 dates in 2024, with one in
    six temperatures and one in six AQI readings set exactly on or next to a threshold."""
    rng = random.Random(seed)
    records = []
    for city, mean, amplitude, typical_aqi in _CITIES:
        days = sorted(rng.sample(range(366), _DATES_PER_CITY))
        for day in days:
            date = _date_2024(day)
            season = math.cos(2 * math.pi * (day - 200) / 366)  # northern summer peak around July
            if city in ("Sydney", "Melbourne", "Auckland", "Cape Town", "Buenos Aires", "São Paulo", "Lima"):
                season = -season
            temperature = mean + amplitude * season + rng.gauss(0, 3)
            if rng.random() < 1 / 6:
                temperature = rng.choice(_TEMP_EDGES)
            aqi = max(5, round(typical_aqi * math.exp(rng.gauss(0, 0.35))))
            if rng.random() < 1 / 6:
                aqi = rng.choice(_AQI_EDGES)
            temperature = round(temperature, 1)
            records.append(
                WeatherRecord(
                    city=city,
                    date=date,
                    split="test" if city in _TEST_CITIES else "train",
                    temperature_c=temperature,
                    conditions=_conditions(rng, temperature),
                    humidity_pct=min(100, max(5, round(rng.gauss(65, 15)))),
                    wind_kph=round(abs(rng.gauss(12, 7)), 1),
                    aqi=aqi,
                    pm2_5=round(aqi * rng.uniform(0.25, 0.45), 1),
                )
            )
    return records


def _date_2024(day: int) -> str:
    month_lengths = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
    month = 0
    while day >= month_lengths[month]:
        day -= month_lengths[month]
        month += 1
    return f"2024-{month + 1:02d}-{day + 1:02d}"


def write_snapshot(records: Iterable[WeatherRecord | dict[str, Any]], path: str | Path) -> str:
    """Write records as JSON Lines (sorted by split, city, date; one canonical form) and return the file's SHA-256."""
    rows = [r if isinstance(r, WeatherRecord) else WeatherRecord.model_validate(r) for r in records]
    rows.sort(key=lambda r: (r.split, city_key(r.city), r.date))
    return write_jsonl(rows, path)


def load_snapshot(path: str | Path = SNAPSHOT_V0, sha256: str | None = None) -> list[WeatherRecord]:
    """Read a snapshot file; with ``sha256``, refuse a file whose checksum differs (a frozen env's data
    must not change silently). The shipped ``-v0`` file is always checked."""
    if sha256 is None and Path(path).resolve() == SNAPSHOT_V0.resolve():
        sha256 = SNAPSHOT_V0_SHA256
    return read_jsonl(path, WeatherRecord, sha256=sha256, what="weather")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Rebuild the WeatherRun snapshot from its seed.")
    parser.add_argument("--out", default=str(SNAPSHOT_V0))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(write_snapshot(generate_snapshot(args.seed), args.out))
