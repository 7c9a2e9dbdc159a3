"""DPO: the loss by hand, log π(y) over all of an episode's samples, shared parts cancelling, learning, bad configs."""

from __future__ import annotations

import json
import math

import gymnasium as gym
import pytest
import torch
from pydantic import ValidationError

from agentgym.trainers.llm.dpo import DPO, DPOConfig, cancel_shared, dpo_loss, sequence_logprobs
from agentgym.trainers.llm.preferences import PreferencePair, write_pairs
from agentgym.trainers.llm.rollout import RolloutConfig, Sample, collate, rollout
from agentgym.trainers.llm.sft import chat_sample
from agentgym.trainers.models.policy import LLMPolicy, token_logprobs
from tests.test_grpo import VOWELS
from tests.test_preferences import answer_pairs


def sample(prompt: list[int], response: list[int]) -> Sample:
    s = Sample()
    s.extend(prompt, policy=False)
    s.extend(response, policy=True)
    return s


def mean_sampled_reward(policy: LLMPolicy, n: int = 64) -> float:
    envs = [gym.make(VOWELS) for _ in range(n)]
    config = RolloutConfig(max_new_tokens=8)
    episodes = rollout(
        policy, envs, [{"seed": i} for i in range(n)], config, generator=torch.Generator().manual_seed(5)
    )
    return sum(ep.total_reward for ep in episodes) / n


# ---------------------------------------------------------------------- the math, by hand


def test_dpo_loss_by_hand():
    policy_w, policy_l = torch.tensor([-1.0, -2.0]), torch.tensor([-3.0, -2.0])
    ref_w, ref_l = torch.tensor([-2.0, -2.0]), torch.tensor([-2.0, -2.0])
    losses, r_w, r_l = dpo_loss(policy_w, policy_l, ref_w, ref_l, beta=0.5)
    # pair 1: r̂_w = 0.5·(−1+2) = 0.5, r̂_l = 0.5·(−3+2) = −0.5, h = 1 → −log σ(1); pair 2: h = 0 → log 2
    assert torch.allclose(r_w, torch.tensor([0.5, 0.0])) and torch.allclose(r_l, torch.tensor([-0.5, 0.0]))
    assert losses.tolist() == pytest.approx([math.log(1 + math.exp(-1)), math.log(2)], rel=1e-6)
    smoothed, _, _ = dpo_loss(policy_w, policy_l, ref_w, ref_l, beta=0.5, label_smoothing=0.1)
    expected = 0.9 * math.log(1 + math.exp(-1)) + 0.1 * math.log(1 + math.exp(1))  # cDPO
    assert smoothed[0].item() == pytest.approx(expected, rel=1e-6)


def test_log_prob_of_a_response_sums_the_policy_tokens_of_all_its_samples(tiny_model_path):
    policy = LLMPolicy.from_pretrained(tiny_model_path)
    turn1, turn2, other = sample([1, 40, 41], [50, 51]), sample([1, 42], [52, 53, 54]), sample([1, 43, 44, 45], [55])
    got = sequence_logprobs(policy.model, [[turn1, turn2], [other], []], policy.pad_id)
    by_hand = []
    for s in (turn1, turn2, other):
        batch = collate([s], policy.pad_id)
        logp, _ = token_logprobs(policy.model, batch["input_ids"], batch["attention_mask"], batch["loss_mask"])
        by_hand.append(logp.sum().item())  # zero off the policy tokens
    assert got.tolist() == pytest.approx([by_hand[0] + by_hand[1], by_hand[2], 0.0], abs=1e-4)


def test_what_both_responses_share_is_left_out():
    first, answer_w, answer_l = sample([1, 2], [3, 4]), sample([1, 5], [6, 7]), sample([1, 5], [6, 8])
    chosen, rejected = cancel_shared([first, answer_w], [first, answer_l])
    # the shared first turn is gone; in the answers the common prefix [1, 5, 6] is context, not policy tokens
    assert [s.input_ids for s in chosen] == [[1, 5, 6, 7]] and [s.input_ids for s in rejected] == [[1, 5, 6, 8]]
    assert chosen[0].loss_mask == [0, 0, 0, 1] and rejected[0].loss_mask == [0, 0, 0, 1]
    assert cancel_shared([first], [first]) == ([], [])  # identical responses: nothing to prefer
    longer, shorter = cancel_shared([first, answer_w], [first])
    assert longer == [answer_w] and shorter == []


# ---------------------------------------------------------------------- learning


def true_pairs(n: int) -> list[PreferencePair]:
    """Whatever the prompt says, ``suitable: true`` is preferred (a preference that needs no context)."""
    pairs = []
    for p in answer_pairs(n):
        chosen, rejected = (
            (p.chosen, p.rejected) if '"suitable": true' in p.chosen[-1]["content"] else (p.rejected, p.chosen)
        )
        pairs.append(PreferencePair(chosen, rejected))
    return pairs


def test_dpo_on_jsonl_pairs_starts_at_log2_and_learns_the_preference(tiny_model_path, tmp_path, monkeypatch):
    from agentgym.trainers.run.run_dir import RunDir

    path = write_pairs(true_pairs(80), tmp_path / "pairs.jsonl")
    config = DPOConfig(
        data=str(path), eval_split=None, eval_fraction=0.2, beta=0.1, learning_rate=1e-3, epochs=2, batch_size=16
    )
    trainer = DPO(tiny_model_path, config, out_dir=tmp_path / "dpo")
    writes = []
    write_config = RunDir.write_config
    monkeypatch.setattr(RunDir, "write_config", lambda run, *a, **kw: writes.append(a) or write_config(run, *a, **kw))
    rows = trainer.learn(progress_bar=False).metrics  # ~4 s
    before, first, last = rows[0], rows[1], rows[-1]
    assert before["eval_loss"] == pytest.approx(math.log(2), abs=1e-5)  # held-out pairs, π = π_ref: h = 0
    assert first["loss"] == pytest.approx(math.log(2), abs=1e-5)
    assert first["reward_accuracy"] == 0.0 and first["reward_margin"] == pytest.approx(0.0, abs=1e-5)
    assert last["reward_accuracy"] == 1.0 and last["reward_margin"] > 0.8 and last["loss"] < 0.4  # measured: 1.4, 0.22
    assert last["eval_reward_accuracy"] == 1.0 and last["eval_reward_margin"] > 0.8  # on 16 held-out pairs
    assert last["chosen_logp"] - last["rejected_logp"] > first["chosen_logp"] - first["rejected_logp"] + 8
    # the pairs share the prompt: only the answer tokens after the common prefix differ, and count
    pair = answer_pairs(1)[0]
    c = chat_sample(trainer.policy, pair.chosen)
    kept, _ = cancel_shared([c], [chat_sample(trainer.policy, pair.rejected)])
    assert 0 < sum(kept[0].loss_mask) < sum(c.loss_mask)
    for name in ("metrics.jsonl", "metrics.csv", "learning_curve.png", "final/model.safetensors"):
        assert (tmp_path / "dpo" / name).exists()
    info = json.loads((tmp_path / "dpo" / "config.json").read_text())
    assert info["algorithm"] == "dpo" and (info["pairs"], info["eval_pairs"], info["skipped_pairs"]) == (64, 16, 0)
    assert len(writes) == 1  # config.json is written once, when the pair counts and evaluations are known


def test_iterative_dpo_from_rollouts_raises_the_preferred_behaviour(tiny_model_path):
    policy = LLMPolicy.from_pretrained(tiny_model_path)
    before = mean_sampled_reward(policy)
    config = DPOConfig(
        env_id=VOWELS,
        rollout=RolloutConfig(max_new_tokens=8),
        tasks=32,
        generations=8,
        rounds=4,
        epochs=2,
        batch_size=8,
        learning_rate=3e-3,
        eval_episodes=4,
    )
    trainer = DPO(policy, config)
    rows = trainer.learn(progress_bar=False).metrics  # ~5 s
    after = mean_sampled_reward(policy)
    assert after > before + 0.15, (before, after)  # measured: 0.37 → 0.66 (sampled vowel share)
    assert trainer.counts["pairs"] == 4 * 32  # vowel shares of 8 replies never all tie
    margins = [r["reward_margin"] for r in rows if "reward_margin" in r]
    assert max(margins[-4:]) > 0.5 > abs(margins[0])
    assert set(trainer.evaluation) == {"before", "after"} and trainer.evaluation["after"]["episodes"] == 4
    assert sum("eval_success" in r for r in rows) == 1 + 4  # before, and after each round
    firsts = [r["loss"] for r, prev in zip(rows[1:], rows, strict=False) if r["round"] != prev["round"]]
    assert firsts == pytest.approx([math.log(2)] * 4, abs=1e-5)  # each round's reference is its start policy


def test_iterative_dpo_stops_keeping_its_progress_when_the_rollouts_no_longer_disagree(tiny_model_path, tmp_path):
    # Round 1 trains on given pairs; round 2's greedy rollouts (temperature 0) tie in every group: no pairs. The run
    # stops there and saves what round 1 learned, instead of failing after all that compute.
    policy = LLMPolicy.from_pretrained(tiny_model_path)
    config = DPOConfig(
        env_id=VOWELS,
        rollout=RolloutConfig(max_new_tokens=8, temperature=0.0),
        tasks=4,
        generations=4,
        rounds=3,
        batch_size=8,
        learning_rate=3e-3,
        eval_episodes=4,
    )
    trainer = DPO(policy, config, pairs=answer_pairs(16), out_dir=tmp_path / "dpo")
    rows = trainer.learn(progress_bar=False).metrics
    assert {r["round"] for r in rows} == {0, 1} and trainer.counts["rounds_done"] == 1
    assert (tmp_path / "dpo" / "final" / "model.safetensors").is_file()
    assert json.loads((tmp_path / "dpo" / "config.json").read_text())["rounds_done"] == 1
    assert "eval_success" in rows[-1] and trainer.evaluation["after"]["episodes"] == 4
    with pytest.raises(ValueError, match="no preference pairs"):  # with nothing to learn from at all: an error
        DPO(LLMPolicy.from_pretrained(tiny_model_path), config).learn(progress_bar=False)


def test_rpo_adds_the_mean_nll_of_the_chosen_tokens(tiny_model_path):
    pairs = true_pairs(4)
    config = DPOConfig(eval_split=None, rpo_alpha=0.5, epochs=1, batch_size=4, learning_rate=1e-9)
    trainer = DPO(tiny_model_path, config, pairs=pairs)
    row = trainer.learn(progress_bar=False).metrics[1]
    kept = [
        cancel_shared([chat_sample(trainer.policy, p.chosen)], [chat_sample(trainer.policy, p.rejected)])[0]
        for p in pairs
    ]
    n_tokens = sum(sum(s.loss_mask) for samples in kept for s in samples)
    logp = sequence_logprobs(trainer.reference, kept, trainer.policy.pad_id).sum().item()
    assert row["chosen_nll"] == pytest.approx(-logp / n_tokens, rel=1e-4)
    assert row["loss"] == pytest.approx(math.log(2) + 0.5 * row["chosen_nll"], rel=1e-5)  # h = 0 at the start


# ---------------------------------------------------------------------- bad configs fail at start-up


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("beta", 0.0, "greater than 0"),
        ("beta", -0.1, "greater than 0"),
        ("label_smoothing", 0.5, "less than 0.5"),
        ("generations", 1, "greater than or equal to 2"),
        ("learning_rate", 0, "greater than 0"),
        ("betas", 0.1, "Extra inputs are not permitted"),
    ],
)
def test_bad_dpo_configs_are_refused_with_a_clear_message(field, value, message):
    with pytest.raises(ValidationError, match=message):
        DPOConfig(**{field: value})


def test_bad_dpo_inputs_fail_before_any_compute(tiny_model_path, tmp_path):
    with pytest.raises(ValidationError, match="rounds > 1 rebuilds pairs"):
        DPOConfig(data="pairs.jsonl", rounds=2)
    with pytest.raises(FileNotFoundError, match="no preference-pairs file at .*missing.jsonl"):
        DPO(tiny_model_path, DPOConfig(data=str(tmp_path / "missing.jsonl")))
    with pytest.raises(FileNotFoundError, match="no policy at .*no-such-model"):
        DPO(tmp_path / "no-such-model", DPOConfig())
    with pytest.raises(FileNotFoundError, match="no reference model at"):
        DPO(tiny_model_path, DPOConfig(), reference=tmp_path / "no-ref")
    pair = answer_pairs(1)[0]
    path = write_pairs([PreferencePair(pair.chosen, pair.chosen)], tmp_path / "same.jsonl")
    with pytest.raises(ValueError, match="none of the 1 preference pairs is usable"):
        DPO(tiny_model_path, DPOConfig(data=str(path), eval_split=None)).learn(progress_bar=False)
