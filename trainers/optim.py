"""The optimizer the LLM trainers share: AdamW with a linear learning-rate warm-up."""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["adamw_with_warmup"]


def adamw_with_warmup(
    params: Iterable[torch.nn.Parameter],
    lr: float,
    warmup_steps: int = 0,
    *,
    betas: tuple[float, float] = (0.9, 0.999),
    weight_decay: float = 0.0,
) -> tuple[torch.optim.AdamW, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW whose learning rate rises linearly over ``warmup_steps`` steps, then stays at ``lr``.

    Call ``scheduler.step()`` after every ``optimizer.step()``.
    """
    optimizer = torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0
    )
    return optimizer, scheduler
