"""Checkpoints of LLM training runs: weights in Hugging Face format plus everything needed to resume.

A checkpoint directory holds the policy (``save_pretrained``: loadable by ``from_pretrained`` like
any model) and ``trainer_state.pt``: step, optimizer and scheduler state, and every random number
generator the run draws from (torch, Python, the sampling generator), so a resumed run continues
exactly where the stopped one was. The state is read with ``torch.load(weights_only=True)``: a crafted
file cannot run code on ``--resume``.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import torch

from agentgym.llm import LLMPolicy

__all__ = ["latest_checkpoint", "load_trainer_state", "save_checkpoint"]

STATE_FILE = "trainer_state.pt"


def save_checkpoint(
    path: str | Path,
    policy: LLMPolicy,
    *,
    step: int,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    generator: torch.Generator,
    rng: random.Random,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write the policy and the trainer state under ``path`` (written to a temp dir, then renamed)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    policy.save_pretrained(tmp)
    state = {
        "step": step,
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "generator": generator.get_state(),
        "python_rng": rng.getstate(),
        "extra": extra or {},
    }
    torch.save(state, tmp / STATE_FILE)
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    return path


def load_trainer_state(
    path: str | Path,
    *,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    generator: torch.Generator,
    rng: random.Random,
) -> dict[str, Any]:
    """Restore optimizer, scheduler and RNG states from a checkpoint; returns the saved state dict."""
    state = _load_state(Path(path) / STATE_FILE)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    generator.set_state(state["generator"])
    rng.setstate(state["python_rng"])
    return state


def _load_state(file: Path) -> dict[str, Any]:
    """The trainer state, unpickled with torch's ``weights_only`` loader: tensors, numbers, strings and
    containers only, so a crafted file cannot run code. Any other content is refused, naming the file."""
    try:
        state = torch.load(file, weights_only=True)
    except Exception as exc:  # UnpicklingError for a forbidden object; others for a truncated or foreign file
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{file}: not a trainer state this version can load safely ({first[:200]})") from None
    if not isinstance(state, dict) or not {"step", "optimizer", "scheduler"} <= set(state):
        raise ValueError(f"{file}: not a trainer state (expected step, optimizer and scheduler entries)")
    return state


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The checkpoint with the highest step under ``RUN_DIR/checkpoints`` (None if there is none)."""
    found = sorted(Path(run_dir).glob(f"checkpoints/step-*/{STATE_FILE}"))
    return found[-1].parent if found else None
