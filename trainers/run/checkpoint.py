"""Checkpoints of LLM training runs: weights in Hugging Face format plus everything needed to resume.

A checkpoint directory holds the policy (``save_pretrained``: loadable by ``from_pretrained`` like
any model) and ``trainer_state.pt``: step, optimizer and scheduler state, and every random number
generator the run draws from (torch, Python, the sampling generator), so a resumed run continues
exactly where the stopped one was. The state is read with ``torch.load(weights_only=True)``: a crafted
file cannot run code on ``--resume``.
"""

from __future__ import annotations

import json
import pickle
import random
import shutil
from pathlib import Path
from typing import Any

import torch

from agentgym.trainers.models.policy import LLMPolicy

__all__ = ["latest_checkpoint", "load_trainer_state", "read_run_config", "save_checkpoint"]

STATE_FILE = "trainer_state.pt"
UNPICKLABLE = "it holds Python objects other than tensors, numbers, strings and containers; none was created"
STATE_KEYS = ("step", "optimizer", "scheduler", "torch_rng")  # and the RNGs a run draws from


def save_checkpoint(
    path: str | Path,
    policy: LLMPolicy,
    *,
    step: int,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    generator: torch.Generator | None = None,
    rng: random.Random | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write the policy and the trainer state under ``path`` (written to a temp dir, then renamed); the
    sampling ``generator`` and the Python ``rng`` are saved when the run has them."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    policy.save_pretrained(tmp)
    state = {
        "step": step,
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        **({"generator": generator.get_state()} if generator is not None else {}),
        **({"python_rng": rng.getstate()} if rng is not None else {}),
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
    generator: torch.Generator | None = None,
    rng: random.Random | None = None,
) -> dict[str, Any]:
    """Restore optimizer, scheduler and RNG states (``generator`` and ``rng`` where given) from a checkpoint;
    returns the saved state dict.

    A state that is damaged, crafted or from another run (an optimizer of other shapes) raises ``ValueError``
    naming the file."""
    file = Path(path) / STATE_FILE
    wanted = {"generator": generator, "python_rng": rng}
    keys = (*STATE_KEYS, *(key for key, given in wanted.items() if given is not None))
    state = _load_state(file, keys)
    try:
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        if generator is not None:
            generator.set_state(state["generator"])
        if rng is not None:
            rng.setstate(state["python_rng"])
    except Exception as exc:  # ValueError, TypeError, RuntimeError, KeyError: it does not fit this trainer
        raise ValueError(f"{file}: the saved state does not fit this trainer ({_first_line(exc)})") from None
    return state


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200]}" if lines else type(exc).__name__


def _load_state(file: Path, keys: tuple[str, ...] = STATE_KEYS) -> dict[str, Any]:
    """The trainer state, unpickled with torch's ``weights_only`` loader: tensors, numbers, strings and
    containers only, so a crafted file cannot run code. Any other content is refused, naming the file."""
    try:
        state = torch.load(file, weights_only=True)
    except Exception as exc:  # UnpicklingError for a forbidden object; others for a truncated or foreign file
        reason = UNPICKLABLE if isinstance(exc, pickle.UnpicklingError) else _first_line(exc)
        raise ValueError(f"{file}: not a trainer state this version can load safely ({reason})") from None
    if not isinstance(state, dict) or not set(keys) <= set(state):
        raise ValueError(f"{file}: not a trainer state (expected the entries {', '.join(keys)})")
    if type(state["step"]) is not int or state["step"] < 0:
        raise ValueError(f"{file}: not a trainer state (step {state['step']!r} is not a count)")
    if not _finite(state["optimizer"]):
        raise ValueError(f"{file}: the optimizer state holds NaN or infinite numbers (resuming would train on them)")
    return state


def _finite(value: Any) -> bool:
    """Whether every floating-point tensor in ``value`` (a tensor or a container of them) is finite."""
    if isinstance(value, torch.Tensor):
        return not value.is_floating_point() or bool(torch.isfinite(value).all())
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_finite(v) for v in value)
    return True


def read_run_config(run_dir: str | Path, algorithm: str) -> dict[str, Any]:
    """``RUN_DIR/config.json`` of a training run of ``algorithm`` (its ``config`` is the trainer's config);
    ``ValueError`` naming the file if it is damaged or from another trainer."""
    file = Path(run_dir) / "config.json"
    if not file.is_file():
        raise FileNotFoundError(f"no config.json in {run_dir}: not a training run directory")
    try:
        info = json.loads(file.read_bytes().decode("utf-8"))
    except ValueError as exc:  # not UTF-8, or not JSON
        raise ValueError(f"{file}: not a training run's config ({_first_line(exc)})") from None
    if not isinstance(info, dict) or not isinstance(info.get("config"), dict):
        raise ValueError(f"{file}: not a training run's config (no 'config' object)")
    if info.get("algorithm") != algorithm:
        raise ValueError(f"{run_dir} is a {info.get('algorithm')} run, not {algorithm}")
    return info


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The checkpoint with the highest step under ``RUN_DIR/checkpoints`` (None if there is none)."""
    found = sorted(Path(run_dir).glob(f"checkpoints/step-*/{STATE_FILE}"))
    return found[-1].parent if found else None
