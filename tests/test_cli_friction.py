"""First-use friction on the command line (issue 17, items 9-12, 14, 16): a missing model path fails at once in one
line, ``train`` never overwrites a run by accident, agentgym ids work without their namespace, an unknown ``--set``
key lists the real ones, and the smaller papercuts (``serve weather``'s banner, PPO's rounded budget, infos that
share objects across steps)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import gymnasium as gym
import huggingface_hub
import pytest

import agentgym  # noqa: F401  (registers the ids)
from agentgym.app.cli import main
from agentgym.core.registration import resolve_env_id
from agentgym.trainers.models.policy import resolve_model_source

FAST_S = 2.0  # the old path waited ~50 s for the hub (5 retries); a local decision takes milliseconds


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    start = time.perf_counter()
    code = main(argv)
    elapsed = time.perf_counter() - start
    return code, capsys.readouterr().err.strip(), elapsed


# ---------------------------------------------------------------------------------------------------- item 9: models


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh working directory with an (empty) ``runs/``, as after a first training run."""
    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)
    resolve_model_source("tiny")  # imports huggingface_hub once, outside the timed calls
    return tmp_path


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "sft", "--model", "runs/nonexistent"],
        ["train", "grpo", "--model", "./nowhere"],
        ["train", "reward-model", "--model", "a/b/c"],
        ["eval", "--env", "agentgym/WeatherRun-v0", "--agent", "hf:runs/nonexistent", "--episodes", "1"],
        ["eval", "--env", "agentgym/WeatherRun-v0", "--agent", "hf:~/no-such-model", "--episodes", "1"],
    ],
)
def test_a_missing_model_path_is_one_line_at_once(argv, workdir, capsys):
    out = ["--out", str(workdir / "out")] if argv[0] == "train" else []
    code, err, elapsed = run([*argv, *out, "--no-progress"], capsys)
    assert code == 2 and elapsed < FAST_S, (code, elapsed, err)
    assert len(err.splitlines()) == 1 and "no model directory at" in err
    assert not (workdir / "out").exists()  # refused before the run directory is touched (train)


def test_a_path_like_spec_never_reaches_the_hub(workdir, monkeypatch):
    def no_hub(*args, **kwargs):
        raise AssertionError("asked the hub about a path")

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", no_hub)
    for spec in ("runs/nonexistent", "./x", "../x", "/abs/x", "~/x", "a/b/c", "a\\b", "x..y", "-bad-"):
        with pytest.raises(FileNotFoundError, match="no model directory at"):
            resolve_model_source(spec)
    (workdir / "runs" / "sft" / "final").mkdir(parents=True)
    (workdir / "runs" / "sft" / "final" / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="runs/sft/final"):  # a run directory points at its model
        resolve_model_source("runs/sft")
    assert resolve_model_source("runs/sft/final") == "runs/sft/final"


def test_a_hub_id_fails_fast_offline(workdir, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, err, elapsed = run(["train", "sft", "--model", "no-such-org/no-such-model", "--out", "out"], capsys)
    assert code == 2 and elapsed < FAST_S and len(err.splitlines()) == 1 and "HF_HUB_OFFLINE" in err


def test_a_hub_id_fails_fast_when_the_hub_is_unreachable(workdir, monkeypatch, capsys):
    with socket.socket() as s:  # a port nothing listens on: connection refused, as with no network
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(workdir / "hf-cache"))
    code, err, elapsed = run(["train", "sft", "--model", "no-such-org/no-such-model", "--out", "out"], capsys)
    assert code == 2 and elapsed < FAST_S and len(err.splitlines()) == 1, (elapsed, err)
    assert "hub is unreachable" in err and not Path("out").exists()


# ---------------------------------------------------------------------------------------------------- item 10: --out


def test_train_refuses_an_existing_run_without_overwrite(tmp_path, capsys):
    out = tmp_path / "q"
    argv = ["train", "q-learning", "--episodes", "20", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code, err, _ = run([*argv[:3], "5", *argv[4:]], capsys)
    assert code == 2 and "already holds a run" in err and "--overwrite" in err and "--resume" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # not a byte touched
    code, err, _ = run([*argv, "--resume"], capsys)  # the classic learners cannot resume: refused, not ignored
    assert code == 2 and "--resume works for" in err
    (out / "notes.txt").write_text("mine")
    assert main([*argv[:3], "5", *argv[4:], "--overwrite"]) == 0
    rows = (out / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 5 and not (out / "notes.txt").exists()  # replaced, no stale files of the old run


def test_overwrite_touches_only_a_training_run(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.tex").write_text("keep me")
    code, err, _ = run(["train", "q-learning", "--episodes", "5", "--out", str(folder), "--overwrite"], capsys)
    assert code == 2 and "holds none" in err and (folder / "thesis.tex").read_text() == "keep me"
    code, err, _ = run(["train", "sft", "--out", str(folder), "--no-progress"], capsys)  # LLM trainers too
    assert code == 2 and "already holds a run" in err
    code, err, _ = run(["train", "grpo", "--out", str(folder), "--resume", "--overwrite"], capsys)
    assert code == 2 and "give one of them" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["train", "q-learning", "--episodes", "5", "--out", str(empty), "--no-progress"]) == 0


# ---------------------------------------------------------------------------------------------------- item 11: --env


def test_short_and_case_insensitive_env_ids():
    assert resolve_env_id("CliffWalk-v0") == "agentgym/CliffWalk-v0"
    assert resolve_env_id("cliffwalk-v0") == "agentgym/CliffWalk-v0"
    assert resolve_env_id("AGENTGYM/sqllookup-v0") == "agentgym/SQLLookup-v0"
    assert resolve_env_id("CartPole-v1") == "CartPole-v1"  # Gymnasium's own ids pass through
    assert resolve_env_id("CliffWalking-v1") == "CliffWalking-v1"
    with pytest.raises(gym.error.NameNotFound, match="did you mean 'agentgym/CliffWalk-v0'"):
        resolve_env_id("agentgym/CliffWalk-v9")
    with pytest.raises(gym.error.NameNotFound, match="did you mean 'agentgym/WeatherRun-v0'"):
        resolve_env_id("WeatherRun")
    with pytest.raises(gym.error.NameNotFound, match="agentgym ids: agentgym/CliffWalk-v0"):
        resolve_env_id("agentgym/Nope-v0")


def test_every_command_takes_short_env_ids(tmp_path, capsys):
    out = tmp_path / "q"
    assert main(["train", "q-learning", "--env", "CliffWalk-v0", "--episodes", "5", "--out", str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["env_id"] == "agentgym/CliffWalk-v0"
    capsys.readouterr()
    assert main(["eval", "--env", "weatherrun-v0", "--agent", "oracle", "--episodes", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["env_id"] == "agentgym/WeatherRun-v0"
    code, err, _ = run(["eval", "--env", "CliffWalk", "--agent", "random", "--episodes", "1"], capsys)
    assert code == 2 and "did you mean 'agentgym/CliffWalk-v0'" in err and "CliffWalking" not in err


def test_train_help_names_the_real_default_env(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "default agentgym/CliffWalk-v0" in help_text and "default CliffWalk-v0" not in help_text


# ---------------------------------------------------------------------------------------------------- item 12: --set


@pytest.mark.parametrize(
    "argv, closest",
    [
        (["train", "grpo", "--set", "num_generation=1"], "did you mean num_generations?"),
        (["train", "grpo", "--set", "rollout.max_new_token=8"], "did you mean rollout.max_new_tokens?"),
        (["train", "q-learning", "--set", "alpah=0.5"], "did you mean alpha?"),
        (["train", "ppo", "--set", "learning_rat=0.1"], "did you mean learning_rate?"),
        (["train", "sft", "--set", "zzz=1"], "its settings: env_id, env_kwargs"),
    ],
)
def test_an_unknown_setting_lists_the_fields_and_the_closest(argv, closest, tmp_path, capsys):
    code, err, _ = run([*argv, "--out", str(tmp_path / "run")], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and closest in err and "its settings:" in err
    assert "Extra inputs are not permitted" not in err and not (tmp_path / "run").exists()


# ---------------------------------------------------------------------------------------------------- item 14, 16


def test_readme_env_table_says_the_cliff_ends_the_episode():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `agentgym/CliffWalk-v0`"))
    assert "ends the episode" in row and "cliff_terminates=False" in row
    env = gym.make("agentgym/CliffWalk-v0", cliff_terminates=False)  # the kwarg the README names exists
    env.reset(seed=0)
    right = '<tool_call>{"name": "move", "arguments": {"direction": "right"}}</tool_call>'
    _, reward, terminated, _, _ = env.step(right)  # from the start into the cliff
    assert reward == -100 and not terminated


def test_serve_weather_prints_what_it_serves_and_where():
    code = "from agentgym.app.cli import main; main(['serve', 'weather', '--port', '0'])"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert line.startswith("serving ") and "None" not in line and "weather_v0.jsonl at http://127.0.0.1:" in line


def test_ppo_says_when_it_rounds_the_budget_up(tmp_path, capsys):
    argv = ["train", "ppo", "--timesteps", "40", "--set", "n_steps=32", "--out", str(tmp_path / "p"), "--no-progress"]
    assert main(argv) == 0
    assert "64 env steps: --timesteps 40 rounded up to whole rollouts of n_steps=32" in capsys.readouterr().out
    assert main([*argv[:3], "64", *argv[4:], "--overwrite"]) == 0  # a whole number of rollouts: nothing to say
    assert "rounded up" not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "5000 runs 5120" in " ".join(capsys.readouterr().out.split())


def test_infos_of_a_repeated_action_share_no_object():
    """Interpretations are memoised per action text; the info of each step must still be its own data (Gymnasium
    warns "infos returned by step and the following step share an object", and a user editing one would edit
    the next). Nested arguments are what shared an object."""
    action = '<tool_call>{"name": "get_weather", "arguments": {"city": {"name": "Paris", "alt": [1]}}}</tool_call>'
    env = gym.make("agentgym/WeatherRun-v0")
    _, first = env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the passive checker's warning fails the test
        infos = [env.step(action)[4] for _ in range(3)]
    infos[0]["tool_call"]["arguments"]["city"]["name"] = "edited"
    assert infos[1]["tool_call"]["arguments"]["city"]["name"] == "Paris"
    assert env.step(action)[4]["tool_calls"][0]["arguments"]["city"]["name"] == "Paris"  # the memo is intact
    first["tools"][0]["function"]["name"] = "edited"
    assert env.reset(seed=1)[1]["tools"][0]["function"]["name"] != "edited"  # so are the tools' schemas


def test_the_cli_lists_trainers_from_their_specs():
    """Which trainers resume, and which budget flag each takes, is read from TRAINERS: a spec agrees with its class,
    and the CLI's messages name exactly those."""
    from agentgym.app.cli import build_parser
    from agentgym.trainers import TRAINERS, trainer_names

    for spec in TRAINERS.values():
        assert spec.resumable == (spec.llm and spec.load()[0].resumable), spec.name
    assert trainer_names(resumable=True) == "sft, grpo, llm-ppo"
    train = next(
        a for a in build_parser()._subparsers._group_actions[0].choices["train"]._actions if a.dest == "resume"
    )
    assert train.help.startswith("sft, grpo, llm-ppo:")
