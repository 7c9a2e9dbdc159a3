"""A training run's directory: what every trainer (classic and LLM) writes there, in one place.

::

    RUN_DIR/config.json          {"algorithm": ..., <the trainer's entries>, "package_version": ...}
    RUN_DIR/metrics.jsonl|.csv   one row per episode or step (trainers.metrics.MetricsWriter); tb/ if installed
    RUN_DIR/learning_curve.png   the metrics' learning curves (trainers.plotting)
    RUN_DIR/checkpoints/step-N/  resumable checkpoints (LLM trainers; trainers.checkpoint)
    RUN_DIR/final/               the trained weights (LLM trainers)
    RUN_DIR/episodes.jsonl       every training episode of GRPO/PPO (:class:`EpisodeLog`), for ``agentgym audit``

Saved runs are read back by ``--resume`` and ``agentgym audit``, so these names and keys are a format.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import agentgym
from agentgym.core.episode import EpisodeRecord, append_episodes
from agentgym.trainers.run.metrics import MetricsWriter
from agentgym.trainers.run.plotting import plot_learning_curves

if TYPE_CHECKING:
    from agentgym.trainers.llm.rollout import Episode

__all__ = ["EpisodeLog", "RunDir"]

CONFIG_FILE = "config.json"
CURVE_FILE = "learning_curve.png"


class RunDir:
    """The files of one training run under ``path`` (created on first write)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    @property
    def final(self) -> Path:
        """Where the trained weights go (``final/``)."""
        return self.path / "final"

    def checkpoint(self, step: int) -> Path:
        """The directory of the checkpoint after ``step`` steps (``checkpoints/step-000042``)."""
        return self.path / "checkpoints" / f"step-{step:06d}"

    def write_config(self, algorithm: str, **entries: Any) -> Path:
        """Write ``config.json``: the algorithm, the trainer's ``entries`` (its config, reference model, ...)
        in the order given, and the provenance (package version)."""
        self.path.mkdir(parents=True, exist_ok=True)
        info = {"algorithm": algorithm, **entries, "package_version": agentgym.__version__}
        file = self.path / CONFIG_FILE
        file.write_text(json.dumps(info, indent=2) + "\n")
        return file

    def metrics(self, *, step_key: str = "step", resume_after: int | None = None) -> MetricsWriter:
        """The run's metrics writer (``metrics.jsonl``/``.csv``, TensorBoard); ``resume_after=N`` keeps the rows
        of the first N steps (a resumed run), see :class:`~agentgym.trainers.run.metrics.MetricsWriter`."""
        return MetricsWriter(self.path, step_key=step_key, resume_after=resume_after)

    def plot(
        self,
        label: str,
        rows: Sequence[Mapping[str, Any]],
        *,
        keys: Sequence[str],
        x: str = "step",
        window: int = 10,
        title: str | None = None,
        phases: Sequence[tuple[float, str]] = (),
    ) -> Path:
        """Draw ``learning_curve.png``: one panel per metric in ``keys`` (those the rows have), ``phases`` marked
        (see :func:`~agentgym.trainers.run.plotting.plot_learning_curves`)."""
        return plot_learning_curves(
            {label: rows}, self.path / CURVE_FILE, keys=keys, x=x, window=window, title=title, phases=phases
        )

    def read_config(self, algorithm: str) -> dict[str, Any]:
        """``config.json`` of a run of ``algorithm``; ``ValueError`` naming the file if it is damaged or another
        trainer's (see :func:`~agentgym.trainers.run.checkpoint.read_run_config`)."""
        from agentgym.trainers.run.checkpoint import read_run_config

        return read_run_config(self.path, algorithm)

    def latest_checkpoint(self) -> Path | None:
        """The checkpoint with the highest step (None if the run has none)."""
        from agentgym.trainers.run.checkpoint import latest_checkpoint

        return latest_checkpoint(self.path)


class EpisodeLog:
    """``RUN_DIR/episodes.jsonl``: one :class:`~agentgym.core.episode.EpisodeRecord` per training episode of an online
    LLM trainer (GRPO, PPO), with its observations and ``training_step``, read by ``agentgym audit RUN_DIR`` and
    ``agentgym data`` (the flywheel).

    :meth:`record` queues a step's episodes; :meth:`take` hands the queue over (a multi-process trainer gathers
    the ranks' queues); :meth:`append` writes records (:func:`~agentgym.core.episode.append_episodes`); :meth:`trim`
    prepares a resumed run.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.pending: list[EpisodeRecord] = []

    def record(
        self,
        step: int,
        episodes: Sequence[Episode],
        rewards: Sequence[Sequence[float]],
        model_scores: Sequence[float] | None = None,
    ) -> None:
        """Queue the episodes of training step ``step`` with their per-turn training ``rewards`` and, with a reward
        model, its scores."""
        for i, ep in enumerate(episodes):
            score = None if model_scores is None else model_scores[i]
            self.pending.append(ep.record(training_step=step, training_reward=sum(rewards[i]), rm_reward=score))

    def take(self) -> list[EpisodeRecord]:
        """The queued records, emptying the queue."""
        records, self.pending = self.pending, []
        return records

    def append(self, records: Sequence[EpisodeRecord]) -> None:
        """Append ``records`` to the file (a lone surrogate a model wrote into an action becomes U+FFFD, so no action
        can stop the log or the run)."""
        append_episodes(self.path, records)

    def trim(self, last_step: int) -> None:
        """On resume, drop the episodes of steps after ``last_step`` (they are played again), and a torn last line
        (the run was killed while writing it). The lines kept are kept byte for byte (a log written before the
        episode record stays as it was). A line that is not a logged episode raises ``ValueError`` naming the file
        and the line."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        lines = data[: data.rfind(b"\n") + 1].splitlines()
        keep = [line for n, line in enumerate(lines, 1) if line.strip() and self._step(n, line) <= last_step]
        self.path.write_bytes(b"".join(line + b"\n" for line in keep))

    def _step(self, n: int, line: bytes) -> int:
        try:
            data = json.loads(line.decode("utf-8"))
            step = data["training_step"] if "training_step" in data else data["step"]  # "step": an older log
        except (ValueError, KeyError, TypeError):  # not UTF-8, not JSON, not an object with a step
            step = None
        if type(step) is not int:
            raise ValueError(
                f"{self.path}:{n}: not a logged episode (expected a JSON object with an integer 'training_step')"
            )
        return step
