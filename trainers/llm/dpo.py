"""DPO (Rafailov et al. 2023) for a language model that plays agentgym text envs, from env rollouts or a JSONL file.

For a pair of responses to the same task, ``y_w`` preferred to ``y_l``, DPO fits the policy π_θ
directly, anchored to a frozen reference π_ref (a copy of the start policy unless given)::

    h = β · [(log π_θ(y_w) − log π_ref(y_w)) − (log π_θ(y_l) − log π_ref(y_l))]
    L = −log σ(h)                    (label_smoothing ε > 0: −(1 − ε) log σ(h) − ε log σ(−h), "cDPO")
      + α · NLL(y_w)                 (rpo_alpha α > 0: mean −log π_θ per chosen token, RPO, Pang et al. 2024)

``r̂(y) = β (log π_θ(y) − log π_ref(y))`` is the *implicit reward*; logged per step:
``chosen_reward`` and ``rejected_reward`` (means of r̂), ``reward_margin`` (mean r̂(y_w) − r̂(y_l)),
``reward_accuracy`` (share of pairs with r̂(y_w) > r̂(y_l); 0 at the start, where π_θ = π_ref),
``chosen_logp``/``rejected_logp``, ``chosen_nll`` and ``loss``.

For an agent, ``y`` is a whole episode: ``log π(y)`` sums :func:`~agentgym.trainers.models.policy.token_logprobs` over
every token the policy wrote in every sample of the episode; what the env wrote is context (masked).
Pairs played here keep each episode's samples, so a response is scored in exactly the context it
was played in (``context="summary"``: every turn in its own short prompt). Pairs from a JSONL file
are tokenised with :func:`~agentgym.trainers.llm.sft.chat_sample` (one sample per transcript; the
assistant turns are the policy's). What both responses share cancels exactly in ``h`` (the same
tokens after the same context have the same log-prob under π_θ and π_ref), so samples found on both
sides, and the common token prefix of two single-sample responses, are left out — as TRL leaves out
the prompt. Reference log-probs are computed once per pair.

A run (``DPO(policy, config, out_dir=...).learn()``):

1. pairs: ``config.data`` (JSONL, see :mod:`agentgym.trainers.llm.preferences`), or ``tasks`` task
   instances each played ``generations`` times by the current policy at ``rollout.temperature``,
   best vs worst episode of each task (ties skipped);
2. ``epochs`` passes over the pairs, ``batch_size`` pairs per AdamW step;
3. with ``rounds > 1`` (iterative, "online" DPO), steps 1–2 repeat with pairs from the updated
   policy (new task seeds); each round's reference is the policy at its start (``update_reference``,
   as in Self-Rewarding LMs, Yuan et al. 2024), so every round starts at h = 0. A later round whose
   rollouts tie in every group (the policy no longer disagrees with itself) ends the run there, keeping
   what the earlier rounds learned (``rounds_done`` in ``config.json``); a first round without pairs is an error;
4. greedy evaluation on the frozen ``eval_split`` before training and after every round.

Defaults suit 1–8 B models (TRL's: β 0.1, learning rate 1e-6). For the ~1 M-parameter tiny model on
WeatherRun (``benchmarks/dpo_weatherrun.py``): learning rate 3e-4, β 0.1, ``rpo_alpha=1`` and
iterative rounds. There nearly every pair differs in one decision token; plain DPO pushed the
rejected token's probability into other tokens and broke the call format for a round (format 89 %),
and the NLL term on the chosen tokens prevented it.
"""

from __future__ import annotations

import copy
import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from torch import Tensor

from agentgym.trainers.llm.config import AdamWConfig, EvalConfig
from agentgym.trainers.llm.preferences import (
    NoPreferencePairs,
    PairsConfig,
    PreferencePair,
    check_model_path,
    read_pairs,
    rollout_pairs,
    split_pairs,
)
from agentgym.trainers.llm.rollout import Sample, collate
from agentgym.trainers.llm.sft import chat_sample
from agentgym.trainers.llm.trainer import LLMTrainer
from agentgym.trainers.models.policy import LLMPolicy, token_logprobs

__all__ = ["DPO", "DPOConfig", "cancel_shared", "dpo_loss", "sequence_logprobs"]

CURVE_KEYS = ("loss", "reward_accuracy", "reward_margin", "eval_success")


class DPOConfig(AdamWConfig, PairsConfig, EvalConfig):
    """Every DPO knob, with defaults that suit 1–8 B models (see the module docstring for tiny ones).

    Where the pairs come from is :class:`~agentgym.trainers.llm.preferences.PairsConfig`; the frozen split evaluated
    before training and after every round, and the optimizer, come from :mod:`agentgym.trainers.llm.config`.
    """

    rounds: int = Field(1, ge=1, description="Iterative DPO: rebuild the pairs from the current policy this often.")
    beta: float = Field(0.1, gt=0, description="β: inverse strength of the anchor to the reference.")
    label_smoothing: float = Field(0.0, ge=0, lt=0.5, description="ε: assumed share of flipped preferences (cDPO).")
    rpo_alpha: float = Field(
        0.0, ge=0, description="α: weight of the chosen tokens' mean NLL added to the loss (RPO); 0: plain DPO."
    )
    update_reference: bool = Field(
        True, description="rounds > 1: each round's reference is the policy at its start (False: the start policy)."
    )
    epochs: int = Field(2, ge=1, description="Passes over each round's pairs.")
    batch_size: int = Field(16, ge=1, description="Pairs per optimizer step.")
    micro_batch_size: int = Field(16, ge=1, description="Pairs per forward/backward (gradients accumulate).")
    max_length: int = Field(4096, ge=8, description="Pairs with a longer sample (tokens) are skipped, not cut.")
    eval_fraction: float = Field(0.0, ge=0, lt=1, description="Share of pairs held out (eval_loss, eval_reward_*).")
    seed: int = 0

    @model_validator(mode="after")
    def _rounds_need_rollouts(self) -> DPOConfig:
        if self.rounds > 1 and self.data is not None:
            raise ValueError("rounds > 1 rebuilds pairs from the policy's rollouts; a JSONL data file is fixed")
        return self


def dpo_loss(
    policy_chosen: Tensor,
    policy_rejected: Tensor,
    reference_chosen: Tensor,
    reference_rejected: Tensor,
    beta: float,
    label_smoothing: float = 0.0,
) -> tuple[Tensor, Tensor, Tensor]:
    """Per-pair sigmoid DPO losses and the implicit rewards ``β(log π − log π_ref)`` of chosen and rejected."""
    chosen_rewards = beta * (policy_chosen - reference_chosen)
    rejected_rewards = beta * (policy_rejected - reference_rejected)
    h = chosen_rewards - rejected_rewards
    losses = -(1 - label_smoothing) * F.logsigmoid(h) - label_smoothing * F.logsigmoid(-h)
    return losses, chosen_rewards.detach(), rejected_rewards.detach()


def sequence_logprobs(model: Any, responses: Sequence[Sequence[Sample]], pad_id: int) -> Tensor:
    """``log π(y)`` per response: token log-probs summed over the policy tokens of all its samples."""
    flat = [(i, s) for i, samples in enumerate(responses) for s in samples]
    device = next(model.parameters()).device
    out = torch.zeros(len(responses), device=device)
    if not flat:
        return out
    batch = {k: v.to(device) for k, v in collate([s for _, s in flat], pad_id).items()}
    logp, _ = token_logprobs(model, batch["input_ids"], batch["attention_mask"], batch["loss_mask"])
    per_sample = (logp * batch["loss_mask"].to(logp.dtype)).sum(1)
    index = torch.tensor([i for i, _ in flat], device=device)
    return out.index_add(0, index, per_sample.to(out.dtype))


def cancel_shared(chosen: Sequence[Sample], rejected: Sequence[Sample]) -> tuple[list[Sample], list[Sample]]:
    """Leave out what both responses share (it cancels in DPO's h): samples on both sides, then, when one
    sample is left on each side, the policy tokens of their common token prefix. Samples without policy
    tokens are dropped."""
    key = lambda s: (tuple(s.input_ids), tuple(s.loss_mask))  # noqa: E731
    shared = Counter(map(key, chosen)) & Counter(map(key, rejected))
    sides = []
    for samples in (chosen, rejected):
        left, kept = Counter(shared), []
        for s in samples:
            if left[key(s)] > 0:
                left[key(s)] -= 1
            else:
                kept.append(s)
        sides.append(kept)
    if len(sides[0]) == 1 and len(sides[1]) == 1:
        a, b = sides[0][0], sides[1][0]
        n = 0
        while n < min(len(a.input_ids), len(b.input_ids)) and a.input_ids[n] == b.input_ids[n]:
            n += 1
        sides = [[_mask_prefix(a, n)], [_mask_prefix(b, n)]]
    return [s for s in sides[0] if any(s.loss_mask)], [s for s in sides[1] if any(s.loss_mask)]


def _mask_prefix(sample: Sample, n: int) -> Sample:
    return Sample(list(sample.input_ids), [0] * n + list(sample.loss_mask[n:]), list(sample.logprobs))


@dataclass
class _Pair:
    """A pair as DPO trains on it: the responses' samples (shared parts left out) and reference log-probs."""

    chosen: list[Sample]
    rejected: list[Sample]
    reference_chosen: float = 0.0
    reference_rejected: float = 0.0

    @property
    def chosen_tokens(self) -> int:
        return sum(sum(s.loss_mask) for s in self.chosen)


class DPO(LLMTrainer):
    """Direct Preference Optimization on preference pairs of agentgym episodes (or chat transcripts).

    ``DPO(policy, config, out_dir=...).learn()`` trains and returns the trainer (its metric rows are ``.metrics``),
    writing ``config.json``, ``metrics.jsonl``/``.csv``, ``learning_curve.png`` and ``final/`` under ``out_dir``.
    ``policy`` is an :class:`LLMPolicy` or a path/hub id; ``reference`` likewise (default: a frozen copy of the
    start policy); ``pairs`` overrides ``config.data`` and the rollouts of the first round. The run directory,
    optimizer, evaluation and loop are :class:`~agentgym.trainers.llm.trainer.LLMTrainer`'s.
    """

    algorithm = "dpo"
    label = "DPO"
    config_class = DPOConfig
    curve_keys = CURVE_KEYS
    resumable = False
    config: DPOConfig

    def __init__(
        self,
        policy: LLMPolicy | str | Path,
        config: DPOConfig | None = None,
        *,
        out_dir: str | Path | None = None,
        reference: LLMPolicy | str | Path | None = None,
        pairs: Sequence[PreferencePair] | None = None,
        **overrides: Any,
    ) -> None:
        super().__init__(config, out_dir=out_dir, **overrides)
        cfg = self.config
        if pairs is None and cfg.data is not None and not Path(cfg.data).is_file():
            raise FileNotFoundError(f"no preference-pairs file at {cfg.data} (DPOConfig.data)")
        for source, what in ((policy, "policy"), (reference, "reference model")):
            if isinstance(source, str | Path):
                check_model_path(source, what)
        self.policy = policy if isinstance(policy, LLMPolicy) else LLMPolicy.from_pretrained(policy)
        self.reference_path = str(reference) if isinstance(reference, str | Path) else self.policy.model.name_or_path
        if isinstance(reference, LLMPolicy):
            self.reference = reference.model
        elif isinstance(reference, str | Path):
            self.reference = LLMPolicy.from_pretrained(reference).model
        else:
            self.reference = copy.deepcopy(self.policy.model)
        self.reference.eval().requires_grad_(False)
        self._pairs = list(pairs) if pairs is not None else None
        torch.manual_seed(cfg.seed)
        self.rng = random.Random(cfg.seed)
        self.make_optimizer(self.policy.model.parameters())
        self.counts: dict[str, int] = {"pairs": 0, "skipped_pairs": 0, "eval_pairs": 0}
        self.evaluation: dict[str, dict[str, float]] = {}
        self._before: dict[str, float] = {}

    # ------------------------------------------------------------------ public API

    def preference_pairs(self, round_index: int = 0) -> list[PreferencePair]:
        """Round ``round_index``'s pairs: ``pairs`` or ``data`` (round 0), else rollouts of the current policy."""
        cfg = self.config
        if round_index == 0 and self._pairs is not None:
            return self._pairs
        if cfg.data is not None:
            return read_pairs(cfg.data)
        return rollout_pairs(self.policy, cfg, cfg.seed + 7919 * round_index)

    def train_steps(self, steps: int | None = None) -> Iterator[dict[str, Any]]:
        """``rounds`` × ``epochs`` over the pairs, ``batch_size`` pairs a step.

        Row 0 holds the evaluation before training (``eval_*``); the last row of every round holds the
        evaluation after it.
        """
        cfg = self.config
        self._before = before = self._evaluation_row()
        self.evaluation["before"] = {k[5:]: v for k, v in before.items() if k.startswith("eval_")}
        t0 = time.perf_counter()
        for round_index in range(cfg.rounds):
            try:
                pairs = self.preference_pairs(round_index)
            except NoPreferencePairs as error:
                if round_index == 0:
                    raise
                # iterative DPO: the policy's own rollouts no longer disagree; what it learned so far stays
                self.progress.write(f"DPO: stopped after round {round_index} of {cfg.rounds}: {error}")
                return
            if round_index > 0 and cfg.update_reference:  # iterative DPO: anchor to the last round's policy
                self.reference = copy.deepcopy(self.policy.model).eval().requires_grad_(False)
            self.counts["rounds_done"] = round_index + 1
            train, held_out = self._prepare(pairs, round_index)
            if round_index == 0:
                self.log({"step": 0, "round": 0, **before, **self._held_out(held_out)})
            self.set_total((self.total_steps or 0) + cfg.epochs * -(-len(train) // cfg.batch_size))
            for epoch in range(1, cfg.epochs + 1):
                order = train[:]
                self.rng.shuffle(order)
                for start in range(0, len(order), cfg.batch_size):
                    row = {"step": self.step + 1, "round": round_index + 1, "epoch": epoch}
                    row.update(self.train_step(order[start : start + cfg.batch_size]))
                    row["time"] = time.perf_counter() - t0
                    if epoch == cfg.epochs and start + cfg.batch_size >= len(order):  # the round's last step
                        row.update(self._held_out(held_out))
                        row.update(self._evaluation_row())
                    yield row

    def on_train_end(self) -> None:
        """A run stopped early is evaluated where it stopped; ``evaluation["after"]`` is the last evaluation."""
        rows = self.metrics
        if self.stopped and "eval_success" not in rows[-1] and self.config.eval_split is not None:
            rows[-1].update(self._evaluation_row())
        self.evaluation["after"] = {k[5:]: v for k, v in rows[-1].items() if k in self._before}

    def postfix(self, row: dict[str, Any]) -> dict[str, str]:
        return {"loss": f"{row['loss']:.3f}", "accuracy": f"{row['reward_accuracy']:.2f}"}

    def curve_title(self) -> str:
        return f"DPO on {self.config.env_id if self.config.data is None else self.config.data}"

    # ------------------------------------------------------------------ one step

    def train_step(self, batch: Sequence[_Pair]) -> dict[str, float]:
        """One AdamW step on a batch of prepared pairs; returns its metrics."""
        cfg, model = self.config, self.policy.model
        model.eval()  # dropout off, as the reference's log-probs were computed (TRL's disable_dropout)
        n_tokens = max(1, sum(p.chosen_tokens for p in batch))

        def loss(chunk: Sequence[_Pair]) -> tuple[torch.Tensor, torch.Tensor]:
            losses, chosen, chunk_stats = self._forward(chunk)
            share = losses.sum() / len(batch)
            if cfg.rpo_alpha:
                share = share - cfg.rpo_alpha * chosen.sum() / n_tokens  # + α · NLL per chosen token
            return share, chunk_stats

        chunks = [batch[start : start + cfg.micro_batch_size] for start in range(0, len(batch), cfg.micro_batch_size)]
        grad_norm, stats = self.optimizer_step(chunks, loss)
        self.end_step()
        metrics = _pair_metrics(torch.cat(stats))
        metrics["loss"] += cfg.rpo_alpha * metrics["chosen_nll"]
        return {
            **metrics,
            "grad_norm": float(grad_norm),
            "lr": self.optimizer.param_groups[0]["lr"],
        }

    # ------------------------------------------------------------------ internals

    def _prepare(self, pairs: Sequence[PreferencePair], round_index: int) -> tuple[list[_Pair], list[_Pair]]:
        """Tokenise, cancel shared parts, drop empty or over-long pairs, compute reference log-probs."""
        cfg, policy = self.config, self.policy
        prepared, skipped = [], 0
        for pair in pairs:
            chosen = pair.chosen_samples or [chat_sample(policy, pair.chosen)]
            rejected = pair.rejected_samples or [chat_sample(policy, pair.rejected)]
            chosen, rejected = cancel_shared(chosen, rejected)
            too_long = any(len(s.input_ids) > cfg.max_length for s in chosen + rejected)
            if too_long or not (chosen or rejected):  # nothing differs: no preference to learn
                skipped += 1
                continue
            prepared.append(_Pair(chosen, rejected))
        if not prepared:
            raise ValueError(
                f"none of the {len(pairs)} preference pairs is usable: their responses are identical "
                f"or a sample is longer than max_length={cfg.max_length} tokens"
            )
        with torch.no_grad():
            for start in range(0, len(prepared), cfg.micro_batch_size):
                chunk = prepared[start : start + cfg.micro_batch_size]
                responses = [p.chosen for p in chunk] + [p.rejected for p in chunk]
                logps = sequence_logprobs(self.reference, responses, policy.pad_id).tolist()
                for i, p in enumerate(chunk):
                    p.reference_chosen, p.reference_rejected = logps[i], logps[len(chunk) + i]
        train, held_out = split_pairs(prepared, cfg.eval_fraction, cfg.seed + round_index)
        self.counts["pairs"] += len(train)
        self.counts["eval_pairs"] += len(held_out)
        self.counts["skipped_pairs"] += skipped
        return train, held_out

    @torch.no_grad()
    def _held_out(self, pairs: Sequence[_Pair]) -> dict[str, float]:
        """DPO metrics on held-out pairs, as ``eval_loss``, ``eval_reward_accuracy``, ... (none if no pairs)."""
        if not pairs:
            return {}
        cfg, model = self.config, self.policy.model
        was_training = model.training
        model.eval()
        stats = [
            self._forward(pairs[i : i + cfg.micro_batch_size])[2] for i in range(0, len(pairs), cfg.micro_batch_size)
        ]
        model.train(was_training)
        metrics = _pair_metrics(torch.cat(stats))
        metrics["loss"] += cfg.rpo_alpha * metrics["chosen_nll"]
        return {f"eval_{k}": v for k, v in metrics.items()}

    def _forward(self, chunk: Sequence[_Pair]) -> tuple[Tensor, Tensor, Tensor]:
        """Per-pair DPO losses and log π(y_w) (differentiable), and the stacked statistics of :func:`_pair_metrics`."""
        cfg, pad_id = self.config, self.policy.pad_id
        logps = sequence_logprobs(self.policy.model, [p.chosen for p in chunk] + [p.rejected for p in chunk], pad_id)
        chosen, rejected = logps[: len(chunk)], logps[len(chunk) :]
        reference = torch.tensor([[p.reference_chosen, p.reference_rejected] for p in chunk], device=logps.device)
        losses, r_chosen, r_rejected = dpo_loss(
            chosen, rejected, reference[:, 0], reference[:, 1], cfg.beta, cfg.label_smoothing
        )
        tokens = torch.tensor([float(p.chosen_tokens) for p in chunk], device=logps.device)
        stats = torch.stack([losses.detach(), r_chosen, r_rejected, chosen.detach(), rejected.detach(), tokens], 1)
        return losses, chosen, stats

    def _evaluation_row(self) -> dict[str, float]:
        if self.config.eval_split is None:
            return {}
        return {f"eval_{k}": v for k, v in self.evaluate().items()}

    def run_info(self) -> dict[str, Any]:
        """``config.json``'s entries besides the algorithm and the provenance (the pair counts and evaluations
        are complete when training ends)."""
        return {
            "config": self.config.model_dump(mode="json"),
            "reference": self.reference_path
            if self.config.rounds == 1 or not self.config.update_reference
            else f"each round's start policy (round 1: {self.reference_path})",
            **self.counts,
            "evaluation": self.evaluation,
        }


def _pair_metrics(stats: Tensor) -> dict[str, float]:
    """Metrics of stacked per-pair columns: loss, r̂ chosen, r̂ rejected, log π chosen, log π rejected, chosen tokens."""
    losses, r_chosen, r_rejected, chosen, rejected, tokens = stats.float().unbind(1)
    return {
        "loss": float(losses.mean()),
        "reward_accuracy": float((r_chosen > r_rejected).float().mean()),
        "reward_margin": float((r_chosen - r_rejected).mean()),
        "chosen_reward": float(r_chosen.mean()),
        "rejected_reward": float(r_rejected.mean()),
        "chosen_logp": float(chosen.mean()),
        "rejected_logp": float(rejected.mean()),
        "chosen_nll": float(-chosen.sum() / tokens.sum().clamp(min=1)),
    }
