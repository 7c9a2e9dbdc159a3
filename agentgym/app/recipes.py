"""Settings that work for the tiny local model (``--model tiny``), as config overrides per stage.

Real 1–8 B models start from the trainers' defaults (GRPO: learning rate 1e-6, β 0.04). The tiny
~1 M-parameter model (``--model tiny``, the shipped base) needs different ones, found on WeatherRun
(``benchmarks/grpo_weatherrun.py``):

- short prompts: each turn shows the compact tool list and the env's one-line state summary
  (``context="summary"``, ``turn_template="{signatures}\n{summary}"``), ~80 tokens per turn with the
  shipped base's tokenizer instead of several hundred for the full observation;
- learning rates ~300× larger than for real models (SFT 1e-3, GRPO 3e-4 with a 20-step warm-up);
- a strong KL anchor to the SFT model (β = 0.3): without it, groups collapse to identical rewards
  (``frac_zero_std`` → 1) and the policy locks into a partial rule;
- on WeatherRun, training on made-up city names (``backend="random", synthetic_cities=True``) so
  the model learns to copy the city it is asked about instead of memorising the 30 training cities;
  the frozen test split's cities are then new to it, as they should be.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TINY", "tiny_overrides"]

_ROLLOUT = {"context": "summary", "turn_template": "{signatures}\n{summary}", "max_new_tokens": 48, "max_turns": 4}
_WEATHER_TRAINING = {"backend": "random", "synthetic_cities": True, "suitable_share": 0.5}

_GRPO = {
    "env_id": "agentgym/WeatherRun-v0",
    "env_kwargs": _WEATHER_TRAINING,
    "eval_env_kwargs": {},
    "rollout": {**_ROLLOUT, "temperature": 1.0},
    "num_generations": 4,
    "tasks_per_step": 16,
    "learning_rate": 3e-4,
    "warmup_steps": 20,
    "beta": 0.3,
    "loss_type": "dapo",
}

TINY: dict[str, dict[str, Any]] = {
    "sft": {
        "env_id": "agentgym/WeatherRun-v0",
        "env_kwargs": _WEATHER_TRAINING,
        "eval_env_kwargs": {},  # the frozen snapshot's test split
        "rollout": _ROLLOUT,
        "episodes": 512,
        "epochs": 1,
        "randomize_decisions": True,
        "learning_rate": 1e-3,
        "warmup_steps": 5,
        "batch_size": 32,
    },
    # After the format-only SFT (benchmarks/grpo_weatherrun.py --experiment a): the outcome of each answered
    # episode labels its decision in hindsight (decision_coef), a dense signal for the one token that decides, drawn
    # from the latest 1,024 distinct labelled decisions (decision_replay) rather than the step's 16 days, and the
    # learning rate decays over the run's 120 steps. Test success after 120 steps, seeds 0/1/2: 85/97/96 % (without
    # the replay 79/94/94 %; plain GRPO, constant rate: 68/53/53 % after 150). At lr 1e-3 two seeds in three stopped
    # answering by step 20.
    "grpo": {**_GRPO, "decision_coef": 1.0, "decision_replay": 1024, "lr_schedule": "cosine", "steps": 120},
    # GRPO straight from the shipped base, no SFT (benchmarks/grpo_weatherrun.py --experiment b). The base answers
    # from memory at first (-0.5), and an unreadable action or an episode that never answers earns 0: with β 0 and
    # no truncation penalty, the run tried (seed 0) learnt within 10 steps to write garbage instead (reward 0, then
    # no gradient at all). The KL brake to the base keeps the call format, and the penalty makes never answering
    # cost as much as answering blind (-0.5), so only a valid lookup pays. At 1.0 it cost more than answering from
    # memory, and in both runs tried the policy stayed there.
    "grpo-from-base": {
        **_GRPO,
        "warmup_steps": 10,
        "beta": 0.1,
        "truncation_penalty": 0.5,
    },
    "ppo": {  # as many episodes per step as GRPO's 16 × 4; benchmarks/ppo_vs_grpo.py compares the two
        "env_id": "agentgym/WeatherRun-v0",
        "env_kwargs": _WEATHER_TRAINING,
        "eval_env_kwargs": {},
        "rollout": {**_ROLLOUT, "temperature": 1.0},
        "episodes_per_step": 64,
        "learning_rate": 3e-4,
        "warmup_steps": 20,
        "beta": 0.05,
        "vf_coef": 0.1,
        "ppo_epochs": 2,
        "num_minibatches": 2,
    },
    # benchmarks/reward_model_weatherrun.py: held-out pair accuracy 47 % → 98 % with the last 64 tokens
    # (the last state line and the answer); with 192 tokens the tiny model stayed near chance.
    "reward-model": {
        "env_id": "agentgym/WeatherRun-v0",
        "env_kwargs": _WEATHER_TRAINING,
        "rollout": {**_ROLLOUT, "temperature": 1.0},
        "tasks": 2048,
        "generations": 4,
        "epochs": 6,
        "batch_size": 32,
        "learning_rate": 1e-4,
        "max_length": 64,
    },
    # benchmarks/dpo_weatherrun.py: iterative DPO with the RPO term, 42 % → 85 % test success.
    "dpo": {
        "env_id": "agentgym/WeatherRun-v0",
        "env_kwargs": _WEATHER_TRAINING,
        "eval_env_kwargs": {},
        "rollout": {**_ROLLOUT, "temperature": 1.0},
        "tasks": 256,
        "generations": 4,
        "rounds": 8,
        "beta": 0.1,
        "rpo_alpha": 1.0,
        "learning_rate": 3e-4,
        "batch_size": 16,
    },
}


# CliffWalk in text (benchmarks/learning_cliffwalk.py). The warm-up teaches the call with random directions (no route).
# RL trains with exploring starts (a random open cell each reset) and the env's own 100-step limit: from the fixed
# start a sampled walk almost never reaches the goal, and under a shorter cap (20 turns) a safe loop (-20) beats
# every walk that risks the cliff (-100), so the runs tried settled there within 10 steps. Neither recipe reaches
# the optimal path (-13) from the start in the budgets measured; see benchmarks/README.md.
_CLIFF = {"env_id": "agentgym/CliffWalk-v0", "train_split": None, "eval_split": None}
_CLIFF_ROLLOUT = {**_ROLLOUT, "max_turns": None, "temperature": 1.0}
TINY |= {
    "sft-cliffwalk": {
        **TINY["sft"],
        **_CLIFF,
        "env_kwargs": {},
        "eval_env_kwargs": None,
        "rollout": {**_ROLLOUT, "max_turns": 20},
        "episodes": 256,
    },
    "grpo-cliffwalk": {
        **_GRPO,
        **_CLIFF,
        "env_kwargs": {"exploring_starts": 1.0},
        "eval_env_kwargs": {},
        "rollout": _CLIFF_ROLLOUT,
        "tasks_per_step": 8,
        "num_generations": 4,
        "warmup_steps": 5,
        "beta": 0.1,
        "credit_assignment": "turn",
    },
    "ppo-cliffwalk": {
        **TINY["ppo"],
        **_CLIFF,
        "env_kwargs": {"exploring_starts": 1.0},
        "eval_env_kwargs": {},
        "rollout": _CLIFF_ROLLOUT,
        "episodes_per_step": 32,
        "warmup_steps": 5,
        "discount_unit": "turn",
    },
}


def tiny_overrides(stage: str, env_id: str) -> dict[str, Any]:
    """The tiny-model settings for ``stage`` (a key of :data:`TINY`) on ``env_id`` (env kwargs only on the stage's
    own env)."""
    env_keys = ("env_id", "env_kwargs", "eval_env_kwargs")
    settings = {k: v for k, v in TINY[stage].items() if k not in env_keys}
    if env_id == TINY[stage]["env_id"]:
        settings |= {k: v for k, v in TINY[stage].items() if k in env_keys[1:]}
    return {"env_id": env_id, **settings}


# SQLLookup (benchmarks/sql_lm.py). The prompt is the question's line and the state line (the instructions after the
# question are the same for every task); training plays the shipped training set (task_set="training": the v0 families
# on a training database with more values, no test question or gold query in it) and evaluates on SQLLookup-v1's test
# split. The demonstrations answer with the gold query at once (oracle run_query=False, describe=False): with the
# describe_table turns first, the tiny base did not learn to stop looking up (the switch to answer_sql turns on one
# digit of the state line, "tables seen 1/6"): 0 % test success after 5 minutes of SFT, every episode describing a
# table until max_turns. Gold queries are 40-240 tokens with this tokenizer, hence max_new_tokens 256.
_SQL = {"env_id": "agentgym/SQLLookup-v1", "env_kwargs": {"task_set": "training"}, "eval_env_kwargs": {}}
_SQL_ROLLOUT = {"context": "summary", "turn_template": "{task_line}\n{summary}", "max_new_tokens": 256, "max_turns": 3}
TINY |= {
    "sft-sqllookup": {
        **TINY["sft"],
        **_SQL,
        "rollout": _SQL_ROLLOUT,
        "episodes": 6144,
        "randomize_decisions": False,
        "oracle_kwargs": {"run_query": False, "describe": False},
        "group_by_length": True,
        # 12 passes (2,304 steps): 63.6 / 69.9 / 63.6 % test on today's training set (results/sql_lm_spread.*; on the
        # earlier one 64.6 / 65.6 / 67.5 %, sql_lm_long.*); one pass 5.3 / 0.5 /
        # 0.0 %. A cosine-decayed 2e-3 reaches its plateau in half the steps (60 % by step 1,152) but no higher:
        # 61.7 / 62.2 / 66.0 % at step 2,304 (benchmarks/results/sql_lm_cosine.*).
        "epochs": 12,
        "warmup_steps": 10,
    },
    "grpo-sqllookup": {
        **_GRPO,
        **_SQL,
        "rollout": {**_SQL_ROLLOUT, "temperature": 1.0},
        "tasks_per_step": 8,
        "num_generations": 4,
        "learning_rate": 1e-4,
        "warmup_steps": 5,
        "beta": 0.1,
    },
}
