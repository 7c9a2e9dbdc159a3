"""Preference pairs (rollouts, JSONL) and the Bradley–Terry reward model: math, learning, round trips, errors."""

from __future__ import annotations

import json
import math
import random

import gymnasium as gym
import pytest
import torch
from pydantic import ValidationError

from agentgym.core.spaces import AnyText
from agentgym.core.tools import ToolCall
from agentgym.trainers.llm.preferences import (
    PreferencePair,
    pairs_from_episodes,
    preference_pairs_from_rollouts,
    read_pairs,
    write_pairs,
)
from agentgym.trainers.llm.reward_model import RewardModel, RewardModelConfig, RewardModelTrainer, bradley_terry_loss
from agentgym.trainers.llm.rollout import Episode, RolloutConfig, random_resets, rollout
from agentgym.trainers.models.policy import LLMPolicy
from tests.test_grpo import VOWELS

TWO_TURNS = "test/TwoTurnVowels-v0"
CONSTANT = "test/Constant-v0"


class TwoTurnVowelEnv(gym.Env):
    """Two turns; each turn's reward is the share of vowels among the response's letters."""

    def __init__(self) -> None:
        self.observation_space = AnyText(1000)
        self.action_space = AnyText(1000)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.turn = 0
        return "Say something.", {"summary": "turn 1"}

    def step(self, action):
        letters = [c for c in action.lower() if c.isalpha()]
        self.turn += 1
        reward = sum(c in "aeiou" for c in letters) / max(1, len(letters))
        return f"Turn {self.turn} done.", reward, self.turn == 2, False, {"summary": f"turn {self.turn + 1}"}


class ConstantEnv(gym.Env):
    """One turn, reward 1 whatever is said: every group ties."""

    def __init__(self) -> None:
        self.observation_space = AnyText(1000)
        self.action_space = AnyText(1000)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "Say something.", {}

    def step(self, action):
        return "Done.", 1.0, True, False, {}


for _id, _entry in ((TWO_TURNS, TwoTurnVowelEnv), (CONSTANT, ConstantEnv)):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_entry)


def episode(rewards: list[float], tag: str) -> Episode:
    ep = Episode({"seed": 7})
    for i, r in enumerate(rewards):
        ep.observations.append(f"obs {i}")
        ep.actions.append(f"{tag} {i}")
        ep.rewards.append(r)
    ep.observations.append("end")
    return ep


def answer_pairs(n: int, seed: int = 0) -> list[PreferencePair]:
    """The user says what the right answer is; chosen gives it, rejected gives the other one."""
    rng = random.Random(seed)
    cities = ["Oslo", "Paris", "Lima", "Cairo", "Quito", "Berlin", "Madrid", "Tokyo", "Delhi", "Rome"]
    pairs = []
    for _ in range(n):
        ok = rng.random() < 0.5
        prompt = f"Is day {rng.randrange(1000)} good to run in {rng.choice(cities)}? The answer is {str(ok).lower()}."
        user = {"role": "user", "content": prompt}
        right = {"role": "assistant", "content": ToolCall("answer", {"suitable": ok}).to_text()}
        wrong = {"role": "assistant", "content": ToolCall("answer", {"suitable": not ok}).to_text()}
        pairs.append(PreferencePair([user, right], [user, wrong], chosen_reward=1.0, rejected_reward=0.0))
    return pairs


# ---------------------------------------------------------------------- pairing rule


def test_pairs_are_best_vs_worst_of_a_group_and_ties_are_skipped():
    group = [episode([0.5], "a"), episode([1.0, 0.5], "b"), episode([0.0], "c"), episode([1.5], "d")]
    tied = [episode([1.0], f"t{i}") for i in range(4)]
    pairs = pairs_from_episodes(group + tied, generations=4)
    assert len(pairs) == 1  # the tied group gives none
    (pair,) = pairs
    assert pair.chosen[-1]["content"] == "b 1" and pair.rejected[-1]["content"] == "c 0"  # first of the 1.5s wins
    assert (pair.chosen_reward, pair.rejected_reward) == (1.5, 0.0)
    assert pair.chosen[0] == pair.rejected[0] == {"role": "user", "content": "obs 0"}
    assert pair.reset == {"seed": 7}

    two = pairs_from_episodes(group, generations=4, pairs_per_group=2)
    assert [(p.chosen_reward, p.rejected_reward) for p in two] == [(1.5, 0.0), (1.5, 0.5)]
    with pytest.raises(ValueError, match="groups of 4"):
        pairs_from_episodes(group[:3], generations=4)


def test_pairs_from_rollouts_pair_max_and_min_reward_of_the_same_task(tiny_model_path):
    policy = LLMPolicy.from_pretrained(tiny_model_path)
    config = RolloutConfig(context="summary", turn_template="{summary}", max_new_tokens=6)
    pairs = preference_pairs_from_rollouts(
        policy, TWO_TURNS, split=None, rollout_config=config, tasks=4, generations=4, seed=3
    )
    # Replay the same rollouts (same resets, same sampling generator): each pair is its group's max vs min.
    resets = [r for r in random_resets(random.Random(3), 4, None) for _ in range(4)]
    envs = [gym.make(TWO_TURNS) for _ in resets]
    episodes = rollout(policy, envs, resets, config, generator=torch.Generator().manual_seed(3))
    groups = [[ep.total_reward for ep in episodes[i : i + 4]] for i in range(0, 16, 4)]
    expected = [(max(g), min(g)) for g in groups if max(g) > min(g)]
    assert [(p.chosen_reward, p.rejected_reward) for p in pairs] == expected and len(expected) >= 2
    for pair in pairs:
        assert pair.chosen_reward > pair.rejected_reward
        assert pair.chosen[0] == pair.rejected[0] and pair.reset in resets
        assert len(pair.chosen_samples) == 2  # summary mode: one sample per turn, as played
        policy_ids = [i for s in pair.chosen_samples for i, m in zip(s.input_ids, s.loss_mask, strict=True) if m]
        actions = [m["content"] for m in pair.chosen if m["role"] == "assistant"]
        assert policy.decode(policy_ids) == "".join(actions)


def test_all_tied_rollouts_are_a_clear_error(tiny_model_path):
    config = RewardModelConfig(env_id=CONSTANT, rollout=RolloutConfig(max_new_tokens=4), tasks=3, generations=2)
    trainer = RewardModelTrainer(tiny_model_path, config)
    with pytest.raises(ValueError, match="no preference pairs: in all 3 tasks the 2 episodes tied"):
        trainer.learn(progress_bar=False)


# ---------------------------------------------------------------------- JSON Lines


def test_jsonl_round_trip_and_trl_explicit_prompt_form(tmp_path):
    pairs = answer_pairs(3)
    pairs[1].reset = {"seed": 4, "options": {"task_index": 2}}
    pairs[2].chosen_reward = pairs[2].rejected_reward = None
    path = write_pairs(pairs, tmp_path / "pairs.jsonl")
    assert read_pairs(path) == pairs
    assert "chosen_reward" not in path.read_text().splitlines()[2]

    prompt = [{"role": "user", "content": "Hi?"}]
    record = {
        "prompt": prompt,
        "chosen": [{"role": "assistant", "content": "hello"}],
        "rejected": [{"role": "assistant", "content": "go away"}],
        "score_chosen": 8,
        "score_rejected": 2.5,
        "prompt_id": "x",
    }
    (tmp_path / "trl.jsonl").write_text(json.dumps(record) + "\n\n")
    (pair,) = read_pairs(tmp_path / "trl.jsonl")
    assert pair.chosen == prompt + record["chosen"] and pair.rejected == prompt + record["rejected"]
    assert (pair.chosen_reward, pair.rejected_reward) == (8.0, 2.5)


USER = {"role": "user", "content": "q"}
GOOD = {"role": "assistant", "content": "a"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"chosen": [', "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({"chosen": [USER, GOOD]}), "missing 'rejected'"),
        (json.dumps({"chosen": [USER, GOOD], "rejected": []}), "'rejected' must be a non-empty list"),
        (json.dumps({"chosen": [USER, {"content": "a"}], "rejected": [USER, GOOD]}), r"chosen\[1\] must be an object"),
        (json.dumps({"chosen": [USER, {"role": "assistant"}], "rejected": [USER, GOOD]}), "no string 'content'"),
        (json.dumps({"chosen": [USER, GOOD], "rejected": [USER]}), "'rejected' has no assistant message"),
        (json.dumps({"chosen": [USER, GOOD], "rejected": [{**USER, "content": "z"}, GOOD]}), "start differently"),
        (json.dumps({"chosen": [USER, GOOD], "rejected": [USER, GOOD], "chosen_reward": "1"}), "must be a number"),
    ],
)
def test_malformed_jsonl_lines_name_the_line_and_the_fault(tmp_path, line, message):
    good = json.dumps({"chosen": [USER, GOOD], "rejected": [USER, {"role": "assistant", "content": "b"}]})
    path = tmp_path / "pairs.jsonl"
    path.write_text(good + "\n" + line + "\n")
    with pytest.raises(ValueError, match=f"pairs.jsonl:2: .*{message}"):
        read_pairs(path)


def test_missing_or_empty_pairs_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no preference-pairs file"):
        read_pairs(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="no preference pairs in the file"):
        read_pairs(tmp_path / "empty.jsonl")


# ---------------------------------------------------------------------- the reward model


def test_bradley_terry_loss_by_hand():
    chosen, rejected = torch.tensor([2.0, 0.0, -1.0]), torch.tensor([0.0, 0.0, 1.0])
    # −log σ(d) = log(1 + e^(−d)) for d = 2, 0, −2
    expected = (math.log(1 + math.exp(-2)) + math.log(2) + math.log(1 + math.exp(2))) / 3
    assert bradley_terry_loss(chosen, rejected).item() == pytest.approx(expected, rel=1e-6)


def test_reward_model_learns_a_synthetic_preference(tiny_model_path, tmp_path):
    config = RewardModelConfig(epochs=3, batch_size=16, learning_rate=1e-4, eval_fraction=0.25)
    trainer = RewardModelTrainer(tiny_model_path, config, out_dir=tmp_path / "rm", pairs=answer_pairs(240))
    rows = trainer.learn(progress_bar=False).metrics  # ~5 s
    assert trainer.num_pairs == {"train": 180, "eval": 60}
    assert rows[0]["step"] == 0 and abs(rows[0]["eval_margin"]) < 0.05  # untrained: no preference
    assert rows[-1]["eval_accuracy"] >= 0.8, rows[-1]  # measured: 1.0 (held-out prompts are new)
    assert rows[-1]["eval_margin"] > 1.0 and rows[-1]["loss"] < 0.5 * rows[1]["loss"]  # measured: 2.4; 0.69 → 0.16
    assert trainer.evaluation["eval_accuracy"] == rows[-1]["eval_accuracy"]
    for name in ("metrics.jsonl", "metrics.csv", "learning_curve.png", "config.json", "final/config.json"):
        assert (tmp_path / "rm" / name).exists()
    info = json.loads((tmp_path / "rm" / "config.json").read_text())
    assert info["algorithm"] == "reward_model" and info["pairs"] == {"train": 180, "eval": 60}

    rm = RewardModel.from_pretrained(tmp_path / "rm" / "final")
    pair = answer_pairs(1, seed=99)[0]
    chosen, rejected = rm.score([pair.chosen, pair.rejected])
    assert chosen > rejected


def test_reward_model_save_load_gives_identical_batched_scores(tiny_model_path, tmp_path):
    rm = RewardModel.from_pretrained(tiny_model_path, max_length=64)
    transcripts = [p.chosen for p in answer_pairs(3)] + [[{"role": "user", "content": "x " * 200}, GOOD]]
    scores = rm.score(transcripts)
    # batched (right-padded) scores equal one-at-a-time scores: the head reads each row's last real token
    assert scores == pytest.approx([rm.score([t])[0] for t in transcripts], abs=1e-5)
    assert len(rm.encode(transcripts[-1])) == 64  # long transcripts keep their last max_length tokens
    rm.save_pretrained(tmp_path / "rm")
    loaded = RewardModel.from_pretrained(tmp_path / "rm")
    assert loaded.max_length == 64
    assert loaded.score(transcripts) == scores


def test_score_episodes_scores_the_transcript(tiny_model_path):
    rm = RewardModel.from_pretrained(tiny_model_path)
    eps = [episode([0.0, 1.0], "a"), episode([1.0], "b")]
    assert rm.score_episodes(eps) == pytest.approx(rm.score([ep.transcript() for ep in eps]), abs=1e-6)
    assert eps[0].transcript()[-1] == {"role": "assistant", "content": "a 1"}  # the outcome is not scored


def test_reward_model_trains_on_rollout_pairs_of_a_policy(tiny_model_path, tmp_path):
    policy = LLMPolicy.from_pretrained(tiny_model_path)
    config = RewardModelConfig(
        env_id=VOWELS, rollout=RolloutConfig(max_new_tokens=6), tasks=8, generations=4, epochs=1, learning_rate=1e-4
    )
    trainer = RewardModelTrainer(policy, config, out_dir=tmp_path / "rm")
    rows = trainer.learn(progress_bar=False).metrics
    assert sum(trainer.num_pairs.values()) == 8  # vowel shares of 4 sampled replies rarely tie
    assert "eval_accuracy" in rows[-1] and (tmp_path / "rm" / "final" / "model.safetensors").exists()
    # the policy's own weights were copied, not shared
    assert not any(p is q for p in policy.model.parameters() for q in trainer.reward_model.model.parameters())


# ---------------------------------------------------------------------- bad inputs fail at start-up


def test_bad_reward_model_inputs_fail_at_start_up(tiny_model_path, tmp_path):
    with pytest.raises(FileNotFoundError, match="no model at .*no-such-model"):
        RewardModelTrainer(tmp_path / "no-such-model", RewardModelConfig())
    with pytest.raises(FileNotFoundError, match="no preference-pairs file at .*pairs.jsonl"):
        RewardModelTrainer(tiny_model_path, RewardModelConfig(data=str(tmp_path / "pairs.jsonl")))
    with pytest.raises(FileNotFoundError, match="no model at runs/sft/final"):
        RewardModelTrainer("runs/sft/final", RewardModelConfig())
    with pytest.raises(FileNotFoundError, match="no rollout policy at"):
        RewardModelTrainer(tiny_model_path, RewardModelConfig(policy=str(tmp_path / "gone")))
    RewardModel.from_pretrained(tiny_model_path).save_pretrained(tmp_path / "rm")
    with pytest.raises(ValueError, match="is a reward model, which cannot play the rollouts"):
        RewardModelTrainer(tmp_path / "rm", RewardModelConfig())
    for field, value, message in [
        ("eval_fraction", 1.0, "less than 1"),
        ("learning_rate", 0, "greater than 0"),
        ("generations", 1, "greater than or equal to 2"),
        ("epoch", 3, "Extra inputs are not permitted"),
    ]:
        with pytest.raises(ValidationError, match=message):
            RewardModelConfig(**{field: value})


def test_tokenizer_without_chat_template_is_refused(tiny_model_path):
    rm = RewardModel.from_pretrained(tiny_model_path)
    rm.tokenizer.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        RewardModel(rm.model, rm.tokenizer)
