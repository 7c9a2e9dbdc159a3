"""WeatherRun's data: weather and air-quality records, the frozen ``-v0`` snapshot, and the running rule.

A record is one (city, date) observation::

    {"city": "Shanghai", "date": "2024-05-03", "split": "train", "temperature_c": 18.4,
     "conditions": "partly cloudy", "humidity_pct": 62, "wind_kph": 11.0, "aqi": 55, "pm2_5": 16.5}

The snapshot shipped with the package (``data/weather_v0.jsonl``) is made by
:func:`~agentgym.envs.weather.build.snapshot.generate_snapshot` from a fixed seed, so it can be rebuilt
bit-identically (``python -m agentgym.envs.weather.build.snapshot``);
:func:`load_snapshot` checks its SHA-256 against :data:`SNAPSHOT_V0_SHA256`. It covers both sides of
both thresholds and their edge values (10.0 and 25.0 °C, AQI 99 and 100). The ``train`` and ``test``
splits have disjoint cities.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentgym.core.data import read_jsonl, sha256_file, write_jsonl

__all__ = [
    "SNAPSHOT_V0",
    "SNAPSHOT_V0_SHA256",
    "WeatherRecord",
    "city_key",
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
