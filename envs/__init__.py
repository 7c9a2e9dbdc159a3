"""The agentgym tasks (installed as ``agentgym.envs``)."""

from agentgym.envs.cliff_walk import CliffWalkEnv

__all__ = ["CliffWalkEnv"]
