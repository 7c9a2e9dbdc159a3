"""Learning benchmark: the tiny LLM learns WeatherRun with format-only SFT, then GRPO, on 2 CPU cores.

Stages (all offline; the model and tokenizer are built here):

1. ``build_tiny_model`` — a ~1.1 M-parameter Llama-config model with a word-level tokenizer.
2. SFT on oracle demonstrations whose decisions are randomised (``randomize_decisions``): the model
   learns the call format and the order of calls, not the rule. Reported: greedy test success
   (expected near chance) and format compliance.
3. GRPO from the SFT model with the tiny-model recipe (``agentgym.recipes.TINY``) for a wall-clock
   budget, evaluating greedily on the 100 frozen test tasks every ``--eval-every`` steps.

Training uses WeatherRun's random backend with made-up city names (``synthetic_cities=True``): the
test split's cities never appear in training, and with only the 30 training cities the tiny model
memorises names instead of copying the one it is asked about.

Run (about 14 minutes on 2 cores)::

    python benchmarks/grpo_weatherrun.py --minutes 10

Prints the SFT result, the GRPO evaluation curve, the first wall time at which test success reached
95 %, and writes ``benchmarks/results/grpo_weatherrun.png`` and ``…/grpo_weatherrun.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from agentgym.llm import LLMPolicy
from agentgym.plotting import plot_learning_curves
from agentgym.recipes import TINY
from agentgym.tiny_model import build_tiny_model
from agentgym.trainers.grpo import GRPO, GRPOConfig
from agentgym.trainers.sft import SFT, SFTConfig

RESULTS = Path(__file__).parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="GRPO wall-clock budget")
    parser.add_argument("--eval-every", type=int, default=20, help="GRPO steps between test evaluations")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sft-model", help="skip stages 1-2 and start GRPO from this SFT model")
    parser.add_argument("--out", default="runs/bench_grpo_weatherrun")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)

    if args.sft_model:
        sft_path = Path(args.sft_model)
    else:
        t0 = time.perf_counter()
        base = build_tiny_model(out / "tiny", seed=args.seed)
        sft = SFT(base, SFTConfig(**TINY["sft"], seed=args.seed), out_dir=out / "sft")
        rows = sft.learn()
        sft_path = out / "sft" / "final"
        print(
            f"SFT ({time.perf_counter() - t0:.0f} s incl. build): test success {rows[-1]['eval_success']:.0%}, "
            f"format compliance {rows[-1]['eval_format_compliance']:.0%}, "
            f"tool-call validity {rows[-1]['eval_tool_call_validity']:.0%}"
        )

    policy = LLMPolicy.from_pretrained(sft_path)
    config = GRPOConfig(**TINY["grpo"], checkpoint_every=args.eval_every, steps=100_000, seed=args.seed)
    trainer = GRPO(policy, config, out_dir=out / "grpo")
    start = time.perf_counter()
    before = trainer.evaluate()
    print(f"GRPO start: test success {before['success']:.0%}, format {before['format_compliance']:.0%}")
    curve = [{"step": 0, "minutes": 0.0, **{f"eval_{k}": v for k, v in before.items()}}]
    budget = args.minutes * 60

    def on_step(_trainer: GRPO, row: dict) -> bool:
        row["minutes"] = (time.perf_counter() - start) / 60
        if "eval_success" in row:
            curve.append(row)
            print(
                f"step {row['step']:4d}  {row['minutes']:5.2f} min  test success {row['eval_success']:.0%}  "
                f"format {row['eval_format_compliance']:.0%}  train success {row['success']:.0%}  "
                f"kl {row['kl']:.3f}  {row['time_step']:.2f} s/step"
            )
        return time.perf_counter() - start < budget

    rows = trainer.learn(callback=on_step, progress_bar=False)
    final = trainer.evaluate()
    reached = next((r for r in curve if r.get("eval_success", 0) >= 0.95), None)
    summary = {
        "sft_model": str(sft_path),
        "start": before,
        "final": final,
        "steps": rows[-1]["step"],
        "minutes": (time.perf_counter() - start) / 60,
        "seconds_per_step": sum(r["time_step"] for r in rows) / len(rows),
        "first_95": None if reached is None else {"step": reached["step"], "minutes": reached["minutes"]},
        "curve": [{k: r[k] for k in ("step", "minutes", "eval_success", "eval_format_compliance")} for r in curve],
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "curve"}, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "grpo_weatherrun.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot_learning_curves(
        {"GRPO (tiny model)": curve},
        RESULTS / "grpo_weatherrun.png",
        x="minutes",
        window=1,
        keys=("eval_success", "eval_format_compliance"),
        title="WeatherRun test split after format-only SFT",
        floor=0.0,
    )


if __name__ == "__main__":
    main()
