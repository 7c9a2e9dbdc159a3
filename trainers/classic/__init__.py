"""Classic RL on ``Discrete`` envs (an agentgym env's discrete view): ``tabular`` (Q-learning, SARSA),
``reinforce``, ``ppo`` (their networks in ``torch_agent``), ``base`` (what they share) and ``runs`` (a training run
of one to a run directory)."""
