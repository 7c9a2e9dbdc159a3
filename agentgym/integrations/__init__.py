"""Bridges from agentgym to other training libraries; each submodule imports its library only when imported itself.

- :mod:`agentgym.integrations.trl`: the ``agentgym/*`` tasks for TRL's ``GRPOTrainer`` (``environment_factory``,
  ``rollout_func`` or a reward function), installed with ``pip install "agentgym-suite[trl]"``.
"""
