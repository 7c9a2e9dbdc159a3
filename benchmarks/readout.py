"""Reading out WeatherRun's decision: the labels peer, on the decision token alone.

From the format-only SFT model (the README recipe's first stage: it writes valid calls, its decisions are coin
flips), train the whole model with cross-entropy on the decision value only (``"suitable": true|false``), in the
recipe's own contexts (the summary turn after both lookups, then the oracle's answer up to the value), from at most
``--labels`` labelled episodes of the random backend (synthetic cities, half the days suitable), batch 16, AdamW.
The arms differ only in the learning-rate schedule: constant (what the replica in ``../shared/BACKGROUND.md`` used)
or a half cosine to 0. Every ``--eval-every`` steps: the policy's greedy decision accuracy on the 100 test days of
the frozen snapshot (other cities), and, once, each layer's linear probe (``agentgym.trainers.llm.probe``) as the
ceiling a linear readout reaches.

    python benchmarks/readout.py                        # 3 seeds × 2 arms, ~5 min on 2 cores
    python benchmarks/readout.py --model runs/sft/final --labels 512 --steps 100

Writes ``benchmarks/results/readout.{json,png}``.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import torch

import agentgym  # noqa: F401
from agentgym.app.recipes import TINY
from agentgym.trainers.llm.optim import adamw_with_warmup
from agentgym.trainers.llm.probe import decision_contexts, policy_choices, probe, split_decisions
from agentgym.trainers.llm.rollout import RolloutConfig, Sample, collate
from agentgym.trainers.models.policy import LLMPolicy, token_logprobs
from agentgym.trainers.run.plotting import _pyplot, _save

WEATHER = "agentgym/WeatherRun-v0"
RESULTS = Path(__file__).parent / "results"


def format_sft(out: Path) -> Path:
    """The README recipe's first stage (``agentgym train sft`` with the tiny recipe: random decisions)."""
    from agentgym.trainers.llm.sft import SFT

    settings = {k: v for k, v in TINY["sft"].items() if k != "env_id"}
    SFT("tiny", env_id=WEATHER, eval_split=None, **settings, out_dir=out).learn(progress_bar=False)
    return out / "final"


def train(model: Path, labelled, test, schedule: str, steps: int, lr: float, every: int, seed: int) -> list:
    torch.manual_seed(seed)
    rng = random.Random(seed)
    policy = LLMPolicy.from_pretrained(model)
    params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer, scheduler = adamw_with_warmup(params, lr, 5, schedule=schedule, horizon=lambda: steps)
    truth = torch.tensor(test.labels)
    curve = [(0, float((policy_choices(policy, test) == truth).double().mean()))]
    for step in range(1, steps + 1):
        batch = []
        for i in (rng.randrange(len(labelled)) for _ in range(16)):
            sample = Sample()
            sample.extend(labelled.contexts[i], policy=False)
            sample.extend(labelled.continuations[i][labelled.labels[i]], policy=True)
            batch.append(sample)
        b = collate(batch, policy.pad_id)
        logp, _ = token_logprobs(policy.model, b["input_ids"], b["attention_mask"], b["loss_mask"])
        loss = -(logp * b["loss_mask"]).sum() / b["loss_mask"].sum()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        if step % every == 0:
            curve.append((step, float((policy_choices(policy, test) == truth).double().mean())))
    return curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="the format-only SFT model (default: train it here, ~30 s)")
    parser.add_argument("--labels", type=int, default=512, help="labelled episodes (reused as needed)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--schedules", nargs="+", default=["constant", "cosine"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--results", default=str(RESULTS))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = Path(args.model) if args.model else format_sft(Path(tempfile.mkdtemp()) / "sft")
    config = RolloutConfig(**TINY["grpo"]["rollout"])
    policy = LLMPolicy.from_pretrained(model)
    random_days = {"backend": "random", "synthetic_cities": True, "suitable_share": 0.5}
    labelled = decision_contexts(policy, WEATHER, config, env_kwargs=random_days, episodes=args.labels, seed=1)
    _, test = split_decisions(policy, WEATHER, config)
    ceiling = probe(policy, WEATHER, config)
    print(ceiling.table(), flush=True)
    runs = {}
    for schedule in args.schedules:
        for seed in args.seeds:
            start = time.perf_counter()
            curve = train(model, labelled, test, schedule, args.steps, args.lr, args.eval_every, seed)
            runs[f"{schedule}/{seed}"] = {"curve": curve, "seconds": time.perf_counter() - start}
            first = next((s for s, a in curve if a >= 0.95), None)
            print(
                f"{schedule:8} seed {seed}: "
                + " ".join(f"{s}:{a:.0%}" for s, a in curve)
                + f"  first ≥95 %: step {first}, final {curve[-1][1]:.0%}",
                flush=True,
            )
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "model": str(args.model or "format-only SFT (trained here)"),
        "labels": len(labelled),
        "steps": args.steps,
        "lr": args.lr,
        "batch": 16,
        "probe": ceiling.model_dump(),
        "runs": runs,
    }
    (out / "readout.json").write_text(json.dumps(record, indent=1))
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(args.schedules), figsize=(5 * len(args.schedules), 3.6), sharey=True, squeeze=False)
    for ax, schedule in zip(axes[0], args.schedules, strict=True):
        for seed in args.seeds:
            steps, acc = zip(*runs[f"{schedule}/{seed}"]["curve"], strict=True)
            ax.plot(steps, [100 * a for a in acc], marker="o", ms=3, label=f"seed {seed}")
        ax.axhline(100 * ceiling.best, color="gray", ls="--", lw=1, label=f"best probe layer ({ceiling.best:.0%})")
        ax.axhline(95, color="#c44e52", ls=":", lw=1, label="target 95 %")
        ax.set(title=f"lr {schedule}", xlabel=f"steps (batch 16, {len(labelled)} labels)", ylim=(40, 101))
        ax.legend(fontsize=7, loc="lower right")
    axes[0][0].set_ylabel("test decision accuracy (%)")
    print(f"wrote {_save(fig, out / 'readout.png')} and readout.json")


if __name__ == "__main__":
    main()
