"""The agentgym learners (installed as ``agentgym.trainers``)."""

from agentgym.trainers.base import DiscreteAgent
from agentgym.trainers.ppo import PPO, PPOConfig
from agentgym.trainers.reinforce import REINFORCE, REINFORCEConfig
from agentgym.trainers.tabular import SARSA, QLearning, TabularConfig

__all__ = ["DiscreteAgent", "PPO", "PPOConfig", "QLearning", "REINFORCE", "REINFORCEConfig", "SARSA", "TabularConfig"]
