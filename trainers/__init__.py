"""The agentgym learners (installed as ``agentgym.trainers``).

Classic RL on the discrete view: :class:`QLearning`, :class:`SARSA`, :class:`REINFORCE`, :class:`PPO`.
Language models (import from their modules, which load torch/transformers only when used):
``sft.SFT``, ``grpo.GRPO``, ``llm_ppo.LLMPPO``, ``dpo.DPO``, ``reward_model.RewardModelTrainer``.
"""

from agentgym.trainers.base import DiscreteAgent
from agentgym.trainers.ppo import PPO, PPOConfig
from agentgym.trainers.reinforce import REINFORCE, REINFORCEConfig
from agentgym.trainers.tabular import SARSA, QLearning, TabularConfig

__all__ = ["DiscreteAgent", "PPO", "PPOConfig", "QLearning", "REINFORCE", "REINFORCEConfig", "SARSA", "TabularConfig"]
