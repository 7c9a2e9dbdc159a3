"""WeatherRun: look up the weather and air quality of a city, then decide whether it is a good day to run.

``env`` is the task, ``dataset`` the frozen snapshot (and the code that builds it), ``backends`` where the tools'
numbers come from (the snapshot, a random draw, or an HTTP weather service)."""

from agentgym.envs.weather.env import REQUIRED_TOOLS, RewardWeights, WeatherOracle, WeatherRunEnv

__all__ = ["REQUIRED_TOOLS", "RewardWeights", "WeatherOracle", "WeatherRunEnv"]
