"""Supervised fine-tuning (SFT) warm-up: teach a language model the tool-call format before RL.

Demonstrations come from the env's scripted oracle, played through the same rollout engine and
prompt layout the RL trainers use (so SFT and GRPO see identical contexts), or from a JSONL file of
chat transcripts (``{"messages": [{"role": ..., "content": ...}, ...]}`` per line). The loss is the
cross-entropy on assistant tokens only; what the env or the user wrote is context.

``randomize_decisions=True`` makes the oracle's decisions random (each action is replaced by a
random menu action calling the same tool): the model learns the format and the order of calls but
not the answer, so a later RL phase starts near chance and its gain is measurable.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from pydantic import Field

from agentgym.core import task_info
from agentgym.core.data import read_jsonl
from agentgym.core.registration import make_env
from agentgym.trainers.llm.config import CheckpointConfig, EvalConfig, ModelConfig, OptimizerConfig
from agentgym.trainers.llm.rollout import OracleTeacher, Sample, collate, random_resets, rollout
from agentgym.trainers.llm.trainer import LLMTrainer
from agentgym.trainers.models.policy import DTYPES, LLMPolicy, prepare_policy, token_logprobs

__all__ = ["SFT", "SFTConfig", "chat_sample", "oracle_demonstrations"]


class SFTConfig(CheckpointConfig, OptimizerConfig, ModelConfig, EvalConfig):
    """SFT settings; the defaults suit real models (the tiny model wants ~1e-3, see the CLI preset).

    The env (whose oracle makes the demonstrations), the split evaluated after training, the optimizer, the model
    (dtype, device, gradient checkpointing, LoRA: ``lora_r > 0`` trains adapters only, at a larger learning rate
    such as 1e-4) and the checkpoint fields come from :mod:`agentgym.trainers.llm.config`; ``rollout`` is the prompt
    layout, as in RL.
    """

    data: str | None = Field(None, description="JSONL of chat transcripts to train on instead of oracle demos.")
    episodes: int = Field(256, ge=1, description="Oracle demonstration episodes.")
    randomize_decisions: bool = Field(False, description="Teach the format, not the answer (see module doc).")
    oracle_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments of the env's oracle(), e.g. SQLLookup's run_query=False."
    )
    epochs: int = Field(2, ge=1)
    batch_size: int = Field(32, ge=1, description="Samples per optimizer step.")
    learning_rate: float = Field(2e-5, gt=0, description="AdamW learning rate.")
    checkpoint_every: int = Field(100, ge=0, description="Save a resumable checkpoint every N steps (0: never).")
    group_by_length: bool = Field(
        False,
        description="Batch samples of similar length (shuffled in windows of 64 batches, each sorted by length): "
        "less padding, so fewer tokens a step where lengths vary (SQLLookup: lookups and long answers).",
    )
    seed: int = 0


def oracle_demonstrations(policy: LLMPolicy, config: SFTConfig, *, batch: int = 64) -> list[Sample]:
    """Play ``config.episodes`` episodes with the oracle teacher and return their samples."""
    teacher = OracleTeacher(
        randomize_decisions=config.randomize_decisions, seed=config.seed, oracle_kwargs=config.oracle_kwargs
    )
    n = min(batch, config.episodes)
    envs = [make_env(config.env_id, config.train_split, config.env_kwargs) for _ in range(n)]
    num_tasks = task_info(envs[0]).num_tasks
    rng = random.Random(config.seed)
    samples: list[Sample] = []
    for start in range(0, config.episodes, n):
        count = min(n, config.episodes - start)
        resets = random_resets(rng, count, num_tasks)
        for episode in rollout(policy, envs[:count], resets, config.rollout, teacher=teacher):
            samples += episode.samples
    for env in envs:
        env.close()
    return samples


def chat_sample(policy: LLMPolicy, messages: list[dict[str, str]], tools: list[dict] | None = None) -> Sample:
    """Tokenise a chat transcript turn by turn; assistant contents (and their end-of-turn) are the policy's."""
    sample = Sample()
    rendered = ""
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            prompt = policy.render(messages[:i], tools=tools, generation=True)
            sample.extend(policy.encode(prompt[len(rendered) :]), policy=False)
            full = policy.render(messages[: i + 1], tools=tools, generation=False)
            sample.extend(policy.encode(full[len(prompt) :]), policy=True)
            rendered = full
    return sample


class SFT(LLMTrainer):
    """``SFT(policy, config, out_dir=...).learn()``: cross-entropy on the policy's tokens of demonstrations; returns
    the trainer (its metric rows are ``.metrics``).

    With ``out_dir``, every ``checkpoint_every`` steps a checkpoint goes to ``checkpoints/step-N/`` (weights,
    optimizer, scheduler), and ``SFT.resume(out_dir)`` continues a stopped run from the latest one with the
    same samples in the same order, so an interrupted run loses at most ``checkpoint_every`` steps. The run
    directory, optimizer, checkpoints and loop are :class:`~agentgym.trainers.llm.trainer.LLMTrainer`'s.
    """

    algorithm = "sft"
    label = "SFT"
    config_class = SFTConfig
    curve_keys = ("loss", "token_accuracy")
    curve_window = 5
    config: SFTConfig

    def __init__(self, policy: LLMPolicy | str | Path, config: SFTConfig | None = None, *, out_dir=None, **overrides):
        super().__init__(config, out_dir=out_dir, **overrides)
        cfg = self.config
        dtype = DTYPES[cfg.dtype] if cfg.dtype else None
        self.policy = policy if isinstance(policy, LLMPolicy) else LLMPolicy.from_pretrained(policy, dtype=dtype)
        torch.manual_seed(cfg.seed)  # new LoRA adapters are initialised from the run's seed
        self.policy = prepare_policy(self.policy, **{k: getattr(cfg, k) for k in ModelConfig.model_fields})
        self.make_optimizer([p for p in self.policy.model.parameters() if p.requires_grad])  # with LoRA: adapters

    def samples(self) -> list[Sample]:
        """The training samples: the JSONL transcripts if ``data`` is set, else oracle demonstrations."""
        if self.config.data:
            rows = read_jsonl(self.config.data)
            bad = [i for i, r in enumerate(rows) if not isinstance(r.get("messages"), list)]
            if bad:
                raise ValueError(f"{self.config.data}: line {bad[0] + 1} has no 'messages' list")
            return [chat_sample(self.policy, r["messages"], r.get("tools")) for r in rows]
        return oracle_demonstrations(self.policy, self.config)

    def _order(self, samples: list[Sample], epoch: int) -> list[Sample]:
        """Epoch ``epoch``'s shuffle, a function of the seed and the epoch alone (so a resumed run has it too)."""
        order = samples[:]
        rng = random.Random(self.config.seed * 100_003 + epoch)
        rng.shuffle(order)
        if self.config.group_by_length:
            size, window = self.config.batch_size, 64 * self.config.batch_size
            batches = []
            for start in range(0, len(order), window):
                chunk = sorted(order[start : start + window], key=lambda s: len(s.input_ids))
                batches += [chunk[i : i + size] for i in range(0, len(chunk), size)]
            short = [b for b in batches if len(b) < size]  # at most one: it goes last, so steps keep their batches
            batches = [b for b in batches if len(b) == size]
            rng.shuffle(batches)
            order = [sample for batch in batches + short for sample in batch]
        return order

    def loss(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, tuple[float, float]]:
        """The mean cross-entropy over the policy's tokens of a collated batch, and as stats that loss and the share
        of those tokens the model gives more than half its probability."""
        logp, _ = token_logprobs(self.policy.model, batch["input_ids"], batch["attention_mask"], batch["loss_mask"])
        mask = batch["loss_mask"].to(logp.dtype)
        token_accuracy = float(((logp.detach() > -0.693) * mask).sum() / mask.sum())
        loss = -(logp * mask).sum() / mask.sum()
        return loss, (loss.item(), token_accuracy)

    def train_steps(self, steps: int | None = None) -> Iterator[dict[str, Any]]:
        """``epochs`` passes over the samples, ``batch_size`` samples a step (a resumed run continues its epoch)."""
        cfg, model = self.config, self.policy.model
        torch.manual_seed(cfg.seed + self.step)
        samples = [s for s in self.samples() if any(s.loss_mask)]
        if not samples:
            raise ValueError("no training samples with assistant tokens (check data= or the env's oracle)")
        steps_per_epoch = -(-len(samples) // cfg.batch_size)
        total = cfg.epochs * steps_per_epoch
        self.set_total(total)
        model.train()
        t0 = time.perf_counter() - (self.metrics[-1]["time"] if self.metrics else 0.0)
        order, order_epoch = [], -1
        while self.step < total:
            epoch, k = divmod(self.step, steps_per_epoch)
            if epoch != order_epoch:
                order, order_epoch = self._order(samples, epoch), epoch
            batch = collate(order[k * cfg.batch_size : (k + 1) * cfg.batch_size], self.policy.pad_id)
            batch = {key: v.to(self.policy.device) for key, v in batch.items()}
            _, [(loss, token_accuracy)] = self.optimizer_step([batch], self.loss)
            self.end_step()
            yield {
                "step": self.step,
                "epoch": epoch + 1,
                "loss": loss,
                "token_accuracy": token_accuracy,
                "time": time.perf_counter() - t0,
            }

    def on_train_end(self) -> None:
        """Evaluate on ``eval_split``; the evaluation joins the last row (and the metrics file as a row of its own)."""
        if self.config.eval_split is not None:
            evaluation = {f"eval_{k}": v for k, v in self.evaluate().items()}
            self.metrics[-1].update(evaluation)
            self.log({"step": self.metrics[-1]["step"], **evaluation}, keep=False)
