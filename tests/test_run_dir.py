"""The run directory, the episode log, the shared config pieces, the trainer registry and the CLI's budget flags."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

import agentgym
from agentgym.app.cli import _budget_settings, main
from agentgym.core.episode import EpisodeRecord
from agentgym.trainers import TRAINERS, trainer_spec
from agentgym.trainers.llm.config import AdamWConfig, CheckpointConfig, EnvConfig, EvalConfig, OptimizerConfig
from agentgym.trainers.llm.rollout import Episode, Sample
from agentgym.trainers.run.run_dir import EpisodeLog, RunDir


def test_a_run_directory_writes_config_with_provenance_and_names_its_files(tmp_path):
    run = RunDir(tmp_path / "run")
    file = run.write_config("grpo", config={"steps": 3}, reference="base", world_size=1)
    info = json.loads(file.read_text())
    assert list(info) == ["algorithm", "config", "reference", "world_size", "package_version"]  # the saved format
    assert info["package_version"] == agentgym.__version__ and info["config"] == {"steps": 3}
    assert run.read_config("grpo") == info
    with pytest.raises(ValueError, match="is a grpo run, not sft"):
        run.read_config("sft")
    assert run.final == tmp_path / "run" / "final"
    assert run.checkpoint(42) == tmp_path / "run" / "checkpoints" / "step-000042"
    assert run.latest_checkpoint() is None
    with run.metrics(step_key="step") as metrics:
        for step in (1, 2, 3):
            metrics.write({"step": step, "loss": 1.0 / step})
    assert (run.path / "metrics.csv").read_text().splitlines()[0] == "step,loss"
    with run.metrics(step_key="step", resume_after=2) as metrics:  # a resumed run keeps the rows up to its checkpoint
        assert [r["step"] for r in metrics.rows] == [1, 2]
    assert run.plot("GRPO", metrics.rows, keys=("loss",)).name == "learning_curve.png"


def episode(reward: float) -> Episode:
    ep = Episode({"seed": 1}, observations=["task", "done"], actions=["answer(\ud800)"], rewards=[reward])
    ep.reward_components, ep.canonical, ep.valid = [{"correct": reward}], [True], [True]
    ep.success, ep.terminated = reward > 0, True
    ep.samples.append(Sample([1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 1, 1], [0.0] * 6))
    return ep


def test_the_episode_log_queues_a_step_writes_valid_utf8_and_trims_on_resume(tmp_path):
    log = EpisodeLog(tmp_path / "episodes.jsonl")
    for step in (1, 2, 3):
        log.record(step, [episode(1.0), episode(0.0)], [[1.5], [0.0]], model_scores=[0.5, -0.5])
        assert len(log.pending) == 2
        log.append(log.take())
        assert log.pending == []
    records = [EpisodeRecord.from_line(line) for line in log.path.read_text(encoding="utf-8").splitlines()]
    assert [r.training_step for r in records] == [1, 1, 2, 2, 3, 3] and records[0].actions == ["answer(\ufffd)"]
    assert (records[0].training_reward, records[0].total_reward, records[1].rm_reward) == (1.5, 1.0, -0.5)
    assert records[0].observations == ["task", "done"] and records[0].reward_components == [{"correct": 1.0}]
    assert records[0].completion_tokens == 4 and records[0].terminated  # the policy's tokens; the outcome
    with log.path.open("ab") as f:
        f.write(b'{"training_step": 4, "act')  # killed mid-write
    log.trim(2)
    assert [json.loads(line)["training_step"] for line in log.path.read_text().splitlines()] == [1, 1, 2, 2]
    log.path.write_bytes(b'{"step": 1}\n{"step": 3}\n')  # a log written before the episode record: "step"
    log.trim(2)
    assert log.path.read_bytes() == b'{"step": 1}\n'
    log.path.write_bytes(b'{"step": 1}\nnot json\n')
    with pytest.raises(ValueError, match=r"episodes.jsonl:2: not a logged episode"):
        log.trim(2)


def test_the_configs_compose_the_shared_pieces_and_keep_each_trainers_defaults():
    from agentgym.trainers import DPOConfig, GRPOConfig, LLMPPOConfig, RewardModelConfig, SFTConfig

    for config in (GRPOConfig, LLMPPOConfig, SFTConfig, DPOConfig):
        assert issubclass(config, EvalConfig) and issubclass(config, OptimizerConfig)
    assert issubclass(RewardModelConfig, EnvConfig) and not issubclass(RewardModelConfig, EvalConfig)
    assert all(issubclass(c, AdamWConfig) for c in (GRPOConfig, DPOConfig, RewardModelConfig))
    assert not issubclass(SFTConfig, AdamWConfig) and "weight_decay" not in SFTConfig.model_fields  # as before
    assert issubclass(SFTConfig, CheckpointConfig) and issubclass(GRPOConfig, CheckpointConfig)
    # each trainer's own defaults, as they were before the pieces existed
    learning_rates = {GRPOConfig: 1e-6, LLMPPOConfig: 1e-6, SFTConfig: 2e-5, DPOConfig: 1e-6, RewardModelConfig: 1e-5}
    assert {c: c().learning_rate for c in learning_rates} == learning_rates
    assert (GRPOConfig().checkpoint_every, SFTConfig().checkpoint_every) == (50, 100)
    assert GRPOConfig().adam_betas == (0.9, 0.99) and "adam_betas" not in DPOConfig.model_fields
    # flat fields: a nested piece would break config.json and --set key=value
    dumped = GRPOConfig().model_dump()
    assert {"env_id", "eval_split", "learning_rate", "checkpoint_every", "num_generations"} <= set(dumped)


def test_evaluate_split_takes_the_eval_piece_not_any_object():
    from agentgym.trainers.llm.rollout import evaluate_split

    with pytest.raises(TypeError, match="EvalConfig"):
        evaluate_split(None, SimpleNamespace(env_id="agentgym/WeatherRun-v0"))  # type: ignore[arg-type]


def test_one_registry_serves_python_and_the_cli_and_loads_trainers_lazily():
    code = (
        "import sys, agentgym.trainers as t, agentgym.app.cli\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'heavy import'\n"
        "from agentgym.trainers import GRPO, SFT, DPO, PPO, QLearning, SARSA, REINFORCE, LLMPPO, RewardModelTrainer\n"
        "from agentgym.trainers.llm.grpo import GRPO as G\n"
        "assert GRPO is G and QLearning.__module__ == 'agentgym.trainers.classic.tabular'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    assert set(TRAINERS) == {"q-learning", "sarsa", "reinforce", "ppo", "sft", "grpo", "llm-ppo", "dpo", "reward-model"}
    trainer, config = trainer_spec("dpo").load()
    assert trainer.__name__ == "DPO" and "rounds" in config.model_fields
    with pytest.raises(ValueError, match="unknown algorithm 'nope'"):
        trainer_spec("nope")


def _args(**flags: int) -> argparse.Namespace:
    return argparse.Namespace(**{f: flags.get(f) for f in ("episodes", "timesteps", "steps", "rounds", "tasks")})


def test_a_budget_flag_sets_the_config_field_of_its_own_name(capsys):
    dpo, rm = TRAINERS["dpo"], TRAINERS["reward-model"]
    dpo_fields, rm_fields = (set(s.load()[1].model_fields) for s in (dpo, rm))
    assert _budget_settings(dpo, _args(rounds=3, tasks=64), dpo_fields) == {"rounds": 3, "tasks": 64}
    assert capsys.readouterr().err == ""
    # the old spellings are gone: each is the one-line error of a flag that sets nothing
    with pytest.raises(ValueError, match=r"--steps is not a setting of dpo \(its budget flags: --rounds, --tasks\)"):
        _budget_settings(dpo, _args(steps=2), dpo_fields)
    with pytest.raises(ValueError, match="--episodes is not a setting of reward-model"):
        _budget_settings(rm, _args(episodes=128), rm_fields)


def test_a_flag_that_sets_nothing_is_a_one_line_error(tmp_path, capsys):
    assert main(["train", "grpo", "--rounds", "2", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--rounds is not a setting of grpo (its budget flags: --steps)" in err and len(err.splitlines()) == 1
    assert main(["train", "q-learning", "--steps", "5", "--out", str(tmp_path)]) == 2
    assert "--steps is not a setting of q-learning" in capsys.readouterr().err
    assert not (tmp_path / "config.json").exists()


def test_a_bug_inside_a_command_keeps_its_traceback(monkeypatch, tmp_path, capsys):
    import agentgym.trainers.classic.runs

    def buggy(*args, **kwargs):
        return None + 1  # a TypeError the user did not cause

    monkeypatch.setattr(agentgym.trainers.classic.runs, "train", buggy)
    with pytest.raises(TypeError, match="unsupported operand"):
        main(["train", "q-learning", "--episodes", "3", "--out", str(tmp_path)])
    # what a user gets wrong is still one line: a keyword the env does not take
    assert main(["train", "grpo", "--set", 'env_kwargs={"colour": 1}', "--out", str(tmp_path)]) == 2
    assert "unexpected keyword argument 'colour' in env_kwargs" in capsys.readouterr().err
