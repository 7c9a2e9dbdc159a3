"""WeatherRun's snapshot generator: the ``-v0`` records (``data/weather_v0.jsonl``) from a fixed seed, 40 cities with
their climates (the test split's cities disjoint from the training split's), rebuilt bit-identically by
``python -m agentgym.envs.weather.build.snapshot``."""

from __future__ import annotations

import math
import random

from agentgym.envs.weather.dataset import SNAPSHOT_V0, WeatherRecord, write_snapshot

__all__ = ["generate_snapshot"]

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


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Rebuild the WeatherRun snapshot from its seed.")
    parser.add_argument("--out", default=str(SNAPSHOT_V0))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(write_snapshot(generate_snapshot(args.seed), args.out))
