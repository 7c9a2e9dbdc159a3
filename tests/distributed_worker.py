"""Run by tests/test_distributed.py under ``torchrun --nproc_per_node 2``: a few GRPO or PPO steps on the
toy env, then each rank saves its final weights for the test to compare."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentgym.trainers.llm.grpo import GRPO  # noqa: E402
from agentgym.trainers.llm.ppo import LLMPPO  # noqa: E402
from tests.test_grpo import tiny_config  # noqa: E402  (registers the toy env)
from tests.test_llm_ppo import ppo_config  # noqa: E402


def main(algorithm: str, model: str, out: str) -> None:
    torch.set_num_threads(1)
    if algorithm == "grpo":
        trainer = GRPO(model, tiny_config(tasks_per_step=4, num_generations=4, beta=0.1), out_dir=out)
    else:
        trainer = LLMPPO(model, ppo_config(episodes_per_step=16, beta=0.1), out_dir=out)
    assert trainer.world_size == 2, trainer.world_size
    trainer.learn(3, progress_bar=False)
    state = {k: v.detach().cpu() for k, v in trainer.scorer.state_dict().items()}
    torch.save(
        {"state": state, "distributed_type": str(trainer.accelerator.distributed_type), "envs": len(trainer.envs)},
        Path(out) / f"rank{trainer.rank}.pt",
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
