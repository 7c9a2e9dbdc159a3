"""The agentgym tasks (installed as ``agentgym.envs``): one folder each, whose ``__init__`` declares the task's ids
in ``ENV_SPECS`` (:func:`agentgym.core.registration.declared_ids` collects them; see "Add an environment" in the
README)."""

from agentgym.core.registration import lazy_exports

CLIENT_SPECS = {"agentgym/Remote-v0": {"entry_point": "agentgym.envs.remote:RemoteEnv"}}
"""Ids that are no task of their own: ``agentgym/Remote-v0`` plays a task served by ``agentgym serve env`` (its
``TimeLimit`` is the server's)."""

__all__ = [
    "CliffWalkEnv",
    "CodeOracle",
    "CodeSandboxEnv",
    "SQLLookupEnv",
    "SQLOracle",
    "WeatherOracle",
    "WeatherRunEnv",
]
__getattr__ = lazy_exports(
    {
        "CliffWalkEnv": "agentgym.envs.cliff.env",
        "CodeOracle": "agentgym.envs.code.env",
        "CodeSandboxEnv": "agentgym.envs.code.env",
        "SQLLookupEnv": "agentgym.envs.sql.env",
        "SQLOracle": "agentgym.envs.sql.env",
        "WeatherOracle": "agentgym.envs.weather.env",
        "WeatherRunEnv": "agentgym.envs.weather.env",
    }
)
