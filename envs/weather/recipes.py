"""WeatherRun's settings for the tiny local model, per training stage: what each stage changes from the tiny model's
defaults (:data:`agentgym.app.recipes.TINY_DEFAULTS`), found with ``benchmarks/grpo_weatherrun.py``.

Training plays made-up city names (``backend="random", synthetic_cities=True``), so the model learns to copy the
city it is asked about instead of memorising the 30 training cities; the frozen test split's cities are then new to
it, as they should be.
"""

_TRAINING = {"backend": "random", "synthetic_cities": True, "suitable_share": 0.5}
_ENV = {"env_kwargs": _TRAINING, "eval_env_kwargs": {}}  # evaluated on the frozen snapshot's test split

RECIPES = {
    "agentgym/WeatherRun-v0": {
        "sft": _ENV,
        # After the format-only SFT (benchmarks/grpo_weatherrun.py --experiment a): the outcome of each answered
        # episode labels its decision in hindsight (decision_coef), a dense signal for the one token that decides,
        # drawn from the latest 1,024 distinct labelled decisions (decision_replay) rather than the step's 16 days,
        # and the learning rate decays over the run's 120 steps. Test success after 120 steps, seeds 0/1/2:
        # 85/97/96 % (without the replay 79/94/94 %; plain GRPO, constant rate: 68/53/53 % after 150). At lr 1e-3
        # two seeds in three stopped answering by step 20.
        "grpo": {**_ENV, "decision_coef": 1.0, "decision_replay": 1024, "lr_schedule": "cosine", "steps": 120},
        # GRPO straight from the shipped base, no SFT (--experiment b). The base answers from memory at first (-0.5),
        # and an unreadable action or an episode that never answers earns 0: with β 0 and no truncation penalty, the
        # run tried (seed 0) learnt within 10 steps to write garbage instead (reward 0, then no gradient at all). The
        # KL brake to the base keeps the call format, and the penalty makes never answering cost as much as answering
        # blind (-0.5), so only a valid lookup pays. At 1.0 it cost more than answering from memory, and in both runs
        # tried the policy stayed there.
        "grpo-from-base": {**_ENV, "warmup_steps": 10, "beta": 0.1, "truncation_penalty": 0.5},
        "ppo": _ENV,  # benchmarks/ppo_vs_grpo.py compares it with GRPO
        # benchmarks/reward_model_weatherrun.py: held-out pair accuracy 47 % → 98 % with the last 64 tokens (the
        # last state line and the answer); with 192 tokens the tiny model stayed near chance.
        "reward-model": {"env_kwargs": _TRAINING},
        "dpo": _ENV,  # benchmarks/dpo_weatherrun.py: iterative DPO with the RPO term, 42 % → 85 % test success
    }
}
"""Env id → stage (an algorithm, or an algorithm and a variant: ``grpo-from-base``) → config overrides."""
