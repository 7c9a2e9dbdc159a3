"""CodeSandbox: write a Python function, run it and its tests in a sandbox, submit it to hidden unit tests.

``env`` is the task, ``dataset`` loads the frozen problems, ``families`` and ``problems`` generate them; the
programs run in :mod:`agentgym.envs.sandbox`."""

from agentgym.core.registration import lazy_exports

ENV_SPECS = {
    "agentgym/CodeSandbox-v0": {"entry_point": "agentgym.envs.code.env:CodeSandboxEnv", "max_episode_steps": 10},
    "agentgym/CodeSandbox-v1": {
        "entry_point": "agentgym.envs.code.env:CodeSandboxEnv",
        "max_episode_steps": 10,
        "kwargs": {"task_set": "v1"},
    },
}
"""This task's ids and how Gymnasium makes them (``max_episode_steps``: the ``TimeLimit``)."""

__all__ = ["CodeOracle", "CodeSandboxEnv", "RewardWeights"]
__getattr__ = lazy_exports(dict.fromkeys(__all__, "agentgym.envs.code.env"))
