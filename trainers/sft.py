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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from pydantic import Field

from agentgym.core import task_info
from agentgym.data import read_jsonl
from agentgym.registration import make_env
from agentgym.trainers.checkpoint import load_trainer_state, save_checkpoint
from agentgym.trainers.config import CheckpointConfig, EvalConfig, ModelConfig, OptimizerConfig
from agentgym.trainers.llm import DTYPES, LLMPolicy, prepare_policy, token_logprobs
from agentgym.trainers.optim import adamw_with_warmup
from agentgym.trainers.rollout import OracleTeacher, Sample, collate, evaluate_split, random_resets, rollout
from agentgym.trainers.run_dir import RunDir

__all__ = ["SFT", "SFTConfig", "chat_sample", "oracle_demonstrations"]


class SFTConfig(CheckpointConfig, OptimizerConfig, ModelConfig, EvalConfig):
    """SFT settings; the defaults suit real models (the tiny model wants ~1e-3, see the CLI preset).

    The env (whose oracle makes the demonstrations), the split evaluated after training, the optimizer, the model
    (dtype, device, gradient checkpointing, LoRA: ``lora_r > 0`` trains adapters only, at a larger learning rate
    such as 1e-4) and the checkpoint fields come from :mod:`agentgym.trainers.config`; ``rollout`` is the prompt
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


class SFT:
    """``SFT(policy, config, out_dir=...).learn()``: cross-entropy on the policy's tokens of demonstrations.

    With ``out_dir``, every ``checkpoint_every`` steps a checkpoint goes to ``checkpoints/step-N/`` (weights,
    optimizer, scheduler), and ``SFT.resume(out_dir)`` continues a stopped run from the latest one with the
    same samples in the same order, so an interrupted run loses at most ``checkpoint_every`` steps.
    """

    algorithm = "sft"

    def __init__(self, policy: LLMPolicy | str | Path, config: SFTConfig | None = None, *, out_dir=None, **overrides):
        self.config = cfg = SFTConfig.model_validate({**(config or SFTConfig()).model_dump(), **overrides})
        dtype = DTYPES[cfg.dtype] if cfg.dtype else None
        self.policy = policy if isinstance(policy, LLMPolicy) else LLMPolicy.from_pretrained(policy, dtype=dtype)
        torch.manual_seed(cfg.seed)  # new LoRA adapters are initialised from the run's seed
        self.policy = prepare_policy(self.policy, **{k: getattr(cfg, k) for k in ModelConfig.model_fields})
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.run = RunDir(self.out_dir) if self.out_dir is not None else None
        self.optimizer, self.scheduler = adamw_with_warmup(
            [p for p in self.policy.model.parameters() if p.requires_grad],  # with LoRA: the adapters
            cfg.learning_rate,
            cfg.warmup_steps,
        )
        self.step = 0

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

    def learn(
        self, *, callback: Callable[[SFT, dict[str, Any]], bool | None] | None = None, progress_bar: bool = True
    ) -> list[dict[str, Any]]:
        """Train for ``epochs`` over the samples; evaluate on ``eval_split``; return the metric rows.

        ``callback(trainer, row)`` runs after every step; returning ``False`` stops training (a checkpoint is
        where a resumed run starts)."""
        from tqdm.auto import tqdm

        cfg, model = self.config, self.policy.model
        torch.manual_seed(cfg.seed + self.step)
        samples = [s for s in self.samples() if any(s.loss_mask)]
        if not samples:
            raise ValueError("no training samples with assistant tokens (check data= or the env's oracle)")
        writer = None
        if self.run is not None:
            self.run.write_config(self.algorithm, config=cfg.model_dump(mode="json"))
            writer = self.run.metrics(step_key="step", resume_after=self.step if self.step else None)
        rows: list[dict[str, Any]] = list(writer.rows) if writer else []
        steps_per_epoch = -(-len(samples) // cfg.batch_size)
        total = cfg.epochs * steps_per_epoch
        bar = tqdm(total=total, initial=self.step, desc="SFT", disable=not progress_bar, unit="step")
        model.train()
        t0 = time.perf_counter() - (rows[-1]["time"] if rows else 0.0)
        order, order_epoch = [], -1
        while self.step < total:
            epoch, k = divmod(self.step, steps_per_epoch)
            if epoch != order_epoch:
                order, order_epoch = self._order(samples, epoch), epoch
            batch = collate(order[k * cfg.batch_size : (k + 1) * cfg.batch_size], self.policy.pad_id)
            batch = {key: v.to(self.policy.device) for key, v in batch.items()}
            logp, _ = token_logprobs(model, batch["input_ids"], batch["attention_mask"], batch["loss_mask"])
            mask = batch["loss_mask"].to(logp.dtype)
            loss = -(logp * mask).sum() / mask.sum()
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], cfg.max_grad_norm)
            self.optimizer.step()
            self.scheduler.step()
            self.step += 1
            row = {
                "step": self.step,
                "epoch": epoch + 1,
                "loss": loss.item(),
                "token_accuracy": float(((logp.detach() > -0.693) * mask).sum() / mask.sum()),
                "time": time.perf_counter() - t0,
            }
            rows.append(row)
            if writer:
                writer.write(row)
            if self.run is not None and cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0:
                self._checkpoint()
            bar.update(1)
            bar.set_postfix(loss=f"{row['loss']:.3f}")
            if callback is not None and callback(self, row) is False:
                break
        bar.close()
        if cfg.eval_split is not None:
            evaluation = evaluate_split(self.policy, cfg)
            rows[-1].update({f"eval_{k}": v for k, v in evaluation.items()})
            if writer:
                writer.write({"step": rows[-1]["step"], **{f"eval_{k}": v for k, v in evaluation.items()}})
        if writer:
            writer.close()
        if self.run is not None:
            self.policy.save_pretrained(self.run.final)
            self.run.plot("SFT", rows, keys=("loss", "token_accuracy"), window=5)
        return rows

    def _checkpoint(self) -> None:
        assert self.run is not None
        save_checkpoint(
            self.run.checkpoint(self.step),
            self.policy,
            step=self.step,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
        )

    @classmethod
    def resume(cls, run_dir: str | Path, **overrides: Any) -> SFT:
        """Continue a stopped run from its latest checkpoint: weights, optimizer, scheduler and step."""
        run = RunDir(run_dir)
        ckpt = run.latest_checkpoint()
        if ckpt is None:
            raise FileNotFoundError(f"no checkpoint under {run.path}/checkpoints; nothing to resume")
        info = run.read_config(cls.algorithm)
        trainer = cls(ckpt, SFTConfig.model_validate({**info["config"], **overrides}), out_dir=run.path)
        trainer.step = load_trainer_state(ckpt, optimizer=trainer.optimizer, scheduler=trainer.scheduler)["step"]
        return trainer
