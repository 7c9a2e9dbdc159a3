"""The agentgym command: list, train → eval round trip, demo, and clear errors for bad settings."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentgym.app.cli import main


def test_list(capsys):
    assert main(["list"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("agentgym/CliffWalk-v0") and "cliff" in line


def test_train_then_eval_reports_greedy_return(tmp_path, capsys):
    out = tmp_path / "q"
    argv = ["train", "q-learning", "--episodes", "100", "--seed", "0", "--alpha", "0.5", "--gamma", "1"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    assert "greedy return from the seed's start: -13" in capsys.readouterr().out
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["episode"] for r in rows] == list(range(1, 101)) and rows[-1]["greedy_return"] == -13
    assert (out / "metrics.csv").read_text().splitlines()[0].startswith("episode,return,length")
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "config.json").read_text())["agent"]["alpha"] == 0.5

    argv = ["eval", "--agent", f"qtable:{out / 'qtable.npz'}", "--episodes", "3", "--out", str(out), "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["mean_return"] == -13 and report["success_rate"] == 1.0 and report["returns"] == [-13.0] * 3
    assert json.loads((out / "summary.json").read_text()) == report


@pytest.mark.parametrize("algorithm, budget", [("reinforce", ["--episodes", "1000"]), ("ppo", ["--timesteps", "5000"])])
def test_train_policy_gradient_then_eval_on_the_test_split(algorithm, budget, tmp_path, capsys):
    out = tmp_path / algorithm
    env = ["--env", "agentgym/WeatherRun-v0"]
    argv = ["train", algorithm, *env, "--env-kwargs", '{"split": "train"}', *budget, "--set", "eval_every=0"]
    assert main([*argv, "--out", str(out), "--no-progress"]) == 0
    assert json.loads((out / "config.json").read_text())["agent"]["eval_every"] == 0
    capsys.readouterr()
    argv = ["eval", *env, "--env-kwargs", '{"split": "test"}', "--agent", f"torch:{out / 'model.pt'}", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["episodes"] == 100 and report["success_rate"] >= 0.95


def test_eval_random_agent(capsys):
    assert main(["eval", "--agent", "random", "--episodes", "2", "--seed", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["episodes"] == 2 and report["mean_return"] < -13


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "sarsa", "--alpha", "2"], "invalid setting: alpha"),
        (["train", "sarsa", "--env-kwargs", '{"bad": 1}'], "unexpected keyword argument 'bad'"),
        (["train", "sarsa", "--env", "agentgym/Nope-v0"], "Nope"),
        (["eval", "--agent", "qtable:/does/not/exist.npz"], "No such file"),
        (["eval", "--agent", "telepathy"], "unknown agent spec"),
        (["train", "reinforce", "--set", "bogus=1"], "invalid setting: bogus"),
        (["train", "ppo", "--alpha", "0.5"], "invalid setting: alpha"),
    ],
)
def test_bad_settings_exit_2_with_a_message(argv, message, tmp_path, capsys):
    assert main([*argv, *(["--out", str(tmp_path)] if argv[0] == "train" else [])]) == 2
    assert message in capsys.readouterr().err


def test_bad_env_kwargs_json_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", "sarsa", "--env-kwargs", "{not json"])
    assert exc.value.code == 2 and "not valid JSON" in capsys.readouterr().err


def test_demo_writes_plots(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--episodes", "60", "--llm-steps", "0"]) == 0
    out = capsys.readouterr().out
    assert "q-learning: greedy return" in out and "sarsa: greedy return" in out
    assert "oracle          100%        1.500" in out
    for name in (
        "cliff_walk/learning_curves.png",
        "cliff_walk/greedy_paths.png",
        "cliff_walk/q-learning/qtable.npz",
        "cliff_walk/sarsa/metrics.csv",
        "weather_run/learning_curve.png",
        "weather_run/q-learning/qtable.npz",
    ):
        assert (tmp_path / name).stat().st_size > 0


def test_console_script():
    script = shutil.which("agentgym", path=str(Path(sys.executable).parent)) or shutil.which("agentgym")
    assert script, "the agentgym console script is not installed"
    out = subprocess.run([script, "list"], capture_output=True, text=True, check=True).stdout
    assert "agentgym/CliffWalk-v0" in out


def test_train_sft_then_grpo_with_the_tiny_model(tmp_path, capsys):
    sft = tmp_path / "sft"
    args = ["train", "sft", "--model", "tiny", "--episodes", "64", "--set", "eval_episodes=8", "--out", str(sft)]
    assert main([*args, "--no-progress"]) == 0
    assert "format compliance" in capsys.readouterr().out
    assert (sft / "final" / "model.safetensors").exists() and (sft / "final" / "tokenizer.json").exists()
    assert not (sft / "tiny").exists()  # the shipped base is loaded, not built
    grpo = tmp_path / "grpo"
    args = ["train", "grpo", "--model", str(sft / "final"), "--recipe", "tiny", "--steps", "2", "--out", str(grpo)]
    settings = ["--set", "tasks_per_step=2", "--set", "num_generations=2", "--set", "eval_episodes=4"]
    assert main([*args, *settings, "--set", "checkpoint_every=1", "--no-progress"]) == 0
    rows = [json.loads(line) for line in (grpo / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all("eval_success" in r for r in rows)
    config = json.loads((grpo / "config.json").read_text())["config"]
    assert config["beta"] == 0.3 and config["rollout"]["turn_template"] == "{signatures}\n{summary}"  # the tiny recipe
    assert config["eval_env_kwargs"] == {} and config["env_kwargs"]["synthetic_cities"]  # evaluated on the snapshot
    assert main([*args, *settings, "--steps", "3", "--resume", "--no-progress"]) == 0  # one more step
    assert len((grpo / "metrics.jsonl").read_text().splitlines()) == 3
    ppo = tmp_path / "ppo"
    args = ["train", "llm-ppo", "--model", str(sft / "final"), "--steps", "1", "--out", str(ppo), "--no-progress"]
    assert main([*args, "--set", "episodes_per_step=4", "--set", "eval_episodes=4"]) == 0
    config = json.loads((ppo / "config.json").read_text())
    assert config["algorithm"] == "ppo" and config["config"]["episodes_per_step"] == 4
    assert (ppo / "final" / "value_head.pt").exists() and len((ppo / "episodes.jsonl").read_text().splitlines()) == 4
    # the reward model and DPO, on a user's preference pairs (JSONL)
    pairs, rm, dpo = tmp_path / "pairs.jsonl", tmp_path / "rm", tmp_path / "dpo"
    call = '<tool_call>{{"name": "answer", "arguments": {{"suitable": {}}}}}</tool_call>'
    with pairs.open("w") as f:
        for i in range(8):
            user = {"role": "user", "content": f"temp {10 + i}°C · AQI 40"}
            chosen, rejected = call.format("true"), call.format("false")
            f.write(
                json.dumps(
                    {
                        "chosen": [user, {"role": "assistant", "content": chosen}],
                        "rejected": [user, {"role": "assistant", "content": rejected}],
                    }
                )
                + "\n"
            )
    data = ["--set", f"data={pairs}", "--set", "epochs=1", "--no-progress"]
    assert main(["train", "reward-model", "--model", str(sft / "final"), "--out", str(rm), *data]) == 0
    assert "held-out pairs: accuracy" in capsys.readouterr().out
    assert json.loads((rm / "final" / "config.json").read_text())["architectures"] == ["LlamaForSequenceClassification"]
    args = ["train", "dpo", "--model", str(sft / "final"), "--recipe", "tiny", "--rounds", "1", "--out", str(dpo)]
    args += data
    assert main([*args, "--set", "eval_episodes=4"]) == 0
    assert json.loads((dpo / "config.json").read_text())["config"]["rpo_alpha"] == 1.0  # the tiny recipe
    assert (dpo / "final" / "model.safetensors").exists()


def test_bad_llm_settings_fail_before_any_model_loads(tmp_path, capsys):
    assert main(["train", "grpo", "--set", "num_generations=1", "--out", str(tmp_path)]) == 2
    assert "num_generations: Input should be greater than or equal to 2" in capsys.readouterr().err
    assert main(["train", "grpo", "--set", "beta=-1", "--out", str(tmp_path)]) == 2
    assert "beta" in capsys.readouterr().err
    assert main(["train", "grpo", "--model", str(tmp_path / "missing"), "--out", str(tmp_path / "r")]) == 2
    assert "missing" in capsys.readouterr().err
    assert not (tmp_path / "tiny").exists()  # nothing was built for a config that cannot run
    assert main(["train", "llm-ppo", "--set", f"reward_model={tmp_path / 'no-rm'}", "--out", str(tmp_path)]) == 2
    assert "reward model directory" in capsys.readouterr().err and not (tmp_path / "tiny").exists()


def test_a_model_without_chat_template_is_refused(tiny_model_path, tmp_path, capsys):
    bare = tmp_path / "bare"
    shutil.copytree(tiny_model_path, bare)
    (bare / "chat_template.jinja").unlink()
    config = json.loads((bare / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(config))
    assert main(["train", "grpo", "--model", str(bare), "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    assert "no chat template" in capsys.readouterr().err and not (tmp_path / "run").exists()
