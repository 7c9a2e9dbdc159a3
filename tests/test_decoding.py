"""The lean KV-cache decoder reproduces ``model.forward``, shares identical prompts and reuses prefixes."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from agentgym.trainers.models.decoding import Decoder, PrefixCache, supports

PROMPTS = [[5, 6, 7, 8, 9], [11, 12], [5, 6, 7, 8, 9], [40] * 9, [3]]


def _model(kind: str):
    torch.manual_seed(0)
    common = {"vocab_size": 300, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2}
    heads = {"num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256, "pad_token_id": 0}
    if kind == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common, **heads, attention_bias=True))
    else:  # Qwen2: biases on q, k, v only
        model = Qwen2ForCausalLM(Qwen2Config(**common, **heads))
    for p in model.parameters():  # far from the init so that a wrong term shows
        torch.nn.init.normal_(p, std=0.2)
    return model.eval()


def _reference(model, sequences):
    with torch.no_grad():
        return torch.stack([model(input_ids=torch.tensor([s])).logits[0, -1] for s in sequences])


UNPADDED = [[5, 6, 7, 8, 9], [11, 12, 13, 14, 15], [40] * 5]  # one length: plain causal attention, no mask


@pytest.mark.parametrize("prompts", [PROMPTS, UNPADDED], ids=["padded", "unpadded"])
@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "separate"])
@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_logits_match_model_forward_through_prefill_and_steps(kind, fuse, prompts):
    model = _model(kind)
    decoder = Decoder(model)
    decoder.fuse = fuse  # small models fuse q/k/v and gate/up; large ones keep the projections apart
    sequences = [list(p) for p in prompts]
    logits = decoder.prefill(prompts, 5)
    for _ in range(5):
        reference = _reference(model, sequences)
        assert torch.allclose(logits, reference, atol=1e-4), (logits - reference).abs().max()
        token = logits.argmax(-1)
        for s, t in zip(sequences, token.tolist(), strict=True):
            s.append(t)
        logits = decoder.step(token)


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_a_prompt_extending_a_cached_sequence_computes_only_its_new_tokens(kind):
    model = _model(kind)
    decoder, cache = Decoder(model), PrefixCache()
    keys = list(range(len(PROMPTS)))
    decoder.prefill(PROMPTS, 3, cache=cache, keys=keys)
    fed = torch.tensor([21, 22, 23, 24, 25])
    decoder.step(fed)
    generated = [[t, 99] for t in fed.tolist()]  # 99 was sampled last and never fed: it is not cached
    decoder.store(cache, keys, [p + g for p, g in zip(PROMPTS, generated, strict=True)])
    assert [len(cache.entries[k].ids) for k in keys] == [len(p) + 1 for p in PROMPTS]
    # the next turn: prompt + response + the env's reply
    extended = [p + g + [50 + i, 60 + i] for i, (p, g) in enumerate(zip(PROMPTS, generated, strict=True))]
    calls = []
    original = decoder._forward
    decoder._forward = lambda ids, *a: calls.append(ids.shape) or original(ids, *a)
    logits = decoder.prefill(extended, 2, cache=cache, keys=keys)
    assert torch.allclose(logits, _reference(model, extended), atol=1e-4)
    assert calls[0][1] == max(len(e) - len(cache.entries[k].ids) for e, k in zip(extended, keys, strict=True))
    assert calls[0][1] < min(map(len, extended))  # far fewer columns than the prompts: the prefix was reused
    # a key whose prompt does not extend its entry is encoded from scratch
    fresh = decoder.prefill([[7, 7, 7]] * len(keys), 1, cache=cache, keys=keys)
    assert torch.allclose(fresh, _reference(model, [[7, 7, 7]] * len(keys)), atol=1e-4)


def test_identical_prompts_are_encoded_once():
    model = _model("llama")
    decoder = Decoder(model)
    rows = []
    original = decoder._forward
    decoder._forward = lambda ids, *a: rows.append(ids.shape[0]) or original(ids, *a)
    logits = decoder.prefill([[1, 2, 3]] * 8 + [[4, 5]] * 8, 1)
    assert rows == [2] and logits.shape[0] == 16
    assert torch.equal(logits[0], logits[7]) and torch.equal(logits[8], logits[15])


def test_supports_the_llama_family_and_nothing_else():
    assert supports(_model("llama")) and supports(_model("qwen2"))
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_embd=32, n_layer=1, n_head=2))
    assert not supports(gpt2)
    with pytest.raises(ValueError, match="not a Llama-family model"):
        Decoder(gpt2)


def test_append_mode_rollouts_reuse_each_turn_and_play_the_same_episodes(tiny_model_path):
    """Multi-turn append mode: every turn extends the transcript, which is encoded once, never again."""
    import gymnasium as gym

    import agentgym  # noqa: F401  (registers the envs)
    from agentgym.trainers.llm.rollout import RolloutConfig, rollout
    from agentgym.trainers.models.policy import LLMPolicy

    policy = LLMPolicy.from_pretrained(tiny_model_path)
    config = RolloutConfig(context="append", max_turns=3, max_new_tokens=8, temperature=0.0)
    envs = [gym.make("agentgym/CliffWalk-v0") for _ in range(3)]
    resets = [{"seed": s} for s in range(3)]
    columns, shortest = [], []
    original, generate = policy._decoder._forward, policy.generate
    policy._decoder._forward = lambda ids, *a: columns.append(ids.shape[1]) or original(ids, *a)
    policy.generate = lambda prompts, **kw: shortest.append(min(map(len, prompts))) or generate(prompts, **kw)
    cached = rollout(policy, envs, resets, config)
    policy._decoder._forward, policy.generate = original, generate
    decoder, policy._decoder = policy._decoder, None  # model.forward, every turn from scratch
    recomputed = rollout(policy, envs, resets, config)
    policy._decoder = decoder
    assert [e.actions for e in cached] == [e.actions for e in recomputed]
    assert [e.samples[0].input_ids for e in cached] == [e.samples[0].input_ids for e in recomputed]
    prefills = [c for c in columns if c > 1]  # decode steps feed one column
    assert len(prefills) == len(shortest) == 3
    assert prefills[0] >= shortest[0]  # turn 1 encodes the whole first observation
    for turn in (1, 2):  # later turns: fewer columns than the shortest prompt, i.e. every row reused its prefix
        assert prefills[turn] < shortest[turn] - shortest[0] // 2, (prefills, shortest)


def _with_lora(model, seed: int = 1):
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    torch.manual_seed(seed)
    for name, param in peft_model.named_parameters():
        if "lora_B" in name:  # peft starts B at zero, which would hide a decoder that skips the adapters
            torch.nn.init.normal_(param, std=0.2)
    return peft_model.eval()


@pytest.mark.parametrize(
    ("fuse", "fold"), [(True, True), (False, True), (False, False)], ids=["fused", "folded", "low-rank"]
)
def test_lora_adapters_run_inside_the_decoder_and_it_follows_their_updates(fuse, fold):
    model = _with_lora(_model("llama"))
    assert supports(model)
    decoder = Decoder(model)
    decoder.fuse, decoder.fold = fuse, fold  # by model size: fused and folded, folded, adapters applied beside
    for update in range(2):
        sequences = [list(p) for p in PROMPTS]
        logits = decoder.prefill(PROMPTS, 3)
        for _ in range(3):
            reference = _reference(model, sequences)
            assert torch.allclose(logits, reference, atol=1e-4), (update, (logits - reference).abs().max())
            token = logits.argmax(-1)
            for s, t in zip(sequences, token.tolist(), strict=True):
                s.append(t)
            logits = decoder.step(token)
        with torch.no_grad():  # an optimizer step on the adapters: the next prefill must sample from it
            for name, param in model.named_parameters():
                if "lora_" in name:
                    param.add_(torch.randn_like(param), alpha=0.1)
    with model.disable_adapter():  # the reference policy of a LoRA run: the base alone
        assert torch.allclose(decoder.prefill(PROMPTS, 1), _reference(model, PROMPTS), atol=1e-4)
    base = _model("llama")
    assert not torch.allclose(decoder.prefill(PROMPTS, 1), Decoder(base).prefill(PROMPTS, 1), atol=1e-2)


def test_lora_variants_the_decoder_does_not_reproduce_are_left_to_model_forward():
    from peft import LoraConfig, get_peft_model

    dora = get_peft_model(_model("llama"), LoraConfig(r=4, target_modules="all-linear", use_dora=True))
    assert not supports(dora)
    biased = get_peft_model(_model("llama"), LoraConfig(r=4, target_modules="all-linear", lora_bias=True))
    assert not supports(biased)


def test_stop_strings_on_token_ids_agree_with_the_decoded_text(tiny_model_path):
    """The id tables find a stop string exactly where the decoded text ends with it, however it is tokenised."""
    import random

    from transformers import AutoTokenizer

    from agentgym.trainers.models.decoding import StopStrings

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    texts = ['"}}', "ool_ca", "\n\n"]
    matcher = StopStrings(tokenizer, texts)
    rng = random.Random(0)
    pieces = ['"}}', '"}', "}", '"', "ool", "_ca", "l", "_", "\n", "\n\n", "x", "tool_call", 'ue"}}', "a b"]
    rows = []
    for _ in range(64):  # texts glued from pieces that split and straddle the stop strings in many ways
        rows.append(
            tokenizer.encode("".join(rng.choice(pieces) for _ in range(rng.randint(1, 8))), add_special_tokens=False)
        )
    width = max(map(len, rows))
    found, expected = [], []
    for t in range(1, width + 1):
        live = [r for r in rows if len(r) >= t]
        hit = matcher(torch.tensor([r[:t] for r in live]))
        found += hit.tolist()
        expected += [tokenizer.decode(r[:t], skip_special_tokens=False).endswith(tuple(texts)) for r in live]
    assert found == expected and sum(expected) > 20  # many matches, each one where the text has it
