"""Credit-assignment benchmark: GRPO's trajectory-level advantages against per-turn returns-to-go (REINFORCE++),
with and without a group baseline, on CliffWalk and WeatherRun with the shipped tiny base model.

Schemes (``GRPOConfig.credit_assignment``, ``group_baseline``; everything else the same):

- ``trajectory``: GRPO, one group-relative advantage per episode on all its turns (the default);
- ``turn+baseline``: each turn's return-to-go minus its group's mean return-to-go at that turn, divided by the
  batch std;
- ``turn``: each turn's return-to-go z-scored over the batch (no group baseline).

Per env, one format-only SFT warm-up (oracle calls with random decisions: ``randomize_decisions``) is trained
once and every scheme starts from it. Then, per scheme and seed:

- **gradient variance** at the SFT start: ``--variance-batches`` independent rollout batches are played once
  and every scheme's gradient of its own GRPO loss is taken on the same episodes (no optimizer step).
  Reported: the noise fraction ``tr Cov(g) / E‖g‖²`` (scale-free, as the schemes scale advantages
  differently: 0 is a batch gradient that is all signal, 1 all noise; ``E‖g‖² = ‖E g‖² + tr Cov(g)``), the
  mean cosine between batches' gradients and the raw ``tr Cov(g)``;
- **learning**: ``--steps`` GRPO steps; the step at which the metric first reaches the target, else the metric
  after the budget. CliffWalk (``max_turns`` 6, so the goal, 13 moves away, is out of reach and the task is not
  to fall): the mean return of the sampled training episodes over the last 3 steps, target ≥ −15 (every turn
  costs −1, the cliff −100: roughly a fall rate under 10 %; an invalid call also costs −1 and moves nothing,
  so "never move" is as good as "walk safely" here). WeatherRun (tiny recipe, ``agentgym.app.recipes.TINY``):
  greedy success on ``--eval-episodes`` frozen test tasks every ``--eval-every`` steps, target ≥ 0.8.

The default run is short (one seed, 10 steps per scheme, 4 tasks × 4 per step, a 4-step warm-up: a few minutes
on one thread); the
targets need more. Writes ``benchmarks/results/NAME.{json,md,png}`` (``--name``, default ``credit_assignment``)::

    python benchmarks/credit_assignment.py                      # default, a few minutes
    python benchmarks/credit_assignment.py --steps 30 --seeds 0 1 --variance-batches 8 --name credit_assignment_30
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from agentgym.app.recipes import TINY, tiny_overrides
from agentgym.trainers.llm.grpo import GRPO, GRPOConfig
from agentgym.trainers.llm.rollout import random_resets, rollout
from agentgym.trainers.llm.sft import SFT, SFTConfig
from agentgym.trainers.models.policy import LLMPolicy

RESULTS = Path(__file__).parent / "results"
SCHEMES: dict[str, dict[str, Any]] = {
    "trajectory": {"credit_assignment": "trajectory"},
    "turn+baseline": {"credit_assignment": "turn", "group_baseline": True},
    "turn": {"credit_assignment": "turn", "group_baseline": False},
}
CLIFF_ROLLOUT = {"max_turns": 6}
ENVS: dict[str, dict[str, Any]] = {
    "cliffwalk": {
        "env_id": "agentgym/CliffWalk-v0",
        "sft": {"episodes": 256, "rollout": {**TINY["sft"]["rollout"], **CLIFF_ROLLOUT}},
        "grpo": {"rollout": {**TINY["grpo"]["rollout"], **CLIFF_ROLLOUT}, "eval_split": None, "train_split": None},
        "metric": "reward",
        "target": -15.0,
    },
    "weatherrun": {
        "env_id": "agentgym/WeatherRun-v0",
        "sft": {},
        "grpo": {},
        "metric": "eval_success",
        "target": 0.8,
    },
}


def build_sft(env: str, out: Path, seed: int) -> tuple[Path, float | None]:
    """The format-only SFT start of ``env`` and the seconds it took (trained once: None when reused from ``out``)."""
    path = out / f"sft-{env}"
    if (path / "config.json").is_file():
        return path, None
    spec = ENVS[env]
    settings = {**tiny_overrides("sft", spec["env_id"]), **spec["sft"], "seed": seed, "eval_split": None}
    if env == "cliffwalk":
        settings["train_split"] = None
    policy = LLMPolicy.from_pretrained("tiny")
    t0 = time.perf_counter()
    SFT(policy, SFTConfig(**settings)).learn(progress_bar=False)
    seconds = time.perf_counter() - t0
    policy.save_pretrained(path)
    print(f"[{env}] SFT {seconds:.0f} s → {path}", flush=True)
    return path, seconds


def grpo_config(env: str, scheme: str, seed: int, args: argparse.Namespace) -> GRPOConfig:
    spec = ENVS[env]
    settings = {
        **tiny_overrides("grpo", spec["env_id"]),
        "tasks_per_step": args.tasks_per_step,
        "num_generations": args.num_generations,
        "warmup_steps": args.warmup_steps,
        "checkpoint_every": 0,
        "eval_episodes": args.eval_episodes,
        "log_episodes": False,
        **spec["grpo"],
        **SCHEMES[scheme],
        "seed": seed,
    }
    return GRPOConfig(**settings)


def gradient_variance(env: str, sft: Path, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Every scheme's gradient on the same ``--variance-batches`` rollout batches from the SFT start."""
    trainers = {s: GRPO(sft, grpo_config(env, s, 0, args)) for s in SCHEMES}
    grads: dict[str, list[torch.Tensor]] = {s: [] for s in SCHEMES}
    player = trainers["trajectory"]
    for trainer in trainers.values():  # keep the gradient, skip the step: weights stay at the SFT start
        trainer.optimizer_step = lambda t=trainer: _record(t)
    for _ in range(args.variance_batches):
        tasks = random_resets(player.rng, args.tasks_per_step, player.num_tasks)
        resets = [r for r in tasks for _ in range(args.num_generations)]
        episodes = rollout(
            player.policy, player.envs[: len(resets)], resets, player.config.rollout, generator=player.generator
        )
        turn_rewards = player.turn_rewards(episodes)
        for scheme, trainer in trainers.items():
            advantages, groups = trainer.advantages(turn_rewards)
            trainer._update(episodes, advantages, groups.tied)
            grads[scheme].append(trainer.last_gradient)
    out = {}
    for scheme, gs in grads.items():
        g = torch.stack(gs)
        k = len(g)
        noise = float(((g - g.mean(0)) ** 2).sum(1).sum()) / max(k - 1, 1)  # trace of the covariance, unbiased
        second = float((g**2).sum(1).mean())  # E‖g‖² = ‖E g‖² + noise
        cosines = [
            float(torch.nn.functional.cosine_similarity(g[i], g[j], dim=0)) for i in range(k) for j in range(i + 1, k)
        ]
        out[scheme] = {
            "noise_fraction": noise / second if second > 0 else float("nan"),
            "variance": noise,
            "mean_cosine": statistics.mean(cosines) if cosines else float("nan"),
            "grad_norm": float(g.norm(dim=1).mean()),
        }
    return out


def _record(trainer: GRPO) -> float:
    trainer.last_gradient = torch.cat(
        [p.grad.flatten() if p.grad is not None else torch.zeros(p.numel()) for p in trainer.scorer.parameters()]
    ).clone()
    return float(trainer.last_gradient.norm())


def learn(env: str, scheme: str, seed: int, sft: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``--steps`` GRPO steps of one scheme; the metric curve and the first step at the target."""
    spec = ENVS[env]
    trainer = GRPO(sft, grpo_config(env, scheme, seed, args))
    curve: list[dict[str, float]] = []
    if spec["metric"] == "eval_success":
        curve.append({"step": 0, "eval_success": trainer.evaluate()["success"]})
    seconds = [0.0]

    def on_step(_t: GRPO, row: dict) -> None:
        seconds[0] += row["time_step"]
        point = {"step": row["step"], "reward": row["reward"], "success": row["success"]}
        if spec["metric"] == "eval_success" and (row["step"] % args.eval_every == 0 or row["step"] == args.steps):
            point["eval_success"] = trainer.evaluate()["success"]
        curve.append(point)

    trainer.learn(args.steps, callback=on_step, progress_bar=False)
    if spec["metric"] == "reward":  # a batch of sampled episodes is noisy: the mean of the last 3 steps
        for i, point in enumerate(curve):
            point["reward_mean3"] = statistics.mean(p["reward"] for p in curve[max(0, i - 2) : i + 1])
    key = "reward_mean3" if spec["metric"] == "reward" else spec["metric"]
    scored = [p for p in curve if key in p]
    hit = next((p["step"] for p in scored if p[key] >= spec["target"]), None)
    final = scored[-1][key]
    print(f"[{env} {scheme} seed {seed}] steps to target: {hit}; final {spec['metric']} {final:.3g}", flush=True)
    return {"seed": seed, "curve": curve, "steps_to_target": hit, "final": final, "train_seconds": seconds[0]}


def second_half(run: dict[str, Any], metric: str, steps: int) -> float:
    """The mean of ``metric`` over the steps after the first half of the budget (sampled returns: every step;
    test success: every evaluation)."""
    return statistics.mean(p[metric] for p in run["curve"] if p["step"] > steps // 2 and metric in p)


def table(results: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        f"Budget: {args.steps} GRPO steps of {args.tasks_per_step} tasks × {args.num_generations}, seeds "
        f"{args.seeds}; gradient variance over {args.variance_batches} batches from the SFT start.",
        "",
        "| env | scheme | steps to target (per seed) | final metric (median) | metric over the 2nd half (per seed) | "
        "gradient noise fraction | tr Cov(g) | mean cosine between batch gradients | s per step |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for env, res in results.items():
        spec = ENVS[env]
        for scheme in SCHEMES:
            runs = res["runs"][scheme]
            var = res["variance"][scheme]
            steps = ", ".join("—" if r["steps_to_target"] is None else str(r["steps_to_target"]) for r in runs)
            final = statistics.median(r["final"] for r in runs)
            half = ", ".join(f"{second_half(r, spec['metric'], args.steps):.3g}" for r in runs)
            per_step = statistics.mean(r["train_seconds"] / args.steps for r in runs)
            lines.append(
                f"| {env} | {scheme} | {steps} (target {spec['metric']} ≥ {spec['target']:g}) | {final:.3g} | {half} | "
                f"{var['noise_fraction']:.3f} | {var['variance']:.3g} | {var['mean_cosine']:.3f} | {per_step:.1f} |"
            )
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2 * len(results), figsize=(5 * 2 * len(results), 3.8), squeeze=False)
    for i, (env, res) in enumerate(results.items()):
        spec = ENVS[env]
        ax = axes[0][2 * i]
        for scheme in SCHEMES:
            for k, run in enumerate(res["runs"][scheme]):
                key = "reward_mean3" if spec["metric"] == "reward" else spec["metric"]
                points = [p for p in run["curve"] if key in p]
                ax.plot(
                    [p["step"] for p in points],
                    [p[key] for p in points],
                    marker=".",
                    color=f"C{list(SCHEMES).index(scheme)}",
                    alpha=0.8,
                    label=scheme if k == 0 else None,
                )
        ax.axhline(spec["target"], color="grey", ls="--", lw=0.8, label="target")
        ax.set_title(f"{env}: {'return (mean of 3 steps)' if spec['metric'] == 'reward' else 'test success'}")
        ax.set_xlabel("GRPO step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        ax = axes[0][2 * i + 1]
        values = [res["variance"][s]["noise_fraction"] for s in SCHEMES]
        ax.bar(list(SCHEMES), values, color=[f"C{k}" for k in range(len(SCHEMES))])
        ax.set_title(f"{env}: gradient noise fraction tr Cov(g) / E|g|²")
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", choices=list(ENVS), default=list(ENVS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--steps", type=int, default=10, help="GRPO steps per scheme and seed")
    parser.add_argument(
        "--warmup-steps", type=int, default=4, help="learning-rate warm-up (the recipe's 20 suits 100+ steps)"
    )
    parser.add_argument("--tasks-per-step", type=int, default=4)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--variance-batches", type=int, default=4)
    parser.add_argument("--eval-every", type=int, default=5, help="WeatherRun: steps between test evaluations")
    parser.add_argument("--eval-episodes", type=int, default=30, help="WeatherRun: test tasks per evaluation")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="runs/bench_credit_assignment", help="where the SFT models are kept")
    parser.add_argument("--results", default=str(RESULTS))
    parser.add_argument("--name", default="credit_assignment", help="file name of the table, JSON and plot")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out, results_dir = Path(args.out), Path(args.results)
    results_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    results: dict[str, Any] = {}
    for env in args.envs:
        sft, sft_seconds = build_sft(env, out, seed=0)
        variance = gradient_variance(env, sft, args)
        for scheme, v in variance.items():
            print(
                f"[{env} {scheme}] gradient noise fraction {v['noise_fraction']:.3f}, mean cosine "
                f"{v['mean_cosine']:.3f}",
                flush=True,
            )
        runs = {scheme: [learn(env, scheme, seed, sft, args) for seed in args.seeds] for scheme in SCHEMES}
        results[env] = {"sft_seconds": sft_seconds, "variance": variance, "runs": runs}
    text = table(results, args)
    sft = ", ".join(
        f"{env} {r['sft_seconds']:.0f} s" if r["sft_seconds"] is not None else f"{env} reused from {args.out}"
        for env, r in results.items()
    )
    text += f"\nSFT warm-ups: {sft}.\n"
    print("\n" + text)
    minutes = (time.perf_counter() - start) / 60
    print(f"total {minutes:.1f} min on {args.threads} thread(s)")
    (results_dir / f"{args.name}.md").write_text(text + f"\nTotal {minutes:.1f} min, {args.threads} thread(s).\n")
    (results_dir / f"{args.name}.json").write_text(
        json.dumps({"args": vars(args), "minutes": minutes, "results": results}, indent=1, default=_finite)
    )
    plot(results, results_dir / f"{args.name}.png")
    print(f"wrote {results_dir}/{args.name}.{{md,json,png}}")


def _finite(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


if __name__ == "__main__":
    main()
