"""Linear probes of a model's decision (agentgym.trainers.llm.probe), hindsight decision labels, and the cosine
schedule."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
import torch
from transformers import AutoModelForCausalLM

import agentgym  # noqa: F401
from agentgym.app.cli import main
from agentgym.app.recipes import TINY
from agentgym.trainers.llm.optim import adamw_with_warmup
from agentgym.trainers.llm.probe import (
    DecisionReplay,
    DecisionSet,
    decision_key,
    fit_probe,
    hindsight_decisions,
    probe,
    split_decisions,
)
from agentgym.trainers.llm.rollout import OracleTeacher, RolloutConfig, rollout
from agentgym.trainers.models.policy import LLMPolicy

WEATHER = "agentgym/WeatherRun-v0"
CONFIG = RolloutConfig(**TINY["grpo"]["rollout"])


@pytest.fixture(scope="module")
def base() -> LLMPolicy:
    torch.set_num_threads(1)
    return LLMPolicy.from_pretrained("tiny")


@pytest.fixture(scope="module")
def decisions(base):
    return split_decisions(base, WEATHER, CONFIG)


def test_contexts_stop_right_before_the_oracles_value(base, decisions):
    train, test = decisions
    assert (len(train), len(test)) == (300, 100)  # every train / test day once, one decision each
    assert train.values == [False, True] and 0.3 < sum(train.labels) / len(train) < 0.7
    text = base.decode(train.contexts[0])
    assert text.endswith('"suitable": ') and "<tool_call>" in text and "decision pending" in text
    assert [base.decode(c) for c in train.continuations[0]] == ["false", "true"]


def test_the_shipped_base_holds_the_decision_and_a_random_one_does_not(base, decisions):
    report = probe(base, WEATHER, CONFIG, decisions=decisions)
    assert report.best >= 0.85 and report.best_layer >= 1  # measured: 92 % at layer 4 (2: 87 %)
    assert report.layers[0] == pytest.approx(0.5, abs=0.05)  # the last token's embedding is the same for every day
    assert report.policy <= 0.65 and report.gap >= 0.2  # the base answers alike for every day: not read out
    torch.manual_seed(0)
    random = LLMPolicy(AutoModelForCausalLM.from_config(base.model.config), base.tokenizer)
    noise = probe(random, WEATHER, CONFIG, decisions=decisions)
    assert noise.best <= 0.75  # measured: 66 % (seed 0), 55 % (seed 1)


def test_a_probe_is_the_convex_optimum_on_separable_data():
    torch.manual_seed(0)
    x = torch.randn(400, 8)
    y = (x[:, 3] - 0.5 * x[:, 5] > 0.2).long()
    fitted = fit_probe(x[:300], y[:300], classes=2, l2=1e-4)
    assert float((fitted.predict(x[300:]) == y[300:]).double().mean()) >= 0.95


def test_free_text_answers_have_no_label(base):
    assert (
        decision_key([{"function": {"name": "run_sql", "parameters": {"properties": {"q": {"type": "string"}}}}}])
        is None
    )
    with pytest.raises(ValueError, match="no boolean or enum argument"):
        split_decisions(base, "agentgym/SQLLookup-v1", CONFIG)


def test_hindsight_labels_are_the_truth_whatever_was_answered(base):
    """Random decisions (the format-only demonstrations) relabelled by their outcome give the oracle's decision."""
    envs = [gym.make(WEATHER, split="test") for _ in range(40)]
    resets = [{"seed": i, "options": {"task_index": i}} for i in range(40)]
    played = rollout(base, envs, resets, CONFIG, teacher=OracleTeacher(randomize_decisions=True, seed=3))
    truth = rollout(base, envs, resets, CONFIG, teacher=OracleTeacher())
    assert 0 < sum(ep.success for ep in played) < 40  # some random answers right, some wrong
    _, info = envs[0].reset(seed=0)
    found = hindsight_decisions(base, played, decision_key(info["tools"]))
    assert len(found) == 40
    expected = [
        int(json.loads(ep.actions[-1][len("<tool_call>") : -len("</tool_call>")])["arguments"]["suitable"])
        for ep in truth
    ]
    assert found.labels == expected
    for context, continuations, episode in zip(found.contexts, found.continuations, played, strict=True):
        assert base.decode(context).endswith(episode.actions[-1].split('"suitable": ')[0] + '"suitable": ')
        assert [base.decode(c) for c in continuations] == ["false", "true"]


def test_cosine_schedule_decays_to_zero_at_the_horizon_after_the_warm_up():
    param = torch.nn.Parameter(torch.zeros(1))
    total = {"steps": None}
    optimizer, scheduler = adamw_with_warmup([param], 1.0, 4, schedule="cosine", horizon=lambda: total["steps"])
    total["steps"] = 20  # set after the optimizer, as LLMTrainer's set_total does
    rates = []
    for _ in range(20):
        optimizer.step()
        scheduler.step()
        rates.append(optimizer.param_groups[0]["lr"])
    assert rates[:3] == pytest.approx(
        [0.5 * (1 + torch.cos(torch.tensor(torch.pi * s / 20)).item()) * min(1, (s + 1) / 4) for s in range(1, 4)]
    )
    assert max(rates) < 1.0 and rates[9] == pytest.approx(0.5) and rates[-1] == pytest.approx(0.0, abs=1e-12)
    assert all(a >= b for a, b in zip(rates[3:], rates[4:], strict=False))
    with pytest.raises(ValueError, match="schedule"):
        adamw_with_warmup([param], 1.0, schedule="linear")


def test_probe_command_prints_json_and_plots(tmp_path, capsys):
    plot = tmp_path / "probe.png"
    assert main(["probe", "--json", "--plot", str(plot)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["decision"] == "answer.suitable" and len(report["layers"]) == 5 and report["best"] >= 0.85
    assert plot.stat().st_size > 10_000
    assert main(["probe", "--env", "SQLLookup-v1"]) == 2
    assert "free text" in capsys.readouterr().err


def test_grpo_decision_coef_trains_on_hindsight_labels():
    from agentgym.app.recipes import tiny_overrides
    from agentgym.trainers.llm.grpo import GRPO, GRPOConfig

    settings = tiny_overrides("grpo", WEATHER) | {
        "tasks_per_step": 4,
        "num_generations": 2,
        "checkpoint_every": 0,
        "eval_split": None,
        "seed": 0,
        "learning_rate": 1e-3,
    }
    runs = {}
    for coef in (0.0, 1.0):
        trainer = GRPO("tiny", GRPOConfig(**{**settings, "decision_coef": coef})).learn(3, progress_bar=False)
        runs[coef] = (trainer.metrics, torch.cat([p.detach().flatten() for p in trainer.policy.model.parameters()]))
    plain, dense = runs[0.0][0], runs[1.0][0]
    assert all("decision_loss" not in row for row in plain)
    labelled = [row for row in dense if row.get("decision_labels")]
    assert labelled and all(0 < row["decision_loss"] < 10 for row in labelled)
    assert sum(row.get("decision_labels", 0) for row in dense) <= 3 * 8  # at most one decision per episode
    assert not torch.equal(runs[0.0][1], runs[1.0][1])  # the term reaches the weights


def _decisions(days: range) -> DecisionSet:
    """A decision set of one context per day: ids ``[day, day]``, value ids ``[[0], [1]]``, label ``day % 2``."""
    days = list(days)
    return DecisionSet(
        "answer", "suitable", [False, True], [[d, d] for d in days], [[[0], [1]]] * len(days), [d % 2 for d in days]
    )


def test_decision_replay_keeps_the_latest_distinct_decisions_and_draws_from_all_of_them(tmp_path):
    replay = DecisionReplay(("answer", "suitable", [False, True]), capacity=8)
    replay.add(_decisions(range(6)))
    replay.add(_decisions(range(4, 10)))  # 4 and 5 again: kept once, now among the latest
    assert [context[0] for context, _, _ in replay.entries.values()] == [2, 3, 4, 5, 6, 7, 8, 9]
    drawn = replay.sample(5, torch.Generator().manual_seed(0))
    assert len(drawn) == 5 and len({c[0] for c in drawn.contexts}) == 5
    assert all(label == context[0] % 2 for context, label in zip(drawn.contexts, drawn.labels, strict=True))
    seen = {c[0] for seed in range(20) for c in replay.sample(2, torch.Generator().manual_seed(seed)).contexts}
    assert seen == set(range(2, 10))  # uniform over the buffer, not only the step's own
    assert len(replay.sample(50, torch.Generator())) == 8

    replay.save(tmp_path)
    again = DecisionReplay(replay.key, capacity=8)
    again.load(tmp_path)
    assert again.entries == replay.entries


@pytest.mark.parametrize(
    "content",
    [
        "[[[1, 2], [[0], [1]], 2]]",  # a label past the values
        '[[[1, "x"], [[0], [1]], 0]]',  # ids that are not ints
        "[[[1, 2], [[0], [1]]]]",  # no label
        json.dumps([[[1], [[0], [1]], 0]] * 9),  # more than the capacity
        '{"entries": []}',
        "[[[1], [[0], [1]], 0]",  # torn
    ],
)
def test_a_crafted_decision_replay_file_is_refused_and_changes_nothing(tmp_path, content):
    replay = DecisionReplay(("answer", "suitable", [False, True]), capacity=8)
    replay.add(_decisions(range(3)))
    before = dict(replay.entries)
    (tmp_path / DecisionReplay.FILE).write_text(content)
    with pytest.raises(ValueError):
        replay.load(tmp_path)
    assert replay.entries == before


def test_grpo_decision_replay_trains_on_past_days_and_resumes_with_its_buffer(tmp_path):
    from agentgym.app.recipes import tiny_overrides
    from agentgym.trainers.llm.grpo import GRPO, GRPOConfig

    settings = tiny_overrides("grpo", WEATHER) | {
        "tasks_per_step": 4,
        "num_generations": 2,
        "checkpoint_every": 2,
        "eval_split": None,
        "seed": 0,
        "decision_replay": 64,
    }
    trainer = GRPO("tiny", GRPOConfig(**settings), out_dir=tmp_path).learn(2, progress_bar=False)
    labelled = [row["decision_labels"] for row in trainer.metrics if row.get("decision_labels")]
    assert labelled and len(trainer.replay.entries) >= max(labelled)  # the buffer holds past steps' decisions too
    assert [p.parent.name for p in tmp_path.glob(f"checkpoints/*/{DecisionReplay.FILE}")] == ["step-000002"]
    resumed = GRPO.resume(tmp_path)
    assert resumed.replay.entries == trainer.replay.entries
