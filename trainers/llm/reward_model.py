"""A Bradley–Terry reward model: a scalar score for an agent transcript, learned from preference pairs.

The model reads a transcript ``x`` (chat messages rendered by the tokenizer's chat template, ending
with the agent's last action) and returns ``r_θ(x) = w · h_T(x)``, a linear head on the last
token's hidden state of a transformer. It is ``AutoModelForSequenceClassification(num_labels=1)``
built from a causal LM checkpoint (e.g. the SFT model: the head is new, the body is the LM's), so
it saves and loads with ``save_pretrained``/``from_pretrained`` like any Hugging Face model.

Bradley–Terry (1952): ``P(x_w ≻ x_l) = σ(r_θ(x_w) − r_θ(x_l))``. Training on pairs ``(x_w, x_l)``
(:mod:`agentgym.trainers.llm.preferences`: from env rollouts, best vs worst episode of a task, or from
a JSONL file) minimises the negative log-likelihood::

    L(θ) = −mean log σ(r_θ(x_w) − r_θ(x_l))  +  c · mean (r_θ(x_w) + r_θ(x_l))²

where the second term (``center_rewards_coefficient`` c, Eisenstein et al. 2023; default 0) keeps
rewards centred on 0. Reported on held-out pairs (``eval_fraction``): ``accuracy``, the fraction
ranked correctly (``r(x_w) > r(x_l)``; a tie counts as wrong), and ``margin``, the mean
``r(x_w) − r(x_l)``.

Transcripts longer than ``max_length`` tokens keep their last ``max_length`` tokens: the agent's
final actions, where the decision is, stay in view.

Usage::

    trainer = RewardModelTrainer("runs/sft/final", RewardModelConfig(tasks=512), out_dir="runs/rm")
    trainer.learn()
    rm = RewardModel.from_pretrained("runs/rm/final")
    rm.score_episodes(episodes)  # one float per episode
"""

from __future__ import annotations

import contextlib
import copy
import random
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import Tensor

from agentgym.trainers.llm.config import AdamWConfig
from agentgym.trainers.llm.preferences import (
    PairsConfig,
    PreferencePair,
    check_model_path,
    read_pairs,
    rollout_pairs,
    split_pairs,
)
from agentgym.trainers.llm.rollout import Episode
from agentgym.trainers.llm.trainer import LLMTrainer
from agentgym.trainers.models.policy import LLMPolicy

__all__ = ["RewardModel", "RewardModelConfig", "RewardModelTrainer", "bradley_terry_loss"]

DEFAULT_MAX_LENGTH = 1024


def bradley_terry_loss(chosen: Tensor, rejected: Tensor) -> Tensor:
    """``−mean log σ(r_chosen − r_rejected)``: the Bradley–Terry negative log-likelihood of the preferences."""
    return -F.logsigmoid(chosen - rejected).mean()


class RewardModel:
    """A sequence-classification transformer with one output, scoring chat transcripts.

    Build with :meth:`from_pretrained` (a causal LM or a saved reward model) or :meth:`from_policy`.
    """

    def __init__(self, model: Any, tokenizer: Any, *, max_length: int | None = None) -> None:
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                "the tokenizer has no chat template; set tokenizer.chat_template (a Jinja string) to score transcripts"
            )
        model.config.pad_token_id = tokenizer.pad_token_id
        self.model, self.tokenizer = model, tokenizer
        self.max_length = max_length or getattr(model.config, "reward_max_length", None) or DEFAULT_MAX_LENGTH

    @classmethod
    def from_pretrained(
        cls, name_or_path: str | Path, *, dtype: torch.dtype | None = None, max_length: int | None = None
    ) -> RewardModel:
        """Load a saved reward model, or start one from a causal LM checkpoint (its body plus a new head)."""
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        check_model_path(name_or_path, "reward model")
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        new_head = not _is_reward_model(name_or_path)
        with _quiet_transformers() if new_head else contextlib.nullcontext():  # "score.weight newly initialized"
            model = AutoModelForSequenceClassification.from_pretrained(
                name_or_path, num_labels=1, dtype=dtype or torch.float32
            )
        return cls(model, tokenizer, max_length=max_length)

    @classmethod
    def from_policy(cls, policy: LLMPolicy, *, max_length: int | None = None) -> RewardModel:
        """A reward model whose body is a copy of ``policy``'s transformer and whose head is new."""
        from transformers import AutoModelForSequenceClassification

        config = copy.deepcopy(policy.model.config)
        config.num_labels = 1
        config.architectures = None
        model = AutoModelForSequenceClassification.from_config(config).to(policy.model.dtype)
        model.base_model.load_state_dict(policy.model.base_model.state_dict())
        return cls(model.to(policy.device), copy.deepcopy(policy.tokenizer), max_length=max_length)

    def save_pretrained(self, path: str | Path) -> None:
        self.model.config.reward_max_length = self.max_length
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id)

    def encode(self, transcript: list[dict[str, str]]) -> list[int]:
        """Token ids of the rendered transcript (its last ``max_length`` tokens)."""
        text = self.tokenizer.apply_chat_template(transcript, tokenize=False, add_generation_prompt=False)
        return self.tokenizer.encode(text, add_special_tokens=False)[-self.max_length :]

    def rewards(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """``r_θ`` of each right-padded row, read at its last attended token (differentiable)."""
        model = self.model
        if hasattr(model, "score"):  # decoder models: run the head at one position per row only
            hidden = model.base_model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            last = attention_mask.sum(1) - 1
            pooled = hidden[torch.arange(len(input_ids), device=hidden.device), last]
            return model.score(pooled).squeeze(-1).float()
        return model(input_ids=input_ids, attention_mask=attention_mask).logits.squeeze(-1).float()

    def batch_rewards(self, sequences: Sequence[list[int]]) -> Tensor:
        """``r_θ`` of token-id sequences in one forward pass (differentiable)."""
        batch = _pad(sequences, self.pad_id, self.device)
        return self.rewards(batch["input_ids"], batch["attention_mask"])

    @torch.inference_mode()
    def score(self, transcripts: Sequence[list[dict[str, str]]], *, batch_size: int = 32) -> list[float]:
        """One reward per transcript (chat messages), computed in batches of similar length."""
        ids = [self.encode(t) for t in transcripts]
        return self.score_ids(ids, batch_size=batch_size)

    @torch.inference_mode()
    def score_ids(self, sequences: Sequence[list[int]], *, batch_size: int = 32) -> list[float]:
        """One reward per token-id sequence, in batches of similar length (no gradient)."""
        was_training = self.model.training
        self.model.eval()
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
        scores = [0.0] * len(sequences)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            for i, r in zip(chunk, self.batch_rewards([sequences[i] for i in chunk]).tolist(), strict=True):
                scores[i] = r
        self.model.train(was_training)
        return scores

    def score_episodes(self, episodes: Sequence[Episode], *, system_prompt: str | None = None) -> list[float]:
        """One reward per episode, scoring ``episode.transcript(system_prompt)`` (ends with the last action)."""
        return self.score([ep.transcript(system_prompt) for ep in episodes])


class RewardModelConfig(AdamWConfig, PairsConfig):
    """Reward-model training: where the pairs come from (:class:`PairsConfig`), and the optimisation
    (:class:`~agentgym.trainers.llm.config.AdamWConfig`; defaults suit 0.5–8 B models)."""

    policy: str | None = Field(
        None,
        description="Model that plays the rollouts (path or hub id); None: the model the reward model starts from.",
    )
    epochs: int = Field(2, ge=1, description="Passes over the training pairs.")
    batch_size: int = Field(16, ge=1, description="Pairs per optimizer step.")
    micro_batch_size: int = Field(16, ge=1, description="Pairs per forward/backward (gradients accumulate).")
    learning_rate: float = Field(1e-5, gt=0, description="AdamW learning rate (the ~1 M-param tiny model: 1e-4).")
    max_length: int = Field(DEFAULT_MAX_LENGTH, ge=8, description="Tokens kept per transcript (the last ones).")
    center_rewards_coefficient: float = Field(0.0, ge=0, description="c in c · mean (r_w + r_l)²; 0: off.")
    eval_fraction: float = Field(0.2, ge=0, lt=1, description="Share of pairs held out for accuracy and margin.")
    seed: int = 0


class RewardModelTrainer(LLMTrainer):
    """``RewardModelTrainer(model, config, out_dir=...).learn()``: Bradley–Terry training on preference pairs;
    returns the trainer (its metric rows are ``.metrics``).

    ``model`` is a path or hub id (a causal LM, e.g. the SFT model, or a saved reward model), an
    :class:`LLMPolicy` (its weights start the reward model; it also plays the rollouts) or a
    :class:`RewardModel`. ``pairs`` overrides ``config.data`` and the rollouts. Writes
    ``metrics.jsonl``/``.csv``, ``learning_curve.png``, ``config.json`` and ``final/`` under ``out_dir``. The run
    directory, optimizer and loop are :class:`~agentgym.trainers.llm.trainer.LLMTrainer`'s.
    """

    algorithm = "reward_model"
    label = "reward model"
    config_class = RewardModelConfig
    curve_keys = ("loss", "accuracy", "eval_accuracy", "eval_margin")
    resumable = False
    config: RewardModelConfig

    def __init__(
        self,
        model: RewardModel | LLMPolicy | str | Path,
        config: RewardModelConfig | None = None,
        *,
        out_dir: str | Path | None = None,
        pairs: Sequence[PreferencePair] | None = None,
        **overrides: Any,
    ) -> None:
        super().__init__(config, out_dir=out_dir, **overrides)
        cfg = self.config
        self._pairs = list(pairs) if pairs is not None else None
        rollouts = self._pairs is None and cfg.data is None
        if self._pairs is None and cfg.data is not None and not Path(cfg.data).is_file():
            raise FileNotFoundError(f"no preference-pairs file at {cfg.data} (RewardModelConfig.data)")
        if isinstance(model, str | Path):
            check_model_path(model, "model")
        if rollouts and cfg.policy is not None:
            check_model_path(cfg.policy, "rollout policy")
        if rollouts and cfg.policy is None and (isinstance(model, RewardModel) or _is_reward_model(model)):
            raise ValueError(
                f"{model} is a reward model, which cannot play the rollouts: set RewardModelConfig.policy "
                "(the model that plays them) or RewardModelConfig.data (a JSONL of pairs)"
            )
        self.player: LLMPolicy | None = model if isinstance(model, LLMPolicy) else None
        torch.manual_seed(cfg.seed)  # a new score head is drawn from the seed: the same run gives the same model
        if isinstance(model, RewardModel):
            self.reward_model = model
        elif isinstance(model, LLMPolicy):
            self.reward_model = RewardModel.from_policy(model, max_length=cfg.max_length)
        else:
            self.reward_model = RewardModel.from_pretrained(model, max_length=cfg.max_length)
        self.reward_model.max_length = cfg.max_length
        source = model.model if isinstance(model, LLMPolicy | RewardModel) else None
        self.base_model = str(model) if source is None else str(source.name_or_path)
        if rollouts and (cfg.policy is not None or self.player is None):
            self.player = LLMPolicy.from_pretrained(cfg.policy or self.base_model)
        self.make_optimizer(self.reward_model.model.parameters())
        self.evaluation: dict[str, float] = {}
        self.num_pairs: dict[str, int] = {}

    def preference_pairs(self) -> list[PreferencePair]:
        """The training data: ``pairs`` if given, else the JSONL ``data``, else pairs from env rollouts."""
        cfg = self.config
        if self._pairs is not None:
            return self._pairs
        if cfg.data is not None:
            return read_pairs(cfg.data)
        assert self.player is not None
        return rollout_pairs(self.player, cfg, cfg.seed)

    def train_steps(self, steps: int | None = None) -> Iterator[dict[str, Any]]:
        """``epochs`` over the training pairs; the held-out pairs are evaluated before training (row 0) and after
        each epoch."""
        cfg, rm = self.config, self.reward_model
        torch.manual_seed(cfg.seed)
        pairs = self.preference_pairs()
        train, held_out = split_pairs(pairs, cfg.eval_fraction, cfg.seed)
        self.num_pairs = {"train": len(train), "eval": len(held_out)}
        train_ids = [(rm.encode(p.chosen), rm.encode(p.rejected)) for p in train]
        eval_ids = [(rm.encode(p.chosen), rm.encode(p.rejected)) for p in held_out]
        if eval_ids:
            self.log({"step": 0, "epoch": 0, **self._evaluate(eval_ids)})
        rng = random.Random(cfg.seed)
        self.set_total(cfg.epochs * -(-len(train_ids) // cfg.batch_size))
        t0 = time.perf_counter()
        for epoch in range(1, cfg.epochs + 1):
            order = train_ids[:]
            rng.shuffle(order)
            for start in range(0, len(order), cfg.batch_size):
                row = {"step": self.step + 1, "epoch": epoch, **self.train_step(order[start : start + cfg.batch_size])}
                row["time"] = time.perf_counter() - t0
                if start + cfg.batch_size >= len(order) and eval_ids:
                    row.update(self._evaluate(eval_ids))
                yield row

    def on_train_end(self) -> None:
        self.evaluation = {k: v for k, v in self.metrics[-1].items() if k.startswith("eval_")}

    def postfix(self, row: dict[str, Any]) -> dict[str, str]:
        return {"loss": f"{row['loss']:.3f}", "accuracy": f"{row['accuracy']:.2f}"}

    def curve_title(self) -> str:
        return "Bradley–Terry reward model"

    def save(self, path: str | Path) -> None:
        """Save the reward model (Hugging Face format)."""
        self.reward_model.save_pretrained(path)

    def evaluate(self, pairs: Sequence[PreferencePair]) -> dict[str, float]:
        """``eval_loss``, ``eval_accuracy`` (share ranked correctly) and ``eval_margin`` on ``pairs``."""
        rm = self.reward_model
        return self._evaluate([(rm.encode(p.chosen), rm.encode(p.rejected)) for p in pairs])

    # ------------------------------------------------------------------ internals

    def train_step(self, batch: list[tuple[list[int], list[int]]]) -> dict[str, float]:
        """One AdamW step on a batch of (chosen, rejected) token ids; returns its metrics."""
        cfg, rm = self.config, self.reward_model
        rm.model.eval()  # dropout off (TRL's disable_dropout); gradients flow as usual

        def loss(chunk: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
            rewards = rm.batch_rewards([c for c, _ in chunk] + [r for _, r in chunk])
            chosen, rejected = rewards[: len(chunk)], rewards[len(chunk) :]
            value = bradley_terry_loss(chosen, rejected)
            if cfg.center_rewards_coefficient:
                value = value + cfg.center_rewards_coefficient * ((chosen + rejected) ** 2).mean()
            return value * len(chunk) / len(batch), (chosen.detach(), rejected.detach())

        grad_norm, stats = self.optimizer_step(list(_chunks(batch, cfg.micro_batch_size)), loss)
        self.end_step()
        chosen, rejected = (torch.cat(part) for part in zip(*stats, strict=True))
        return {
            **_pair_metrics(chosen, rejected),
            "grad_norm": float(grad_norm),
            "lr": self.optimizer.param_groups[0]["lr"],
        }

    def _evaluate(self, pairs: list[tuple[list[int], list[int]]]) -> dict[str, float]:
        rm = self.reward_model
        scores = torch.tensor(rm.score_ids([c for c, _ in pairs] + [r for _, r in pairs]))
        chosen, rejected = scores[: len(pairs)], scores[len(pairs) :]
        return {f"eval_{k}": v for k, v in _pair_metrics(chosen, rejected).items()}

    def run_info(self) -> dict[str, Any]:
        """``config.json``'s entries besides the algorithm and the provenance."""
        return {"config": self.config.model_dump(mode="json"), "base_model": self.base_model, "pairs": self.num_pairs}


def _pair_metrics(chosen: Tensor, rejected: Tensor) -> dict[str, float]:
    return {
        "loss": float(bradley_terry_loss(chosen, rejected)),
        "accuracy": float((chosen > rejected).float().mean()),
        "margin": float((chosen - rejected).mean()),
        "chosen_reward": float(chosen.mean()),
        "rejected_reward": float(rejected.mean()),
    }


def _is_reward_model(model: Any) -> bool:
    """Whether a path or hub id holds a sequence classifier (a saved reward model) rather than a causal LM."""
    if not isinstance(model, str | Path):
        return False
    from transformers import AutoConfig

    architectures = AutoConfig.from_pretrained(model).architectures or []
    return any(a.endswith("ForSequenceClassification") for a in architectures)


def _chunks(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _pad(sequences: Sequence[list[int]], pad_id: int, device: torch.device) -> dict[str, Tensor]:
    width = max(len(s) for s in sequences)
    input_ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, s in enumerate(sequences):
        input_ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        attention_mask[i, : len(s)] = 1
    return {"input_ids": input_ids.to(device), "attention_mask": attention_mask.to(device)}


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    from transformers.utils import logging

    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level)
