"""Turn-level credit assignment: both GRPO schemes and PPO's per-turn discount, computed by hand on 3-turn toys."""

from __future__ import annotations

import math
import statistics

import gymnasium as gym
import pytest
import torch

import agentgym  # noqa: F401
from agentgym.core.spaces import AnyText
from agentgym.trainers.advantages import gae, turn_advantages
from agentgym.trainers.llm.grpo import GRPO, GRPOConfig
from agentgym.trainers.llm.rollout import Episode, RolloutConfig, Sample

THREE_TURNS = "test/ThreeVowels-v0"
MODEL = "tiny"  # the shipped base: loads in a second, nothing to build


class ThreeVowelsEnv(gym.Env):
    """Three turns; each pays the share of vowels among the response's letters."""

    def __init__(self) -> None:
        self.observation_space = AnyText(1000)
        self.action_space = AnyText(1000)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.turn = 0
        return "Say something.", {}

    def step(self, action):
        letters = [c for c in action.lower() if c.isalpha()]
        reward = sum(c in "aeiou" for c in letters) / max(1, len(letters))
        self.turn += 1
        return (
            "Again.",
            reward,
            self.turn == 3,
            False,
            {"success": reward > 0.5, "reward_components": {"vowels": reward}},
        )


if THREE_TURNS not in gym.registry:
    gym.register(THREE_TURNS, entry_point=ThreeVowelsEnv)

# The toy batch: two groups (G = 2). Group 0 plays 3 turns twice; group 1 has episodes of 1 and 2 turns.
REWARDS = [[1.0, 0.0, 2.0], [0.0, 0.0, 1.0], [1.0], [0.0, 1.0]]
GAMMA = 0.5
# returns-to-go G_t = r_t + 0.5 G_{t+1}:  [1.5, 1, 2], [0.25, 0.5, 1], [1], [0.5, 1]
RETURNS = [[1.5, 1.0, 2.0], [0.25, 0.5, 1.0], [1.0], [0.5, 1.0]]
# group baselines per turn index: group 0: (0.875, 0.75, 1.5); group 1: (0.75, 1) (turn 1: only the 2-turn episode)
MINUS_BASELINE = [[0.625, 0.25, 0.5], [-0.625, -0.25, -0.5], [0.25], [-0.25, 0.0]]


def trainer(**overrides) -> GRPO:
    config = dict(
        env_id=THREE_TURNS,
        rollout=RolloutConfig(max_new_tokens=4),
        tasks_per_step=2,
        num_generations=2,
        learning_rate=3e-3,
        beta=0.0,
        checkpoint_every=0,
        gamma=GAMMA,
    )
    return GRPO(MODEL, GRPOConfig(**{**config, **overrides}))


def test_returns_to_go_minus_the_group_baseline_by_hand():
    out = turn_advantages([torch.tensor(r) for r in REWARDS], [0, 0, 1, 1], gamma=GAMMA, lam=1.0)
    for got, want in zip(out, MINUS_BASELINE, strict=True):
        assert got.tolist() == pytest.approx(want, abs=1e-7)
    # no baseline: the plain returns-to-go
    plain = turn_advantages([torch.tensor(r) for r in REWARDS], None, gamma=GAMMA, lam=1.0)
    assert [a.tolist() for a in plain] == [pytest.approx(r) for r in RETURNS]


def test_lambda_blends_in_the_later_turns_baseline_by_hand():
    # group 0: δ_t = r_t + γ b_{t+1} − b_t = [1 + 0.375 − 0.875, 0 + 0.75 − 0.75, 2 − 1.5] = [0.5, 0, 0.5]
    # λ = 0 gives δ; λ = 0.5 (γλ = 0.25): A_2 = 0.5, A_1 = 0 + 0.25 · 0.5, A_0 = 0.5 + 0.25 · 0.125
    rewards = [torch.tensor(r) for r in REWARDS[:2]]
    td = turn_advantages(rewards, [0, 0], gamma=GAMMA, lam=0.0)
    assert td[0].tolist() == pytest.approx([0.5, 0.0, 0.5]) and td[1].tolist() == pytest.approx([-0.5, 0.0, -0.5])
    half = turn_advantages(rewards, [0, 0], gamma=GAMMA, lam=0.5)
    assert half[0].tolist() == pytest.approx([0.53125, 0.125, 0.5])
    assert half[1].tolist() == pytest.approx([-0.53125, -0.125, -0.5])
    with pytest.raises(ValueError, match="3 group ids for 2 episodes"):
        turn_advantages(rewards, [0, 0, 1])


def test_trajectory_scheme_by_hand():
    """GRPO: R = Σ γ^t r_t per episode, group-relative, the same advantage on every turn."""
    advantages, groups = trainer().advantages(REWARDS)
    # R = 1 + 0.25 · 2 = 1.5 and 0.25 (group 0); 1 and 0.5 (group 1): centred ±0.625 and ±0.25
    std0, std1 = math.sqrt(2 * 0.625**2), math.sqrt(2 * 0.25**2)
    expected = [0.625 / (std0 + 1e-4), -0.625 / (std0 + 1e-4), 0.25 / (std1 + 1e-4), -0.25 / (std1 + 1e-4)]
    for got, want, n in zip(advantages, expected, [3, 3, 1, 2], strict=True):
        assert got == pytest.approx([want] * n, rel=1e-6)
    assert groups.num_tied_groups == 0


def test_turn_scheme_with_group_baseline_by_hand():
    """REINFORCE++ with a group baseline: G_t − b_t, divided by the batch's sample std over all 9 turns."""
    advantages, _ = trainer(credit_assignment="turn").advantages(REWARDS)
    flat = [a for row in MINUS_BASELINE for a in row]
    std = statistics.stdev(flat)
    for got, want in zip(advantages, MINUS_BASELINE, strict=True):
        assert got == pytest.approx([a / (std + 1e-4) for a in want], rel=1e-6)


def test_turn_scheme_without_baseline_by_hand():
    """Return-batch-normalised REINFORCE: the returns-to-go z-scored over the batch's turns."""
    advantages, _ = trainer(credit_assignment="turn", group_baseline=False).advantages(REWARDS)
    flat = [g for row in RETURNS for g in row]
    mean, std = sum(flat) / len(flat), statistics.stdev(flat)
    for got, want in zip(advantages, RETURNS, strict=True):
        assert got == pytest.approx([(g - mean) / (std + 1e-4) for g in want], rel=1e-6)


def test_per_turn_advantages_reach_their_turns_tokens():
    """At ratio 1 and β = 0 the dapo loss is −Σ_tokens A / tokens: each turn's advantage on its own tokens only,
    in one append-mode sample (three runs of policy tokens) and in summary mode (one sample per turn)."""
    grpo = trainer(tasks_per_step=1, loss_type="dapo")
    append = Sample()
    append.extend([5], policy=False)
    append.extend([7], policy=True)  # turn 0: 1 token
    append.extend([6, 6], policy=False)
    append.extend([8, 9], policy=True)  # turn 1: 2 tokens
    append.extend([6], policy=False)
    append.extend([10], policy=True)  # turn 2: 1 token
    summary = []
    for n in (1, 2, 1):
        s = Sample()
        s.extend([5, 6], policy=False)
        s.extend([11] * n, policy=True)
        summary.append(s)
    turns = dict(actions=["a", "b", "c"], rewards=[0.0, 0.0, 0.0])
    episodes = [Episode({}, samples=[append], **turns), Episode({}, samples=summary, **turns)]
    per_turn = [[1.0, 2.0, -1.0], [0.5, -3.0, 4.0]]
    stats = grpo._update(episodes, per_turn, torch.tensor([False, False]))
    expected = -((1.0 + 2 * 2.0 - 1.0) + (0.5 - 2 * 3.0 + 4.0)) / 8
    assert stats["loss"] == pytest.approx(expected, rel=1e-6)


def test_turn_scheme_trains_and_episodes_keep_reward_components():
    grpo = trainer(credit_assignment="turn", gamma=0.9, lam=0.95, rollout=RolloutConfig(max_new_tokens=16))
    before = [p.detach().clone() for p in grpo.policy.model.parameters()]
    row = grpo.train_step()
    assert row["turns"] == 3 and math.isfinite(row["loss"])
    assert any(not torch.equal(p, q) for p, q in zip(before, grpo.policy.model.parameters(), strict=True))
    from agentgym.trainers.llm.rollout import rollout

    (episode,) = rollout(grpo.policy, grpo.envs[:1], [{"seed": 0}], grpo.config.rollout)
    assert [c["vowels"] for c in episode.reward_components] == episode.rewards


def test_ppo_discounts_per_turn_by_hand():
    """Per-step γ/λ: 1 inside a turn, γ/λ across a turn boundary. Tokens: turn 0 = 2 tokens, turn 1 = 1 token,
    V = 0, rewards at turn ends [0, 1, 2]: the return of every token of turn 0 is 1 + γ · 2 (not γ^k-discounted
    per token)."""
    rewards = torch.tensor([0.0, 1.0, 2.0])
    zeros, terminal = torch.zeros(3), torch.tensor([0.0, 0.0, 1.0])
    gamma = torch.tensor([1.0, 0.5, 1.0])  # the step out of token 1 (turn 0's end) is discounted
    _, ret = gae(rewards, zeros, zeros, terminal, gamma=gamma, lam=torch.ones(3))
    assert ret.tolist() == pytest.approx([1 + 0.5 * 2, 1 + 0.5 * 2, 2.0])
    lam = torch.tensor([1.0, 0.8, 1.0])
    values = torch.tensor([1.0, 1.0, 1.0])
    adv, _ = gae(rewards, values, torch.tensor([1.0, 1.0, 0.0]), terminal, gamma=gamma, lam=lam)
    # δ = [0 + 1 − 1, 1 + 0.5 − 1, 2 − 1] = [0, 0.5, 1]; A_2 = 1, A_1 = 0.5 + 0.4 · 1, A_0 = 0 + 1 · 0.9
    assert adv.tolist() == pytest.approx([0.9, 0.9, 1.0])


def test_ppo_per_turn_discount_runs():
    from agentgym.trainers.llm.ppo import LLMPPO, LLMPPOConfig

    config = LLMPPOConfig(
        env_id=THREE_TURNS,
        rollout=RolloutConfig(max_new_tokens=4),
        episodes_per_step=2,
        beta=0.0,
        checkpoint_every=0,
        gamma=0.5,
        discount_unit="turn",
    )
    row = LLMPPO(MODEL, config).train_step()
    assert row["turns"] == 3 and math.isfinite(row["policy_loss"])


@pytest.mark.parametrize(("field", "value"), [("credit_assignment", "token"), ("gamma", 1.5), ("lam", -0.1)])
def test_bad_credit_settings_are_refused(field, value):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=field):
        GRPOConfig(**{field: value})
