"""The agentgym tasks (installed as ``agentgym.envs``)."""

from agentgym.envs.cliff_walk import CliffWalkEnv
from agentgym.envs.code_sandbox import CodeOracle, CodeSandboxEnv
from agentgym.envs.sql_lookup import SQLLookupEnv, SQLOracle
from agentgym.envs.weather_run import WeatherOracle, WeatherRunEnv

__all__ = [
    "CliffWalkEnv",
    "CodeOracle",
    "CodeSandboxEnv",
    "SQLLookupEnv",
    "SQLOracle",
    "WeatherOracle",
    "WeatherRunEnv",
]
