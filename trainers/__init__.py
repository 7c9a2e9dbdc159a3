"""The agentgym learners (installed as ``agentgym.trainers``)."""

from agentgym.trainers.tabular import QLearning, SARSA, TabularConfig

__all__ = ["QLearning", "SARSA", "TabularConfig"]
