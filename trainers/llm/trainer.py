"""The loop every LLM trainer shares (SFT, DPO, the reward model, GRPO, PPO), as TRL's ``Trainer`` is shared.

An :class:`LLMTrainer` owns what is the same for all of them:

- the run directory (:class:`~agentgym.trainers.run.run_dir.RunDir`): ``config.json`` (written once: when training
  starts where the trainer checkpoints, so a stopped run can resume; when it ends for the others, whose
  ``config.json`` records what the run found in its data, e.g. DPO's pair counts),
  ``metrics.jsonl``/``.csv`` (one row per step; the rows are also :attr:`LLMTrainer.metrics`),
  ``learning_curve.png`` and ``final/``;
- AdamW with its linear warm-up (:func:`~agentgym.trainers.llm.optim.adamw_with_warmup`), from the config's
  ``learning_rate`` and ``warmup_steps`` (and ``adam_betas``, ``weight_decay`` where the config has them);
- checkpoints every ``checkpoint_every`` steps (``checkpoints/step-N/``: weights, optimizer, scheduler and the
  random number generators; :mod:`agentgym.trainers.run.checkpoint`) and :meth:`LLMTrainer.resume`;
- greedy evaluation on the frozen split (:meth:`LLMTrainer.evaluate`);
- the process group (:class:`ProcessGroup`): one process, or several started by ``torchrun``.

- the inner step (:meth:`LLMTrainer.optimizer_step`, :meth:`LLMTrainer.end_step`): zeroed gradients, the step's
  micro-batches through the algorithm's loss with gradients all-reduced once per step, clipping, AdamW, then the
  schedule and the step count. This is the one place an LLM trainer's optimizer steps.

A trainer writes its own :meth:`LLMTrainer.train_steps`: a generator that prepares its data and yields one
metrics row per step (what a step does: its batches and the loss of one, as TRL's ``compute_loss``).
:meth:`LLMTrainer.learn` drives it and returns the trainer, as Stable-Baselines3's ``learn()`` returns the model::

    trainer = GRPO("runs/sft/final", GRPOConfig(steps=100), out_dir="runs/grpo").learn()
    trainer.metrics[-1]["eval_success"]  # also in runs/grpo/metrics.jsonl
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

import torch
from pydantic import BaseModel, ValidationError

from agentgym.trainers.llm.optim import adamw_with_warmup
from agentgym.trainers.llm.probe import probe, split_decisions
from agentgym.trainers.llm.rollout import evaluate_split
from agentgym.trainers.run.checkpoint import load_trainer_state, save_checkpoint
from agentgym.trainers.run.metrics import MetricsWriter
from agentgym.trainers.run.plotting import learning_phases
from agentgym.trainers.run.run_dir import RunDir

__all__ = ["LLMTrainer", "ProcessGroup"]


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
    def no_sync(self, wrapped: torch.nn.Module | None, sync: bool) -> Iterator[None]:
        """Accumulate gradients locally (``sync=False``) or all-reduce them in this backward (``True``); a module
        not wrapped for several processes (``None``) has nothing to hold back."""
        if self.accelerator is None or sync or wrapped is None:
            yield
        else:
            with self.accelerator.no_sync(wrapped):
                yield


class LLMTrainer:
    """The run directory, optimizer, checkpoints, evaluation, process group and loop of an LLM trainer.

    A subclass sets the class attributes below, builds its model in ``__init__`` (after ``super().__init__``)
    and calls :meth:`make_optimizer` on the parameters it trains, and writes :meth:`train_steps`.
    """

    algorithm: ClassVar[str] = "llm"
    """``config.json``'s ``algorithm``; :meth:`resume` refuses a run of another one."""
    config_class: ClassVar[type[BaseModel]]
    label: ClassVar[str] = "LLM"
    """The name on the progress bar and the learning curve."""
    curve_keys: ClassVar[tuple[str, ...]] = ("loss",)
    curve_window: ClassVar[int] = 10
    curve_phases: ClassVar[bool] = False
    """Whether the plot marks where tool use and success set in (:func:`.plotting.learning_phases`)."""
    resumable: ClassVar[bool] = True
    """Whether the trainer writes checkpoints (``checkpoint_every``) that :meth:`resume` continues from."""
    checkpoint_at_end: ClassVar[bool] = False
    """Also checkpoint after the last step (not only every ``checkpoint_every``)."""
    evaluate_at_checkpoint: ClassVar[bool] = False
    """Evaluate every checkpoint; the evaluation joins that step's row as ``eval_*``."""
    generator: torch.Generator | None = None
    """The sampling generator a checkpoint saves (online trainers)."""
    rng: random.Random | None = None
    """The Python random generator a checkpoint saves (online trainers)."""
    wrapped: torch.nn.Module | None = None
    """The module in DistributedDataParallel whose gradients :meth:`optimizer_step` all-reduces (several ranks)."""

    def __init__(self, config: BaseModel | None = None, *, out_dir: str | Path | None = None, **overrides: Any):
        base = (config or self.config_class()).model_dump()
        self.config: Any = self.config_class.model_validate({**base, **overrides})
        self.group = ProcessGroup()
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.run = RunDir(self.out_dir) if self.out_dir is not None else None
        self.step = 0
        self.metrics: list[dict[str, Any]] = []
        """Every step's metrics row (a resumed run's earlier rows first), as written to ``metrics.jsonl``."""
        self.stopped = False
        """Whether the last :meth:`learn` stopped early (its callback or ``steps``)."""
        self.total_steps: int | None = None
        self.progress: Any = None
        self._writer: MetricsWriter | None = None

    # ------------------------------------------------------------------ for subclasses

    def train_steps(self, steps: int | None) -> Iterator[dict[str, Any]]:
        """Prepare the data, then train: one metrics row per optimizer step (``self.step`` counts them).

        ``steps`` is :meth:`learn`'s; a trainer with a step budget trains until it, the others run their epochs
        (and :meth:`learn` stops them at ``steps``)."""
        raise NotImplementedError

    def run_info(self) -> dict[str, Any]:
        """``config.json``'s entries besides the algorithm and the provenance."""
        return {"config": self.config.model_dump(mode="json")}

    def postfix(self, row: dict[str, Any]) -> dict[str, str]:
        """What the progress bar shows after a step."""
        return {"loss": f"{row['loss']:.3f}"}

    def curve_title(self) -> str | None:
        return None

    def on_step_end(self) -> None:
        """Runs on every rank after a step's row is logged (the online trainers write their episode log)."""

    def on_train_end(self) -> None:
        """Runs after the last step, before the metrics file closes (SFT's final evaluation)."""

    def checkpoint_extra(self) -> dict[str, Any] | None:
        """Entries of ``trainer_state.pt``'s ``extra``."""
        return None

    def save_extra(self, path: Path) -> None:
        """Write anything besides the policy a checkpoint needs (PPO: the value head)."""

    def load_extra(self, path: Path) -> None:
        """Read what :meth:`save_extra` wrote."""

    @classmethod
    def _resume_kwargs(cls, info: dict[str, Any], config: Any) -> dict[str, Any]:
        """Keyword arguments of the constructor when :meth:`resume` rebuilds the trainer from ``config.json``."""
        return {}

    def _resumed(self, state: dict[str, Any], info: dict[str, Any]) -> None:
        """Runs at the end of :meth:`resume`, with the checkpoint's state and ``config.json``."""

    # ------------------------------------------------------------------ helpers for subclasses

    def make_optimizer(self, params: Iterable[torch.nn.Parameter]) -> None:
        """AdamW with warm-up over ``params`` (:attr:`optimizer`, :attr:`scheduler`) from the config."""
        cfg = self.config
        self.trained_parameters = list(params)
        self.optimizer, self.scheduler = adamw_with_warmup(
            self.trained_parameters,
            cfg.learning_rate,
            cfg.warmup_steps,
            betas=getattr(cfg, "adam_betas", (0.9, 0.999)),
            weight_decay=getattr(cfg, "weight_decay", 0.0),
            schedule=cfg.lr_schedule,
            horizon=lambda: self.total_steps,
        )

    def optimizer_step(
        self, micro_batches: Sequence[Any], loss: Callable[[Any], tuple[torch.Tensor, Any]]
    ) -> tuple[float, list[Any]]:
        """One AdamW step over a step's ``micro_batches``; returns the gradient norm before clipping and each
        micro-batch's stats.

        ``loss(micro_batch) -> (loss, stats)``: the loss is this rank's share of the step's loss (the shares over
        micro-batches and ranks add up to it: a micro-batch's sum over the step's global count, say). Each share is
        back-propagated; with :attr:`wrapped` (DDP over several ranks) it is scaled by the world size (DDP averages
        gradients over ranks) and gradients are all-reduced in the last backward only. Then the trained parameters'
        gradients are clipped to ``max_grad_norm`` and the optimizer steps. :meth:`end_step` ends the step (an
        algorithm may take several optimizer steps in one, as GRPO's ``num_iterations``). A trainer without
        :attr:`wrapped` (SFT, DPO, the reward model) trains the whole batch on every rank: replicas, not shards."""
        self.optimizer.zero_grad(set_to_none=True)
        stats, scale = [], self.world_size if self.wrapped is not None else 1
        for i, batch in enumerate(micro_batches):
            with self.group.no_sync(self.wrapped, i == len(micro_batches) - 1):
                value, batch_stats = loss(batch)
                (value * scale).backward()
            stats.append(batch_stats)
        norm = float(torch.nn.utils.clip_grad_norm_(self.trained_parameters, self.config.max_grad_norm))
        self.optimizer.step()
        return norm, stats

    def end_step(self) -> None:
        """End a training step: the learning-rate schedule moves on and :attr:`step` counts it."""
        self.scheduler.step()
        self.step += 1

    def set_total(self, total: int) -> None:
        """How many steps the run has in all (the progress bar's total; the online trainers checkpoint there)."""
        self.total_steps = total
        if self.progress is not None:
            self.progress.total = total
            self.progress.refresh()

    def log(self, row: dict[str, Any], *, keep: bool = True) -> None:
        """Write ``row`` to the metrics files and (``keep``) append it to :attr:`metrics`."""
        if keep:
            self.metrics.append(row)
        if self._writer is not None:
            self._writer.write(row)

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
        callback: Callable[[Self, dict[str, Any]], bool | None] | None = None,
        progress_bar: bool = True,
    ) -> Self:
        """Train; return the trainer. The metric rows are :attr:`metrics` and, with ``out_dir``, ``metrics.jsonl``.

        ``steps`` stops training once that many steps are done in total (the online trainers' budget, default
        ``config.steps``). ``callback(trainer, row)`` runs after every step; returning ``False`` stops training
        (a checkpoint is where a resumed run starts).
        """
        from tqdm.auto import tqdm

        writes = self.run is not None and self.is_main
        self._writer = self.start_run() if writes else None
        self.metrics = list(self._writer.rows) if self._writer else []
        self.stopped, self.total_steps = False, None
        disable = not progress_bar or not self.is_main
        self.progress = tqdm(total=None, initial=self.step, desc=self.label, disable=disable, unit="step")
        try:
            for row in self.train_steps(steps):
                if self.run is not None and self._checkpoint_due():
                    row.update(self.checkpoint())
                self.log(row)
                self.on_step_end()
                self.progress.update(1)
                self.progress.set_postfix(self.postfix(row))
                if (callback is not None and callback(self, row) is False) or (
                    steps is not None and self.step >= steps
                ):
                    self.stopped = True
                    break
            self.on_train_end()
        finally:
            self.progress.close()
            if self._writer is not None:
                self._writer.close()
                self._writer = None
        if writes:
            assert self.run is not None
            if not self.resumable:
                self.run.write_config(self.algorithm, **self.run_info())
            self.save(self.run.final)
            phases = learning_phases(self.metrics) if self.curve_phases else ()
            self.run.plot(
                self.label,
                self.metrics,
                keys=self.curve_keys,
                window=self.curve_window,
                title=self.curve_title(),
                phases=phases,
            )
        return self

    def start_run(self) -> MetricsWriter:
        """Write ``config.json`` (a resumable trainer) and open the metrics files (keeping a resumed run's rows)."""
        assert self.run is not None
        if self.resumable:
            self.run.write_config(self.algorithm, **self.run_info())
        return self.run.metrics(step_key="step", resume_after=self.step if self.step else None)

    def evaluate(self, *, split: str | None = None, episodes: int | None = None) -> dict[str, float]:
        """Greedy evaluation on the frozen ``eval_split`` (every task once unless ``episodes``), with the decision
        probe's ``probe_*`` figures when ``eval_probe`` is set."""
        result = evaluate_split(self.policy, self.config, split=split, episodes=episodes).metrics()
        if getattr(self.config, "eval_probe", False):
            cfg = self.config
            kwargs = cfg.env_kwargs if cfg.eval_env_kwargs is None else cfg.eval_env_kwargs
            if not hasattr(self, "_probe_decisions"):  # the contexts depend on the tokenizer and template only
                self._probe_decisions = split_decisions(self.policy, cfg.env_id, cfg.rollout, env_kwargs=kwargs)
            report = probe(self.policy, cfg.env_id, cfg.rollout, decisions=self._probe_decisions)
            result |= {"probe_best": report.best, "probe_policy": report.policy, "probe_gap": report.gap}
        return result

    def save(self, path: str | Path) -> None:
        """Save the policy (Hugging Face format) and any extra state, e.g. a value head."""
        path = Path(path)
        self.policy.save_pretrained(path)
        self.save_extra(path)

    def checkpoint(self) -> dict[str, float]:
        """Save ``checkpoints/step-N`` (rank 0); with ``evaluate_at_checkpoint``, evaluate it and return the
        evaluation as ``eval_*`` metrics."""
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
            extra=self.checkpoint_extra(),
        )
        self.save_extra(path)
        if not self.evaluate_at_checkpoint:
            return {}
        return {f"eval_{k}": v for k, v in self.evaluate().items()}

    @classmethod
    def resume(cls, run_dir: str | Path, checkpoint: str | Path | None = None, **overrides: Any) -> Self:
        """Continue a run from its latest checkpoint (or ``checkpoint``): weights, optimizer, RNGs, step."""
        if not cls.resumable:
            raise ValueError(f"{cls.__name__} writes no checkpoints: a {cls.algorithm} run cannot be resumed")
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
        trainer = cls(ckpt, config, out_dir=run.path, **cls._resume_kwargs(info, config))
        trainer.load_extra(ckpt)
        state = load_trainer_state(
            ckpt, optimizer=trainer.optimizer, scheduler=trainer.scheduler, generator=trainer.generator, rng=trainer.rng
        )
        trainer.step = state["step"]
        trainer._resumed(state, info)
        return trainer

    # ------------------------------------------------------------------ internals

    def _checkpoint_due(self) -> bool:
        every = getattr(self.config, "checkpoint_every", 0)
        return bool(every and self.step % every == 0) or (self.checkpoint_at_end and self.step == self.total_steps)


def _accelerator() -> Any:
    """An ``accelerate.Accelerator`` when started by torchrun/accelerate with several processes, else None."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    from accelerate import Accelerator

    return Accelerator(cpu=not torch.cuda.is_available())
