"""SQLLookup: answer a question about a SQLite database never seen before, by exploring it with SQL.

``env`` is the task, ``dataset`` the generated company database and questions (and their builder), ``safety`` the
read-only, time- and memory-bounded SQLite layer every query goes through."""

from agentgym.envs.sql.env import RewardWeights, SQLDatabase, SQLLookupEnv, SQLOracle

__all__ = ["RewardWeights", "SQLDatabase", "SQLLookupEnv", "SQLOracle"]
