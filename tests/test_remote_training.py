"""The LLM rollout engine, ``agentgym eval`` and vector stepping take ``agentgym/Remote-v0`` envs unchanged.

Every server binds 127.0.0.1 on an ephemeral port, in a thread of this process.
"""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

import agentgym  # noqa: F401  (registers the ids)
from agentgym.app.cli import main
from agentgym.app.evaluation.runner import evaluate_agent
from agentgym.app.serving.env_server import EnvServer
from agentgym.core import parts_of
from agentgym.envs.remote import RemoteVectorEnv

WEATHER = "agentgym/WeatherRun-v0"
VOLATILE = {"timing", "provenance", "env_id", "env_kwargs"}  # how and where a run ran, not what it measured


@pytest.fixture(scope="module")
def weather():
    with EnvServer(WEATHER, port=0, operator=True) as first, EnvServer(WEATHER, port=0, operator=True) as second:
        yield [first, second]


def _remote(servers, **kwargs):
    return gym.make("agentgym/Remote-v0", base_url=",".join(s.url for s in servers), env_id=WEATHER, **kwargs)


def test_summary_mode_rollouts_are_token_identical_on_remote_envs(weather, tiny_model_path):
    from agentgym.trainers.llm.rollout import RolloutConfig, rollout
    from agentgym.trainers.models.policy import LLMPolicy

    policy = LLMPolicy.from_pretrained(tiny_model_path)
    config = RolloutConfig(context="summary", history=2, max_new_tokens=12, max_turns=3, temperature=1.0)
    resets = [{"seed": i, "options": {"task_index": i}} for i in range(3)]
    played = {}
    for where, make in (("local", lambda: gym.make(WEATHER)), ("remote", lambda: _remote(weather))):
        envs = [make() for _ in resets]
        played[where] = rollout(policy, envs, resets, config, generator=torch.Generator().manual_seed(7))
        if where == "remote":
            task = envs[0].unwrapped.task_prompt()
        for env in envs:
            env.close()
    for local, remote in zip(played["local"], played["remote"], strict=True):
        assert [s.input_ids for s in remote.samples] == [s.input_ids for s in local.samples]
        assert [s.loss_mask for s in remote.samples] == [s.loss_mask for s in local.samples]
        assert [s.logprobs for s in remote.samples] == [s.logprobs for s in local.samples]
        assert (remote.actions, remote.rewards, remote.observations) == (
            local.actions,
            local.rewards,
            local.observations,
        )
    first_prompt = policy.decode(played["remote"][0].samples[0].input_ids)
    assert task and task in first_prompt  # the prompt was built from the served env's parts, not left empty
    assert sum(len(ep.samples) for ep in played["remote"]) >= 3  # summary mode: one sample per turn


def test_remote_observation_parts_are_the_local_ones(weather):
    local, remote = gym.make(WEATHER), _remote(weather)
    assert remote.reset(seed=3, options={"task_index": 4}) == local.reset(seed=3, options={"task_index": 4})
    assert parts_of(remote) == parts_of(local)
    assert remote.unwrapped.tools_prompt() == local.unwrapped.tools_prompt()
    assert remote.unwrapped.task_prompt() == local.unwrapped.task_prompt()
    assert remote.unwrapped.max_observation_length == local.unwrapped.max_observation_length
    action = local.unwrapped.sample_action(np.random.default_rng(0))
    assert remote.step(action) == local.step(action)
    assert parts_of(remote) == parts_of(local) and parts_of(remote).result is not None
    remote.close()


@pytest.mark.parametrize("agent", ["random", "oracle"])
def test_eval_through_env_urls_gives_the_local_summary(weather, agent):
    local = evaluate_agent(WEATHER, agent, episodes=12)
    env_kwargs = {"base_url": [s.url for s in weather], "env_id": WEATHER}
    remote = evaluate_agent("agentgym/Remote-v0", agent, episodes=12, env_kwargs=env_kwargs, concurrency=3)
    assert remote.failures == 0 and remote.episodes == 12
    assert remote.model_dump(exclude=VOLATILE) == local.model_dump(exclude=VOLATILE)
    assert remote.data_checksum is not None  # the served env's, as a local run records it
    if agent == "oracle":
        assert remote.success_rate == 1.0


def test_the_env_url_flag_spreads_sessions_over_the_servers(weather, tmp_path, capsys):
    urls = ",".join(s.url for s in weather)
    before = [s.sessions.counts["created"] for s in weather]
    code = main(["eval", "--env-url", urls, "--env", WEATHER, "--agent", "oracle", "--episodes", "8",
                 "--concurrency", "4", "--json", "--no-progress", "--out", str(tmp_path / "run")])  # fmt: skip
    assert code == 0
    remote = json.loads(capsys.readouterr().out)
    assert main(["eval", "--env", WEATHER, "--agent", "oracle", "--episodes", "8", "--json", "--no-progress"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in remote.items() if k not in VOLATILE} == {
        k: v for k, v in local.items() if k not in VOLATILE
    }
    created = [s.sessions.counts["created"] - b for s, b in zip(weather, before, strict=True)]
    assert min(created) >= 2, created  # 4 workers' sessions (plus the probe), round-robin over both servers


def test_a_killed_server_fails_its_episodes_and_the_eval_goes_on():
    server = EnvServer(WEATHER, port=0, operator=True).__enter__()
    env_kwargs = {"base_url": server.url, "env_id": WEATHER, "retries": 1, "backoff_s": 0.01}
    killed = []

    def kill_after_the_first(record):
        if not killed:
            killed.append(record.index)
            server.__exit__(None, None, None)

    summary = evaluate_agent(
        "agentgym/Remote-v0", "oracle", episodes=4, env_kwargs=env_kwargs, concurrency=1, callback=kill_after_the_first
    )
    assert summary.episodes == 4 and summary.completed == 1 and summary.failures == 3
    (reason,) = summary.failure_reasons
    assert reason.startswith("RemoteEnvUnavailable: the env server at") and "unreachable" in reason


def test_remote_vector_env_steps_like_n_local_envs(weather):
    n = 4
    remote = RemoteVectorEnv([s.url for s in weather], WEATHER, num_envs=n)
    local = gym.vector.SyncVectorEnv([lambda: gym.make(WEATHER)] * n)
    assert remote.single_action_space == local.single_action_space
    assert [e.unwrapped.base_url for e in remote.envs] == [weather[i % 2].url for i in range(n)]
    got, want = remote.reset(seed=11), local.reset(seed=11)
    assert got[0] == want[0] and _same_infos(got[1], want[1])
    rng = np.random.default_rng(0)
    sampler = gym.make(WEATHER).unwrapped
    ends = 0
    for _ in range(14):  # several episodes end and autoreset on the next step
        actions = tuple(sampler.sample_action(rng) for _ in range(n))
        got, want = remote.step(actions), local.step(actions)
        assert got[0] == want[0]
        for a, b in zip(got[1:4], want[1:4], strict=True):
            np.testing.assert_array_equal(a, b)
        assert _same_infos(got[4], want[4])
        ends += int(np.sum(got[2] | got[3]))
    assert ends >= 2
    remote.close()
    local.close()


def _same_infos(a, b) -> bool:
    """Batched infos (dicts of arrays, nested for dict values) hold equal values."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and a.keys() == b.keys()
            and all(_same_infos(a[k], b[k]) for k in a)
        )
    if isinstance(a, np.ndarray) and a.dtype == object:
        return (
            isinstance(b, np.ndarray) and len(a) == len(b) and all(_same_infos(x, y) for x, y in zip(a, b, strict=True))
        )
    return bool(np.array_equal(a, b)) if isinstance(a, np.ndarray) else a == b
