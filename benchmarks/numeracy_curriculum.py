"""Does a comparison learnt on one fixed surface carry over to made-up quantities? A curriculum against its control.

Continuing the shipped tiny base on numeracy drills of every surface at once (made-up quantity names, units,
``≤``/``≥``, any entity; :func:`agentgym.trainers.models.tiny_corpus.numeracy_drill`) left its stated-rule agreement at
chance on 2 cores and on a GPU (``benchmarks/README.md``, "The base brings numbers"). Two minimal arms, the loss on the
decision token alone (``true``/``false`` in the final call), 64 chats a step, AdamW 1e-3, one torch thread:

- ``curriculum``: ``--fixed-steps`` steps of one fixed surface (tool ``reply(ok)``, quantity ``BIQ``, entity
  ``Mukikax``, whole numbers, ``<`` or ``>``), then ``--variable-steps`` of level-0 drills on varying surfaces
  (a made-up quantity, unit and entity, ``<``, ``≤``, ``>``, ``≥``);
- ``control``: the varying surfaces from the start, for as many steps in all.

Every 100 steps: greedy accuracy on 300 held-out chats of each surface, and of level-1 drills (decimals,
negatives, ranges; never trained here). Writes ``OUT.json`` and ``OUT.png``; ``--save DIR`` keeps each arm's
model for the probes of :mod:`agentgym.trainers.llm.numeracy`::

    python benchmarks/numeracy_curriculum.py --save runs/numeracy_curriculum     # ~25 min on one thread
    python -m agentgym.trainers.llm.numeracy --model runs/numeracy_curriculum/curriculum --steps 150 --threads 1
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

from agentgym.core.tools import ToolCall
from agentgym.trainers.llm.numeracy import decision_logits
from agentgym.trainers.models import tiny_corpus as tc
from agentgym.trainers.models.policy import LLMPolicy

SYMBOLS = {"<": "<", "<=": "≤", ">": ">", ">=": "≥"}


def decision_context(policy: LLMPolicy, chat: list[dict[str, str]]) -> tuple[list[int], int]:
    """The token ids up to the decision in the chat's final call, and the decision's token."""
    call = chat[-1]["content"]
    cut = max(call.rfind("true"), call.rfind("false"))
    word = "true" if call[cut:].startswith("true") else "false"
    return policy.chat_ids(chat[:-1]) + policy.encode(call[:cut]), policy.encode(word)[0]


def fixed_chat(rng: random.Random) -> list[dict[str, str]]:
    """One surface: the same tool, quantity and entity every time; whole numbers, ``<`` or ``>``."""
    top = 10 ** rng.randint(1, 3)
    threshold, x, op = rng.randint(0, top), rng.randint(0, top), rng.choice(["<", ">"])
    truth = x < threshold if op == "<" else x > threshold
    user = f"reply(ok)\nok=true when BIQ {op} {threshold}.\nMukikax · BIQ {x} · decision pending"
    return [
        {"role": "user", "content": user},
        {"role": "assistant", "content": ToolCall("reply", {"ok": truth}).to_text()},
    ]


def variable_chat(rng: random.Random) -> list[dict[str, str]]:
    """The same layout on varying surfaces: a made-up quantity, unit and entity; four comparisons."""
    task = tc.numeracy_task(rng, level=0)
    clause = task.clauses[0]
    rule = f"{task.names[0]} {SYMBOLS[clause.op]} {task.fmt(0, clause.low)}"
    state = f"{tc._made_up_word(rng).capitalize()} · {task.names[0]} {task.shown(0)} · decision pending"
    user = f"reply(ok)\nok=true when {rule}.\n{state}"
    return [
        {"role": "user", "content": user},
        {"role": "assistant", "content": ToolCall("reply", {"ok": task.truth}).to_text()},
    ]


def level1_chat(rng: random.Random) -> list[dict[str, str]]:
    return tc.numeracy_drill(rng, level=1)


SURFACES = {"fixed": fixed_chat, "variable": variable_chat, "level1": level1_chat}


def run_arm(
    fixed_steps: int, variable_steps: int, *, eval_every: int = 100, save: Path | None = None
) -> list[dict[str, float]]:
    policy = LLMPolicy.from_pretrained("tiny")
    tests = {
        name: [decision_context(policy, make(random.Random(10**6 + i))) for i in range(300)]
        for name, make in SURFACES.items()
    }
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=1e-3, betas=(0.9, 0.95))
    rng, start, curve = random.Random(0), time.perf_counter(), []
    for step in range(fixed_steps + variable_steps + 1):
        if step % eval_every == 0 or step == fixed_steps + variable_steps:
            with torch.no_grad():
                point = {"step": step, "seconds": round(time.perf_counter() - start, 1)}
                for name, test in tests.items():
                    choice = decision_logits(policy, [ids for ids, _ in test]).argmax(-1)
                    right = choice == torch.tensor([y for _, y in test])
                    point[name] = round(right.float().mean().item(), 4)
            curve.append(point)
            print(point, flush=True)
        if step == fixed_steps + variable_steps:
            break
        make = fixed_chat if step < fixed_steps else variable_chat
        batch = [decision_context(policy, make(rng)) for _ in range(64)]
        logits = decision_logits(policy, [ids for ids, _ in batch], grad=True)
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor([y for _, y in batch]))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if save is not None:
        policy.save_pretrained(save)
    return curve


def plot(arms: dict[str, list[dict[str, float]]], fixed_steps: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for (arm, curve), style in zip(arms.items(), ("-", "--"), strict=False):
        for i, surface in enumerate(SURFACES):
            ax.plot([p["step"] for p in curve], [100 * p[surface] for p in curve], style, color=f"C{i}",
                    label=f"{arm}: {surface}")  # fmt: skip
    ax.axvline(fixed_steps, color="grey", lw=0.6, ls=":")
    ax.axhline(50, color="grey", lw=0.6)
    ax.set_xlabel("steps of 64 chats (curriculum: fixed surface left of the dotted line)")
    ax.set_ylabel("held-out stated-rule accuracy (%)")
    ax.set_ylim(30, 100)
    ax.set_title("The shipped base learning to compare: one surface first, or all at once")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixed-steps", type=int, default=500)
    parser.add_argument("--variable-steps", type=int, default=700)
    parser.add_argument("--arms", nargs="+", default=["curriculum", "control"], choices=["curriculum", "control"])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/numeracy_curriculum"))
    parser.add_argument("--save", type=Path, help="save each arm's model in SAVE/ARM (for the probes)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    total = args.fixed_steps + args.variable_steps
    arms = {}
    for arm in args.arms:
        print(f"== {arm}", flush=True)
        fixed = args.fixed_steps if arm == "curriculum" else 0
        arms[arm] = run_arm(fixed, total - fixed, save=args.save / arm if args.save else None)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(
            json.dumps({"settings": vars(args) | {"out": str(args.out)}, "arms": arms}, indent=1) + "\n"
        )
    plot(arms, args.fixed_steps, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
