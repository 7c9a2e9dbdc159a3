"""Seconds per GRPO step: ``agentgym.trainers.llm.grpo.GRPO`` vs TRL's ``GRPOTrainer``, same tiny model, CPU.

Both trainers get the same configuration:

- model: the ~1.1 M-parameter Llama-config model of ``agentgym.trainers.models.tiny_model.build_tiny_model`` (fp32, random
  weights), built once into a temporary folder (or ``--model PATH``) and loaded by both;
- a step = 2 prompts × 8 generations = 16 completions of at most 64 new tokens (temperature 1, top-p 1), one
  optimizer step per generation batch (``num_iterations=1``, no gradient accumulation), AdamW, lr 1e-5,
  ``loss_type="dapo"``, ε = 0.2, group-scaled advantages;
- single-turn reward: the share of vowels among the letters of the completion (the same function for both;
  ours gets it from a one-step gymnasium env, TRL as a reward function);
- prompts: the same 64 chat prompts (one user message each, rendered with the model's chat template);
- ``beta`` (KL to a frozen reference): timed at 0.0 (neither trainer loads a reference model) and at 0.04
  (both load one and score every batch with it); ``--betas`` picks others;
- ``torch.set_num_threads(1)`` (and ``OMP_NUM_THREADS=1``) in both: with 2 threads, timings on a 2-core
  machine swung by up to 20×.

Each (trainer, beta) runs in its own subprocess, so the peak RSS is that trainer's alone (``VmHWM`` from
``/proc/self/status``; ``ru_maxrss``, which Linux carries over from the parent across ``execve``, is in the
JSON too); the peak after imports (torch/transformers/trl/datasets, or agentgym's trainer) is reported as the
model-free baseline. In each
process ``--warmup`` steps are discarded, then ``--steps`` steps are timed. Repeats are interleaved
(ours, TRL, TRL, ours, ...) so load from other processes hits both alike.

What is timed:

- ours: wall time of ``GRPO.train_step()`` (draw tasks, reset envs, render prompts, sample, step envs for the
  reward, advantages, forward/backward, clip, optimizer step);
- TRL: wall time from ``on_step_begin`` to ``on_step_end`` of a ``TrainerCallback`` (generation, reward,
  advantages, forward/backward, clip, optimizer and scheduler step). ``loop`` is the interval between
  consecutive ``on_step_end`` calls, which adds the dataloader fetch and the trainer's bookkeeping;
- ``gen``: time inside the model sampling loop only (ours: ``LLMPolicy.generate``; TRL:
  ``GRPOTrainer._generate_single_turn``, i.e. ``model.generate``), as a share of the step;
- ``rollout``: ours ``row["time_rollout"]`` (envs + chat rendering + sampling + decoding + rewards); TRL
  ``_generate_and_score_completions`` (tokenising + sampling + decoding + rewards + advantages, + reference
  log-probs when beta > 0).

Run (builds the tiny model, ~15 s, then 2 betas × 2 repeats × 2 trainers = 8 processes; about 3-4 minutes on
2 CPU cores)::

    python benchmarks/grpo_vs_trl.py
    python benchmarks/grpo_vs_trl.py --steps 20 --warmup 3 --repeats 2 --betas 0.0 0.04 \\
        --out benchmarks/results/grpo_vs_trl.json     # the defaults, spelled out
    python benchmarks/grpo_vs_trl.py --betas 0.0 --model /tmp/tiny   # reuse a built model, beta 0 only

Reading the output: one line per process, then a Markdown table with, per (trainer, beta), the median
s/step over all measured steps of all repeats (and the per-repeat medians, to show the noise), the
generation and rollout shares, the mean completion length (should be ≈64 for both: the untrained model rarely
samples a stop token), and the peak RSS. ``ratio`` = ours median / TRL median for the same beta; ≤ 1.0 means
ours is no slower (the target). The JSON written to ``--out`` holds every step time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

TARGET = 1.0  # ours/TRL seconds-per-step ratio we aim for (no slower than TRL)
GROUP = 8  # num_generations
PROMPTS_PER_STEP = 2  # a step is PROMPTS_PER_STEP × GROUP = 16 completions
MAX_NEW_TOKENS = 64
LEARNING_RATE = 1e-5
ENV_ID = "bench/VowelShare-v0"
TOPICS = (
    "rivers", "mountains", "cities", "forests", "deserts", "oceans", "islands", "lakes",
    "valleys", "glaciers", "volcanoes", "canyons", "meadows", "harbours", "bridges", "castles",
)  # fmt: skip
PROMPTS = [f"Task {i}: write one short sentence about {TOPICS[i % len(TOPICS)]}." for i in range(64)]
DEFAULT_OUT = Path(__file__).parent / "results" / "grpo_vs_trl.json"


def vowel_share(text: str) -> float:
    """Share of vowels among the letters of ``text`` (0 when it has no letters): the reward of both trainers."""
    letters = [c for c in text.lower() if c.isalpha()]
    return sum(c in "aeiou" for c in letters) / len(letters) if letters else 0.0


def maxrss_mib() -> float:
    """``getrusage(RUSAGE_SELF).ru_maxrss`` in MiB (KiB on Linux, bytes on macOS).

    Linux carries it across ``execve``: a worker starts at its parent's RSS at the fork, hence the light driver.
    """
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if platform.system() == "Darwin" else peak / 1024


def rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB: ``VmHWM`` of this process's own address space
    where ``/proc`` has it (not inherited across ``execve``), else ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return maxrss_mib()


def single_thread() -> None:
    import torch

    torch.set_num_threads(1)


# ---------------------------------------------------------------------------------------------- workers


def run_ours(model: str, beta: float, warmup: int, steps: int) -> dict[str, Any]:
    """Time ``GRPO.train_step`` in this process."""
    import gymnasium as gym

    from agentgym.core.spaces import AnyText
    from agentgym.trainers.llm.grpo import GRPO, GRPOConfig
    from agentgym.trainers.llm.rollout import RolloutConfig

    single_thread()
    rss_imports = rss_mib()

    class VowelShareEnv(gym.Env):
        """One turn: the observation is a prompt, the action a completion, the reward its vowel share."""

        def __init__(self) -> None:
            self.observation_space = AnyText(4096)
            self.action_space = AnyText(1 << 16)

        def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
            super().reset(seed=seed)
            return PROMPTS[int(self.np_random.integers(len(PROMPTS)))], {}

        def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
            return "", vowel_share(action), True, False, {}

    gym.register(ENV_ID, entry_point=VowelShareEnv)
    config = GRPOConfig(
        env_id=ENV_ID,
        train_split=None,
        eval_split=None,
        rollout=RolloutConfig(max_new_tokens=MAX_NEW_TOKENS, context="append", temperature=1.0, top_p=1.0),
        tasks_per_step=PROMPTS_PER_STEP,
        num_generations=GROUP,
        learning_rate=LEARNING_RATE,
        beta=beta,
        loss_type="dapo",
        num_iterations=1,
        micro_batch_size=PROMPTS_PER_STEP * GROUP,
        checkpoint_every=0,
    )
    trainer = GRPO(model, config)
    policy = trainer.policy
    generate = policy.generate
    gen_time = [0.0]

    def timed_generate(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return generate(*args, **kwargs)
        finally:
            gen_time[0] += time.perf_counter() - start

    policy.generate = timed_generate  # instance attribute: instruments this run only
    records = []
    for _ in range(warmup + steps):
        gen_time[0] = 0.0
        start = time.perf_counter()
        row = trainer.train_step()
        elapsed = time.perf_counter() - start
        records.append(
            {
                "step": elapsed,
                "loop": elapsed,
                "gen": gen_time[0],
                "rollout": row["time_rollout"],
                "completion_length": row["response_length"],
                "stopped_early": 1.0 - row["clipped_responses"],
                "reward": row["reward"],
            }
        )
    return {"rss_imports_mib": rss_imports, "records": records[warmup:]}


def run_trl(model: str, beta: float, warmup: int, steps: int) -> dict[str, Any]:
    """Time ``GRPOTrainer`` steps in this process with a ``TrainerCallback``."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig as TRLConfig
    from trl import GRPOTrainer

    single_thread()
    rss_imports = rss_mib()
    records: list[dict[str, float]] = []
    current: dict[str, float] = {}

    class Timed(GRPOTrainer):
        """Adds timers around sampling and around generate-and-score; records completion lengths."""

        def _generate_single_turn(self, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            completion_ids, logprobs = super()._generate_single_turn(*args, **kwargs)
            current["gen"] = current.get("gen", 0.0) + time.perf_counter() - start
            lengths = [len(ids) for ids in completion_ids]
            current["completion_length"] = sum(lengths) / len(lengths)
            current["stopped_early"] = sum(n < MAX_NEW_TOKENS for n in lengths) / len(lengths)
            return completion_ids, logprobs

        def _generate_and_score_completions(self, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            out = super()._generate_and_score_completions(*args, **kwargs)
            current["rollout"] = current.get("rollout", 0.0) + time.perf_counter() - start
            return out

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.begin = 0.0
            self.last_end: float | None = None

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            current.clear()
            self.begin = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            end = time.perf_counter()
            loop = end - self.last_end if self.last_end is not None else end - self.begin
            self.last_end = end
            records.append({"step": end - self.begin, "loop": loop, **current})

    def reward(completions: list[Any], **kwargs: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [vowel_share(t) for t in texts]

    tokenizer = AutoTokenizer.from_pretrained(model)
    policy = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": p}]} for p in PROMPTS])
    out_dir = tempfile.mkdtemp(prefix="grpo_vs_trl_")
    args = TRLConfig(
        output_dir=out_dir,
        use_cpu=True,
        bf16=False,  # TRL's configs default to bf16=True
        fp16=False,
        report_to="none",
        logging_strategy="no",
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        max_steps=warmup + steps,
        per_device_train_batch_size=PROMPTS_PER_STEP * GROUP,
        gradient_accumulation_steps=1,  # → steps_per_generation=1, generation_batch_size=16
        num_generations=GROUP,
        num_iterations=1,
        max_completion_length=MAX_NEW_TOKENS,
        temperature=1.0,
        top_p=1.0,
        learning_rate=LEARNING_RATE,
        lr_scheduler_type="constant",
        adam_beta2=0.99,
        weight_decay=0.0,
        max_grad_norm=1.0,
        beta=beta,
        loss_type="dapo",
        epsilon=0.2,
        scale_rewards="group",
        seed=0,
    )
    if args.generation_batch_size != PROMPTS_PER_STEP * GROUP or args.steps_per_generation != 1:
        raise RuntimeError(f"TRL config gives {args.generation_batch_size=} {args.steps_per_generation=}")
    trainer = Timed(
        model=policy,
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[StepTimer()],
    )
    trainer.train()
    if len(records) != warmup + steps:
        raise RuntimeError(f"expected {warmup + steps} steps, timed {len(records)}")
    return {"rss_imports_mib": rss_imports, "records": records[warmup:]}


def worker(args: argparse.Namespace) -> None:
    if args.worker == "build":
        from agentgym.trainers.models.tiny_model import build_tiny_model

        build_tiny_model(args.model)  # all envs: a 3.6 k vocabulary, so stop tokens are rarely sampled
        return
    run = run_ours if args.worker == "ours" else run_trl
    result = run(args.model, args.beta, args.warmup, args.steps)
    result["rss_peak_mib"] = rss_mib()
    result["ru_maxrss_mib"] = maxrss_mib()
    Path(args.result).write_text(json.dumps(result))


# ---------------------------------------------------------------------------------------------- driver


def spawn(trainer: str, model: str, beta: float, warmup: int, steps: int) -> dict[str, Any]:
    """Run one worker process and return its result (raises with the worker's stderr if it fails)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        result_path = f.name
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_VERBOSITY": "error",
    }
    cmd = [sys.executable, __file__, "--worker", trainer, "--model", model, "--beta", str(beta)]
    cmd += ["--warmup", str(warmup), "--steps", str(steps), "--result", result_path]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{trainer} worker failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    result = json.loads(Path(result_path).read_text())
    os.unlink(result_path)
    result["wall_s"] = time.perf_counter() - start
    return result


def median_of(records: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in records)


def mean_of(records: list[dict[str, float]], key: str) -> float:
    return statistics.fmean(r[key] for r in records)


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    records = [r for run in runs for r in run["records"]]
    step = median_of(records, "step")
    return {
        "median_s_per_step": step,
        "repeat_medians": [median_of(run["records"], "step") for run in runs],
        "median_loop_s": median_of(records, "loop"),
        "min_s_per_step": min(r["step"] for r in records),
        "gen_share": sum(r["gen"] for r in records) / sum(r["step"] for r in records),
        "rollout_share": sum(r["rollout"] for r in records) / sum(r["step"] for r in records),
        "median_gen_s": median_of(records, "gen"),
        "mean_completion_length": mean_of(records, "completion_length"),
        "stopped_early": mean_of(records, "stopped_early"),
        "rss_imports_mib": max(run["rss_imports_mib"] for run in runs),
        "rss_peak_mib": max(run["rss_peak_mib"] for run in runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="measured steps per process")
    parser.add_argument("--warmup", type=int, default=3, help="discarded steps per process")
    parser.add_argument("--repeats", type=int, default=2, help="processes per (trainer, beta), interleaved")
    parser.add_argument("--betas", type=float, nargs="+", default=[0.0, 0.04], help="KL coefficients to time")
    parser.add_argument("--model", help="an existing tiny model folder (default: build one in a temp folder)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON of all results")
    parser.add_argument("--worker", choices=["ours", "trl", "build"], help=argparse.SUPPRESS)
    parser.add_argument("--beta", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="grpo_vs_trl_model_") as tmp:
        model = args.model
        if model is None:  # built in a subprocess too, so that this driver stays small (see maxrss_mib)
            t0 = time.perf_counter()
            model = str(Path(tmp) / "tiny")
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", "build", "--model", model], capture_output=True
            )
            if proc.returncode != 0:
                raise RuntimeError(f"building the tiny model failed:\n{proc.stderr.decode()[-4000:]}")
            print(f"built tiny model in {time.perf_counter() - t0:.1f} s: {model}", flush=True)
        runs: dict[tuple[str, float], list[dict[str, Any]]] = {}
        for beta in args.betas:
            for repeat in range(args.repeats):
                order = ("ours", "trl") if repeat % 2 == 0 else ("trl", "ours")
                for trainer in order:
                    result = spawn(trainer, model, beta, args.warmup, args.steps)
                    runs.setdefault((trainer, beta), []).append(result)
                    print(
                        f"{trainer:>4} beta={beta:g} repeat {repeat + 1}: "
                        f"median {median_of(result['records'], 'step'):.4f} s/step, "
                        f"peak RSS {result['rss_peak_mib']:.0f} MiB, process {result['wall_s']:.1f} s",
                        flush=True,
                    )

    summary = {f"{t}@beta={b:g}": summarise(r) for (t, b), r in runs.items()}
    ratios = {
        f"beta={b:g}": summary[f"ours@beta={b:g}"]["median_s_per_step"]
        / summary[f"trl@beta={b:g}"]["median_s_per_step"]
        for b in args.betas
    }
    report = {
        "config": {
            "steps": args.steps,
            "warmup": args.warmup,
            "repeats": args.repeats,
            "betas": args.betas,
            "num_generations": GROUP,
            "prompts_per_step": PROMPTS_PER_STEP,
            "max_new_tokens": MAX_NEW_TOKENS,
            "learning_rate": LEARNING_RATE,
            "threads": 1,
        },
        "versions": {
            "python": platform.python_version(),
            **{name: version(name) for name in ("torch", "transformers", "trl", "accelerate", "datasets")},
        },
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "summary": summary,
        "ratio_ours_over_trl": ratios,
        "target": TARGET,
        "runs": {f"{t}@beta={b:g}": r for (t, b), r in runs.items()},
        "total_s": time.perf_counter() - started,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")

    print()
    print(
        f"GRPO step, {PROMPTS_PER_STEP} prompts × {GROUP} generations × ≤{MAX_NEW_TOKENS} tokens, tiny model, "
        f"1 thread; median of {args.repeats} × {args.steps} steps ({args.warmup} warm-up per process)"
    )
    print()
    print(
        "| trainer | beta | s/step (median) | per repeat | loop s | gen share | rollout share "
        "| completion tokens | stopped early | RSS after imports | peak RSS | ratio ours/TRL |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for beta in args.betas:
        for trainer in ("ours", "trl"):
            s = summary[f"{trainer}@beta={beta:g}"]
            ratio = f"**{ratios[f'beta={beta:g}']:.2f}**" if trainer == "ours" else ""
            per_repeat = ", ".join(f"{m:.4f}" for m in s["repeat_medians"])
            print(
                f"| {'ours' if trainer == 'ours' else 'TRL'} | {beta:g} | {s['median_s_per_step']:.4f} | {per_repeat} "
                f"| {s['median_loop_s']:.4f} | {s['gen_share']:.0%} | {s['rollout_share']:.0%} "
                f"| {s['mean_completion_length']:.1f} | {s['stopped_early']:.1%} | {s['rss_imports_mib']:.0f} MiB "
                f"| {s['rss_peak_mib']:.0f} MiB | {ratio} |"
            )
    print()
    verdict = all(r <= TARGET for r in ratios.values())
    print(f"target ratio ≤ {TARGET:.2f}: {'met' if verdict else 'NOT met'}; results in {args.out}")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
