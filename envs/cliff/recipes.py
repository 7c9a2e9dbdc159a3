"""CliffWalk's settings for the tiny local model, per training stage (``benchmarks/learning_cliffwalk.py``).

The warm-up teaches the call with random directions (no route). RL trains with exploring starts (a random open cell
each reset) and the env's own 100-step limit: from the fixed start a sampled walk almost never reaches the goal, and
under a shorter cap (20 turns) a safe loop (-20) beats every walk that risks the cliff (-100), so the runs tried
settled there within 10 steps. Neither recipe reaches the optimal path (-13) from the start in the budgets measured;
see benchmarks/README.md.
"""

_SPLITS = {"train_split": None, "eval_split": None}  # one configuration, no splits
_RL = {**_SPLITS, "env_kwargs": {"exploring_starts": 1.0}, "eval_env_kwargs": {}, "warmup_steps": 5}
_ROLLOUT = {"max_turns": None, "temperature": 1.0}

RECIPES = {
    "agentgym/CliffWalk-v0": {
        "sft": {**_SPLITS, "eval_env_kwargs": None, "rollout": {"max_turns": 20}, "episodes": 256},
        "grpo": {**_RL, "rollout": _ROLLOUT, "tasks_per_step": 8, "beta": 0.1, "credit_assignment": "turn"},
        "ppo": {**_RL, "rollout": _ROLLOUT, "episodes_per_step": 32, "discount_unit": "turn"},
    }
}
"""Env id → stage → config overrides (see :mod:`agentgym.envs.weather.recipes`)."""
