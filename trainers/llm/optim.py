"""The optimizer the LLM trainers share: AdamW with a linear learning-rate warm-up, then a constant or a cosine
learning rate."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import torch

__all__ = ["adamw_with_warmup"]


def adamw_with_warmup(
    params: Iterable[torch.nn.Parameter],
    lr: float,
    warmup_steps: int = 0,
    *,
    betas: tuple[float, float] = (0.9, 0.999),
    weight_decay: float = 0.0,
    schedule: str = "constant",
    horizon: Callable[[], int | None] | None = None,
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW whose learning rate rises linearly over ``warmup_steps`` steps, then stays at ``lr`` (``schedule=
    "constant"``) or follows a half cosine from ``lr`` down to 0 at step ``horizon()`` (``"cosine"``; the run's
    total steps, read at every step, so a budget set after the optimizer is made still counts; without one the rate
    stays constant).

    Call ``scheduler.step()`` after every ``optimizer.step()``.
    """
    if schedule not in ("constant", "cosine"):
        raise ValueError(f"schedule must be 'constant' or 'cosine', not {schedule!r}")

    def factor(step: int) -> float:
        rate = min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0
        total = horizon() if schedule == "cosine" and horizon is not None else None
        return rate * 0.5 * (1 + math.cos(math.pi * min(step, total) / total)) if total else rate

    optimizer = torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
