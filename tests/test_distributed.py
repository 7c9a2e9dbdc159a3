"""Two processes on CPU (torchrun + accelerate → DDP over gloo): the ranks share the work and end with
identical weights; only rank 0 writes files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("accelerate")

WORKER = Path(__file__).with_name("distributed_worker.py")


@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_two_ranks_end_with_identical_weights(algorithm, tiny_model_path, tmp_path):
    out = tmp_path / algorithm
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    with subprocess.Popen(
        [*cmd, str(WORKER), algorithm, str(tiny_model_path), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # so a hung run can be killed with all its ranks
    ) as done:
        try:
            _, stderr = done.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(done.pid, signal.SIGKILL)
            raise
    assert done.returncode == 0, stderr[-3000:]
    ranks = [torch.load(out / f"rank{r}.pt", weights_only=False) for r in (0, 1)]
    assert all(r["distributed_type"] == "DistributedType.MULTI_CPU" for r in ranks)
    a, b = ranks[0]["state"], ranks[1]["state"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    from safetensors.torch import load_file

    initial = load_file(str(Path(tiny_model_path) / "model.safetensors"))
    moved = [k for k in initial if not torch.equal(initial[k], a[f"model.{k}"])]
    assert moved, "training changed no weight"
    # each rank played half of the step's episodes; rank 0 alone wrote the run's files
    assert ranks[0]["envs"] == ranks[1]["envs"] == 8
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert json.loads((out / "config.json").read_text())["world_size"] == 2
    logged = (out / "episodes.jsonl").read_text().splitlines()
    assert len(logged) == 3 * 16  # both ranks' episodes, gathered
