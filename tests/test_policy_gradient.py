"""Policy-gradient math and trainers: hand-computed advantages, REINFORCE and PPO solving CliffWalk,
determinism, persistence, config validation."""

import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest
import torch
from pydantic import ValidationError

import agentgym  # noqa: F401
from agentgym.core.wrappers import DiscreteToolActions
from agentgym.trainers.advantages import (
    discounted_returns,
    entropy,
    gae,
    group_relative_advantages,
    normalize,
    ppo_clip_loss,
    value_loss,
)
from agentgym.trainers.classic.ppo import PPO
from agentgym.trainers.classic.reinforce import REINFORCE

ENV_ID = "agentgym/CliffWalk-v0"


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny networks: one thread is fastest, and leaves the other core to a parallel test run."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


# ---------------------------------------------------------------------- returns and GAE


def test_discounted_returns_by_hand():
    assert torch.allclose(discounted_returns(t(1, 2, 3), gamma=0.5), t(2.75, 3.5, 3.0))
    # an episode terminates after step 1; the next one is cut off and bootstraps from 10
    got = discounted_returns(t(1, 1, 1, 1), terminated=t(0, 1, 0, 0), gamma=0.5, bootstrap_value=10.0)
    assert torch.allclose(got, t(1.5, 1.0, 4.0, 6.0))
    # truncated after step 1: V(s_2) = 4 stands in for the rest of that episode
    got = discounted_returns(t(1, 1, 1), gamma=0.5, truncated=t(0, 1, 0), next_values=t(9, 4, 9))
    assert torch.allclose(got, t(2.5, 3.0, 1.0))


def test_gae_bootstraps_on_truncation_not_on_termination():
    rewards, values, next_values = t(1, 1), t(0.5, 0.5), t(0.5, 2.0)
    gamma, lam = 0.9, 0.8
    # terminated after the last step: δ1 = 1 − 0.5, δ0 = 1 + 0.9·0.5 − 0.5, A0 = δ0 + 0.72·A1
    adv, ret = gae(rewards, values, next_values, terminated=t(0, 1), gamma=gamma, lam=lam)
    assert torch.allclose(adv, t(1.31, 0.5)) and torch.allclose(ret, t(1.81, 1.0))
    # truncated instead: δ1 = 1 + 0.9·2 − 0.5 bootstraps from V(s_2) = 2
    adv, _ = gae(rewards, values, next_values, terminated=t(0, 0), truncated=t(0, 1), gamma=gamma, lam=lam)
    assert torch.allclose(adv, t(0.95 + 0.72 * 2.3, 2.3))
    # an episode that ends at step 0 does not leak the next episode's advantage into it
    adv, _ = gae(rewards, values, t(7, 2), terminated=t(1, 0), gamma=gamma, lam=lam)
    assert torch.allclose(adv, t(0.5, 2.3))
    adv, _ = gae(rewards, values, t(7, 2), terminated=t(0, 0), truncated=t(1, 0), gamma=gamma, lam=lam)
    assert torch.allclose(adv, t(1 + 0.9 * 7 - 0.5, 2.3))


def test_gae_with_lambda_one_is_monte_carlo_minus_value():
    g = torch.Generator().manual_seed(0)
    rewards, values = torch.randn(6, generator=g), torch.randn(6, generator=g)
    next_values = torch.cat([values[1:], t(0.7)])
    terminated, truncated = t(0, 0, 1, 0, 0, 0), t(0, 0, 0, 0, 0, 1)
    adv, ret = gae(rewards, values, next_values, terminated, truncated, gamma=0.9, lam=1.0)
    mc = discounted_returns(rewards, terminated, 0.9, truncated=truncated, next_values=next_values)
    assert torch.allclose(ret, mc, atol=1e-6) and torch.allclose(adv, mc - values, atol=1e-6)
    # parallel envs: a (T, N) batch equals each column on its own
    adv2, _ = gae(torch.stack([rewards, rewards], 1), torch.stack([values, values], 1),
                  torch.stack([next_values, next_values], 1), torch.stack([terminated, terminated], 1),
                  torch.stack([truncated, truncated], 1), gamma=0.9, lam=1.0)  # fmt: skip
    assert torch.allclose(adv2[:, 1], adv)


def test_normalize():
    assert torch.allclose(normalize(t(1, 2, 3)), t(-1, 0, 1))
    assert normalize(t(5)).item() == 0.0


# ---------------------------------------------------------------------- GRPO group advantages


def test_group_relative_advantages_zero_a_tied_group_and_count_it():
    out = group_relative_advantages(t(1, 0, 1, 0, 1, 1, 1, 1), group_size=4)
    z = 0.5 / (math.sqrt(1 / 3) + 1e-4)  # (r − 0.5) / sample std of {1, 0, 1, 0}
    assert torch.allclose(out.advantages, t(z, -z, z, -z, 0, 0, 0, 0))
    assert out.tied.tolist() == [False] * 4 + [True] * 4
    assert (out.num_groups, out.num_tied_groups) == (2, 1)
    # the same groups given as ids, interleaved
    ids = torch.tensor([0, 1, 0, 1, 0, 1, 0, 1])
    out2 = group_relative_advantages(t(1, 1, 0, 1, 1, 1, 0, 1), group_ids=ids)
    assert torch.allclose(out2.advantages, t(z, 0, -z, 0, z, 0, -z, 0)) and out2.num_tied_groups == 1
    assert torch.allclose(group_relative_advantages(t(2, 0), group_size=2, scale=False).advantages, t(1, -1))
    with pytest.raises(ValueError, match="group_size"):
        group_relative_advantages(t(1, 2, 3), group_size=2)


# ---------------------------------------------------------------------- PPO losses


def test_ppo_clip_loss_on_a_crafted_batch():
    ratios = [1.5, 0.5, 1.1, 0.9]
    logp_new = torch.tensor([math.log(r) for r in ratios], requires_grad=True)
    loss, stats = ppo_clip_loss(logp_new, torch.zeros(4), t(1, 1, -1, -1), clip_eps=0.2)
    # min(r·A, clip(r)·A): 1.2 (clipped), 0.5, −1.1, −0.9
    assert loss.item() == pytest.approx(-(1.2 + 0.5 - 1.1 - 0.9) / 4)
    assert stats["clipfrac"] == pytest.approx(0.5)
    assert stats["approx_kl"] == pytest.approx(sum((r - 1) - math.log(r) for r in ratios) / 4, rel=1e-5)
    loss.backward()  # the clipped sample gets no gradient; the others −A·ratio/4
    assert torch.allclose(logp_new.grad, t(0.0, -0.125, 0.275, 0.225))


def test_value_loss_and_entropy():
    assert value_loss(t(2.0), t(3.0)).item() == pytest.approx(0.5)
    # clipped: V may move only 0.2 from 1.0, so the error counted is (1.2 − 3)²
    assert value_loss(t(2.0), t(3.0), old_values=t(1.0), clip_eps=0.2).item() == pytest.approx(1.62)
    assert entropy(torch.zeros(4)).item() == pytest.approx(math.log(4))
    assert entropy(torch.tensor([0.0, -1e9])).item() == pytest.approx(0.0, abs=1e-6)


# ---------------------------------------------------------------------- the trainers


def greedy_walk(agent) -> tuple[bool, float]:
    """Follow ``predict`` on a fresh CliffWalk: (info["success"], return)."""
    env = DiscreteToolActions(gym.make(ENV_ID))
    s, info = env.reset(seed=0)
    total = 0.0
    for _ in range(100):
        s, r, terminated, truncated, info = env.step(agent.predict(s)[0])
        total += r
        if terminated or truncated:
            break
    return bool(info["success"]), total


def k_of_n(k: int, seeds: range, run: Callable[[int], tuple[bool, Any]]) -> tuple[int, dict[int, Any]]:
    """``run(seed) -> (passed, result)`` over ``seeds`` in order, stopping once ``k`` passed or ``k`` can no
    longer be reached: the count of passes is what "at least k of these n seeds" would see, for fewer runs."""
    passed, results = 0, {}
    for i, seed in enumerate(seeds):
        ok, results[seed] = run(seed)
        passed += ok
        if passed >= k or passed + len(seeds) - i - 1 < k:
            break
    return passed, results


# Learning claims hold for k of n seeds, never for one seed picked to pass: float32 training can take another
# path on another CPU (its matrix kernels round differently), so a seed that passes on one machine may fail on the
# next (PPO seed 0 did: greedy -19 here, on an AMD EPYC). Measured on that machine, which sets the margins:
# - PPO, 12k env steps: the final greedy policy reaches the goal with return >= -17 on 38 of seeds 0-39 (-19 and
#   a -100 the exceptions); the first greedy success came after 6.5k-11.8k steps on all 40. Test: 3 of 5.
# - REINFORCE, stopping at the first greedy success with return >= -17 (evaluated every 20 episodes): 20 of seeds
#   0-19 within 1000 episodes (after 340-760; with a fixed 600 episodes only 14 of 20 still hold the goal at the
#   end: REINFORCE stays noisy once converged). Test: 2 of 3.
# - FrozenLake (non-slippery), stopping at the goal: PPO 20 of 20 within 2.6k of 5k steps; REINFORCE 20 of 20
#   within 520 of 1000 episodes (11 of 20 within the 300 episodes this test once gave one seed). Test: 3 of 4.


def test_ppo_solves_cliff_walk():
    def run(seed):
        agent = PPO(gym.make(ENV_ID), seed=seed)
        first = {}

        def watch(_agent, m):
            if m.get("greedy_success") and not first:
                first.update(timesteps=m["timesteps"], greedy_return=m["greedy_return"])

        agent.learn(12_000, callback=watch)
        success, ret = greedy_walk(agent)
        logged.update(agent.last_update)
        return bool(first) and success and ret >= -17, (first, ret)

    logged: dict = {}
    passed, results = k_of_n(3, range(5), run)
    print(f"PPO, per seed (first greedy success, final greedy return): {results}")
    assert passed >= 3, results
    assert {"policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "explained_variance"} <= logged.keys()


def test_reinforce_solves_cliff_walk():
    def run(seed):
        agent = REINFORCE(gym.make(ENV_ID), seed=seed, eval_every=20)
        agent.learn(1000, callback=lambda _, m: not (m.get("greedy_success") and m["greedy_return"] >= -17))
        success, ret = greedy_walk(agent)  # the policy training stopped at
        return success and ret >= -17, (agent.episodes_done, ret)

    passed, results = k_of_n(2, range(3), run)
    print(f"REINFORCE, per seed (episodes to the goal, greedy return): {results}")
    assert passed >= 2, results


@pytest.mark.parametrize(("cls", "budget"), [(REINFORCE, 1000), (PPO, 5000)])
def test_solves_non_slippery_frozen_lake(cls, budget):
    def run(seed):
        agent = cls(gym.make("FrozenLake-v1", is_slippery=False), seed=seed, eval_every=5)
        agent.learn(budget, callback=lambda _, m: m.get("greedy_return") != 1.0)  # stop once the goal is reached
        return agent.greedy_return() == 1.0, agent.episodes_done

    passed, results = k_of_n(3, range(4), run)
    assert passed >= 3, results


@pytest.mark.parametrize(("cls", "budget"), [(REINFORCE, 20), (PPO, 600)])
def test_deterministic_under_seed(cls, budget):
    def params(seed):
        agent = cls(gym.make(ENV_ID, is_slippery=True), seed=seed, eval_every=0).learn(budget)
        return torch.cat([p.detach().flatten() for p in [*agent.policy.parameters(), *agent.value.parameters()]])

    assert torch.equal(params(1), params(1)) and not torch.equal(params(1), params(2))


@pytest.mark.parametrize(("cls", "budget"), [(REINFORCE, 8), (PPO, 300)])
def test_save_load_roundtrip(cls, budget, tmp_path):
    agent = cls(gym.make(ENV_ID), seed=0, eval_every=0).learn(budget)
    path = agent.save(tmp_path / "agent.pt")
    loaded = cls.load(path)  # the env is made from the saved id
    assert loaded.config == agent.config and loaded.episodes_done == agent.episodes_done
    assert [loaded.predict(s)[0] for s in range(48)] == [agent.predict(s)[0] for s in range(48)]
    assert torch.equal(loaded.action_table(), agent.action_table())
    assert loaded.predict(36, deterministic=False)[0] in range(4)
    other = PPO if cls is REINFORCE else REINFORCE
    with pytest.raises(ValueError, match=cls.algorithm):
        other.load(path)
    with pytest.raises(ValueError, match="shape"):
        cls.load(path, env=gym.make("FrozenLake-v1"))


@pytest.mark.parametrize(
    ("cls", "bad"),
    [
        (REINFORCE, {"learning_rate": 0}),
        (REINFORCE, {"baseline": "median"}),
        (REINFORCE, {"episodes_per_update": 0}),
        (REINFORCE, {"lr": 0.1}),
        (PPO, {"clip_eps": -0.1}),
        (PPO, {"gae_lambda": 1.5}),
        (PPO, {"n_steps": 0}),
        (PPO, {"total_timesteps": 10}),
    ],
)
def test_bad_config_is_rejected_with_the_field_named(cls, bad):
    with pytest.raises(ValidationError, match=next(iter(bad))):
        cls(gym.make(ENV_ID), **bad)


@pytest.mark.parametrize(("cls", "budget"), [(REINFORCE, 50), (PPO, 5000)])
def test_callback_gets_episode_metrics_and_can_stop(cls, budget):
    rows = []
    agent = cls(gym.make(ENV_ID), seed=0, eval_every=2)
    agent.learn(budget, callback=lambda _, m: rows.append(m) or m["episode"] < 6)
    assert agent.episodes_done == 6 and [m["episode"] for m in rows] == [1, 2, 3, 4, 5, 6]
    assert {"episode", "timesteps", "return", "length", "success"} <= rows[0].keys()
    assert "greedy_return" in rows[1] and "greedy_return" not in rows[0]
    if cls is REINFORCE:
        assert {"loss", "policy_loss", "value_loss", "entropy"} <= rows[3].keys() and "loss" not in rows[2]


def test_rejects_env_without_discrete_view():
    with pytest.raises(TypeError, match="Discrete"):
        PPO(gym.make("CartPole-v1"))


def test_each_algorithm_file_stands_alone():
    """PPO and REINFORCE share their networks through agentgym.trainers.classic.torch_agent, never through each other,
    so editing one algorithm's file cannot change the other (imports inside functions count too)."""
    import ast
    from pathlib import Path

    trainers = Path(__file__).resolve().parents[1] / "trainers" / "classic"
    for name, other in [("ppo", "reinforce"), ("reinforce", "ppo")]:
        tree = ast.parse((trainers / f"{name}.py").read_text(encoding="utf-8"))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert f"agentgym.trainers.classic.{other}" not in imported, f"{name}.py imports {other}.py"
        assert "agentgym.trainers.classic.torch_agent" in imported
