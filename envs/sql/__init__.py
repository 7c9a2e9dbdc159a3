"""SQLLookup: answer a question about a SQLite database never seen before, by exploring it with SQL.

``env`` is the task, ``dataset`` the generated company database and questions (and their builder), ``safety`` the
read-only, time- and memory-bounded SQLite layer every query goes through."""

from agentgym.core.registration import lazy_exports

ENV_SPECS = {
    "agentgym/SQLLookup-v0": {"entry_point": "agentgym.envs.sql.env:SQLLookupEnv", "max_episode_steps": 12},
    "agentgym/SQLLookup-v1": {
        "entry_point": "agentgym.envs.sql.env:SQLLookupEnv",
        "max_episode_steps": 12,
        "kwargs": {"task_set": "v1"},
    },
}
"""This task's ids and how Gymnasium makes them (``max_episode_steps``: the ``TimeLimit``)."""

__all__ = ["RewardWeights", "SQLDatabase", "SQLLookupEnv", "SQLOracle"]
__getattr__ = lazy_exports(dict.fromkeys(__all__, "agentgym.envs.sql.env"))
