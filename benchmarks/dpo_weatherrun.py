"""Learning benchmark: DPO from the format-only SFT model on WeatherRun, pairs from its own rollouts (2 CPU cores).

Start: a tiny-model SFT checkpoint (``--sft``; ``benchmarks/grpo_weatherrun.py`` makes one under
``runs/bench_grpo_weatherrun/sft/final``) whose decisions are random, so its greedy test success is
near chance. Each round plays ``--tasks`` training tasks ``--generations`` times with the tiny recipe's
env and rollout settings (``agentgym.app.recipes.TINY["grpo"]``: made-up cities, the state-summary
prompt, temperature 1), pairs the best and the worst episode of every task whose rewards differ,
and trains DPO (with the RPO term, ``--rpo-alpha``: the chosen tokens' NLL) on the pairs; the next
round plays the updated policy and uses it as the reference (iterative DPO; ``--fixed-reference``
keeps the SFT model). Greedy success on WeatherRun's 100 frozen test tasks is measured before
training and after every round.

Measured (1 busy core, seed 0): 42 % → 85 % in 4 minutes (8 rounds). After 4 rounds: 85 % with
these settings; 68 % without the RPO term (format fell to 89 % after round 1); 64 % with β = 0.01
(almost only the RPO term); 68 % with β = 1.

Run (about 5 minutes on 2 cores)::

    python benchmarks/dpo_weatherrun.py --sft runs/bench_grpo_weatherrun/sft/final

Prints test success before and after (and per round) and writes ``benchmarks/results/dpo_weatherrun.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from agentgym.app.recipes import TINY
from agentgym.trainers.llm.dpo import DPO, DPOConfig

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sft", required=True, help="the format-only SFT model directory (read only)")
    parser.add_argument("--tasks", type=int, default=256, help="training tasks played per round")
    parser.add_argument("--generations", type=int, default=4, help="episodes per task (best vs worst make a pair)")
    parser.add_argument("--rounds", type=int, default=8, help="iterative DPO rounds (pairs rebuilt from the policy)")
    parser.add_argument("--epochs", type=int, default=2, help="passes over each round's pairs")
    parser.add_argument("--batch-size", type=int, default=16, help="pairs per optimizer step")
    parser.add_argument("--lr", type=float, default=3e-4, help="learning rate (the tiny model)")
    parser.add_argument("--beta", type=float, default=0.1, help="DPO β")
    parser.add_argument("--rpo-alpha", type=float, default=1.0, help="weight of the chosen tokens' NLL (RPO)")
    parser.add_argument("--fixed-reference", action="store_true", help="keep the SFT model as the reference")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/bench_dpo_weatherrun")
    parser.add_argument("--results", default=str(RESULTS / "dpo_weatherrun.json"), help="where the JSON summary goes")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    recipe = TINY["grpo"]
    config = DPOConfig(
        env_id=recipe["env_id"],
        env_kwargs=recipe["env_kwargs"],
        eval_env_kwargs=recipe["eval_env_kwargs"],
        rollout=recipe["rollout"],
        tasks=args.tasks,
        generations=args.generations,
        rounds=args.rounds,
        epochs=args.epochs,
        batch_size=args.batch_size,
        micro_batch_size=args.batch_size,
        learning_rate=args.lr,
        beta=args.beta,
        rpo_alpha=args.rpo_alpha,
        update_reference=not args.fixed_reference,
        seed=args.seed,
    )
    start = time.perf_counter()
    trainer = DPO(args.sft, config, out_dir=args.out)

    def on_step(trainer: DPO, row: dict) -> None:
        if row["step"] == 1:
            before = trainer.evaluation["before"]
            print(f"before DPO: test success {before['success']:.0%}, format {before['format_compliance']:.0%}")
        if "eval_success" in row:
            print(
                f"round {row['round']}  step {row['step']:4d}  {(time.perf_counter() - start) / 60:5.2f} min  "
                f"test success {row['eval_success']:.0%}  format {row['eval_format_compliance']:.0%}  "
                f"reward accuracy {row['reward_accuracy']:.2f}  margin {row['reward_margin']:.2f}"
            )

    rows = trainer.learn(callback=on_step, progress_bar=False).metrics
    before, after = trainer.evaluation["before"], trainer.evaluation["after"]
    summary = {
        "sft_model": args.sft,
        "settings": {k: v for k, v in vars(args).items() if k not in ("results", "out")},
        "before": before,
        "after": after,
        "pairs": trainer.counts,
        "steps": trainer.step,
        "minutes": (time.perf_counter() - start) / 60,
        "curve": [
            {k: r[k] for k in ("round", "step", "eval_success", "eval_format_compliance") if k in r}
            for r in rows
            if "eval_success" in r
        ],
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "curve"}, indent=2))
    path = Path(args.results)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"test success {before['success']:.0%} → {after['success']:.0%}; wrote {path}")


if __name__ == "__main__":
    main()
