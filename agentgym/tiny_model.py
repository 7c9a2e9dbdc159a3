"""A tiny causal language model and tokenizer built here, offline, from the envs' own text.

``build_tiny_model(path)`` trains a word-level tokenizer on text the registered envs produce (task
prompts, observations, the oracles' tool calls), creates a small Llama-config model with random
weights, and saves both with ``save_pretrained``. It loads back through the same
``from_pretrained`` path a real model uses (:class:`agentgym.llm.LLMPolicy`), so tests, the demo
and the benchmarks exercise the real code.

Why word level. A small model learns a tool-call format fast when every tool and field name is one
token and numbers are digits (``18.4`` → ``1 8 . 4``): an action is ~18 tokens and the decision is
a single token (``true``/``false``). The tokenizer is byte-level BPE over pre-tokens that are
whole words, single digits or runs of punctuation (``": "``), with a vocabulary large enough that
every lowercase word seen twice is one token; anything unseen falls back to bytes, so any text
encodes and decodes exactly. A character-level tokenizer made a model like this 3-5× slower per
step and far less stable.

Names are the exception. The merges are learned from the corpus with capitalised words removed,
so a name is spelled with pieces of ordinary words (``Shanghai`` → ``S h an gh ai``). WeatherRun's
test split asks about cities the training split never mentions; as single tokens they would be
embeddings no training step ever touched, and the model could not copy them into a call. Spelled
with pieces it has seen, a new city is copied like a known one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "build_tiny_model", "env_corpus", "train_tokenizer"]

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]

# ChatML, as Qwen models use it. No ``tools`` support: schemas go into the prompt as text.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Capitalised words (names), other words (each with an optional leading space), single digits, runs of
# punctuation with their spaces, whitespace.
_PRETOKEN = r" ?\p{Lu}[\p{L}_]*| ?[\p{L}_]+|\p{N}|(?: ?[^\s\p{L}\p{N}_]+)+ ?|\s+"
_WORD = re.compile(r"\w+")


def _without_names(text: str) -> str:
    """``text`` with capitalised words removed: the BPE merges are learned from everything else."""
    return _WORD.sub(lambda m: "" if m.group()[0].isupper() else m.group(), text)


def env_corpus(env_ids: Sequence[str] | None = None, *, episodes_per_task: int = 2) -> Iterator[str]:
    """Text the envs produce: every task's first observation, then the oracle's actions and the
    observations they lead to, on every split; plus each env's action menu (all answers)."""
    from agentgym.registration import ENV_IDS, make_env, split_kwargs

    for env_id in env_ids or ENV_IDS:
        for split in ("train", "test") if split_kwargs(env_id, "train") else (None,):
            env = make_env(env_id, split)
            base = env.unwrapped
            oracle = base.oracle()
            tasks = base.num_tasks or 1
            for index in range(tasks):
                for episode in range(episodes_per_task if base.num_tasks else 20):
                    options = {"task_index": index} if base.num_tasks else {}
                    obs, _ = env.reset(seed=episode, options=options)
                    yield obs
                    yield from base.action_menu()
                    for _ in range(12):
                        action, _ = oracle.predict(obs)
                        yield action
                        obs, _, terminated, truncated, _ = env.step(action)
                        yield obs
                        if terminated or truncated:
                            break
            env.close()


def train_tokenizer(texts: Iterator[str] | Sequence[str], *, vocab_size: int = 4096, min_frequency: int = 2):
    """A byte-level BPE tokenizer over word/digit/punctuation pre-tokens (``tokenizers.Tokenizer``)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_PRETOKEN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator((_without_names(t) for t in texts), trainer=trainer)
    return tokenizer


def build_tiny_model(
    path: str | Path,
    *,
    env_ids: Sequence[str] | None = None,
    hidden_size: int = 128,
    num_layers: int = 3,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 384,
    vocab_size: int = 4096,
    max_positions: int = 4096,
    seed: int = 0,
) -> Path:
    """Build and save a tiny Llama-config causal LM + tokenizer + chat template under ``path``.

    The defaults give ~1.1 M parameters (0.5 M of them the tied embedding). Loading it back is
    ``LLMPolicy.from_pretrained(path)`` or ``AutoModelForCausalLM/AutoTokenizer.from_pretrained``.
    The encode/decode round trip is checked on the corpus before the files are written.
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from agentgym.tools import ToolCall

    path = Path(path)
    texts = list(env_corpus(env_ids))
    raw = train_tokenizer(texts, vocab_size=vocab_size)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:2] + SPECIAL_TOKENS[3:],
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    for text in texts[:: max(1, len(texts) // 500)]:
        back = tokenizer.decode(tokenizer.encode(text, add_special_tokens=False))
        if back != text:
            raise RuntimeError(f"tokenizer round trip failed: {text[:80]!r} → {back[:80]!r}")

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    # Name the class that reads tokenizer.json as it is. (A Qwen2 config would not do: transformers 5 forces
    # Qwen2Tokenizer for model_type "qwen2", which rebuilds its own pre-tokenizer and ignores this one.)
    cfg_path = path / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "TokenizersBackend"
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
    loaded = AutoTokenizer.from_pretrained(path)
    probe = ToolCall("answer", {"suitable": True}).to_text()
    if loaded.encode(probe, add_special_tokens=False) != tokenizer.encode(probe, add_special_tokens=False):
        raise RuntimeError(f"AutoTokenizer loaded {type(loaded).__name__}, which does not read {path}/tokenizer.json")
    return path
