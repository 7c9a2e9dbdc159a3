"""CodeSandbox: write a Python function, run it and its tests in a sandbox, submit it to hidden unit tests.

``env`` is the task, ``dataset`` loads the frozen problems, ``families`` and ``problems`` generate them; the
programs run in :mod:`agentgym.envs.sandbox`."""

from agentgym.envs.code.env import CodeOracle, CodeSandboxEnv, RewardWeights

__all__ = ["CodeOracle", "CodeSandboxEnv", "RewardWeights"]
