"""The agentgym learners (installed as ``agentgym.trainers``)."""

from agentgym.trainers.tabular import SARSA, QLearning, TabularConfig

__all__ = ["QLearning", "SARSA", "TabularConfig"]
