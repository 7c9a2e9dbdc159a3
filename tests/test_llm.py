"""The LLM side: tiny model + tokenizer, sampling, the multi-turn rollout engine, masks and log-probs."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

import agentgym  # noqa: F401  (registers the envs)
from agentgym.core.tools import ToolCall
from agentgym.trainers.llm.rollout import OracleTeacher, RolloutConfig, collate, episode_metrics, rollout
from agentgym.trainers.models.policy import LLMPolicy, token_logprobs
from agentgym.trainers.models.tiny_model import build_tiny_model

WEATHER = "agentgym/WeatherRun-v0"


@pytest.fixture(scope="module")
def policy(tiny_model_path) -> LLMPolicy:
    torch.manual_seed(0)
    return LLMPolicy.from_pretrained(tiny_model_path)


def test_tiny_model_loads_through_auto_classes_and_round_trips(tiny_model_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path)
    assert type(tok).__name__ == "TokenizersBackend"  # not a Qwen2/Llama tokenizer that ignores tokenizer.json
    assert 0.1e6 < sum(p.numel() for p in model.parameters()) < 5e6
    call = ToolCall("get_weather", {"city": "Zürich"}).to_text()
    ids = tok.encode(call, add_special_tokens=False)
    assert tok.decode(ids, skip_special_tokens=False) == call
    pieces = tok.convert_ids_to_tokens(ids)
    assert "get_weather" in pieces and "city" in pieces  # tool and field names are one token each
    digits = tok.convert_ids_to_tokens(tok.encode("temp 18.4°C", add_special_tokens=False))
    assert "1" in digits and "8" in digits and "4" in digits  # numbers are spelled digit by digit
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_build_is_deterministic(tmp_path, tiny_model_path):
    other = build_tiny_model(tmp_path / "again", env_ids=["agentgym/CliffWalk-v0"])
    again = build_tiny_model(tmp_path / "again2", env_ids=["agentgym/CliffWalk-v0"])
    assert (other / "tokenizer.json").read_bytes() == (again / "tokenizer.json").read_bytes()
    assert (other / "model.safetensors").read_bytes() == (again / "model.safetensors").read_bytes()


def test_generation_is_batched_seeded_and_stops_after_a_tool_call(policy):
    texts = ("Oslo · temp ?", "a much longer prompt here")
    prompts = [policy.chat_ids([{"role": "user", "content": t}]) for t in texts]
    a = policy.generate(prompts, max_new_tokens=12, generator=torch.Generator().manual_seed(1))
    b = policy.generate(prompts, max_new_tokens=12, generator=torch.Generator().manual_seed(1))
    assert [g.token_ids for g in a] == [g.token_ids for g in b]
    # left padding does not change what a prompt produces: greedy alone == greedy in a batch
    alone = policy.generate(prompts[:1], max_new_tokens=12, temperature=0)[0]
    batched = policy.generate(prompts, max_new_tokens=12, temperature=0)[0]
    assert alone.token_ids == batched.token_ids
    # generation stops right after a stop string (</tool_call> by default): make the 3rd greedy token one
    third = alone.token_ids[2]
    stop = policy.tokenizer.decode([third], skip_special_tokens=False)
    assert policy.encode(stop) == [third]
    stopping = LLMPolicy(policy.model, policy.tokenizer, stop_strings=(stop,))
    out = stopping.generate(prompts[:1], max_new_tokens=12, temperature=0)[0]
    assert out.stopped and out.token_ids == alone.token_ids[: alone.token_ids.index(third) + 1]
    assert not alone.stopped and len(alone.token_ids) == 12  # no stop token: cut at max_new_tokens
    # a stop string of several tokens (matched on the ids, on the device) ends the row where its text ends
    decode, sampled = policy.tokenizer.decode, a[0].token_ids
    pairs = [decode(sampled[i - 1 : i + 1], skip_special_tokens=False) for i in range(1, len(sampled))]
    text = next(t for t in pairs if len(policy.encode(t)) > 1)
    split = LLMPolicy(policy.model, policy.tokenizer, stop_strings=(text,))
    assert split._stop_texts == [text]  # not one token: no id to match alone
    out = split.generate(prompts, max_new_tokens=12, generator=torch.Generator().manual_seed(1))[0]
    end = next(k for k in range(1, 13) if decode(sampled[:k], skip_special_tokens=False).endswith(text))
    assert out.stopped and out.token_ids == sampled[:end]
    # min_new_tokens holds every stop back until then, as Hugging Face's does
    held = stopping.generate(prompts, max_new_tokens=12, min_new_tokens=6, temperature=0)
    assert all(len(g.token_ids) >= 6 and third not in g.token_ids[:6] for g in held)


def test_sampling_logprobs_match_the_training_pass(policy):
    envs = [gym.make(WEATHER) for _ in range(4)]
    config = RolloutConfig(context="append", max_new_tokens=10, max_turns=3)
    generator = torch.Generator().manual_seed(0)
    episodes = rollout(policy, envs, [{"seed": i} for i in range(4)], config, generator=generator)
    samples = [s for ep in episodes for s in ep.samples]
    batch = collate(samples, policy.pad_id)
    with torch.no_grad():
        logp, _ = token_logprobs(policy.model, batch["input_ids"], batch["attention_mask"], batch["loss_mask"])
    mask = batch["loss_mask"].bool()
    assert mask.sum() > 50
    assert torch.allclose(logp[mask], batch["logprobs"][mask], atol=1e-4)


@pytest.mark.parametrize("context", ["append", "summary"])
def test_loss_mask_covers_exactly_the_policy_tokens(policy, context):
    envs = [gym.make(WEATHER) for _ in range(2)]
    config = RolloutConfig(context=context, turn_template="{summary}")
    episodes = rollout(policy, envs, [{"seed": 3}, {"seed": 4}], config, teacher=OracleTeacher())
    for ep in episodes:
        assert ep.success and ep.turns == 3 and ep.total_reward == 1.5
        assert len(ep.samples) == (1 if context == "append" else 3)
        written = []
        for s in ep.samples:
            assert len(s.input_ids) == len(s.loss_mask) == len(s.logprobs)
            ids = s.input_ids
            spans, start = [], None
            for i, m in enumerate([*s.loss_mask, 0]):
                if m and start is None:
                    start = i
                if not m and start is not None:
                    spans.append(policy.tokenizer.decode(ids[start:i], skip_special_tokens=False))
                    start = None
            written += spans
        assert written == ep.actions  # the policy's tokens are the actions, nothing else
    if context == "append":  # the env's observation tokens are in the sample, unmasked
        text = policy.tokenizer.decode(episodes[0].samples[0].input_ids, skip_special_tokens=False)
        assert text.count("<|im_start|>user") == 3 and "Result: Weather in" in text


def test_env_tokens_receive_no_gradient(policy):
    """Inspect gradients: the loss reaches the output layer only at positions predicting policy tokens."""
    envs = [gym.make(WEATHER)]
    episodes = rollout(policy, envs, [{"seed": 1}], RolloutConfig(), teacher=OracleTeacher())
    batch = collate(episodes[0].samples, policy.pad_id)
    captured = {}

    def keep(_module, _inputs, output):
        output.last_hidden_state.retain_grad()
        captured["h"] = output.last_hidden_state

    handle = policy.model.get_decoder().register_forward_hook(keep)
    try:
        logp, _ = token_logprobs(policy.model, batch["input_ids"], batch["attention_mask"], batch["loss_mask"])
        (-logp.sum()).backward()
    finally:
        handle.remove()
        policy.model.zero_grad(set_to_none=True)
    grad_norm = captured["h"].grad[0].norm(dim=-1)  # gradient at each position's final hidden state
    predicts_policy = batch["loss_mask"][0, 1:].bool()
    assert (grad_norm[:-1][~predicts_policy] == 0).all()  # positions whose next token the env wrote: none
    assert (grad_norm[:-1][predicts_policy] > 0).all()
    assert predicts_policy.sum() < 0.2 * predicts_policy.numel()  # most tokens in the transcript are the env's


def test_budgets_truncate_and_are_recorded(policy):
    envs = [gym.make(WEATHER) for _ in range(2)]
    few_turns = rollout(policy, envs, [{"seed": 0}] * 2, RolloutConfig(max_turns=2, max_new_tokens=4))
    assert all(ep.truncation == "max_turns" and ep.turns == 2 and ep.clipped == 2 for ep in few_turns)
    tight = rollout(policy, envs, [{"seed": 0}] * 2, RolloutConfig(max_tokens=400, max_new_tokens=8))
    assert all(ep.truncation == "max_tokens" for ep in tight)
    assert all(len(ep.samples[0].input_ids) <= 400 for ep in tight)
    metrics = episode_metrics(tight)
    assert metrics["truncation_rate"] == 1.0 and metrics["success"] == 0.0


def test_oracle_teacher_can_randomise_decisions_only(policy):
    envs = [gym.make(WEATHER, split="test") for _ in range(50)]
    resets = [{"seed": 0, "options": {"task_index": i}} for i in range(50)]
    config = RolloutConfig(context="summary", turn_template="{summary}")
    episodes = rollout(policy, envs, resets, config, teacher=OracleTeacher(randomize_decisions=True, seed=0))
    assert all(ep.turns == 3 and ep.terminated and all(ep.canonical) for ep in episodes)
    assert all('"get_weather"' in ep.actions[0] and '"get_air_quality"' in ep.actions[1] for ep in episodes)
    assert all('"reason": "temp ' in ep.actions[2] for ep in episodes)  # the evidence is kept, the decision is not
    success = sum(ep.success for ep in episodes) / len(episodes)
    assert 0.25 < success < 0.75  # about chance: the format is taught, the answer is not


def test_a_chat_template_is_required(tiny_model_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    tok.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        LLMPolicy(AutoModelForCausalLM.from_pretrained(tiny_model_path), tok)
