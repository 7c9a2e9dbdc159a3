"""The example notebooks run offline, top to bottom, so they cannot rot."""

import re
from pathlib import Path

import pytest

from agentgym.core.registration import ENV_IDS

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.ipynb")), ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = "".join(
        o.get("text", "") for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
    )
    errors = [o for cell in nb.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    if path.name == "00_quick_start.ipynb":
        assert "episode over: return 1.5, success True" in outputs  # tolerant formats, then a correct answer
        assert "unknown tool 'get_wether'. Did you mean 'get_weather'?" in outputs  # an error, not an exception
        assert "Discrete(4) actions, Discrete(13) observations" in outputs
        assert "oracle: success 100%, mean return 1.50 over 100 test tasks" in outputs
        random_success = int(re.search(r"random: success (\d+)%", outputs)[1])
        assert random_success < 50, random_success
        assert all(env_id in outputs for env_id in ENV_IDS)
    elif path.name == "01_weather_run.ipynb":
        assert "return 1.5 success True" in outputs
        assert "test split: success 100%" in outputs
    elif path.name == "02_classic_rl_cliffwalk.ipynb":
        found = re.findall(r"^(.+): greedy return (-?\d+), path length (\d+), (.+)$", outputs, re.MULTILINE)
        greedy = {name: (int(ret), int(length), outcome) for name, ret, length, outcome in found}
        assert set(greedy) == {"Q-learning", "SARSA", "REINFORCE", "PPO"}, found
        assert all(outcome == "reaches the goal" and ret == -length for ret, length, outcome in greedy.values()), greedy
        assert greedy["Q-learning"][0] == -13  # off-policy: the optimal path along the cliff edge
        assert greedy["SARSA"][0] < -13  # on-policy under ε-greedy: a longer, safer path
        llm = [int(x) for x in re.search(r"mean return of the sampled walks.*: \[(.*)\]", outputs)[1].split(",")]
        assert llm[0] <= -60 and sum(llm[-2:]) / 2 >= llm[0] + 30, llm  # GRPO: it stops falling off the cliff
        assert re.search(r"LLM \(8 GRPO steps\): greedy return -?\d+, \d+ moves", outputs)
    elif path.name == "03_llm_grpo_weatherrun.ipynb":
        assert "before SFT: format compliance 0%" in outputs
        compliance = int(re.search(r"after SFT: format compliance (\d+)%", outputs)[1])
        assert compliance >= 80, compliance
        assert '⟦<tool_call>{"name": "get_weather"' in outputs  # the policy's tokens (loss mask 1), bracketed
        assert re.search(r"advantage \+\d", outputs)  # a group whose rewards differ has a positive advantage
        assert "after 6 GRPO steps" in outputs
    elif path.name == "04_benchmark_endpoint.ipynb":
        assert "oracle through the endpoint: success 100%, 0 failed episodes" in outputs
        assert "same results at concurrency 1 and 8: True" in outputs
        speedup = float(re.search(r"speed-up at concurrency 8: ([\d.]+)x", outputs)[1])
        assert speedup > 2, speedup  # 30 ms a request: ~8x ideal, ~4-5x measured on a busy 2-core machine
        assert "killed with 10 episodes on disk" in outputs
        assert "resumed: played 14 more episodes, none of the 10 on disk again: True" in outputs
        assert "resumed summary equals the uninterrupted run's: True" in outputs
        assert re.search(r"untrained tiny model: success \d+% .* 0 failed", outputs)
    elif path.name == "05_sql_agent.ipynb":
        assert "before: success False" in outputs
        assert "handful before: 0 of 4 answered correctly" in outputs
        learnt = int(re.search(r"handful after: (\d) of 4 answered correctly", outputs)[1])
        assert learnt >= 2, learnt  # tests/test_sql_agent.py asserts the same on 3 seeds
        assert "per-tag chart saved" in outputs
