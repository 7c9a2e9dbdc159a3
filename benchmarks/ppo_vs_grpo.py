"""PPO vs GRPO on WeatherRun with the tiny LLM: same SFT start, same wall-clock budget, one plot.

Each run starts from the same format-only SFT model (``--sft``; ``benchmarks/grpo_weatherrun.py``
builds one) and trains with the tiny-model recipe (``agentgym.app.recipes.TINY``) for ``--minutes`` of
training time; every ``--eval-seconds`` of training time the policy is evaluated greedily on the 100
frozen test tasks (evaluation time is not counted). Runs:

- ``grpo``: GRPO, groups of 4, the env's rule reward;
- ``ppo``: PPO with a value head, the env's rule reward;
- ``ppo-rm``: PPO driven by a trained reward model alone (``--reward-model``, from
  ``benchmarks/reward_model_weatherrun.py``; ``env_reward_coef=0``) — the classic SFT → RM → PPO
  pipeline; run ``agentgym audit OUT/ppo-rm`` afterwards to see whether it hacked the RM.

Sequentially on one machine (fair on 2 cores: one run at a time)::

    python benchmarks/ppo_vs_grpo.py --sft runs/bench_grpo_weatherrun/sft/final --minutes 5 --runs grpo,ppo

or one process per run on a bigger machine, then ``--plot-only OUT`` to merge. Writes
``OUT/NAME/`` (the trainer's run directory), ``OUT/NAME.json`` (the curve) and
``benchmarks/results/ppo_vs_grpo.{png,json}``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

from agentgym.app.recipes import TINY
from agentgym.trainers.llm.grpo import GRPO, GRPOConfig
from agentgym.trainers.llm.ppo import LLMPPO, LLMPPOConfig
from agentgym.trainers.run.plotting import plot_learning_curves

RESULTS = Path(__file__).parent / "results"
LABELS = {"grpo": "GRPO (rule reward)", "ppo": "PPO (rule reward)", "ppo-rm": "PPO (reward model)"}


def train(
    name: str, sft: Path, out: Path, minutes: float, eval_seconds: float, settings: dict[str, Any], label: str
) -> dict:
    """Train one run for ``minutes`` of training time; return its evaluation curve."""
    if name == "grpo":
        trainer: Any = GRPO(sft, GRPOConfig(**{**TINY["grpo"], **settings}), out_dir=out / name)
    else:
        trainer = LLMPPO(sft, LLMPPOConfig(**{**TINY["ppo"], **settings}), out_dir=out / name)
    evaluation = trainer.evaluate()
    curve = [{"step": 0, "minutes": 0.0, **{f"eval_{k}": v for k, v in evaluation.items()}}]
    clock = {"trained": 0.0, "since_eval": 0.0, "last": time.perf_counter()}

    def on_step(t: Any, row: dict) -> bool:
        elapsed = time.perf_counter() - clock["last"]
        clock["trained"] += elapsed
        clock["since_eval"] += elapsed
        done = clock["trained"] >= minutes * 60
        if clock["since_eval"] >= eval_seconds or done:
            result = t.evaluate()
            trained = clock["trained"] / 60
            curve.append({"step": row["step"], "minutes": trained, **{f"eval_{k}": v for k, v in result.items()}})
            print(
                f"{name:7s} step {row['step']:4d}  {trained:5.2f} min  test success {result['success']:.0%}  "
                f"train reward {row['reward']:.2f}  train success {row['success']:.0%}",
                flush=True,
            )
            clock["since_eval"] = 0.0
            write_summary(name, label, out, settings, curve, row["step"], clock["trained"])
        clock["last"] = time.perf_counter()
        return not done

    rows = trainer.learn(100_000, callback=on_step, progress_bar=False).metrics
    return write_summary(name, label, out, settings, curve, rows[-1]["step"], clock["trained"])


def write_summary(
    name: str, label: str, out: Path, settings: dict, curve: list[dict], steps: int, seconds: float
) -> dict:
    """Write ``OUT/NAME.json`` (also after every evaluation, so a run cut short still leaves its curve)."""
    summary = {
        "run": name,
        "label": label,
        "settings": settings,
        "steps": steps,
        "seconds_per_step": seconds / max(steps, 1),
        "start_success": curve[0]["eval_success"],
        "final_success": curve[-1]["eval_success"],
        "best_success": max(c["eval_success"] for c in curve),
        "curve": curve,
    }
    (out / f"{name}.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def plot(out: Path) -> None:
    """Merge the runs' curves under ``out`` into one plot and one JSON under benchmarks/results."""
    runs = [json.loads(p.read_text()) for p in sorted(out.glob("**/*.json")) if p.parent.name != "checkpoints"]
    runs = [r for r in runs if "curve" in r]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ppo_vs_grpo.json").write_text(json.dumps(runs, indent=2) + "\n")
    plot_learning_curves(
        {r["label"]: r["curve"] for r in runs},
        RESULTS / "ppo_vs_grpo.png",
        x="minutes",
        window=1,
        keys=("eval_success",),
        title="WeatherRun test success, same SFT start (tiny LLM)",
        floor=0.0,
    )
    for r in runs:
        print(
            f"{r['label']:22s} start {r['start_success']:.0%}  final {r['final_success']:.0%}  "
            f"best {r['best_success']:.0%}  ({r['steps']} steps, {r['seconds_per_step']:.2f} s/step)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sft", help="the format-only SFT model every run starts from")
    parser.add_argument("--runs", default="grpo,ppo", help="comma-separated: grpo, ppo, ppo-rm")
    parser.add_argument("--minutes", type=float, default=5.0, help="training time per run")
    parser.add_argument("--eval-seconds", type=float, default=30.0, help="training time between evaluations")
    parser.add_argument("--reward-model", help="ppo-rm: the reward model directory")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON", help="override a config field")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/bench_ppo_vs_grpo")
    parser.add_argument("--label", help="the plot's label for a single run (default: from its name)")
    parser.add_argument("--plot-only", action="store_true", help="only merge the runs already under --out")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.plot_only:
        if not args.sft:
            parser.error("--sft is required (the SFT model from benchmarks/grpo_weatherrun.py)")
        torch.set_num_threads(args.threads)
        overrides = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
        for name in args.runs.split(","):
            settings = {"seed": args.seed, "checkpoint_every": 0, **overrides}
            if name == "ppo-rm":
                if not args.reward_model:
                    parser.error("ppo-rm needs --reward-model")
                settings |= {"reward_model": args.reward_model, "env_reward_coef": 0.0}
            label = args.label or LABELS[name]
            train(name, Path(args.sft), out, args.minutes, args.eval_seconds, settings, label)
    plot(out)


if __name__ == "__main__":
    main()
