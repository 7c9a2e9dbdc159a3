"""Files read back (checkpoints, Q-tables, saved agents) and records written by eval: never code execution,
never a traceback for a damaged file, never a run aborted by one episode's text."""

from __future__ import annotations

import pickle
import random

import gymnasium as gym
import numpy as np
import pytest
import torch

from agentgym.reports import EpisodeRecord, load_episodes, to_json
from agentgym.trainers import PPO, QLearning
from agentgym.trainers.checkpoint import STATE_FILE, load_trainer_state


class _Payload:
    """Unpickling this would create ``marker`` (the crafted ``trainer_state.pt`` of the attack)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_crafted_trainer_state_cannot_run_code(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / STATE_FILE).write_bytes(pickle.dumps({"step": 1, "optimizer": _Payload(str(marker)), "scheduler": {}}))
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    with pytest.raises(ValueError, match=STATE_FILE):
        load_trainer_state(
            tmp_path, optimizer=optimizer, scheduler=scheduler, generator=torch.Generator(), rng=random.Random(0)
        )
    assert not marker.exists()


@pytest.mark.parametrize("damage", ["empty", "truncated", "nan", "text"])
def test_damaged_q_tables_are_refused_with_the_file_named(tmp_path, damage):
    agent = QLearning(gym.make("agentgym/CliffWalk-v0"), seed=0)
    path = agent.save(tmp_path / "qtable.npz")
    data = path.read_bytes()
    if damage == "empty":
        path.write_bytes(b"")
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "text":
        path.write_text("not a q-table")
    else:
        agent.q[3, 1] = np.nan
        agent.save(path)
    with pytest.raises(ValueError, match="qtable.npz"):
        QLearning.load(path)


@pytest.mark.parametrize("damage", ["empty", "truncated", "pickle"])
def test_damaged_torch_agents_are_refused_with_the_file_named(tmp_path, damage):
    agent = PPO(gym.make("agentgym/CliffWalk-v0"), seed=0)
    path = agent.save(tmp_path / "model.pt")
    marker = tmp_path / "pwned"
    data = {"empty": b"", "truncated": path.read_bytes()[:100], "pickle": pickle.dumps(_Payload(str(marker)))}[damage]
    path.write_bytes(data)
    with pytest.raises(ValueError, match="model.pt"):
        PPO.load(path)
    assert not marker.exists()


def test_an_episode_with_a_lone_surrogate_is_written_and_read_back(tmp_path):
    record = EpisodeRecord(index=0, reset={"seed": 0}, observations=["obs"], actions=["mo\ud800ve"], rewards=[0.0])
    path = tmp_path / "episodes.jsonl"
    path.write_text(to_json(record) + "\n", encoding="utf-8")
    (back,) = load_episodes(path)
    assert back.actions == ["mo\ufffdve"] and back.index == 0
