"""The shipped tiny base model: generic corpus, checksummed weights, the skills it brings."""

from __future__ import annotations

import itertools
import random
import re
import shutil
import time

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the ids)
from agentgym.core.parser import parse_tool_calls
from agentgym.core.registration import ENV_IDS
from agentgym.envs.weather.dataset import load_snapshot
from agentgym.trainers.models.policy import LLMPolicy
from agentgym.trainers.models.tiny_corpus import CorpusMix, chat_documents, made_up_name
from agentgym.trainers.models.tiny_model import BASE_DIR, BASE_STAGES, base_model_path

STAGE_MIXES = [CorpusMix(**stage["mix"]) for stage in BASE_STAGES]
STAGE_DIGESTS = ["8fbea19548a2564e", "9465367d24548a53", "4b811b043a8c8a87"]  # their first 300 chats, SHA-256


@pytest.mark.parametrize("stage", range(len(STAGE_MIXES)))
def test_corpus_never_mentions_a_task_tool_or_city(stage):
    """The corpus of every stage the shipped base was trained on."""
    tool_names = {name for env_id in ENV_IDS for name in gym.make(env_id).unwrapped.tools}
    cities = {record.city for record in load_snapshot()}
    assert {"get_weather", "answer", "run_sql", "move", "submit"} <= tool_names and len(cities) >= 40
    docs = chat_documents(0, STAGE_MIXES[stage])
    text = "\n".join(m["content"] for doc in itertools.islice(docs, 5000) for m in doc)
    words = set(re.findall(r"[\w-]+", text))
    assert not tool_names & words, tool_names & words
    assert not [city for city in cities if city in text]
    assert "<tool_call>" in text and "Result:" in text  # it is a tool-calling corpus all the same
    assert not {"temp", "AQI", "city", "weather", "quality"} & words  # nor the words of WeatherRun's prompt


def test_shipped_base_is_checksummed_and_loads_in_seconds(tmp_path):
    t0 = time.perf_counter()
    policy = LLMPolicy.from_pretrained("tiny")
    assert time.perf_counter() - t0 < 30  # ~1 s here
    assert 0.5e6 < sum(p.numel() for p in policy.model.parameters()) < 5e6
    assert sum(f.stat().st_size for f in BASE_DIR.iterdir()) < 16 * 2**20
    copy = shutil.copytree(BASE_DIR, tmp_path / "base")
    (copy / "model.safetensors").write_bytes((copy / "model.safetensors").read_bytes()[:-1] + b"\0")
    with pytest.raises(ValueError, match="model.safetensors"):
        base_model_path(copy)


def test_base_copies_unseen_multi_word_names_exactly():
    """Names the corpus generator never drew (another seed), two words and more, accents included."""
    policy = LLMPolicy.from_pretrained("tiny")
    rng = random.Random(2026)
    names = [n for n in (made_up_name(rng) for _ in range(200)) if " " in n][:20] + ["Cape Town", "São Paulo"]
    prompts = [
        policy.chat_ids(
            [
                {
                    "role": "user",
                    "content": f"fetch_width(site), fetch_power(site), decide(ok, note)\n"
                    f"{name} · width 12 mm · power ? · decision pending",
                }
            ]
        )
        for name in names
    ]
    copied = 0
    for name, generation in zip(names, policy.generate(prompts, max_new_tokens=48, temperature=0), strict=True):
        calls = parse_tool_calls(policy.decode(generation.token_ids)).calls
        copied += bool(calls) and calls[0].name == "fetch_power" and calls[0].arguments.get("site") == name
    assert copied >= 0.9 * len(names)


def test_pretraining_is_a_function_of_the_seed(tmp_path):
    """Two short builds with the same seed write the same files, byte for byte (same machine and threads)."""
    from agentgym.trainers.models.tiny_model import pretrain_base

    kwargs = dict(
        steps=2,
        batch_size=4,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        intermediate_size=64,
        threads=1,
        progress_bar=False,
    )
    first, second = (pretrain_base(tmp_path / name, seed=0, **kwargs) for name in ("a", "b"))
    assert (first / "SHA256SUMS").read_text() == (second / "SHA256SUMS").read_text()
    assert base_model_path(first) == first  # its own checksums hold


def test_continued_pretraining_keeps_the_tokenizer_and_moves_the_weights(tmp_path):
    """``pretrain --init DIR`` (a second stage on another mix, the user's tokens weighted too) goes on from DIR."""
    from agentgym.trainers.models.tiny_corpus import CorpusMix
    from agentgym.trainers.models.tiny_model import pretrain_base

    small = dict(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64, threads=1)
    first = pretrain_base(tmp_path / "a", steps=2, batch_size=4, progress_bar=False, **small)
    mix = CorpusMix(spelled_names=1.0, spelled_ids=1.0, compound_ids=1.0, opaque_tools=1.0)
    second = pretrain_base(
        tmp_path / "b", steps=2, batch_size=4, progress_bar=False, init=first, mix=mix, context_weight=0.3, threads=1
    )
    assert (first / "tokenizer.json").read_bytes() == (second / "tokenizer.json").read_bytes()
    assert (first / "model.safetensors").read_bytes() != (second / "model.safetensors").read_bytes()
    assert base_model_path(second) == second


def test_the_stage_corpora_are_the_ones_the_shipped_base_was_built_from():
    """Changing a stage's mix (or a draw in the generator) changes its corpus: the shipped weights would no longer
    be what ``python -m agentgym.trainers.models.tiny_model pretrain`` builds. Options draw nothing at their default, so
    ``CorpusMix()`` is still the corpus of the first base (``c2b7…``)."""
    import hashlib
    import json

    def digest(mix: CorpusMix | None) -> str:
        return hashlib.sha256(json.dumps(list(itertools.islice(chat_documents(0, mix), 300))).encode()).hexdigest()

    assert digest(None) == "c2b7f700b61eecdf5fc7610ae29279028a962abfe6eb97e9cd2861272800342c"
    assert [digest(mix)[:16] for mix in STAGE_MIXES] == STAGE_DIGESTS
    opaque = list(itertools.islice(chat_documents(0, CorpusMix(opaque_tools=1.0, copy_drill=1.0)), 200))
    calls = [parse_tool_calls(d[-1]["content"]).calls for d in opaque]
    named_by_quantity = sum(
        c[0].name.split("_")[-1] in d[0]["content"].splitlines()[-1] for c, d in zip(calls, opaque, strict=True) if c
    )
    assert named_by_quantity <= 10  # the tool's name no longer gives away the quantity it returns


def test_build_base_runs_its_stages_one_after_the_other(tmp_path):
    """``build_base`` (what ``pretrain`` with no options runs) equals the stages run by hand with ``init``."""
    from agentgym.trainers.models.tiny_model import build_base, pretrain_base

    small = dict(batch_size=4, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
    stages = [
        {"steps": 2, **small, "mix": BASE_STAGES[0]["mix"]},
        {"steps": 2, "learning_rate": 1e-3, **small, "mix": BASE_STAGES[1]["mix"]},
    ]
    built = build_base(tmp_path / "built", stages=stages, threads=1, progress_bar=False)
    first = pretrain_base(tmp_path / "1", steps=2, **small, mix=STAGE_MIXES[0], threads=1, progress_bar=False)
    second = pretrain_base(
        tmp_path / "2",
        steps=2,
        learning_rate=1e-3,
        **small,
        mix=STAGE_MIXES[1],
        init=first,
        threads=1,
        progress_bar=False,
    )
    assert (built / "SHA256SUMS").read_text() == (second / "SHA256SUMS").read_text()


def test_grpo_from_the_base_learns_to_use_the_tools():
    """The seed's experiment in miniature (benchmarks/grpo_weatherrun.py --experiment b): the base answers WeatherRun
    from memory (0 % test success: an answer counts only after get_weather); 10 GRPO steps of the recipe make it
    look things up first. Measured on 3 seeds (10 steps): test success 20 / 40 / 47 %, tool use 100 / 90 / 100 % on
    one machine; on another (2026-12-06) seed 0 collapsed to answering from memory (tool use 0 %) while seeds 1 and 2
    learnt. So the claim is held over the seeds: at least 2 of 3 learn, and mean tool use is at least 50 %."""
    import torch

    from agentgym.app.recipes import TINY
    from agentgym.trainers.llm.grpo import GRPO, GRPOConfig

    torch.set_num_threads(2)
    results = []
    for seed in (0, 1, 2):
        config = GRPOConfig(**TINY["grpo-from-base"], steps=10, checkpoint_every=0, log_episodes=False, seed=seed)
        trainer = GRPO(LLMPolicy.from_pretrained("tiny"), config)
        before = trainer.evaluate()
        trainer.learn(progress_bar=False)
        after = trainer.evaluate()
        assert before["success"] == 0 and before["tool_use"] <= 0.1, before
        results.append(after)
    learnt = [r["tool_use"] >= 0.5 and r["success"] >= 0.1 for r in results]
    assert sum(learnt) >= 2 and sum(r["tool_use"] for r in results) / 3 >= 0.5, results
