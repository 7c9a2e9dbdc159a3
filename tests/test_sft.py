"""SFT: checkpoints every N steps, and a stopped run resumes to the same weights as one that was never stopped."""

from __future__ import annotations

import json

import pytest
import torch

from agentgym.trainers.llm.sft import SFT, SFTConfig

CONFIG = {
    "episodes": 24,
    "batch_size": 8,
    "epochs": 2,
    "learning_rate": 1e-3,
    "checkpoint_every": 2,
    "eval_split": None,
    "rollout": {"context": "summary", "turn_template": "{summary}", "max_turns": 4},
}


def _weights(trainer: SFT) -> list[torch.Tensor]:
    return [p.detach().clone() for p in trainer.policy.model.parameters()]


def test_a_stopped_run_resumes_to_the_same_weights(tiny_model_path, tmp_path):
    whole = SFT(tiny_model_path, SFTConfig(**CONFIG), out_dir=tmp_path / "whole")
    assert whole.learn(progress_bar=False) is whole  # learn() returns the trainer, as SB3's returns the model
    rows = whole.metrics
    assert rows[-1]["step"] == whole.step > 4  # two epochs of the demonstrations
    assert (tmp_path / "whole" / "checkpoints" / "step-000002" / "trainer_state.pt").is_file()

    stopped = SFT(tiny_model_path, SFTConfig(**CONFIG), out_dir=tmp_path / "stopped")
    stopped.learn(callback=lambda trainer, row: row["step"] < 3, progress_bar=False)  # killed after step 3
    assert stopped.step == 3
    resumed = SFT.resume(tmp_path / "stopped")
    assert resumed.step == 2  # the last checkpoint: step 3 is done again
    rows = resumed.learn(progress_bar=False).metrics
    assert [r["step"] for r in rows] == list(range(1, whole.step + 1))  # metrics.jsonl has every step once
    for a, b in zip(_weights(whole), _weights(resumed), strict=True):
        assert torch.equal(a, b)


def test_resume_needs_a_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        SFT.resume(tmp_path)


def test_learn_returns_the_trainer_and_the_metrics_are_in_the_run_dir(tiny_model_path, tmp_path):
    config = SFTConfig(**{**CONFIG, "episodes": 8, "epochs": 1, "checkpoint_every": 0})
    trainer = SFT(tiny_model_path, config, out_dir=tmp_path)
    assert trainer.learn(steps=1, progress_bar=False) is trainer  # ``steps`` stops any LLM trainer early
    assert trainer.step == 1 and trainer.stopped
    written = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in written] == [row["step"] for row in trainer.metrics] == [1]
    assert written[0]["loss"] == pytest.approx(trainer.metrics[0]["loss"])
    assert json.loads((tmp_path / "config.json").read_text())["algorithm"] == "sft"
    assert (tmp_path / "final" / "config.json").is_file() and (tmp_path / "learning_curve.png").is_file()
