"""CliffWalk: the classic 4×12 cliff-walking grid, played by calling a ``move`` tool."""

from agentgym.envs.cliff.env import CliffWalkEnv, CliffWalkOracle

__all__ = ["CliffWalkEnv", "CliffWalkOracle"]
