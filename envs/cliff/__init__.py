"""CliffWalk: the classic 4×12 cliff-walking grid, played by calling a ``move`` tool."""

from agentgym.core.registration import lazy_exports

ENV_SPECS = {
    "agentgym/CliffWalk-v0": {"entry_point": "agentgym.envs.cliff.env:CliffWalkEnv", "max_episode_steps": 100},
}
"""This task's ids and how Gymnasium makes them (``max_episode_steps``: the ``TimeLimit``)."""

__all__ = ["CliffWalkEnv", "CliffWalkOracle"]
__getattr__ = lazy_exports(dict.fromkeys(__all__, "agentgym.envs.cliff.env"))
