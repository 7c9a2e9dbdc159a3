"""WeatherRun: look up the weather and air quality of a city, then decide whether it is a good day to run.

``env`` is the task, ``dataset`` the frozen snapshot (and the code that builds it), ``backends`` where the tools'
numbers come from (the snapshot, a random draw, or an HTTP weather service)."""

from agentgym.core.registration import lazy_exports

ENV_SPECS = {
    "agentgym/WeatherRun-v0": {"entry_point": "agentgym.envs.weather.env:WeatherRunEnv", "max_episode_steps": 8},
}
"""This task's ids and how Gymnasium makes them (``max_episode_steps``: the ``TimeLimit``)."""

__all__ = ["REQUIRED_TOOLS", "RewardWeights", "WeatherOracle", "WeatherRunEnv"]
__getattr__ = lazy_exports(dict.fromkeys(__all__, "agentgym.envs.weather.env"))
