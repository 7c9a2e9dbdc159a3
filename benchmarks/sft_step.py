"""Seconds per SFT step on SQLLookup's demonstrations: ``SFT``'s step vs a plain transformers step, tiny base, CPU.

Both steps train the shipped tiny base on the same oracle demonstrations of the SQLLookup recipe
(``TINY["sft-sqllookup"]``: the summary context, the gold query at once), ``--batch-size`` samples a step, AdamW, one
optimizer step each:

- **plain transformers**: batches in shuffled order, right-padded, ``model(input_ids, attention_mask,
  labels)`` with ``labels = -100`` outside the policy's tokens (the output layer and the softmax over every
  position, pad included);
- **ours**: SFT's own step: batches grouped by length (``group_by_length``: less padding) and
  :meth:`SFT.loss` (the output layer only where the next token is the policy's).

The two runs interleave (plain, ours, ours, plain, ...) so load from other processes hits both alike; the report
is the median seconds per step, the tokens a step computes (padding included), the padding's share and the
forward+backward throughput in real (unpadded) tokens per second. ``--model smollm2 --lora-r 16`` times a real model
with LoRA adapters (peft), the plain step then being a plain transformers/peft loop::

    python benchmarks/sft_step.py            # ~2 min on 2 cores; benchmarks/results/sft_step.json
    python benchmarks/sft_step.py --model smollm2 --lora-r 16 --batch-size 8 --episodes 256 --steps 3 --repeats 2 \
        --json benchmarks/results/sft_step_smollm2.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from agentgym.app.recipes import TINY
from agentgym.trainers.llm.rollout import collate
from agentgym.trainers.llm.sft import SFT, SFTConfig
from agentgym.trainers.models.policy import resolve_model_source


def plain_step(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    labels = batch["input_ids"].masked_fill(batch["loss_mask"] == 0, -100)
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="tiny (the shipped base), smollm2, or a model directory")
    parser.add_argument("--lora-r", type=int, default=0, help="LoRA rank (0: every weight trains)")
    parser.add_argument("--episodes", type=int, default=2048, help="oracle demonstrations")
    parser.add_argument("--batch-size", type=int, default=TINY["sft-sqllookup"]["batch_size"])
    parser.add_argument("--steps", type=int, default=12, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/sft_step.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    recipe = {**TINY["sft-sqllookup"], "episodes": args.episodes, "batch_size": args.batch_size, "eval_split": None}
    trainer = SFT(resolve_model_source(args.model), SFTConfig.model_validate({**recipe, "lora_r": args.lora_r}))
    samples = [s for s in trainer.samples() if any(s.loss_mask)]
    model, pad = trainer.policy.model, trainer.policy.pad_id
    model.train()
    orders = {}
    for name, grouped in (("plain", False), ("ours", True)):
        trainer.config.group_by_length = grouped
        order = trainer._order(samples, 0)
        orders[name] = [order[i : i + args.batch_size] for i in range(0, len(order), args.batch_size)]
    steps = {"plain": plain_step, "ours": lambda _, batch: trainer.loss(batch)[0]}  # SFT's own loss
    seconds: dict[str, list[float]] = {"plain": [], "ours": []}
    tokens: dict[str, list[int]] = {"plain": [], "ours": []}
    real: dict[str, list[int]] = {"plain": [], "ours": []}
    cursor = {"plain": 0, "ours": 0}

    def run(name: str, count: int, timed: bool) -> None:
        for _ in range(count):
            chunk = orders[name][cursor[name] % len(orders[name])]
            cursor[name] += 1
            batch = collate(chunk, pad)
            start = time.perf_counter()
            loss = steps[name](model, batch)
            trainer.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            trainer.optimizer.step()
            if timed:
                seconds[name].append(time.perf_counter() - start)
                tokens[name].append(batch["input_ids"].numel())
                real[name].append(int(batch["attention_mask"].sum()))

    run("plain", 2, False)
    run("ours", 2, False)
    for r in range(args.repeats):
        for name in ("plain", "ours") if r % 2 == 0 else ("ours", "plain"):
            run(name, args.steps, True)
    result = {
        name: {
            "seconds_per_step": statistics.median(seconds[name]),
            "tokens_per_step": statistics.mean(tokens[name]),
            "padding": 1 - sum(real[name]) / sum(tokens[name]),
            "tokens_per_second": sum(real[name]) / sum(seconds[name]),
        }
        for name in seconds
    }
    result["speedup"] = result["plain"]["seconds_per_step"] / result["ours"]["seconds_per_step"]
    result["settings"] = vars(args) | {"json": str(args.json)}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    for name in ("plain", "ours"):
        row = result[name]
        print(f"{name:>6}: {row['seconds_per_step']:.3f} s/step, {row['tokens_per_step']:.0f} tokens/step, "
              f"padding {row['padding']:.1%}, {row['tokens_per_second']:.0f} tokens/s")  # fmt: skip
    print(f"ours {result['speedup']:.2f}x plain transformers ({args.model}, LoRA r {args.lora_r}, "
          f"batch {args.batch_size}, {args.threads} threads)")  # fmt: skip


if __name__ == "__main__":
    main()
