"""Which numeracy pretraining gives the tiny base what a policy gradient needs? A sweep of variants, each continuing
the shipped base on numeracy drills (:func:`agentgym.trainers.models.tiny_corpus.numeracy_drill`), each measured by the
probes of :mod:`agentgym.trainers.llm.numeracy`: stated-rule agreement per drill level, and the hidden-rule probe
(steps to 95 % held-out accuracy, 3 seeds).

Variants run in parallel processes (one per variant; on a GPU machine they share the GPU). On one H200 (all twelve,
4,000 steps of 32 drills or 1,250 of 128) none moved the stated-rule agreement off chance on any level, and the
hidden-rule probe after them was no better than from the shipped base: ``benchmarks/README.md``, "The base brings
numbers", has the figures and what worked instead (``numeracy_curriculum.py``).

    python benchmarks/numeracy_sweep.py --out runs/numeracy_sweep --variants mixed curriculum --steps 3000
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path
from typing import Any

from agentgym.trainers.models.tiny_model import pad_chats

VARIANTS: dict[str, dict] = {
    # levels drawn uniformly, decisions weighted 10x, 32 chats a step, learning rate 1e-3
    "mixed": {},
    "level2": {"levels": [0, 0, 1]},  # the hardest level only: the control
    "curriculum": {"curriculum": 0.3},  # level 0 alone for the first 30 % of steps, then uniform
    "dw30": {"decision_weight": 30.0},
    "lr2e-3": {"learning_rate": 2e-3},
    "b128": {"batch_size": 128, "steps_scale": 0.25},
    "share0.7": {"share": 0.7},  # 30 % of the stage-3 corpus kept, as a shipped stage would
    "curriculum-share0.7": {"curriculum": 0.3, "share": 0.7},
    "decisions-only": {"decision_weight": 1000.0},  # the loss almost only on the decision tokens
    "no-clip": {"clip": 1e9},
    "constant-lr": {"constant_lr": True},
    "level0": {"levels": [1, 0, 0]},  # the easiest level only: does it learn at all in this layout?
}


MICRO_BATCH = 8
"""Chats per forward pass on the CPU: a step's batch is sorted by length and run in passes of this many, each
padded to its own longest chat (the gradients add up to the whole batch's)."""


def _chat_loss(model: Any, pad_id: int, chats: list[tuple[list[int], list[float]]], total: float) -> float:
    """Backpropagate the weighted loss on ``chats`` (token ids and loss weights), divided by ``total`` (the whole
    batch's weight); return its value."""
    import torch

    device = model.device
    input_ids, attention, weight = (t.to(device) for t in pad_chats(chats, pad_id))
    learn = weight > 0
    hidden = model.model(input_ids=input_ids, attention_mask=attention).last_hidden_state
    logits = model.lm_head(hidden[learn])  # the output layer only where a loss is taken
    targets = input_ids[:, 1:][learn[:, :-1]]
    losses = torch.nn.functional.cross_entropy(logits.float(), targets, reduction="none")
    loss = (losses * weight[learn]).sum() / total
    loss.backward()
    return loss.item()


def run(
    name: str, out: str, steps: int, probe_every: int, device: str, threads: int, seed: int, hidden_steps: int
) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentgym.trainers.llm.numeracy import hidden_rule_probe, stated_rule_agreement
    from agentgym.trainers.models import tiny_corpus as tc
    from agentgym.trainers.models.policy import LLMPolicy
    from agentgym.trainers.models.tiny_model import BASE_DIR, BASE_STAGES, _chat_ids, _save

    torch.set_num_threads(threads)
    v = {
        "levels": [1, 1, 1],
        "curriculum": 0.0,
        "decision_weight": 10.0,
        "learning_rate": 1e-3,
        "batch_size": 32,
        "steps_scale": 1.0,
        "share": 1.0,
        "clip": 1.0,
        "constant_lr": False,
        **VARIANTS[name],
    }
    steps = int(steps * v["steps_scale"])
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(BASE_DIR)
    model = AutoModelForCausalLM.from_pretrained(BASE_DIR, dtype=torch.float32).to(device)
    rng = random.Random(seed + 77)
    old = tc.chat_documents(seed + 5, tc.CorpusMix(**BASE_STAGES[-1]["mix"]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=v["learning_rate"], betas=(0.9, 0.95), weight_decay=0.01)
    warmup = 20

    def lr_at(step: int) -> float:
        if v["constant_lr"]:
            return min(1.0, (step + 1) / warmup)
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)

    def drill(step: int) -> list[dict]:
        if rng.random() >= v["share"]:
            return next(old)
        if step < v["curriculum"] * steps:
            return tc.numeracy_drill(rng, level=0)
        return tc.numeracy_drill(rng, level=rng.choices(range(3), weights=v["levels"])[0])

    def probes() -> dict:
        model.eval()
        policy = LLMPolicy(model, tokenizer)
        row = {f"agree_level{k}": stated_rule_agreement(policy, n=300, level=k) for k in range(3)}
        model.train()
        return row

    curve = [{"step": 0, **probes()}]
    start = time.perf_counter()
    model.train()
    for step in range(1, steps + 1):
        batch = sorted(
            (_chat_ids(tokenizer, drill(step), 0.0, v["decision_weight"]) for _ in range(v["batch_size"])),
            key=lambda b: len(b[0]),
        )
        optimizer.zero_grad(set_to_none=True)
        total = sum(sum(w[1:]) for _, w in batch)
        micro = MICRO_BATCH if device == "cpu" else v["batch_size"]
        loss = sum(
            _chat_loss(model, tokenizer.pad_token_id, batch[k : k + micro], total) for k in range(0, len(batch), micro)
        )
        torch.nn.utils.clip_grad_norm_(model.parameters(), v["clip"])
        optimizer.step()
        scheduler.step()
        if step % probe_every == 0 or step == steps:
            curve.append({"step": step, "seconds": round(time.perf_counter() - start), "loss": loss, **probes()})
            print(name, json.dumps(curve[-1]), flush=True)
            (Path(out) / f"{name}.curve.json").write_text(json.dumps(curve))
    model.eval()
    path = Path(out) / name
    _save(model.cpu(), tokenizer, path)
    hidden = []
    for probe_seed in (0, 1, 2):
        policy = LLMPolicy.from_pretrained(str(path))
        policy.model.to(device)
        result = hidden_rule_probe(policy, seed=probe_seed, steps=hidden_steps, target=None)
        hidden.append(
            {
                "seed": probe_seed,
                "rule": result.rule,
                "steps_to_95": result.steps_to(0.95),
                "steps_to_90": result.steps_to(0.9),
                "final": result.curve[-1][1],
                "curve": result.curve,
            }
        )
        print(name, "hidden", probe_seed, hidden[-1]["steps_to_95"], hidden[-1]["final"], flush=True)
    summary = {"variant": name, "settings": v, "steps": steps, "curve": curve, "hidden": hidden}
    (path / "sweep.json").write_text(json.dumps(summary, indent=1))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/numeracy_sweep")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--probe-every", type=int, default=500)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden-steps", type=int, default=300, help="steps of each hidden-rule probe")
    args = parser.parse_args()
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    Path(args.out).mkdir(parents=True, exist_ok=True)
    jobs = [
        (n, args.out, args.steps, args.probe_every, args.device, args.threads, args.seed, args.hidden_steps)
        for n in args.variants
    ]
    with ProcessPoolExecutor(len(jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(run, *zip(*jobs, strict=True)))
    (Path(args.out) / "sweep.json").write_text(json.dumps(results, indent=1))
    for r in results:
        last = r["curve"][-1]
        print(
            f"{r['variant']:22s} agree L0/L1/L2 {last['agree_level0']:.2f}/{last['agree_level1']:.2f}/"
            f"{last['agree_level2']:.2f}  hidden steps to 95 %: {[h['steps_to_95'] for h in r['hidden']]} "
            f"final {[round(h['final'], 2) for h in r['hidden']]}"
        )


if __name__ == "__main__":
    main()
