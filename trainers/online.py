"""What the online RL trainers for language models (GRPO, PPO) share: the loop around a policy
playing agentgym text envs.

An :class:`OnlineTrainer` owns the policy (and, with ``beta > 0``, a frozen reference copy), a pool
of training envs, AdamW with warm-up, the random number generators and the loop: ``train_step`` →
metrics row → every ``checkpoint_every`` steps a checkpoint and a greedy evaluation on the frozen
split → ``metrics.jsonl``/``.csv``, TensorBoard, ``episodes.jsonl``, ``learning_curve.png`` and
``final/``. A subclass writes ``train_step``.

**Reward sources.** An episode's reward is the env's rule-based reward, a learned reward model's
score of the transcript, or a mix::

    r_turn = env_reward_coef · r_env,turn          (every turn)
    r_last += reward_model_coef · RM(transcript)   (the last turn; only with ``reward_model``)
    r_last −= truncation_penalty                    (an episode cut off before it ended)

so SFT → reward model → PPO, the classic RLHF pipeline, is ``reward_model=PATH, env_reward_coef=0``.
Every episode is logged to ``episodes.jsonl`` with both rewards and the env's verdict (``success``)
for ``agentgym audit RUN_DIR``, which lists high-reward episodes the rules reject.

**Reading order.** :meth:`OnlineTrainer.learn` is the loop; a subclass's ``train_step`` is one step (play,
reward, log the episodes, update). What a step needs around the math lives in small pieces:
:class:`ProcessGroup` (ranks and their collectives), :class:`~agentgym.trainers.run_dir.RunDir` (files) and
:class:`~agentgym.trainers.run_dir.EpisodeLog` (``episodes.jsonl``). The module trained is :attr:`scorer`.

**More than one process.** Started by ``torchrun`` or ``accelerate launch`` (``WORLD_SIZE > 1``),
the trainer uses ``accelerate``: the training pass is wrapped in DistributedDataParallel (gloo on
CPU, NCCL on GPUs), each rank plays its share of the step's tasks, gradients are averaged with the
loss normalised by the global token and sample counts (so N ranks compute the same update as one
process with the whole batch), metrics are averaged across ranks, and rank 0 alone writes files
and evaluates. Single-process runs resume exactly; a multi-process run resumes with fresh sampling
seeds on ranks other than 0.
"""

from __future__ import annotations

import contextlib
import copy
import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from pydantic import Field, ValidationError, field_validator
from torch import Tensor

from agentgym.core import task_info
from agentgym.registration import make_env
from agentgym.trainers.checkpoint import load_trainer_state, save_checkpoint
from agentgym.trainers.config import AdamWConfig, CheckpointConfig, EvalConfig, ModelConfig
from agentgym.trainers.llm import DTYPES, LLMPolicy, TokenScores, has_adapters, prepare_policy, score_tokens
from agentgym.trainers.optim import adamw_with_warmup
from agentgym.trainers.rollout import Episode, Sample, collate, evaluate_split
from agentgym.trainers.run_dir import EpisodeLog, RunDir

__all__ = ["OnlineConfig", "OnlineTrainer", "ProcessGroup", "TokenScorer"]


class OnlineConfig(CheckpointConfig, AdamWConfig, ModelConfig, EvalConfig):
    """The settings every online LLM trainer has (GRPO and PPO add their own); the env, evaluation, model
    (dtype, device, gradient checkpointing, LoRA), optimizer and checkpoint fields come from
    :mod:`agentgym.trainers.config`."""

    steps: int = Field(200, ge=1, description="Training steps (one rollout batch each).")
    adam_betas: tuple[float, float] = (0.9, 0.99)
    beta: float = Field(0.04, ge=0, description="KL coefficient to the frozen reference (0: no reference loaded).")
    micro_batch_size: int = Field(64, ge=1, description="Samples per forward/backward (gradients accumulate).")
    reward_model: str | None = Field(
        None, description="Directory of a trained reward model (trainers.reward_model) scoring each transcript."
    )
    reward_model_coef: float = Field(1.0, description="Weight of the reward model's score (added at the last turn).")
    env_reward_coef: float = Field(1.0, description="Weight of the env's rule-based reward (0: reward model only).")
    truncation_penalty: float = Field(
        0.0,
        ge=0,
        description="Subtracted from an episode cut off by max_turns/max_tokens/the time limit (TRL's "
        "missing_eos_penalty): a reward model never shown such episodes may score them high.",
    )
    log_episodes: bool = Field(True, description="Write every training episode to episodes.jsonl (for audits).")
    checkpoint_every: int = Field(50, ge=0, description="Save + evaluate every N steps (0: only at the end).")
    seed: int = 0

    @field_validator("reward_model")
    @classmethod
    def _reward_model_exists(cls, path: str | None) -> str | None:
        if path is not None and not Path(path).is_dir():
            raise ValueError(f"reward model directory {path!r} does not exist (train one with trainers.reward_model)")
        return path


class TokenScorer(torch.nn.Module):
    """The training pass as one module (policy + optional value head), so DDP can wrap it.

    ``forward`` is :func:`agentgym.trainers.llm.score_tokens` on a collated batch.
    """

    def __init__(self, model: torch.nn.Module, value_head: torch.nn.Module | None = None) -> None:
        super().__init__()
        self.model = model
        self.value_head = value_head

    def forward(
        self, batch: dict[str, Tensor], temperature: float = 1.0, with_entropy: bool = False, entropy_grad: bool = False
    ) -> TokenScores:
        return score_tokens(
            self.model,
            batch["input_ids"],
            batch["attention_mask"],
            batch["loss_mask"],
            temperature=temperature,
            with_entropy=with_entropy,
            entropy_grad=entropy_grad,
            value_head=self.value_head,
        )


class ProcessGroup:
    """The processes of a run: one, or several started by ``torchrun``/``accelerate launch`` (``WORLD_SIZE > 1``),
    which talk through ``accelerate``. In one process every collective is the identity."""

    def __init__(self) -> None:
        self.accelerator = _accelerator()
        self.rank = self.accelerator.process_index if self.accelerator else 0
        self.world_size = self.accelerator.num_processes if self.accelerator else 1

    def shard(self, items: list[Any]) -> list[Any]:
        """This rank's share of a list every rank built identically."""
        return items[self.rank :: self.world_size]

    def sum(self, *values: float) -> list[float]:
        """Element-wise sums over all ranks (the values themselves in one process)."""
        if self.accelerator is None:
            return list(values)
        tensor = torch.tensor(values, dtype=torch.float64, device=self.accelerator.device)
        return self.accelerator.reduce(tensor, reduction="sum").tolist()

    def mean(self, row: dict[str, Any]) -> dict[str, Any]:
        """A metrics row's numbers averaged over ranks (NaNs count as 0)."""
        if self.accelerator is None:
            return row
        keys = [k for k, v in row.items() if isinstance(v, int | float) and k != "step"]
        sums = self.sum(*[float(row[k]) if row[k] == row[k] else 0.0 for k in keys])
        return {**row, **{k: s / self.world_size for k, s in zip(keys, sums, strict=True)}}

    def gather(self, items: list[Any]) -> list[Any]:
        """Every rank's ``items``, concatenated in rank order (a collective)."""
        if self.accelerator is None:
            return items
        from accelerate.utils import gather_object

        return [item for part in gather_object([items]) for item in part]

    def place(self, model: torch.nn.Module) -> None:
        """Move ``model`` to this rank's device (a multi-process run; one process leaves it where it is)."""
        if self.accelerator:
            model.to(self.accelerator.device)

    def wrap(self, module: torch.nn.Module) -> torch.nn.Module:
        """``module`` in DistributedDataParallel (several processes), else ``module`` itself."""
        return self.accelerator.prepare_model(module) if self.accelerator else module

    @contextlib.contextmanager
    def no_sync(self, wrapped: torch.nn.Module, sync: bool) -> Iterator[None]:
        """Accumulate gradients locally (``sync=False``) or all-reduce them in this backward (``True``)."""
        if self.accelerator is None or sync:
            yield
        else:
            with self.accelerator.no_sync(wrapped):
                yield


class OnlineTrainer:
    """The loop, checkpoints, evaluation, reward sources and process group of an online LLM trainer.

    Subclasses set ``algorithm``, ``config_class`` and ``curve_keys`` and implement :meth:`train_step`.
    ``policy`` is an :class:`LLMPolicy` or a path/hub id; ``reference`` (used when ``beta > 0``)
    defaults to a frozen copy of the starting policy.
    """

    algorithm = "online"
    config_class: type[OnlineConfig] = OnlineConfig
    curve_keys: tuple[str, ...] = ("reward", "success", "eval_success")

    def __init__(
        self,
        policy: LLMPolicy | str | Path,
        config: OnlineConfig | None = None,
        *,
        out_dir: str | Path | None = None,
        reference: LLMPolicy | str | Path | None = None,
        **overrides: Any,
    ) -> None:
        base = (config or self.config_class()).model_dump()
        self.config = cfg = self.config_class.model_validate({**base, **overrides})
        self.group = ProcessGroup()
        probe = make_env(cfg.env_id, cfg.train_split, cfg.env_kwargs)  # a bad env id fails before a model loads
        self.num_tasks = task_info(probe).num_tasks
        dtype = DTYPES[cfg.dtype] if cfg.dtype else None
        self.policy = policy if isinstance(policy, LLMPolicy) else LLMPolicy.from_pretrained(policy, dtype=dtype)
        torch.manual_seed(cfg.seed)  # new LoRA adapters are initialised from the run's seed
        self.policy = prepare_policy(self.policy, **{k: getattr(cfg, k) for k in ModelConfig.model_fields})
        self.group.place(self.policy.model)
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.run = RunDir(self.out_dir) if self.out_dir is not None else None
        self.episode_log = EpisodeLog(self.run.path / "episodes.jsonl") if self.run is not None else None
        self.reference_path = str(reference) if isinstance(reference, str | Path) else self.policy.model.name_or_path
        # with LoRA, a reference that is the frozen base (none given, or the base's own path when a run resumes) is
        # the policy with its adapters disabled: no second copy of the model
        self._reference_is_base = (
            cfg.beta > 0
            and has_adapters(self.policy.model)
            and (reference is None or str(reference) == str(self.policy.model.name_or_path))
        )
        self.reference = self._reference_model(reference) if cfg.beta > 0 else None
        self.reward_model = self._reward_model() if cfg.reward_model else None
        self.envs = [probe] + [
            make_env(cfg.env_id, cfg.train_split, cfg.env_kwargs) for _ in range(self.envs_needed() - 1)
        ]
        torch.manual_seed(cfg.seed)
        self.rng = random.Random(cfg.seed)  # the same on every rank: all ranks draw the same tasks
        self.generator = torch.Generator().manual_seed(cfg.seed + self.rank)  # sampling differs per rank
        self.scorer = TokenScorer(self.policy.model, self.value_head())  # the trained module
        self.optimizer, self.scheduler = adamw_with_warmup(
            [p for p in self.scorer.parameters() if p.requires_grad],  # with LoRA: the adapters (and a value head)
            cfg.learning_rate,
            cfg.warmup_steps,
            betas=cfg.adam_betas,
            weight_decay=cfg.weight_decay,
        )
        self._wrapped = self.group.wrap(self.scorer)  # what the training pass calls: DDP over ``scorer``, or it
        self.step = 0

    def _reference_model(self, reference: LLMPolicy | str | Path | None) -> torch.nn.Module:
        if self._reference_is_base:
            return self.policy.model  # scored with its adapters disabled (reference_logp), never trained through
        if isinstance(reference, LLMPolicy):
            model = reference.model
        elif isinstance(reference, str | Path):
            dtype = DTYPES[self.config.dtype] if self.config.dtype else None
            model = LLMPolicy.from_pretrained(reference, dtype=dtype).model.to(self.policy.device)
        else:
            model = copy.deepcopy(self.policy.model)
        return model.eval().requires_grad_(False)

    def _reward_model(self) -> Any:
        from agentgym.trainers.reward_model import RewardModel

        reward_model = RewardModel.from_pretrained(self.config.reward_model)
        reward_model.model.to(self.policy.device)
        return reward_model

    # ------------------------------------------------------------------ for subclasses

    def envs_needed(self) -> int:
        """How many training envs this rank steps at once."""
        raise NotImplementedError

    def value_head(self) -> torch.nn.Module | None:
        """A value head trained with the policy (PPO), or None."""
        return None

    def train_step(self) -> dict[str, Any]:
        """Play one batch, update the policy, return the step's metrics."""
        raise NotImplementedError

    def save_extra(self, path: Path) -> None:
        """Write anything besides the policy a checkpoint needs (PPO: the value head)."""

    def load_extra(self, path: Path) -> None:
        """Read what :meth:`save_extra` wrote."""

    # ------------------------------------------------------------------ public API

    @property
    def accelerator(self) -> Any:
        return self.group.accelerator

    @property
    def rank(self) -> int:
        return self.group.rank

    @property
    def world_size(self) -> int:
        return self.group.world_size

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def learn(
        self,
        steps: int | None = None,
        *,
        callback: Callable[[OnlineTrainer, dict[str, Any]], bool | None] | None = None,
        progress_bar: bool = True,
    ) -> list[dict[str, Any]]:
        """Train until ``steps`` (default ``config.steps``) steps are done in total; return the metric rows.

        ``callback(trainer, row)`` runs after every step; returning ``False`` stops training.
        """
        from tqdm.auto import tqdm

        total = steps if steps is not None else self.config.steps
        writes = self.run is not None and self.is_main
        writer = self._start_files() if writes else None
        rows = list(writer.rows) if writer else []
        name = self.algorithm.upper()
        bar = tqdm(total=total, initial=self.step, desc=name, disable=not progress_bar or not writes, unit="step")
        try:
            while self.step < total:
                row = self.train_step()
                every = self.config.checkpoint_every
                if self.run is not None and ((every and self.step % every == 0) or self.step == total):
                    row.update(self.checkpoint())
                rows.append(row)
                if writer:
                    writer.write(row)
                self._flush_episode_log()  # a collective: every rank calls it
                bar.update(1)
                bar.set_postfix(reward=f"{row['reward']:.2f}", success=f"{row['success']:.2f}", kl=f"{row['kl']:.3f}")
                if callback is not None and callback(self, row) is False:
                    break
        finally:
            bar.close()
            if writer:
                writer.close()
        if writes:
            self.save(self.run.final)
            self.run.plot(name, rows, keys=self.curve_keys, title=f"{name} on {self.config.env_id}")
        return rows

    def evaluate(self, *, split: str | None = None, episodes: int | None = None) -> dict[str, float]:
        """Greedy evaluation on the frozen ``eval_split`` (every task once unless ``episodes``)."""
        return evaluate_split(self.policy, self.config, split=split, episodes=episodes)

    def save(self, path: str | Path) -> None:
        """Save the policy (Hugging Face format) and any extra state, e.g. a value head."""
        path = Path(path)
        self.policy.save_pretrained(path)
        self.save_extra(path)

    def checkpoint(self) -> dict[str, float]:
        """Save ``checkpoints/step-N`` and evaluate it (rank 0); returns the evaluation as ``eval_*`` metrics."""
        assert self.run is not None
        if not self.is_main:
            return {}
        path = save_checkpoint(
            self.run.checkpoint(self.step),
            self.policy,
            step=self.step,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            generator=self.generator,
            rng=self.rng,
            extra={"reference": self.reference_path},
        )
        self.save_extra(path)
        return {f"eval_{k}": v for k, v in self.evaluate().items()}

    @classmethod
    def resume(cls, run_dir: str | Path, checkpoint: str | Path | None = None, **overrides: Any) -> OnlineTrainer:
        """Continue a run from its latest checkpoint (or ``checkpoint``): weights, optimizer, RNGs, step."""
        run = RunDir(run_dir)
        ckpt = Path(checkpoint) if checkpoint else run.latest_checkpoint()
        if ckpt is None:
            raise FileNotFoundError(f"no checkpoint under {run.path}/checkpoints; nothing to resume")
        info = run.read_config(cls.algorithm)
        try:
            cls.config_class.model_validate(info["config"])
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(map(str, first["loc"]))
            raise ValueError(
                f"{run.path / 'config.json'}: the saved config is not valid ({where}: {first['msg']})"
            ) from None
        config = cls.config_class.model_validate({**info["config"], **overrides})
        trainer = cls(ckpt, config, out_dir=run.path, reference=info.get("reference") if config.beta > 0 else None)
        trainer.load_extra(ckpt)
        state = load_trainer_state(
            ckpt, optimizer=trainer.optimizer, scheduler=trainer.scheduler, generator=trainer.generator, rng=trainer.rng
        )
        if trainer.rank:
            trainer.generator.manual_seed(config.seed + trainer.rank + state["step"])
        trainer.step = state["step"]
        trainer.reference_path = info.get("reference")
        return trainer

    # ------------------------------------------------------------------ rewards (see the module docstring)

    def reward_model_scores(self, episodes: list[Episode]) -> list[float] | None:
        """The reward model's score of each episode's transcript (None without a reward model)."""
        return self.reward_model.score_episodes(episodes) if self.reward_model is not None else None

    def turn_rewards(self, episodes: list[Episode], scores: list[float] | None = None) -> list[list[float]]:
        """Each episode's per-turn training rewards from the configured reward sources (see module doc).

        ``scores`` are :meth:`reward_model_scores` of ``episodes`` (computed here when not given)."""
        cfg = self.config
        if scores is None:
            scores = self.reward_model_scores(episodes)
        rewards = [[cfg.env_reward_coef * r for r in ep.rewards] for ep in episodes]
        for i, ep in enumerate(episodes):
            if scores is not None and rewards[i]:
                rewards[i][-1] += cfg.reward_model_coef * scores[i]
            if ep.truncated and rewards[i]:
                rewards[i][-1] -= cfg.truncation_penalty
        return rewards

    def log_episodes(
        self, episodes: list[Episode], rewards: list[list[float]], scores: list[float] | None = None
    ) -> None:
        """Queue this step's episodes for ``episodes.jsonl`` (written after the step; with ``log_episodes`` and a run
        directory)."""
        if self.episode_log is not None and self.config.log_episodes:
            self.episode_log.record(self.step + 1, episodes, rewards, scores)

    # ------------------------------------------------------------------ helpers for train_step

    def reference_logp(self, batch: dict[str, Tensor]) -> Tensor:
        base = self.policy.model.disable_adapter() if self._reference_is_base else contextlib.nullcontext()
        with torch.no_grad(), base:
            return score_tokens(
                self.reference,
                batch["input_ids"],
                batch["attention_mask"],
                batch["loss_mask"],
                temperature=self.config.rollout.temperature,
            ).logp

    def batch(self, samples: list[Sample]) -> dict[str, Tensor]:
        return {k: v.to(self.policy.device) for k, v in collate(samples, self.policy.pad_id).items()}

    def train_pass(
        self, batch: dict[str, Tensor], *, with_entropy: bool = False, entropy_grad: bool = False
    ) -> TokenScores:
        """:attr:`scorer` on ``batch`` with gradients, at the rollout temperature (through DDP with several ranks)."""
        temperature = self.config.rollout.temperature
        return self._wrapped(batch, temperature, with_entropy=with_entropy, entropy_grad=entropy_grad)

    @contextlib.contextmanager
    def gradient_sync(self, sync: bool) -> Iterator[None]:
        """Accumulate gradients locally (``sync=False``) or all-reduce them in this backward (``True``).

        Every rank must run exactly one synced backward per optimizer step.
        """
        with self.group.no_sync(self._wrapped, sync):
            yield

    def optimizer_step(self) -> float:
        """Clip gradients, step the optimizer; returns the gradient norm before clipping."""
        params = [p for p in self.scorer.parameters() if p.requires_grad]
        norm = float(torch.nn.utils.clip_grad_norm_(params, self.config.max_grad_norm))
        self.optimizer.step()
        return norm

    # ------------------------------------------------------------------ files

    def _start_files(self) -> Any:
        """Write ``config.json``, open the metrics (keeping a resumed run's rows) and trim the episode log."""
        assert self.run is not None and self.episode_log is not None
        self.run.write_config(
            self.algorithm,
            config=self.config.model_dump(mode="json"),
            reference=self.reference_path,
            world_size=self.world_size,
        )
        writer = self.run.metrics(step_key="step", resume_after=self.step if self.step else None)
        self.episode_log.trim(self.step)
        return writer

    def _flush_episode_log(self) -> None:
        """Append the step's logged episodes of every rank to ``episodes.jsonl`` (rank 0 writes)."""
        if self.episode_log is None or not self.config.log_episodes:
            return
        records = self.group.gather(self.episode_log.take())
        if self.is_main:
            self.episode_log.append(records)


def _accelerator() -> Any:
    """An ``accelerate.Accelerator`` when started by torchrun/accelerate with several processes, else None."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    from accelerate import Accelerator

    return Accelerator(cpu=not torch.cuda.is_available())
