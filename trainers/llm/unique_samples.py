"""Identical samples computed once: the GRPO update's batch, with per-turn advantages on the policy's tokens.

After SFT most turns of a group are the same tokens. :func:`unique_samples` merges every sample of the same tokens
whose per-turn advantages have the same signs into one :class:`UniqueSample` that counts its copies and sums their
advantages: exact for the clipped surrogate, since the copies' probability ratios are equal and the surrogate is
linear in the advantage for a fixed sign. :func:`token_advantages` lays a micro-batch's advantages on its tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from agentgym.trainers.llm.rollout import Episode, Sample, turn_spans

__all__ = ["UniqueSample", "sample_advantages", "token_advantages", "unique_samples"]


@dataclass
class UniqueSample:
    """A sample the update computes once for all its identical copies (same tokens, advantages of the same signs).

    ``advantage_sums[k]`` sums the copies' advantages of the sample's ``k``-th run of policy tokens (a turn)."""

    sample: Sample
    advantage_sums: list[float] = field(default_factory=lambda: [0.0])
    count: int = 0

    @property
    def advantages(self) -> list[float]:
        """The copies' mean advantage per turn (0 for the placeholder a rank with nothing to learn sends)."""
        return [a / max(self.count, 1) for a in self.advantage_sums]


def sample_advantages(episode: Episode, turn_advantages: list[float]) -> list[tuple[Sample, list[float]]]:
    """The episode's samples that hold policy tokens, each with one advantage per run of policy tokens.

    In ``summary`` mode sample ``i`` is turn ``i``; in ``append`` mode the one sample's runs are the turns. Should
    the runs not match the turns, every run gets the first turn's advantage (its return covers the episode)."""
    if len(episode.samples) == len(turn_advantages):
        pairs = [(s, [a] * len(turn_spans(s.loss_mask))) for s, a in zip(episode.samples, turn_advantages, strict=True)]
    else:
        runs = [len(turn_spans(s.loss_mask)) for s in episode.samples]
        if sum(runs) == len(turn_advantages):
            ends = [sum(runs[: i + 1]) for i in range(len(runs))]
            pairs = [(s, turn_advantages[e - n : e]) for s, n, e in zip(episode.samples, runs, ends, strict=True)]
        else:
            first = turn_advantages[0] if turn_advantages else 0.0
            pairs = [(s, [first] * n) for s, n in zip(episode.samples, runs, strict=True)]
    return [(s, a) for s, a in pairs if a]


def unique_samples(
    episodes: Sequence[Episode], advantages: Sequence[list[float]], skip: Sequence[bool] | None = None
) -> list[UniqueSample]:
    """The episodes' samples with their per-turn ``advantages``, identical ones merged (see the module docstring),
    shortest first (micro-batches of similar lengths pad little); episode ``i`` is left out where ``skip[i]``."""
    merged: dict[tuple, UniqueSample] = {}
    for i, (ep, turn_adv) in enumerate(zip(episodes, advantages, strict=True)):
        if skip is not None and skip[i]:
            continue
        for s, a in sample_advantages(ep, turn_adv):
            key = (tuple(x > 0 for x in a), tuple(s.input_ids), tuple(s.loss_mask))
            entry = merged.setdefault(key, UniqueSample(s, [0.0] * len(a)))
            entry.advantage_sums = [x + y for x, y in zip(entry.advantage_sums, a, strict=True)]
            entry.count += 1
    return sorted(merged.values(), key=lambda u: len(u.sample.input_ids))


def token_advantages(chunk: Sequence[UniqueSample], width: int) -> torch.Tensor:
    """A ``len(chunk) × width`` tensor holding each sample's per-turn advantage on that turn's tokens (0 elsewhere)."""
    rows = []
    for u in chunk:
        row = [0.0] * width
        for (start, end), a in zip(turn_spans(u.sample.loss_mask), u.advantages, strict=True):
            row[start:end] = [a] * (end - start)
        rows.append(row)
    return torch.tensor(rows)
