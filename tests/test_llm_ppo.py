"""PPO for language models: GAE over policy tokens only, learning a toy reward, value head, every env."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
import torch
from pydantic import ValidationError

from agentgym.core.spaces import AnyText
from agentgym.trainers.llm.ppo import LLMPPO, VALUE_HEAD_FILE, LLMPPOConfig
from agentgym.trainers.llm.rollout import RolloutConfig, rollout
from tests.test_grpo import VOWELS

TWO_TURNS = "test/TwoTurns-v0"


class TwoTurnEnv(gym.Env):
    """Two turns whatever the policy writes: reward 1 after the first, 2 after the second."""

    def __init__(self) -> None:
        self.observation_space = AnyText(1000)
        self.action_space = AnyText(1000)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.turn = 0
        return "Go.", {"summary": "turn 0"}

    def step(self, action):
        self.turn += 1
        done = self.turn == 2
        return "Again." if not done else "Done.", float(self.turn), done, False, {"summary": f"turn {self.turn}"}


if TWO_TURNS not in gym.registry:
    gym.register(TWO_TURNS, entry_point=TwoTurnEnv)


def ppo_config(**overrides) -> LLMPPOConfig:
    values = dict(
        env_id=VOWELS,
        rollout=RolloutConfig(max_new_tokens=8),
        episodes_per_step=32,
        learning_rate=3e-3,
        beta=0.0,
        checkpoint_every=0,
        seed=0,
    )
    return LLMPPOConfig(**{**values, **overrides})


@pytest.mark.parametrize("context", ["append", "summary"])
def test_returns_flow_over_policy_tokens_and_skip_env_tokens(context, tiny_model_path):
    """With V ≡ 0 (the value head starts at zero), γ = λ = 1 and β = 0, GAE's advantage of a token is
    the reward still to come: 1 + 2 = 3 on every first-turn token, 2 on every second-turn token, and
    exactly 0 on every token the env or the template wrote."""
    trainer = LLMPPO(
        tiny_model_path,
        ppo_config(env_id=TWO_TURNS, rollout=RolloutConfig(max_new_tokens=4, context=context), whiten_advantages=False),
        gamma=1.0,
        lam=1.0,
    )
    episodes = rollout(trainer.policy, trainer.envs[:2], [{"seed": 0}, {"seed": 1}], trainer.config.rollout)
    data = trainer._advantages(episodes, trainer.turn_rewards(episodes))
    for sample, adv, ret in zip(data["samples"], data["advantages"], data["returns"], strict=True):
        mask = torch.tensor(sample.loss_mask, dtype=torch.bool)
        assert (adv[~mask] == 0).all() and (ret[~mask] == 0).all()
        runs = []  # the values on each contiguous run of policy tokens (one run per turn)
        for t, m in enumerate(sample.loss_mask):
            if m and (t == 0 or not sample.loss_mask[t - 1]):
                runs.append([])
            if m:
                runs[-1].append(float(adv[t]))
        expected = [[3.0], [2.0]] if context == "append" else None
        if context == "append":
            assert [sorted(set(r)) for r in runs] == expected
        else:  # one turn per sample
            assert len(runs) == 1 and len(set(runs[0])) == 1 and runs[0][0] in (3.0, 2.0)
    assert data["stats"]["value_mean"] == 0.0


def test_kl_penalty_enters_the_reward_per_token(tiny_model_path):
    """With β > 0 and a reference equal to the policy, the KL term is 0, so the returns are unchanged;
    after the policy moves, the per-token penalty lowers them."""
    trainer = LLMPPO(tiny_model_path, ppo_config(beta=0.5, whiten_advantages=False))
    resets = [{"seed": i} for i in range(4)]
    episodes = rollout(trainer.policy, trainer.envs[:4], resets, trainer.config.rollout)
    data = trainer._advantages(episodes, trainer.turn_rewards(episodes))
    assert data["stats"]["kl"] == pytest.approx(0.0, abs=1e-5)
    with torch.no_grad():
        for p in trainer.policy.model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    moved = trainer._advantages(episodes, trainer.turn_rewards(episodes))
    assert moved["stats"]["kl"] != pytest.approx(0.0, abs=1e-4)


def test_ppo_raises_a_toy_reward_and_its_critic_learns(tiny_model_path):
    trainer = LLMPPO(tiny_model_path, ppo_config())
    rows = [trainer.train_step() for _ in range(30)]
    first, last = rows[0]["reward"], sum(r["reward"] for r in rows[-3:]) / 3
    assert first < 0.5 and last > 0.9, (first, last)
    assert rows[0]["clipfrac"] > 0 and all(0 <= r["clipfrac"] <= 1 for r in rows)
    assert trainer._value_head.weight.abs().sum() > 0  # the critic moved off its zero init


def test_ppo_writes_value_head_and_resumes(tmp_path, tiny_model_path):
    run = tmp_path / "run"
    trainer = LLMPPO(tiny_model_path, ppo_config(episodes_per_step=8, checkpoint_every=2, eval_episodes=4), out_dir=run)
    rows = trainer.learn(2, progress_bar=False).metrics
    assert [r["step"] for r in rows] == [1, 2] and 0 <= rows[1]["eval_success"] <= 1
    head = trainer._value_head.weight.detach().clone()
    assert (run / "checkpoints" / "step-000002" / VALUE_HEAD_FILE).exists() and (
        run / "final" / VALUE_HEAD_FILE
    ).exists()
    logged = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    assert len(logged) == 2 * 8 and {e["training_step"] for e in logged} == {1, 2}
    assert all(len(e["observations"]) == e["turns"] + 1 for e in logged)  # the log keeps what the policy saw
    resumed = LLMPPO.resume(run)
    assert resumed.step == 2 and torch.equal(resumed._value_head.weight, head)
    resumed.learn(3, progress_bar=False)
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["step"] == 3


def test_bad_ppo_configs_fail_before_compute(tmp_path):
    with pytest.raises(ValidationError, match="beta"):
        LLMPPOConfig(beta=-0.1)
    with pytest.raises(ValidationError, match="reward model directory"):
        LLMPPOConfig(reward_model=str(tmp_path / "missing"))
    with pytest.raises(ValidationError, match="lam"):
        LLMPPOConfig(lam=1.5)


def test_a_reward_model_replaces_or_mixes_with_the_env_reward(tiny_model_path, tmp_path):
    """reward = env_reward_coef · env reward per turn + reward_model_coef · RM(transcript) at the last turn."""
    from agentgym.trainers.llm.reward_model import RewardModel
    from agentgym.trainers.models.policy import LLMPolicy

    torch.manual_seed(0)
    RewardModel.from_policy(LLMPolicy.from_pretrained(tiny_model_path)).save_pretrained(tmp_path / "rm")
    config = ppo_config(env_id=TWO_TURNS, episodes_per_step=4, reward_model=str(tmp_path / "rm"))
    trainer = LLMPPO(tiny_model_path, config, env_reward_coef=0.5, reward_model_coef=2.0, out_dir=tmp_path / "run")
    episodes = rollout(trainer.policy, trainer.envs, [{"seed": i} for i in range(4)], trainer.config.rollout)
    scores = trainer.reward_model.score_episodes(episodes)
    assert len(set(scores)) > 1  # the transcripts differ, so do their scores
    rewards = trainer.turn_rewards(episodes)
    assert rewards == [[0.5, pytest.approx(0.5 * 2 + 2.0 * s)] for s in scores]
    assert trainer.episode_log.pending == []  # turn_rewards computes rewards; the step logs them
    trainer.log_episodes(episodes, rewards, trainer.reward_model_scores(episodes))
    logged = trainer.episode_log.pending
    assert [e.rm_reward for e in logged] == pytest.approx(scores) and all(e.total_reward == 3.0 for e in logged)


def test_truncation_penalty_charges_episodes_that_never_finished(tiny_model_path):
    config = ppo_config(env_id=TWO_TURNS, episodes_per_step=2, rollout=RolloutConfig(max_new_tokens=4, max_turns=1))
    trainer = LLMPPO(tiny_model_path, config, truncation_penalty=0.75)
    episodes = rollout(trainer.policy, trainer.envs, [{"seed": 0}, {"seed": 1}], trainer.config.rollout)
    assert all(ep.truncation == "max_turns" for ep in episodes)
    assert trainer.turn_rewards(episodes) == [[1.0 - 0.75], [1.0 - 0.75]]
