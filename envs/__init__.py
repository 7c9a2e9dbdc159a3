"""The agentgym tasks (installed as ``agentgym.envs``)."""

from agentgym.envs.cliff.env import CliffWalkEnv
from agentgym.envs.code.env import CodeOracle, CodeSandboxEnv
from agentgym.envs.sql.env import SQLLookupEnv, SQLOracle
from agentgym.envs.weather.env import WeatherOracle, WeatherRunEnv

__all__ = [
    "CliffWalkEnv",
    "CodeOracle",
    "CodeSandboxEnv",
    "SQLLookupEnv",
    "SQLOracle",
    "WeatherOracle",
    "WeatherRunEnv",
]
