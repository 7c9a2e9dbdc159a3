"""Retry with reflection on WeatherRun: does a second attempt help a trained tiny model?

Plays a model on the 100 frozen test tasks in :class:`~agentgym.core.wrappers.Retry` with 3 attempts, greedy and
sampled (T = 1), and reports pass@1 and success within 2 and 3 attempts (``agentgym.app.evaluation.runner.retry_stats``).
The model is ``--model`` (any ``from_pretrained`` directory), by default the tiny recipe's format-only SFT
(``agentgym train sft --model tiny``), trained here first. Prompts are the recipe's summary prompts, so the model
sees the env's state line, not the feedback: what a retry adds here is a fresh sample, which the table shows next
to what independent samples would give (1 − (1 − pass@1)^k).

Run (a few minutes on one core)::

    python benchmarks/retry.py                       # trains the recipe SFT first (~1 min)
    python benchmarks/retry.py --model runs/sft/final

Writes ``benchmarks/results/retry.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from agentgym.app.evaluation.runner import evaluate_agent
from agentgym.app.recipes import TINY
from agentgym.trainers.llm.sft import SFT, SFTConfig
from agentgym.trainers.models.policy import LLMPolicy
from agentgym.trainers.models.tiny_model import base_model_path

RESULTS = Path(__file__).parent / "results"
ATTEMPTS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a from_pretrained directory (default: train the recipe's SFT)")
    parser.add_argument("--out", default="runs/bench_retry")
    parser.add_argument("--results", default=str(RESULTS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    model = Path(args.model) if args.model else out / "sft" / "final"
    if not model.is_dir():
        policy = LLMPolicy.from_pretrained(base_model_path())
        SFT(policy, SFTConfig(**TINY["sft"], eval_split=None), out_dir=out / "sft").learn(progress_bar=False)
        policy.save_pretrained(model)
    prompt = {k: TINY["sft"]["rollout"][k] for k in ("context", "turn_template", "max_new_tokens")}
    rows = []
    for temperature in (0.0, 1.0):
        sampling = {**prompt, "max_turns": 8 * ATTEMPTS, "temperature": temperature}
        evaluate_agent(
            "agentgym/WeatherRun-v0",
            f"hf:{model}",
            split="test",
            sampling=sampling,
            retry=ATTEMPTS,
            out_dir=out / f"eval-T{temperature:g}",
        )
        stats = json.loads((out / f"eval-T{temperature:g}" / "retry.json").read_text())
        p1 = stats["pass_at_1"]
        if temperature > 0:  # a greedy policy's attempts are not independent draws
            stats["independent_within"] = [1 - (1 - p1) ** k for k in range(1, ATTEMPTS + 1)]
        rows.append({"temperature": temperature, **stats})
    print("| sampling | pass@1 | within 2 | within 3 | independent samples: within 2, 3 |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        w, ind = r["success_within"], r.get("independent_within")
        name = "greedy" if r["temperature"] == 0 else f"T = {r['temperature']:g}"
        independent = f"{ind[1]:.0%}, {ind[2]:.0%}" if ind else "—"
        print(f"| {name} | {w[0]:.0%} | {w[1]:.0%} | {w[2]:.0%} | {independent} |")
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    (results / "retry.json").write_text(json.dumps({"model": str(model), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
