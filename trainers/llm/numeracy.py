"""Probes of a base model's numeracy: does it apply a stated threshold rule, and can a policy gradient teach it
one that is never stated?

A tool task such as WeatherRun hides its rule: the agent sees numbers (``temp 18.4°C · AQI 55``) and learns from
the reward alone which decisions pay. A policy gradient can only find such a rule if the model's features already
tell magnitudes apart; from a base that brings none it moves ``P(true)`` for every state alike. Both probes use
made-up quantities and the chat layout of :mod:`agentgym.trainers.models.tiny_corpus` (a tool list, a one-line state,
the decision written as the final tool call), never a task's words, and look at one token: the decision after
``"ok": `` in the canonical call (the evidence written before it, as the corpus and the WeatherRun oracle do).

- :func:`stated_rule_agreement`: share of held-out drills (another seed than the corpus's) whose rule, stated in
  the prompt, the model's greedy decision follows.
- :func:`hidden_rule_probe`: a policy gradient on the decision token alone (G samples per context, reward 1 for
  the rule's decision, advantage = reward − group mean), on a two-quantity rule drawn from the probe's seed and
  never shown; held-out greedy accuracy every ``eval_every`` steps.

``python -m agentgym.trainers.llm.numeracy [--model DIR] [--seeds 0 1 2]`` runs both on a model (default: the
shipped base).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from agentgym.core.tools import ToolCall
from agentgym.trainers.models.tiny_corpus import NumeracyTask, made_up_name, numeracy_task, signatures

if TYPE_CHECKING:
    from agentgym.trainers.models.policy import LLMPolicy

__all__ = ["HiddenRuleResult", "decision_logits", "hidden_rule_probe", "stated_rule_agreement"]

PROBE_SEED = 1_000_003
"""Probe contexts are drawn from seeds offset by this, far from the corpus's (seed 0 and up)."""

# The tools every probe context lists: made-up, and not among the corpus's word lists.
_LOOKUP, _FINAL, _SUBJECT, _YES, _WHY = "qery", "wrapup", "obj", "ok", "basis"


def _context(policy: LLMPolicy, task: NumeracyTask, entity: str, stated: bool) -> list[int]:
    """Token ids of a decision context: the prompt, then the final call written up to its decision."""
    tools = [(f"{_LOOKUP}_{q}", [_SUBJECT]) for q in task.names] + [(_FINAL, [_YES, _WHY])]
    header = signatures(tools)
    if stated:
        header += f"\n{_YES}=true when {task.rule_text(random.Random(len(task.names)))}."
    state = " · ".join([entity, *(f"{q} {task.shown(i)}" for i, q in enumerate(task.names)), "decision pending"])
    evidence = " · ".join(f"{q} {task.shown(i)}" for i, q in enumerate(task.names))
    call = ToolCall(_FINAL, {_WHY: evidence, _YES: True}).to_text()
    prefix = call[: call.rindex("true")]
    return policy.chat_ids([{"role": "user", "content": f"{header}\n{state}"}]) + policy.encode(prefix)


def _decision_ids(policy: LLMPolicy) -> tuple[int, int]:
    ids = [policy.encode(word) for word in ("true", "false")]
    if any(len(i) != 1 for i in ids):
        raise ValueError("the probes need 'true' and 'false' to be one token each in this tokenizer")
    return ids[0][0], ids[1][0]


def decision_logits(policy: LLMPolicy, contexts: Sequence[list[int]], grad: bool = False) -> torch.Tensor:
    """Next-token logits (contexts × vocabulary) after each context, in one right-padded forward pass."""
    width = max(len(c) for c in contexts)
    ids = torch.full((len(contexts), width), policy.pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, c in enumerate(contexts):
        ids[i, : len(c)] = torch.tensor(c)
        mask[i, : len(c)] = 1
    last = torch.tensor([len(c) - 1 for c in contexts])
    ids, mask = ids.to(policy.device), mask.to(policy.device)
    with torch.set_grad_enabled(grad):
        hidden = policy.model.model(input_ids=ids, attention_mask=mask).last_hidden_state
        return policy.model.lm_head(hidden[torch.arange(len(contexts), device=ids.device), last.to(ids.device)]).float()


def _accuracy(policy: LLMPolicy, contexts: list[list[int]], truths: list[bool], batch: int = 64) -> float:
    yes, no = _decision_ids(policy)
    right = 0
    for k in range(0, len(contexts), batch):
        choice = decision_logits(policy, contexts[k : k + batch]).argmax(-1)
        want = torch.tensor([yes if t else no for t in truths[k : k + batch]])
        right += int((choice.cpu() == want).sum())
    return right / len(contexts)


def stated_rule_agreement(policy: LLMPolicy, n: int = 400, seed: int = 0, level: int = 2) -> float:
    """Share of ``n`` held-out drills of ``level`` (:data:`~agentgym.trainers.models.tiny_corpus.NUMERACY_LEVELS`; the
    default, the hardest: one to three made-up quantities; the rule stated in the prompt, half of them true) on
    which the greedy decision is the rule's."""
    rng = random.Random(PROBE_SEED + seed)
    tasks = [numeracy_task(rng, level=level) for _ in range(n)]
    contexts = [_context(policy, t, made_up_name(rng), stated=True) for t in tasks]
    return _accuracy(policy, contexts, [t.truth for t in tasks])


@dataclass
class HiddenRuleResult:
    """What :func:`hidden_rule_probe` measured: held-out greedy accuracy against policy-gradient steps."""

    rule: str
    curve: list[tuple[int, float]] = field(default_factory=list)
    """(step, held-out accuracy) pairs, step 0 first."""
    seconds: float = 0.0

    def steps_to(self, level: float) -> int | None:
        """The first evaluated step at which the accuracy reached ``level`` (None: never)."""
        return next((step for step, accuracy in self.curve if accuracy >= level), None)


def hidden_rule_probe(
    policy: LLMPolicy,
    *,
    seed: int = 0,
    steps: int = 200,
    contexts_per_step: int = 16,
    group_size: int = 4,
    learning_rate: float = 3e-4,
    eval_every: int = 10,
    eval_contexts: int = 400,
    target: float | None = 0.95,
    scale_by_std: bool = False,
) -> HiddenRuleResult:
    """Teach ``policy`` a rule it is never told, from rewards alone; it trains the policy in place.

    The rule (drawn from ``seed``): two made-up quantities, the first inside a range and the second below a
    threshold, as WeatherRun's is, at scales and thresholds of the seed's drawing. Each step samples
    ``group_size`` decisions for each of ``contexts_per_step`` fresh contexts (half of them true, 60 % of the
    values near a threshold); reward 1 when the sampled token is the rule's decision (anything else: 0);
    advantage = reward − the group's mean (``scale_by_std``: divided by its std, as GRPO does); one AdamW step on
    ``−mean(advantage · log π(token))``. Stops early once the held-out accuracy reaches ``target``.
    """
    rng = random.Random(PROBE_SEED + 7919 * seed)
    names = [f"{q}{rng.choice('kxzv')}" for q in ("mo", "drel")]  # made-up, fixed for the run
    rule = numeracy_task(rng, names, ops=["in", "<"])
    yes, no = _decision_ids(policy)
    held_out = [rule.resample(rng) for _ in range(eval_contexts)]
    held_contexts = [_context(policy, t, made_up_name(rng), stated=False) for t in held_out]
    truths = [t.truth for t in held_out]
    result = HiddenRuleResult(rule.rule_text(random.Random(0)))
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=learning_rate, betas=(0.9, 0.95), weight_decay=0.0)
    generator = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    policy.model.eval()  # no dropout in these models; eval keeps the sampling and training passes alike
    result.curve.append((0, _accuracy(policy, held_contexts, truths)))
    for step in range(1, steps + 1):
        batch = [rule.resample(rng) for _ in range(contexts_per_step)]
        logits = decision_logits(policy, [_context(policy, t, made_up_name(rng), False) for t in batch], grad=True)
        logp = torch.log_softmax(logits, -1)
        tokens = torch.multinomial(logp.detach().exp().cpu(), group_size, replacement=True, generator=generator)
        tokens = tokens.to(logp.device)
        want = torch.tensor([yes if t.truth else no for t in batch], device=logp.device)[:, None]
        reward = (tokens == want).float()
        advantage = reward - reward.mean(1, keepdim=True)
        if scale_by_std:
            advantage = advantage / (reward.std(1, keepdim=True) + 1e-4)
        loss = -(advantage * logp.gather(1, tokens)).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % eval_every == 0 or step == steps:
            result.curve.append((step, _accuracy(policy, held_contexts, truths)))
            if target is not None and result.curve[-1][1] >= target:
                break
    result.seconds = time.perf_counter() - start
    return result


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    from agentgym.trainers.models.policy import LLMPolicy

    parser = argparse.ArgumentParser(
        prog="python -m agentgym.trainers.llm.numeracy", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--model", default="tiny", help="a model directory (default: the shipped tiny base)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="hidden-rule probe seeds")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-4)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    policy = LLMPolicy.from_pretrained(args.model)
    print(f"stated-rule agreement (400 held-out drills): {stated_rule_agreement(policy):.1%}")
    for seed in args.seeds:
        policy = LLMPolicy.from_pretrained(args.model)
        result = hidden_rule_probe(policy, seed=seed, steps=args.steps, learning_rate=args.lr, target=None)
        curve = " ".join(f"{s}:{a:.0%}" for s, a in result.curve)
        print(
            f"hidden rule, seed {seed} ({result.rule}; {result.seconds:.0f} s): steps to 95 % "
            f"{result.steps_to(0.95)}; {curve}",
            flush=True,
        )


if __name__ == "__main__":
    main()
