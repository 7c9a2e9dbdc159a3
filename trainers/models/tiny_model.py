"""The tiny language models: the shipped pretrained base (``--model tiny``) and random-weight test models.

**The shipped base** (``trainers/models/tiny_base/``, loaded by ``LLMPolicy.from_pretrained("tiny")`` and
``--model tiny``; :func:`base_model_path` checks every file against ``SHA256SUMS``) is a Llama-config causal
LM of 938,112 parameters (4 layers, width 128, 4 heads with 2 key/value heads, MLP 384, tied embeddings,
vocabulary 1,176; 3.8 MB of safetensors, SHA-256 ``1626f825…``). It was pretrained by code in this repo, from
seed 0, in three stages (:data:`BASE_STAGES`, run one after the other by :func:`build_base`)::

    python -m agentgym.trainers.models.tiny_model pretrain  # 25 min (1,524 s) on 2 cores (AMD EPYC), 2 torch threads

on :mod:`agentgym.trainers.models.tiny_corpus`, a synthetic, task-agnostic chat corpus, the loss on the assistant's
tokens, AdamW (β 0.9/0.95, cosine to 10 %), 32 chats a step:

1. 2,000 steps (learning rate 3e-3, 100 warm-up steps; 1,026 s): half *copy drills* (a made-up tool list, a
   one-line state naming something with one to three made-up words, accents included, or a code of random
   characters, and the call that copies it), half made-up lookup-and-decide tasks. 85 % of the tool and
   parameter names are made up (random letters, often two or three words joined by ``_``), so a name can only
   be copied from the tool list, never recalled; 80 % of the tasks call their lookups in the order the list
   shows them. The tokenizer's merges come from this corpus alone (merges seen 50 times in its first 5,000
   chats), so every token the model reads is one it was trained on.
2. 600 steps (2e-3; 279 s): the same, with half the quantities in a state line made up (``hum ?``,
   ``PKV ?``): with only the corpus's 36 quantity words the base copied no name into a call once the state
   showed a quantity it never saw (WeatherRun's ``temp``: 5 of 40 cities; ``load``: 40 of 40).
3. 400 steps (1e-3; 219 s): the same, with 30 % of the tasks' first turns looking something up instead of 8 %:
   at 8 % GRPO from the base never saw a valid lookup on WeatherRun and stayed answering from memory.

It never sees a task's data, rules, tool names, the words of WeatherRun's prompt (``temp``, ``AQI``, ``city``)
or transcripts (``tests/test_tiny_base.py`` scans every stage's corpus). What it brings to WeatherRun's compact
prompt (probe: the 40 snapshot cities, greedy and 3 samples each): at the first turn it answers from memory
(``answer(suitable=…)``, a valid call in 33 % of samples, a valid lookup in 1 %, and otherwise a garbled tool
name); once the temperature is known it calls a lookup (62 % valid, 61 % with the city copied exactly, mostly
``get_weather`` again rather than ``get_air_quality``); with
both known it answers validly (86 %), copying the numbers into the reason. It copies 21 of 22 unseen
multi-word names in a made-up tool list (the test). What it cannot do is decide: on its own corpus's chats
that state a threshold rule it agrees with the rule 52 % of the time, so WeatherRun's thresholds must be learnt
from reward. (The first shipped base, one stage on ``CorpusMix()``, wrote ``get_grade(name=…)`` on
WeatherRun: 0 % valid calls.)

Rebuilding with the same seed and thread count on the same kind of CPU reproduces the files byte for
byte (the test suite checks this on a short build, and that :func:`build_base` equals its stages run by hand;
the full 25-minute build was not repeated); another thread count or CPU changes the order of floating-point
sums, so the weights differ in their last bits.

**Random-weight test models.** ``build_tiny_model(path)`` trains a word-level tokenizer on text the
registered envs produce (task prompts, observations, the oracles' tool calls), creates a small Llama-config
model with random weights, and saves both with ``save_pretrained``; the tests and ``benchmarks/grpo_vs_trl.py``
use it because it is built in seconds.

Why word level (both tokenizers). A small model learns a tool-call format fast when every tool and field
name is one token and numbers are digits (``18.4`` → ``1 8 . 4``). The tokenizer is byte-level BPE over
pre-tokens that are whole words, single digits or runs of punctuation (``": "``); anything unseen falls
back to bytes, so any text encodes and decodes exactly. A character-level tokenizer made a model like this
3-5× slower per step and far less stable. Capitalised words are kept out of the merges, so a name is
spelled with pieces of ordinary words (``Shanghai`` → ``S h an gh ai``): a name the model never saw is made
of tokens it has seen, and can be copied into a call like a known one.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "BASE_DIR",
    "BASE_STAGES",
    "CHAT_TEMPLATE",
    "SPECIAL_TOKENS",
    "base_model_path",
    "build_base",
    "build_tiny_model",
    "env_corpus",
    "pad_chats",
    "pretrain_base",
    "train_tokenizer",
]

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
    from agentgym.core.registration import ENV_IDS, make_env, split_kwargs

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


def _chat_tokenizer(raw: Any) -> Any:
    """A ``transformers`` tokenizer around a trained ``tokenizers.Tokenizer``: ChatML specials and template."""
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:2] + SPECIAL_TOKENS[3:],
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _llama(tokenizer: Any, hidden: int, layers: int, heads: int, kv_heads: int, mlp: int, positions: int, seed: int):
    """A randomly initialised Llama-config causal LM (tied embeddings) for ``tokenizer``, seeded."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=mlp,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def _save(model: Any, tokenizer: Any, path: Path) -> None:
    """``save_pretrained`` both, and check that ``AutoTokenizer`` reads the tokenizer back as it is."""
    from transformers import AutoTokenizer

    from agentgym.core.tools import ToolCall

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

    path = Path(path)
    texts = list(env_corpus(env_ids))
    raw = train_tokenizer(texts, vocab_size=vocab_size)
    tokenizer = _chat_tokenizer(raw)
    for text in texts[:: max(1, len(texts) // 500)]:
        back = tokenizer.decode(tokenizer.encode(text, add_special_tokens=False))
        if back != text:
            raise RuntimeError(f"tokenizer round trip failed: {text[:80]!r} → {back[:80]!r}")

    model = _llama(tokenizer, hidden_size, num_layers, num_heads, num_kv_heads, intermediate_size, max_positions, seed)
    _save(model, tokenizer, path)
    return path


# ---------------------------------------------------------------------------------------------- the shipped base

BASE_DIR = Path(__file__).parent / "tiny_base"
"""Where the shipped, pretrained tiny base model lives (``--model tiny``)."""
BASE_SHA256 = "SHA256SUMS"
PRETRAIN_STEPS = 2000

_STAGE_1_MIX = {
    "opaque_tools": 0.8,
    "spelled_ids": 0.5,
    "compound_ids": 0.5,
    "spelled_names": 0.3,
    "word_lists": 0.15,
    "listed_order": 0.8,
}
BASE_STAGES: tuple[dict[str, Any], ...] = (
    {"steps": PRETRAIN_STEPS, "mix": _STAGE_1_MIX},
    {"steps": 600, "learning_rate": 2e-3, "warmup_steps": 20, "mix": {**_STAGE_1_MIX, "made_up_quantities": 0.5}},
    {
        "steps": 400,
        "learning_rate": 1e-3,
        "warmup_steps": 20,
        "mix": {**_STAGE_1_MIX, "made_up_quantities": 0.5, "start_lookup": 0.3},
    },
)
"""How the shipped base was built: :func:`pretrain_base` keyword arguments (``mix``: :class:`CorpusMix` fields) per
stage, each stage going on from the last (:func:`build_base`)."""


def _chat_ids(
    tokenizer: Any, messages: list[dict[str, str]], context_weight: float = 0.0, decision_weight: float = 1.0
) -> tuple[list[int], list[float]]:
    """Token ids of a ChatML chat and loss weights: 1 on the assistant's content and its end-of-turn
    (``decision_weight`` on its ``true``/``false`` tokens, the decisions), ``context_weight`` on the other messages'
    content, 0 on the role headers."""
    decisions = _decision_ids(tokenizer) if decision_weight != 1.0 else frozenset()
    ids: list[int] = []
    weights: list[float] = []
    for message in messages:
        head = tokenizer.encode(f"<|im_start|>{message['role']}\n", add_special_tokens=False)
        body = tokenizer.encode(message["content"] + "<|im_end|>", add_special_tokens=False)
        tail = tokenizer.encode("\n", add_special_tokens=False)
        if message["role"] == "assistant":
            learn = [decision_weight if token in decisions else 1.0 for token in body]
        else:
            learn = [context_weight] * len(body)
        ids += head + body + tail
        weights += [0.0] * len(head) + learn + [0.0] * len(tail)
    return ids, weights


def _decision_ids(tokenizer: Any) -> frozenset[int]:
    """The ids of the one-token decisions ``true`` and ``false`` (JSON) and ``True``/``False`` (Python)."""
    encoded = (tokenizer.encode(word, add_special_tokens=False) for word in ("true", "false", "True", "False"))
    return frozenset(ids[0] for ids in encoded if len(ids) == 1)


def pretrain_base(
    path: str | Path,
    *,
    seed: int = 0,
    steps: int = PRETRAIN_STEPS,
    batch_size: int = 32,
    learning_rate: float = 3e-3,
    warmup_steps: int = 100,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 384,
    vocab_size: int = 2048,
    context_weight: float = 0.0,
    decision_weight: float = 1.0,
    threads: int | None = None,
    progress_bar: bool = True,
    mix: Any = None,
    init: str | Path | None = None,
) -> Path:
    """Pretrain the tiny base model on :mod:`agentgym.trainers.models.tiny_corpus`; save it (with SHA-256 sums) in
    ``path``.

    The tokenizer's merges come from the corpus (its first 5,000 chats); the model sees only the corpus,
    with the loss on the assistant's tokens. ``mix`` (a :class:`agentgym.trainers.models.tiny_corpus.CorpusMix`) changes
    the corpus; the shipped base used the default. ``context_weight`` puts a loss on the other messages' tokens too,
    ``decision_weight`` scales it on the assistant's ``true``/``false`` (both 0 and 1 for the shipped base).
    """
    import time

    import torch
    from tqdm.auto import tqdm

    from agentgym.trainers.models.tiny_corpus import chat_documents

    if threads:
        torch.set_num_threads(threads)
    path = Path(path)
    docs = chat_documents(seed, mix)
    # The merges come from the corpus alone, so every token is one the model is trained on: with generic
    # English in the merges too, 62 % of the vocabulary never occurred in the corpus, and text made of those
    # tokens (a task's tool names, "Cape Town") could not be copied, its embeddings left at their random init.
    # Merges seen fewer than 50 times in the sample are left out, for the same reason.
    if init is not None:  # go on training a saved model, with its tokenizer
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(init)
        model = AutoModelForCausalLM.from_pretrained(init, dtype=torch.float32)
        torch.manual_seed(seed)
    else:
        sample = [m["content"] for _ in range(5000) for m in next(docs)]
        raw = train_tokenizer(sample, vocab_size=vocab_size, min_frequency=50)
        tokenizer = _chat_tokenizer(raw)
        model = _llama(tokenizer, hidden_size, num_layers, num_heads, num_kv_heads, intermediate_size, 4096, seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.95), weight_decay=0.01)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: _warmup_cosine(step, warmup_steps, steps))
    model.train()
    start = time.perf_counter()
    bar = tqdm(range(steps), desc="pretrain", disable=not progress_bar)
    for _ in bar:
        loss = _pretrain_loss(
            model, tokenizer, [next(docs) for _ in range(batch_size)], context_weight, decision_weight
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
    seconds = time.perf_counter() - start
    _save(model, tokenizer, path)
    _write_sums(path)
    params = sum(p.numel() for p in model.parameters())
    print(f"pretrained {params / 1e6:.2f} M parameters in {seconds:.0f} s ({steps} steps × {batch_size}) → {path}")
    return path


def _warmup_cosine(step: int, warmup_steps: int, steps: int) -> float:
    """The pretraining's learning-rate factor: linear warm-up, then a half cosine from 1 down to 0.1."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup_steps) / max(1, steps - warmup_steps)))


def _write_sums(path: Path) -> None:
    """``path/SHA256SUMS``: the SHA-256 of every file of a saved model, as ``sha256sum`` writes them."""
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name != BASE_SHA256)
    (path / BASE_SHA256).write_text("".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in files))


def pad_chats(chats: Sequence[tuple[list[int], list[float]]], pad_id: int) -> tuple[Any, Any, Any]:
    """Right-padded ``(input_ids, attention_mask, weight)`` tensors of chats given as token ids and per-token loss
    weights (:func:`_chat_ids`); ``weight[i, t]`` is the weight of predicting token ``t + 1`` at position ``t``."""
    import torch

    width = max(len(ids) for ids, _ in chats)
    input_ids = torch.full((len(chats), width), pad_id)
    attention = torch.zeros((len(chats), width), dtype=torch.long)
    weight = torch.zeros((len(chats), width))
    for i, (ids, weights) in enumerate(chats):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        attention[i, : len(ids)] = 1
        weight[i, : len(ids) - 1] = torch.tensor(weights[1:])  # position t predicts token t + 1
    return input_ids, attention, weight


def _pretrain_loss(
    model: Any, tokenizer: Any, docs: list[list[dict[str, str]]], context_weight: float, decision_weight: float
) -> Any:
    """The next-token loss of one batch of chats (rows sorted by length, right-padded), taken where
    :func:`_chat_ids` puts a weight; the output layer runs only there."""
    import torch

    batch = sorted(
        (_chat_ids(tokenizer, doc, context_weight, decision_weight) for doc in docs),
        key=lambda b: len(b[0]),
    )
    input_ids, attention, weight = pad_chats(batch, tokenizer.pad_token_id)
    learn = weight > 0
    hidden = model.model(input_ids=input_ids, attention_mask=attention).last_hidden_state
    logits = model.lm_head(hidden[learn])  # the output layer only where a loss is taken
    targets = input_ids[:, 1:][learn[:, :-1]]
    if context_weight or decision_weight != 1.0:
        losses = torch.nn.functional.cross_entropy(logits.float(), targets, reduction="none")
        loss = (losses * weight[learn]).sum() / weight[learn].sum()
    else:  # the loss the shipped base was trained with
        loss = torch.nn.functional.cross_entropy(logits.float(), targets)
    return loss


def build_base(
    path: str | Path = BASE_DIR,
    *,
    stages: Sequence[dict[str, Any]] = BASE_STAGES,
    seed: int = 0,
    threads: int | None = 2,
    progress_bar: bool = True,
) -> Path:
    """Build the base model in ``path`` as the shipped one was built: :func:`pretrain_base` once per stage, on the
    stage's corpus mix, each stage going on from the one before (the first trains the tokenizer)."""
    import tempfile

    from agentgym.trainers.models.tiny_corpus import CorpusMix

    with tempfile.TemporaryDirectory() as tmp:
        init: Path | None = None
        for k, stage in enumerate(stages):
            out = Path(path) if k == len(stages) - 1 else Path(tmp) / f"stage-{k + 1}"
            settings = {key: value for key, value in stage.items() if key != "mix"}
            mix = CorpusMix(**stage.get("mix", {}))
            init = pretrain_base(
                out, seed=seed, threads=threads, progress_bar=progress_bar, init=init, mix=mix, **settings
            )
    return Path(path)


def base_model_path(path: str | Path | None = None) -> Path:
    """The shipped tiny base model's directory (``--model tiny``), its files checked against ``SHA256SUMS``.

    Raises ``FileNotFoundError`` or ``ValueError`` (naming the file) if a file is missing or altered.
    """

    path = Path(path) if path is not None else BASE_DIR
    sums = path / BASE_SHA256
    if not sums.is_file():
        build = "python -m agentgym.trainers.models.tiny_model pretrain"
        raise FileNotFoundError(f"{sums}: no shipped tiny base model here (build it: {build})")
    for line in sums.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        file = path / name
        if not file.is_file() or hashlib.sha256(file.read_bytes()).hexdigest() != digest:
            raise ValueError(f"{file}: missing or does not match its SHA-256 in {sums}")
    return path


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m agentgym.trainers.models.tiny_model pretrain [--out DIR]``: rebuild the base (all of
    :data:`BASE_STAGES`); with ``--steps``, ``--mix``, ``--init``, ``--lr``, ``--warmup`` or ``--context-weight``,
    one stage of :func:`pretrain_base` instead."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m agentgym.trainers.models.tiny_model", description="Pretrain the tiny base model."
    )
    parser.add_argument("command", choices=["pretrain"])
    parser.add_argument("--out", default=str(BASE_DIR), help="where to write it (default: the shipped copy)")
    parser.add_argument("--steps", type=int, help=f"one stage of this many steps (default {PRETRAIN_STEPS})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the shipped file was built with 2)")
    parser.add_argument("--init", help="go on training this model directory (its tokenizer too)")
    parser.add_argument("--lr", type=float, help="one stage's peak learning rate (default 3e-3)")
    parser.add_argument("--warmup", type=int, help="one stage's warm-up steps (default 100)")
    parser.add_argument("--context-weight", type=float, help="one stage's loss weight on the user's tokens (default 0)")
    parser.add_argument(
        "--mix",
        action="append",
        default=[],
        metavar="FIELD=SHARE",
        help="a CorpusMix field, e.g. --mix opaque_tools=0.5 (repeatable; default: the shipped mix)",
    )
    args = parser.parse_args(argv)
    from agentgym.trainers.models.tiny_corpus import CorpusMix

    one_stage = (args.steps, args.init, args.lr, args.warmup, args.context_weight)
    if not args.mix and all(option is None for option in one_stage):
        build_base(args.out, seed=args.seed, threads=args.threads)
        return

    try:
        mix = CorpusMix(**{k: json.loads(v) for k, v in (item.split("=", 1) for item in args.mix)})
    except (TypeError, ValueError) as error:
        parser.error(f"--mix: {error}")
    pretrain_base(
        args.out,
        steps=args.steps or PRETRAIN_STEPS,
        seed=args.seed,
        threads=args.threads,
        mix=mix,
        context_weight=args.context_weight or 0.0,
        init=args.init,
        learning_rate=args.lr or 3e-3,
        warmup_steps=100 if args.warmup is None else args.warmup,
    )


if __name__ == "__main__":
    main()
