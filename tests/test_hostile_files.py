"""Files read back (checkpoints, Q-tables, saved agents) and records written by eval: never code execution,
never a traceback for a damaged file, never a run aborted by one episode's text."""

from __future__ import annotations

import pickle
import random
import re

import gymnasium as gym
import numpy as np
import pytest
import torch

from agentgym.app.evaluation.reports import load_episodes, to_json
from agentgym.core.episode import EpisodeRecord
from agentgym.trainers import PPO, QLearning
from agentgym.trainers.run.checkpoint import STATE_FILE, load_trainer_state


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


def _edited_checkpoint(path, edit):
    checkpoint = torch.load(path, weights_only=True)
    edit(checkpoint)
    torch.save(checkpoint, path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c.update(config='{"learning_rate": -1}'), "the saved config is not valid (learning_rate"),
        (lambda c: c["policy"].update({"0.weight": torch.zeros(3, 3)}), "the saved weights do not fit"),
        (lambda c: c["policy"]["2.bias"].fill_(float("nan")), "NaN or infinite"),
        (lambda c: c["counters"].update(policy=3), "the saved counter 'policy' = 3 is not one of this agent's"),
        (lambda c: c["counters"].update(episodes_done=-4), "the saved counter 'episodes_done' = -4"),
        (lambda c: c.pop("generator"), "missing entries: generator"),
    ],
)
def test_a_saved_agent_with_bad_contents_is_refused_naming_the_file(tmp_path, edit, message):
    path = PPO(gym.make("agentgym/CliffWalk-v0"), seed=0).save(tmp_path / "model.pt")
    _edited_checkpoint(path, edit)
    with pytest.raises(ValueError, match="model.pt") as info:
        PPO.load(path)
    assert message in str(info.value) and len(str(info.value).splitlines()) == 1


@pytest.mark.parametrize(
    "meta, message",
    [
        ({"config": {"alpha": 5}}, "the saved config is not valid (alpha: "),
        ({"algorithm": "dqn"}, "algorithm 'dqn'"),
        ({"episodes_done": -1}, "episodes_done -1"),
    ],
)
def test_a_q_table_with_bad_metadata_is_refused_naming_the_file(tmp_path, meta, message):
    import json

    agent = QLearning(gym.make("agentgym/CliffWalk-v0"), seed=0)
    path = agent.save(tmp_path / "qtable.npz")
    with np.load(path) as data:
        q, saved = data["q"], json.loads(str(data["meta"]))
    with path.open("wb") as f:
        np.savez(f, q=q, meta=np.array(json.dumps({**saved, **meta})))
    with pytest.raises(ValueError, match="qtable.npz") as info:
        QLearning.load(path)
    assert message in str(info.value)


def _trainer_state(tmp_path, edit):
    """A real trainer state (a linear model's Adam after one step), edited, and what restores it."""
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.ones(1, 2)).sum().backward()
    optimizer.step()
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    state = {
        "step": 3,
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "generator": torch.Generator().get_state(),
        "python_rng": random.Random(0).getstate(),
        "extra": {},
    }
    edit(state)
    torch.save(state, tmp_path / STATE_FILE)
    fresh = torch.optim.Adam(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    return {
        "optimizer": fresh,
        "scheduler": torch.optim.lr_scheduler.LambdaLR(fresh, lambda _: 1.0),
        "generator": torch.Generator(),
        "rng": random.Random(1),
    }


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: None, None),
        (lambda s: s.pop("torch_rng"), "expected the entries"),
        (lambda s: s.update(step=-2), "step -2 is not a count"),
        (lambda s: s["optimizer"]["state"][0]["exp_avg"].fill_(float("nan")), "NaN or infinite"),
        (lambda s: s["optimizer"]["param_groups"][0]["params"].append(7), "does not fit this trainer"),
        (lambda s: s.update(torch_rng=torch.zeros(3)), "does not fit this trainer"),
        (lambda s: s.update(python_rng=[1, 2]), "does not fit this trainer"),
    ],
)
def test_a_trainer_state_that_does_not_fit_is_refused_naming_the_file(tmp_path, edit, message):
    restore = _trainer_state(tmp_path, edit)
    if message is None:  # the unedited state restores
        assert load_trainer_state(tmp_path, **restore)["step"] == 3
        return
    with pytest.raises(ValueError, match=STATE_FILE) as info:
        load_trainer_state(tmp_path, **restore)
    assert message in str(info.value) and len(str(info.value).splitlines()) == 1


@pytest.mark.parametrize(
    "config_json, message",
    [
        (b"", "not a training run's config"),
        (b'{"algorithm": "grpo", "config": {"steps": "many"}}', "the saved config is not valid (steps: "),
        (b'{"algorithm": "grpo"}', "no 'config' object"),
        (b"\xff{}", "not a training run's config"),
    ],
)
def test_resuming_a_run_with_a_damaged_config_json_names_it(tmp_path, config_json, message):
    from agentgym.trainers.llm.grpo import GRPO

    step = tmp_path / "checkpoints" / "step-000002"
    step.mkdir(parents=True)
    (step / STATE_FILE).write_bytes(b"")
    (tmp_path / "config.json").write_bytes(config_json)
    with pytest.raises(ValueError, match="config.json") as info:
        GRPO.resume(tmp_path)
    assert message in str(info.value) and len(str(info.value).splitlines()) == 1


def test_the_episode_log_of_a_resumed_run_drops_a_torn_line_and_names_a_damaged_one(tmp_path):
    from agentgym.trainers.run.run_dir import EpisodeLog

    log = tmp_path / "episodes.jsonl"
    log.write_bytes(b'{"step": 1, "a": "\xe2\x80\xa8"}\n{"step": 2}\n{"step": 3}\n{"step": 3, "act')  # killed mid-write
    EpisodeLog(log).trim(2)  # what resume runs: keep steps <= 2
    assert log.read_bytes() == b'{"step": 1, "a": "\xe2\x80\xa8"}\n{"step": 2}\n'
    log.write_bytes(b'{"step": 1}\nnot json\n')
    with pytest.raises(ValueError, match=r"episodes.jsonl:2: not a logged episode"):
        EpisodeLog(log).trim(2)


def test_a_logged_episode_with_a_lone_surrogate_is_written_as_utf8_and_audited(tmp_path):
    from agentgym.app.evaluation.audit import audit_run
    from agentgym.core.episode import EpisodeRecord
    from agentgym.trainers.run.run_dir import EpisodeLog

    def logged(step, action):
        return {"step": step, "reward": 1.0, "env_reward": 1.0, "rm_reward": None, "success": False, "turns": 1,
                "response_tokens": 5, "canonical": [True], "valid": [True], "truncation": None, "clipped": 0,
                "actions": [action], "reset": {"seed": step}}  # fmt: skip

    log = EpisodeLog(tmp_path / "episodes.jsonl")
    for step, action in enumerate(["answer(\ud800)", "answer(\udfff \U0001f600 \u2028)", "answer(ok)"], 1):
        log.pending = [EpisodeRecord.from_line(logged(step, action))]  # a line of an older log, converted
        log.append(log.take())  # what every training step runs
    assert log.pending == []
    text = (tmp_path / "episodes.jsonl").read_bytes().decode("utf-8")  # valid UTF-8 throughout
    assert len(text.split("\n")) == 4 and "answer(\ufffd)" in text and "\U0001f600 \u2028" in text
    report = audit_run(tmp_path, quantile=0.0)
    assert report.episodes == 3 and [e["actions"][0] for e in report.flagged][:2] == [
        "answer(\ufffd)",
        "answer(\ufffd \U0001f600 \u2028)",
    ]


def _metrics_run(tmp_path, rows):
    from agentgym.trainers.run.metrics import MetricsWriter

    with MetricsWriter(tmp_path, tensorboard=False, step_key="step") as writer:
        for row in rows:
            writer.write(row)
    return tmp_path / "metrics.jsonl"


def test_resumed_metrics_keep_every_row_to_the_checkpoint_and_drop_a_torn_one(tmp_path):
    from agentgym.trainers.run.metrics import MetricsWriter

    rows = [{"step": s, "loss": 0.5 / s, "note": f"step\u2028{s}\x85"} for s in range(1, 6)]
    path = _metrics_run(tmp_path, rows)
    path.write_bytes(path.read_bytes() + b'{"step": 6, "lo')  # killed while writing step 6
    with MetricsWriter(tmp_path, tensorboard=False, step_key="step", resume_after=4) as writer:
        assert writer.rows == rows[:4]  # U+2028 and U+0085 inside a row do not split it
        writer.write({"step": 5, "loss": 0.1, "note": "a lone \ud800"})
    lines = path.read_bytes().decode("utf-8").split("\n")
    assert len(lines) == 6 and lines[-1] == "" and "a lone \ufffd" in lines[4]
    assert "a lone \ufffd" in (tmp_path / "metrics.csv").read_text(encoding="utf-8").replace("?", "\ufffd")


@pytest.mark.parametrize(
    "line, message",
    [
        (b"not json", "not a metrics row (not JSON: Expecting value: line 1 column 1 (char 0))"),
        (b'{"step": 3, "loss": \xff}', "not a metrics row (not UTF-8 text)"),
        (b"[3]", "not a metrics row (a JSON object)"),
        (b'{"step": "three"}', "not a metrics row ('step' is 'three', not a number)"),
        (b'{"step": null}', "not a metrics row ('step' is None, not a number)"),
    ],
    ids=["not-json", "not-utf8", "not-an-object", "step-text", "step-null"],
)
def test_a_damaged_metrics_row_is_one_line_naming_the_line_and_nothing_is_lost(tmp_path, line, message):
    from agentgym.trainers.run.metrics import MetricsWriter

    path = _metrics_run(tmp_path, [{"step": s, "loss": 1.0} for s in range(1, 5)])
    lines = path.read_bytes().split(b"\n")
    lines[2] = line
    damaged = b"\n".join(lines)
    path.write_bytes(damaged)
    with pytest.raises(ValueError) as info:
        MetricsWriter(tmp_path, tensorboard=False, step_key="step", resume_after=2)
    assert str(info.value) == f"{path}:3: {message}", info.value
    assert path.read_bytes() == damaged  # refused before the file is rewritten


def test_preference_pairs_that_are_not_utf8_name_the_file_and_line(tmp_path):
    from agentgym.trainers.llm.preferences import read_pairs

    path = tmp_path / "pairs.jsonl"
    good = b'{"chosen": [{"role": "assistant", "content": "a"}], "rejected": [{"role": "assistant", "content": "b"}]}'
    path.write_bytes(good + b"\n" + good.replace(b'"a"', b'"\xe9"') + b"\n")
    with pytest.raises(ValueError, match=r"pairs.jsonl:2: .*can't decode byte 0xe9"):
        read_pairs(path)


def test_a_weather_snapshot_with_a_nan_temperature_is_refused_naming_the_line(tmp_path):
    from agentgym.envs.weather.dataset import SNAPSHOT_V0

    path = tmp_path / "snapshot.jsonl"
    lines = SNAPSHOT_V0.read_text(encoding="utf-8").splitlines()
    lines[4] = re.sub(r'"temperature_c": ?[-0-9.]+', '"temperature_c": NaN', lines[4])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as info:
        gym.make("agentgym/WeatherRun-v0", snapshot=path)
    assert str(info.value) == f"{path}:5: not a weather record (temperature_c: Input should be a finite number)"
