"""The language-model trainers, on one loop (``trainer``: the run, the optimizer step; ``online_trainer`` for those
that learn from their own episodes): ``sft``, ``grpo`` (settings in ``grpo_config``), ``ppo``, ``reward_model``,
``dpo``. Beside them what they share: ``rollout`` (multi-turn episodes and greedy evaluation), ``config``,
``optim``, ``preferences``, ``unique_samples``, and the ``probe`` and ``numeracy`` diagnostics."""
