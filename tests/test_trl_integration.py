"""agentgym.app.integrations.trl: TRL's GRPOTrainer trains the tiny model on WeatherRun through environment_factory and
through rollout_func, and the rewards TRL logs are the env's own when the same actions are replayed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import torch

trl = pytest.importorskip("trl")
pytestmark = pytest.mark.filterwarnings("ignore:.*gradient_checkpointing.*:FutureWarning")  # transformers 5 vs TRL

import agentgym  # noqa: E402,F401
from agentgym.app.integrations.trl import (  # noqa: E402
    RESET_KEY,
    AgentGymRollout,
    agentgym_reward_func,
    env_return,
    environment_factory,
    make_dataset,
)

ROOT = Path(__file__).resolve().parents[1]
ENV = "agentgym/WeatherRun-v0"
CITY = "Auckland"  # task 0 of the train split: a suitable day
R_MIN, R_MAX = -0.5, 1.5  # WeatherRun's return range with the default weights


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.set_num_threads(1)


def grpo_config(tmp_path: Path, **overrides):
    """2 steps × 1 prompt × 4 generations on CPU, logging every step, saving nothing."""
    values = dict(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        fp16=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        dataloader_num_workers=0,
        max_steps=2,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=1,
        num_generations=4,
        learning_rate=1e-3,
        beta=0.0,
        seed=0,
    )
    return trl.GRPOConfig(**{**values, **overrides})


def steer(tokenizer, texts: list[str], *, close: bool, step: float = 10.0) -> list:
    """``generation_kwargs["sequence_bias"]`` that makes a random model write one of ``texts`` (then end of turn if
    ``close``): every prefix of every text gets a bias growing with its length, so the longest match wins and the
    model picks at random where the texts part ways."""
    bias: dict[tuple[int, ...], float] = {}
    for text in texts:
        ids = tokenizer.encode(text, add_special_tokens=False) + ([tokenizer.eos_token_id] if close else [])
        for k in range(1, len(ids) + 1):
            bias[tuple(ids[:k])] = step * k
    return [[list(ids), value] for ids, value in bias.items()]


def replay(reset: dict, actions: list[str]) -> float:
    """The return of ``actions`` from ``reset`` in a fresh env made without the integration."""
    env = gym.make(ENV, split="train")
    env.reset(**reset)
    total = 0.0
    for action in actions:
        _, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        if terminated or truncated:
            break
    env.close()
    return total


def weights(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def logged(trainer, key: str) -> list[float]:
    return [row[key] for row in trainer.state.log_history if key in row]


# ---------------------------------------------------------------------- environment_factory


def test_environment_factory_trains_and_logs_the_env_reward(tiny_model_path, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    # TRL's tool loop needs a template it can parse tool calls from: Qwen3's, which TRL ships.
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    calls = [
        f'<tool_call>\n{{"name": "get_weather", "arguments": {{"city": "{CITY}"}}}}\n</tool_call>',
        '<tool_call>\n{"name": "answer", "arguments": {"suitable": true}}\n</tool_call>',
        '<tool_call>\n{"name": "answer", "arguments": {"suitable": false}}\n</tool_call>',
    ]
    factory = environment_factory(ENV, "train")
    batches: list[list[tuple[dict, list[str], list[float], float]]] = []

    def record(completions, environments, **kwargs):
        batches.append([(e.reset_arguments, list(e.actions), list(e.rewards), e.get_reward()) for e in environments])
        return [0.0] * len(completions)

    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=[record],
        args=grpo_config(
            tmp_path,
            max_completion_length=192,
            max_tool_calling_iterations=3,
            generation_kwargs={"sequence_bias": steer(tokenizer, calls, close=True)},
        ),
        train_dataset=make_dataset(ENV, "train", n=1, tools_in_prompt=False),
        processing_class=tokenizer,
        environment_factory=factory,
    )
    before = weights(trainer.model)
    trainer.train()

    assert len(batches) == 2 and all(len(b) == 4 for b in batches)
    episodes = [episode for batch in batches for episode in batch]
    assert all(e[0] == {"seed": 0, "options": {"task_index": 0}} for e in episodes)
    assert sum(len(e[1]) for e in episodes) >= 4  # the env's tools were called, through the env
    names = {
        json.loads(a.removeprefix("<tool_call>").removesuffix("</tool_call>"))["name"] for e in episodes for a in e[1]
    }
    assert names <= {"get_weather", "answer"}
    for reset, actions, rewards, total in episodes:
        assert total == pytest.approx(sum(rewards))
        assert replay(reset, actions) == pytest.approx(total)  # the env gives the same return on a replay
        assert R_MIN <= total <= R_MAX
    # TRL logged the environment's reward (get_reward) per step: the mean of the batch's returns
    env_means = logged(trainer, "rewards/WeatherRunEnv/mean")
    assert env_means == pytest.approx([sum(e[3] for e in b) / len(b) for b in batches])
    assert logged(trainer, "reward") == pytest.approx(env_means)
    assert all(f > 0 for f in logged(trainer, "tools/call_frequency"))
    # the groups were not all ties, so the policy got a gradient and the weights moved
    assert any(len({e[3] for e in b}) > 1 for b in batches)
    after = weights(trainer.model)
    assert any(not torch.equal(before[n], after[n]) for n in before)
    assert len(factory.instances) == 4


# ---------------------------------------------------------------------- rollout_func


def test_rollout_func_trains_with_env_masks_and_env_returns(tiny_model_path, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)  # the tiny model's own ChatML: no tools support
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    calls = [
        f'<tool_call>{{"name": "get_weather", "arguments": {{"city": "{CITY}"}}}}</tool_call>',
        '<tool_call>{"name": "answer", "arguments": {"suitable": true}}</tool_call>',
        '<tool_call>{"name": "answer", "arguments": {"suitable": false}}</tool_call>',
    ]
    rollout = AgentGymRollout(ENV, "train", max_new_tokens=32)
    seen: list[tuple[list, dict]] = []

    def recording_rollout(prompts, trainer):
        out = rollout(prompts, trainer)
        seen.append((prompts, out))
        return out

    dataset = make_dataset(ENV, "train", n=1)
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=[env_return],
        args=grpo_config(
            tmp_path,
            max_completion_length=256,
            generation_kwargs={"sequence_bias": steer(tokenizer, calls, close=False)},
        ),
        train_dataset=dataset,
        processing_class=tokenizer,
        rollout_func=recording_rollout,
    )
    before = weights(trainer.model)
    trainer.train()

    assert len(seen) == 2
    messages = [{k: v for k, v in m.items() if k != RESET_KEY} for m in dataset[0]["prompt"]]
    first = tokenizer.encode(
        tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False), add_special_tokens=False
    )
    hidden = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    turns = 0
    for prompts, out in seen:
        assert len(prompts) == len(out["completion_ids"]) == 4
        for prompt, p_ids, c_ids, mask, ret in zip(
            prompts, out["prompt_ids"], out["completion_ids"], out["env_mask"], out["env_return"], strict=True
        ):
            assert p_ids == first  # the prompt TRL trains on is the dataset's prompt, as the chat template renders it
            assert len(mask) == len(c_ids)
            # cut the completion into the model's runs (mask 1) and the env's (mask 0)
            actions, env_text, run = [], "", []
            for token, m in zip([*c_ids, -1], [*mask, 0], strict=True):
                if m:
                    run.append(token)
                    continue
                if run:
                    actions.append(tokenizer.decode([t for t in run if t not in hidden], skip_special_tokens=False))
                    run = []
                if token >= 0:
                    env_text += tokenizer.decode([token], skip_special_tokens=False)
            turns += len(actions)
            assert all("<tool_call>" in a and a.endswith("</tool_call>") for a in actions), actions
            # an episode the env ended (answer) is closed with end-of-turn; one the token budget cut is not
            assert (c_ids[-1] == tokenizer.eos_token_id) == ('"answer"' in actions[-1])
            if len(actions) > 1:
                assert "Result:" in env_text  # the env's replies are in the completion, masked out of the loss
            reset = json.loads(next(m[RESET_KEY] for m in prompt if m.get(RESET_KEY)))
            assert replay(reset, actions) == pytest.approx(ret)
            assert R_MIN <= ret <= R_MAX
    assert turns >= 8
    logged_means = logged(trainer, "rewards/env_return/mean")
    assert logged_means == pytest.approx([sum(out["env_return"]) / 4 for _, out in seen])
    assert logged(trainer, "env_turns") == pytest.approx([sum(out["env_turns"]) / 4 for _, out in seen])
    assert logged(trainer, "env_success") == pytest.approx([sum(out["env_success"]) / 4 for _, out in seen])
    assert any(len(set(out["env_return"])) > 1 for _, out in seen)
    after = weights(trainer.model)
    assert any(not torch.equal(before[n], after[n]) for n in before)
    # every episode is logged as agentgym's trainers log theirs, so the audit and the flywheel read the TRL run
    from agentgym.app.evaluation.audit import audit_run, read_logged_episodes

    log_dir = tmp_path / "out" / "agentgym"
    records = read_logged_episodes(log_dir / "episodes.jsonl")
    assert [r.training_step for r in records] == [1] * 4 + [2] * 4
    assert [r.total_reward for r in records] == pytest.approx([ret for _, out in seen for ret in out["env_return"]])
    assert [r.training_reward for r in records] == [r.total_reward for r in records]
    assert all(r.observations and len(r.observations) == r.turns + 1 for r in records)
    assert audit_run(log_dir, quantile=0.0).episodes == 8


def test_rollout_func_refuses_vllm_and_prompts_without_a_task(tmp_path):
    rollout = AgentGymRollout(ENV, "train")

    class FakeTrainer:
        use_vllm = True

    with pytest.raises(ValueError, match="environment_factory"):
        rollout([[{"role": "user", "content": "hi"}]], FakeTrainer())
    FakeTrainer.use_vllm = False
    with pytest.raises(ValueError, match="make_dataset"):
        rollout([[{"role": "user", "content": "hi"}]], FakeTrainer())
    with pytest.raises(ValueError, match="env_return"):
        env_return(["x"])


# ---------------------------------------------------------------------- single-turn reward function


def test_reward_function_replays_tool_calls_in_the_prompts_task():
    dataset = make_dataset(ENV, "train", n=2)
    reward = agentgym_reward_func(ENV, "train")
    assert trl.trainer.utils.get_callable_name(reward) == "agentgym_reward"
    env = gym.make(ENV, split="train")
    env.reset(seed=1, options={"task_index": 1})
    city, truth = env.unwrapped.city, env.unwrapped._truth()

    def call(name, **arguments):
        return {"type": "function", "function": {"name": name, "arguments": arguments}}

    parsed = [call("get_weather", city=city), call("answer", suitable=truth)]

    completions = [
        # parsed tool calls (TRL's response parser), weather only then the right answer: +1
        [{"role": "assistant", "content": "", "tool_calls": parsed}],
        # the same as text, with the air quality too: +1.5
        [
            {
                "role": "assistant",
                "content": f'<tool_call>{{"name": "get_weather", "arguments": {{"city": "{city}"}}}}</tool_call>'
                f'<tool_call>{{"name": "get_air_quality", "arguments": {{"city": "{city}"}}}}</tool_call>'
                f'<tool_call>{{"name": "answer", "arguments": {{"suitable": {str(truth).lower()}}}}}</tool_call>',
            }
        ],
        [{"role": "assistant", "content": "answer: yes"}],  # unreadable: the invalid-action reward, 0
        "answer(suitable=True)",  # standard (non-chat) completion, answering blind: -0.5
    ]
    metrics: dict[str, float] = {}
    rewards = reward(
        completions,
        prompts=[dataset[1]["prompt"]] * 4,
        seed=[1] * 4,
        task_index=[1] * 4,
        log_metric=metrics.__setitem__,
    )
    assert rewards == pytest.approx([1.0, 1.5, 0.0, -0.5])
    assert metrics == {"env_success": 0.5}
    # without the columns, the task comes from the prompt itself
    assert reward(completions[:1], prompts=[dataset[1]["prompt"]]) == pytest.approx([1.0])


# ---------------------------------------------------------------------- construction errors, optional import


def test_dataset_columns_and_reset():
    dataset = make_dataset(ENV, "train", n=3, seed=5, system_prompt="Be brief.")
    assert dataset.column_names == ["prompt", "seed", "task_index"]
    assert dataset["seed"] == [5, 6, 7] and dataset["task_index"] == [0, 1, 2]
    row = dataset[2]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert json.loads(row["prompt"][1][RESET_KEY]) == {"seed": 7, "options": {"task_index": 2}}
    env = gym.make(ENV, split="train")
    observation, _ = env.reset(seed=7, options={"task_index": 2})
    assert row["prompt"][1]["content"] == observation
    assert make_dataset("agentgym/CliffWalk-v0", n=2)["task_index"] == [None, None]
    # the environment's reset: no text when the prompt holds the task, else the task and the state
    instance = environment_factory(ENV, "train")()
    assert instance.reset(**row) is None
    text = instance.reset(prompt=[{"role": "user", "content": ""}], seed=7, task_index=2)
    assert text.startswith(env.unwrapped.task_prompt()) and "Tools:" not in text
    assert instance.get_reward() == 0.0 and instance.actions == []


@pytest.mark.parametrize(
    "build",
    [
        environment_factory,
        AgentGymRollout,
        agentgym_reward_func,
        lambda env_id, split=None, env_kwargs=None: make_dataset(env_id, split, 1, env_kwargs=env_kwargs),
    ],
    ids=["environment_factory", "AgentGymRollout", "agentgym_reward_func", "make_dataset"],
)
def test_bad_env_id_or_kwargs_fail_at_construction(build):
    with pytest.raises(ValueError, match=r"unknown env id 'agentgym/Nope-v0'.*agentgym/WeatherRun-v0"):
        build("agentgym/Nope-v0")
    with pytest.raises(TypeError, match=r"agentgym/WeatherRun-v0.*colour"):
        build(ENV, "train", {"colour": "red"})
    with pytest.raises(ValueError, match=r"agentgym/WeatherRun-v0.*backend must be"):
        build(ENV, "train", {"backend": "cloud"})
    with pytest.raises(ValueError, match=r"agentgym/WeatherRun-v0.*rewards.*sunshine"):
        build(ENV, "train", {"rewards": {"sunshine": 1.0}})


def test_trl_stays_optional():
    code = (
        "import sys, agentgym\n"
        "assert 'trl' not in sys.modules, 'import agentgym imported trl'\n"
        "sys.modules['trl'] = None\n"
        "try:\n"
        "    import agentgym.app.integrations.trl\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert 'pip install "agentgym-suite[trl]"' in out.stdout


# ---------------------------------------------------------------------- CodeSandbox: examples/trl_codesandbox.py


def test_codesandbox_example_trains_two_steps_on_hidden_test_rewards(tiny_model_path, tmp_path):
    import importlib.util

    from agentgym.envs.sandbox import layer_status

    if all(layer_status()[layer] is not None for layer in ("bwrap", "unshare")):
        pytest.skip("no sandbox layer on this machine")
    spec = importlib.util.spec_from_file_location("trl_codesandbox", ROOT / "examples" / "trl_codesandbox.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    from transformers import AutoTokenizer

    env = gym.make(example.ENV, split="train")
    env.reset(seed=0, options={"task_index": 0})
    task = env.unwrapped.task
    submits = [f'<tool_call>{json.dumps({"name": "submit", "arguments": {"code": code}})}</tool_call>'
               for code in (task.solution, task.wrong_solutions[1])]  # fmt: skip
    # the env scores a submit by the hidden tests: all of them for the reference, fewer for the wrong candidate
    scores = [_code_return(example.ENV, action) for action in submits]
    assert scores[0] == 1.0 and 0.0 < scores[1] < 1.0  # the wrong one fails only a hidden edge case
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    trainer = example.build_trainer(
        str(tiny_model_path),
        steps=2,
        out=str(tmp_path / "out"),
        learning_rate=1e-3,
        max_new_tokens=max(len(tokenizer.encode(s)) for s in submits) + 8,
        tasks=1,
        generation_kwargs={"sequence_bias": steer(tokenizer, submits, close=True)},
    )
    trainer.args.disable_tqdm = True
    before = weights(trainer.model)
    trainer.train()

    means = logged(trainer, "rewards/env_return/mean")
    assert trainer.state.global_step == 2 and len(means) == 2
    # each step's mean return is k of 4 reference submits and 4 - k wrong ones, as the hidden tests scored them
    possible = [(k * scores[0] + (4 - k) * scores[1]) / 4 for k in range(5)]
    assert all(min(abs(m - p) for p in possible[1:]) < 1e-6 for m in means), (means, possible)
    if any(m not in (possible[0], possible[-1]) for m in means):  # a group that was not all ties moved the weights
        after = weights(trainer.model)
        assert any(not torch.equal(before[n], after[n]) for n in before)


def _code_return(env_id: str, action: str) -> float:
    env = gym.make(env_id, split="train")
    env.reset(seed=0, options={"task_index": 0})
    _, reward, terminated, *_ = env.step(action)
    env.close()
    assert terminated
    return float(reward)
