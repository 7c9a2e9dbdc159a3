"""Learning benchmark: the shipped tiny base model learns WeatherRun with GRPO on 2 CPU cores.

Two experiments, each over several seeds (median and spread), evaluated greedily on the 100 frozen test
tasks (whose 10 cities never occur in training; training uses made-up city names):

- ``--experiment a`` (the recommended recipe): a format-only SFT warm-up (oracle demonstrations whose
  decisions are coin flips, so it teaches the calls but not the rule), then GRPO.
- ``--experiment b`` (no WeatherRun SFT at all): GRPO straight from the base model, which at first
  answers from memory without looking anything up. Plotted: tool use, format compliance, test success
  and mean reward against steps and wall time, to show the phases (no tools → tools → using results).
- ``--experiment labels`` (the peer: what labels teach): SFT from the base on oracle demonstrations with
  their *correct* decisions, 512, 1,024 and 2,048 episodes (each from the base), then the same greedy test.
  It shows how many labelled decisions the base needs to learn the rule, against which GRPO's reward-only
  learning is measured.

Both use the tiny recipe (``agentgym.app.recipes.TINY``): every turn shows the compact tool list and the
env's one-line state (``turn_template="{signatures}\\n{summary}"``).

Run (each seed: a few minutes on 2 cores)::

    python benchmarks/grpo_weatherrun.py --experiment a --seeds 0 1 2 --minutes 3
    python benchmarks/grpo_weatherrun.py --experiment b --seeds 0 1 2 --minutes 10
    python benchmarks/grpo_weatherrun.py --experiment labels --seeds 0 1 2

``--jobs 2`` trains two seeds at a time, one core and one torch thread each (the numbers in
``benchmarks/README.md`` were measured so: a seed's minutes are one core's, a stricter budget than 2 cores).
The clock is the time spent in training steps; the test evaluations between them are not counted.

Writes ``benchmarks/results/grpo_weatherrun_{a,b}.json`` and ``.png``, and ``grpo_weatherrun_labels.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from agentgym.app.recipes import TINY
from agentgym.trainers.llm.grpo import GRPO, GRPOConfig
from agentgym.trainers.llm.rollout import evaluate_split
from agentgym.trainers.llm.sft import SFT, SFTConfig
from agentgym.trainers.models.policy import LLMPolicy
from agentgym.trainers.models.tiny_model import base_model_path

RESULTS = Path(__file__).parent / "results"
KEYS = ("eval_success", "eval_tool_use", "eval_format_compliance", "eval_reward")


def run_seed(
    experiment: str,
    seed: int,
    minutes: float,
    eval_every: int,
    out: Path,
    threads: int,
    model: str | None = None,
    overrides: dict | None = None,
) -> dict:
    """One seed: (SFT for experiment a), then GRPO for ``minutes``; the evaluation curve."""
    torch.set_num_threads(threads)
    policy = LLMPolicy.from_pretrained(model or base_model_path())
    sft_seconds = 0.0
    if experiment == "a":
        t0 = time.perf_counter()
        SFT(policy, SFTConfig(**TINY["sft"], seed=seed, eval_split=None), out_dir=out / "sft").learn(progress_bar=False)
        sft_seconds = time.perf_counter() - t0
    settings = {**(TINY["grpo"] if experiment == "a" else TINY["grpo-from-base"]), **(overrides or {})}
    # a run's steps (``--set steps=N``) bound it and set the length of a decaying learning-rate schedule
    steps = settings.pop("steps", 100_000)
    config = GRPOConfig(**settings, checkpoint_every=eval_every, steps=steps, seed=seed)
    trainer = GRPO(policy, config, out_dir=out / "grpo")
    start = time.perf_counter()
    first = trainer.evaluate()
    curve = [{"step": 0, "minutes": 0.0, "wall_minutes": 0.0, **{f"eval_{k}": v for k, v in first.items()}}]
    print(f"[{experiment} seed {seed}] SFT {sft_seconds:.0f} s; start: " + _line(curve[0]), flush=True)

    trained = [0.0]  # seconds inside train_step: the clock the budget and the curves use (evaluations excluded)

    def on_step(_trainer: GRPO, row: dict) -> bool:
        trained[0] += row["time_step"]
        row["minutes"] = trained[0] / 60
        row["wall_minutes"] = (time.perf_counter() - start) / 60
        if "eval_success" in row:
            curve.append({k: row[k] for k in ("step", "minutes", "wall_minutes", *KEYS)})
            print(
                f"[{experiment} seed {seed}] step {row['step']:4d} {row['minutes']:5.2f} min  " + _line(row), flush=True
            )
        return trained[0] < minutes * 60

    rows = trainer.learn(callback=on_step, progress_bar=False).metrics
    timing = {
        k: statistics.mean(r[k] for r in rows if k in r)
        for k in ("time_step", "time_generate", "time_env", "time_update")
        if any(k in r for r in rows)
    }
    return {"seed": seed, "sft_seconds": sft_seconds, "steps": rows[-1]["step"], "timing": timing, "curve": curve}


def labelled(seed: int, threads: int, model: str | None = None, sizes: tuple[int, ...] = (512, 1024, 2048)) -> dict:
    """SFT from the base on ``n`` oracle episodes with their correct decisions, for each ``n``; the greedy test."""
    torch.set_num_threads(threads)
    points = []
    for n in sizes:
        policy = LLMPolicy.from_pretrained(model or base_model_path())
        t0 = time.perf_counter()
        config = SFTConfig(**{**TINY["sft"], "randomize_decisions": False, "episodes": n}, seed=seed, eval_split=None)
        SFT(policy, config).learn(progress_bar=False)
        seconds = time.perf_counter() - t0
        result = evaluate_split(policy, config, split="test").metrics()  # greedy, as GRPO's evaluations
        points.append({"episodes": n, "sft_seconds": round(seconds, 1), **{k: result[k[5:]] for k in KEYS}})
        print(f"[labels seed {seed}] {n} labelled episodes, {seconds:.0f} s: " + _line(points[-1]), flush=True)
    return {"seed": seed, "points": points}


def _line(row: dict) -> str:
    return "  ".join(f"{k[5:]} {row[k]:.0%}" if k != "eval_reward" else f"reward {row[k]:+.2f}" for k in KEYS)


def first_minutes(curve: list[dict], key: str, level: float) -> float | None:
    """Wall-clock minutes at which ``key`` first reached ``level`` (None: never)."""
    return next((r["minutes"] for r in curve if r[key] >= level), None)


def plot(runs: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(KEYS), figsize=(4 * len(KEYS), 6.5), squeeze=False)
    for col, key in enumerate(KEYS):
        for row, x in enumerate(("step", "minutes")):
            ax = axes[row][col]
            for run in runs:
                ax.plot(
                    [r[x] for r in run["curve"]],
                    [r[key] for r in run["curve"]],
                    marker=".",
                    label=f"seed {run['seed']}",
                )
            ax.set_xlabel("GRPO steps" if x == "step" else "training minutes (evaluations excluded)")
            if key != "eval_reward":
                ax.set_ylim(-0.02, 1.02)
            ax.set_title(key.removeprefix("eval_").replace("_", " ") + " (test split)")
            ax.grid(alpha=0.3)
        axes[0][col].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", choices=["a", "b", "labels"], default="a")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--minutes", type=float, help="GRPO wall-clock budget per seed (default: a 3, b 10)")
    parser.add_argument("--eval-every", type=int, default=10, help="GRPO steps between test evaluations")
    parser.add_argument("--threads", type=int, default=2, help="torch threads per seed")
    parser.add_argument("--jobs", type=int, default=1, help="seeds trained at once, in separate processes")
    parser.add_argument("--out", default="runs/bench_grpo_weatherrun")
    parser.add_argument("--model", help="another base model directory (default: the shipped tiny base)")
    parser.add_argument("--results", default=str(RESULTS), help="where the JSON and the plot go")
    parser.add_argument("--name", help="the results' file name (default: grpo_weatherrun_<experiment>)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="FIELD=JSON", help="a GRPO setting other than the recipe's"
    )
    args = parser.parse_args()
    overrides = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.set)}
    if args.experiment == "labels":
        runs = [labelled(seed, args.threads, args.model) for seed in args.seeds]
        Path(args.results).mkdir(parents=True, exist_ok=True)
        (Path(args.results) / "grpo_weatherrun_labels.json").write_text(json.dumps({"runs": runs}, indent=2) + "\n")
        return
    minutes = args.minutes or (3.0 if args.experiment == "a" else 10.0)
    jobs = [
        (
            args.experiment,
            seed,
            minutes,
            args.eval_every,
            Path(args.out) / f"{args.experiment}-seed{seed}",
            args.threads,
            args.model,
            overrides,
        )
        for seed in args.seeds
    ]
    if args.jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            runs = list(pool.map(run_seed, *zip(*jobs, strict=True)))
    else:
        runs = [run_seed(*job) for job in jobs]
    summary = {
        "experiment": args.experiment,
        "minutes": minutes,
        "threads": args.threads,
        "jobs": args.jobs,
        "overrides": overrides,
        "runs": runs,
        "median": {},
    }
    for key, level in (("eval_success", 0.9), ("eval_success", 0.95), ("eval_tool_use", 0.9)):
        reached = [first_minutes(r["curve"], key, level) for r in runs]
        summary["median"][f"minutes_to_{key[5:]}_{level:.0%}"] = reached
    finals = [r["curve"][-1]["eval_success"] for r in runs]
    summary["median"]["final_success"] = {"median": statistics.median(finals), "min": min(finals), "max": max(finals)}
    summary["median"]["sft_seconds"] = [round(r["sft_seconds"], 1) for r in runs]
    print(json.dumps(summary["median"], indent=2))
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    name = args.name or f"grpo_weatherrun_{args.experiment}"
    (results / f"{name}.json").write_text(json.dumps(summary, indent=2) + "\n")
    title = {"a": "format-only SFT, then GRPO", "b": "GRPO from the base model, no WeatherRun SFT"}[args.experiment]
    plot(runs, results / f"{name}.png", f"Tiny base on WeatherRun: {title}")


if __name__ == "__main__":
    main()
