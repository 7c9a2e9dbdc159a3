"""SQLLookup learned by a language model: SFT on the training set's oracle transcripts, then GRPO on the env's reward.

From a base model (``--model``: ``tiny``, the shipped base, or any model directory), per seed:

1. SFT with the tiny recipe ``TINY["sft-sqllookup"]`` (``agentgym.app.recipes``): oracle transcripts on the shipped
   training set (``task_set="training"``: the v0 question families on a training database with more values; no
   frozen test question or gold query in it) that describe the tables the gold query uses, then ``answer_sql``
   with it; summary context (each turn's prompt is the question's line and the state line);
2. GRPO with ``TINY["grpo-sqllookup"]`` on the same training set, rewarded by the env (result match), for
   ``--grpo-minutes`` of training steps;
3. greedy evaluation on ``agentgym/SQLLookup-v1``'s test split (209 questions) through
   ``agentgym.app.evaluation.runner.evaluate_agent`` (success with its Wilson 95 % interval, and per difficulty tag) of the
   SFT and GRPO models, and, for ``--curve-seeds``, of every checkpoint (the curve against training minutes).

The clock is the time inside training steps (SFT steps; GRPO rollouts and updates); building the demonstrations and
the evaluations are not counted. Results go to ``--results`` (JSON, a Markdown table, the curve as a PNG)::

    python benchmarks/sql_lm.py --seeds 0 1 2 --curve-seeds 0 --results benchmarks/results/sql_lm
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import torch

from agentgym.app.evaluation.reports import load_episodes
from agentgym.app.evaluation.runner import evaluate_agent
from agentgym.app.recipes import TINY
from agentgym.core.episode import EpisodeRecord
from agentgym.trainers.llm.grpo import GRPO, GRPOConfig
from agentgym.trainers.llm.sft import SFT, SFTConfig
from agentgym.trainers.models.policy import LLMPolicy

ENV_ID = "agentgym/SQLLookup-v1"
TAGS = ("single_table", "join", "aggregate", "nested", "date")


def evaluate(model_dir: Path, rollout: dict[str, Any], out_dir: Path | None = None) -> dict[str, Any]:
    """Greedy success on SQLLookup-v1's test split, with its Wilson interval and per difficulty tag."""
    start = time.perf_counter()
    sampling = {**rollout, "temperature": 0.0}
    summary = evaluate_agent(
        ENV_ID, f"hf:{model_dir}", split="test", sampling=sampling, concurrency=64, out_dir=out_dir
    )
    tags = summary.by_tag.get("difficulty", {})
    return {
        "success": summary.success_rate,
        "ci95": list(summary.success_ci95),
        "episodes": summary.episodes,
        "tool_call_validity": summary.tool_call_validity,
        "format_compliance": summary.format_compliance,
        "mean_turns": summary.mean_turns,
        "by_tag": {
            tag: {"success": s.success_rate, "ci95": list(s.success_ci95), "n": s.episodes} for tag, s in tags.items()
        },
        "eval_seconds": time.perf_counter() - start,
    }


def _test_episodes(eval_dir: Path) -> list[tuple[Any, EpisodeRecord]]:
    """``(task, record)`` for every episode of an evaluation of SQLLookup-v1's test split."""
    import gymnasium as gym

    env = gym.make(ENV_ID, split="test")
    tasks = env.unwrapped.tasks
    env.close()
    return [(tasks[r.reset["options"]["task_index"]], r) for r in load_episodes(eval_dir / "episodes.jsonl")]


def failures(eval_dir: Path) -> dict[str, dict[str, int]]:
    """Per question family of the test split: episodes, successes, and how the others ended — ``error`` (every
    answer_sql failed to run: a query SQLite refuses), ``wrong`` (a query that ran, the wrong result),
    ``unfinished`` (no answer within the turn budget, or an unreadable call)."""
    out: dict[str, dict[str, int]] = {}
    for task, record in _test_episodes(eval_dir):
        row = out.setdefault(task.family or "", {"n": 0, "success": 0, "error": 0, "wrong": 0, "unfinished": 0})
        row["n"] += 1
        last = record.observations[-1] if record.observations else ""
        if record.success:
            row["success"] += 1
        elif "Answer recorded" in last:
            row["wrong"] += 1
        elif any("Error:" in o for o in record.observations[1:]):
            row["error"] += 1
        else:
            row["unfinished"] += 1
    return dict(sorted(out.items()))


_LITERAL = re.compile(r"'([^']*)'|\b(\d+(?:\.\d+)?)\b")
NEEDS = ("copied", "derived, seen", "derived, unseen", "one-off")


def _literals(sql: str) -> set[str]:
    """The quoted strings and numbers of a query."""
    return {quoted or number for quoted, number in _LITERAL.findall(sql)} - {""}


def literal_needs(eval_dir: Path) -> dict[str, dict[str, int]]:
    """Test episodes and successes by what the gold query's literals (quoted strings, numbers) ask of the model:
    ``copied`` (every one is in the question's text), ``derived, seen`` (those not in the question, e.g.
    ``'2023-05'`` for "May 2023", all occur in the family's training gold queries), ``derived, unseen`` (one of
    them never does: the training set cannot show it), ``one-off`` (no family in the training set)."""
    from agentgym.envs.sql import dataset

    seen: dict[str, set[str]] = {}
    for task in dataset.load_tasks(dataset.TRAINING_TASKS):
        seen.setdefault(task.family, set()).update(_literals(task.gold_sql))
    out = {need: {"n": 0, "success": 0} for need in NEEDS}
    for task, record in _test_episodes(eval_dir):
        derived = {x for x in _literals(task.gold_sql) if x not in task.question}
        if task.family not in seen:
            need = "one-off"
        else:
            need = "copied" if not derived else "derived, seen" if derived <= seen[task.family] else "derived, unseen"
        out[need]["n"] += 1
        out[need]["success"] += record.success
    return out


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, directory) of a run's checkpoints, in order."""
    found = [(int(p.name.removeprefix("step-")), p) for p in (run_dir / "checkpoints").glob("step-*")]
    return sorted(found)


def run_seed(args: argparse.Namespace, seed: int, out: Path) -> dict[str, Any]:
    """SFT then GRPO for one seed; their evaluations; the curve if asked."""
    torch.manual_seed(seed)
    sft_settings = {**TINY["sft-sqllookup"], **args.sft_set}
    sft_config = SFTConfig.model_validate(
        {
            **sft_settings,
            "episodes": args.sft_episodes,
            "epochs": args.sft_epochs,
            "seed": seed,
            "eval_split": None,
            "checkpoint_every": args.sft_checkpoint_every,
        }  # fmt: skip
    )
    policy = LLMPolicy.from_pretrained(args.model)
    sft_dir = out / f"seed-{seed}" / "sft"
    sft_rows = SFT(policy, sft_config, out_dir=sft_dir).learn(progress_bar=False).metrics
    sft_seconds = sft_rows[-1]["time"]
    times = {row["step"]: row["time"] for row in sft_rows}
    print(f"seed {seed}: SFT {len(sft_rows)} steps in {sft_seconds:.0f} s", flush=True)

    grpo_config = GRPOConfig.model_validate(
        {
            **TINY["grpo-sqllookup"],
            "seed": seed,
            "eval_split": None,
            "steps": 100_000,
            "checkpoint_every": args.grpo_checkpoint_every,
            "log_episodes": False,
        }  # fmt: skip
    )
    grpo_dir = out / f"seed-{seed}" / "grpo"
    spent = [0.0]
    grpo_times: dict[int, float] = {}

    def stop_on_time(trainer: GRPO, row: dict[str, Any]) -> bool:
        spent[0] += row["time_step"]
        grpo_times[row["step"]] = spent[0]
        return spent[0] < args.grpo_minutes * 60

    grpo_rows = (
        GRPO(LLMPolicy.from_pretrained(sft_dir / "final"), grpo_config, out_dir=grpo_dir)
        .learn(callback=stop_on_time, progress_bar=False)
        .metrics
    )
    print(f"seed {seed}: GRPO {len(grpo_rows)} steps in {spent[0]:.0f} s", flush=True)

    rollout = sft_config.rollout.model_dump()
    result: dict[str, Any] = {
        "seed": seed,
        "sft": {"steps": len(sft_rows), "seconds": sft_seconds, "episodes": args.sft_episodes},
        "grpo": {
            "steps": len(grpo_rows),
            "seconds": spent[0],
            "train_success": [row["success"] for row in grpo_rows],
            "frac_zero_std": [row.get("frac_zero_std") for row in grpo_rows],
        },
    }
    for stage, model in (("sft", sft_dir), ("grpo", grpo_dir)):
        eval_dir = out / f"seed-{seed}" / f"eval-{stage}"
        result[stage]["test"] = evaluate(model / "final", rollout, eval_dir)
        result[stage]["test"]["by_family"] = failures(eval_dir)
        result[stage]["test"]["by_literal"] = literal_needs(eval_dir)
    print(f"seed {seed}: test success SFT {result['sft']['test']['success']:.1%}, "
          f"GRPO {result['grpo']['test']['success']:.1%}", flush=True)  # fmt: skip
    curve = [{"minutes": 0.0, "stage": "base", "success": None}]
    if seed in args.curve_seeds:
        curve = []
        for step, path in checkpoints(sft_dir):
            if step == len(sft_rows):
                continue  # the final model, evaluated above
            curve.append({"minutes": times[step] / 60, "stage": "sft", "step": step, **_point(path, rollout)})
        curve.append({"minutes": sft_seconds / 60, "stage": "sft", "step": len(sft_rows),
                      "success": result["sft"]["test"]["success"]})  # fmt: skip
        for step, path in checkpoints(grpo_dir):
            if step in grpo_times and step != len(grpo_rows):
                minutes = (sft_seconds + grpo_times[step]) / 60
                curve.append({"minutes": minutes, "stage": "grpo", "step": step, **_point(path, rollout)})
        curve.append({"minutes": (sft_seconds + spent[0]) / 60, "stage": "grpo", "step": len(grpo_rows),
                      "success": result["grpo"]["test"]["success"]})  # fmt: skip
    result["curve"] = curve
    return result


def _point(path: Path, rollout: dict[str, Any]) -> dict[str, Any]:
    evaluation = evaluate(path, rollout)
    return {"success": evaluation["success"], "by_tag": evaluation["by_tag"]}


def table(results: list[dict[str, Any]]) -> str:
    """Markdown: test success after SFT and after GRPO per seed, and per tag."""
    lines = ["| seed | SFT (min) | test after SFT | GRPO (min, steps) | test after GRPO |", "|---|---|---|---|---|"]
    for r in results:
        sft, grpo = r["sft"], r["grpo"]
        lines.append(
            f"| {r['seed']} | {sft['seconds'] / 60:.1f} | {_rate(sft['test'])} | {grpo['seconds'] / 60:.1f}, "
            f"{grpo['steps']} | {_rate(grpo['test'])} |"
        )
    lines += ["", "| seed | stage | " + " | ".join(TAGS) + " |", "|---|---|" + "---|" * len(TAGS)]
    for r in results:
        for stage in ("sft", "grpo"):
            tags = r[stage]["test"]["by_tag"]
            cells = [_rate(tags[t]) if t in tags else "-" for t in TAGS]
            lines.append(f"| {r['seed']} | {stage} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _rate(stats: dict[str, Any]) -> str:
    low, high = stats["ci95"]
    return f"{stats['success']:.1%} [{low:.1%}, {high:.1%}]"


def plot(results: list[dict[str, Any]], path: Path, title: str, clock: str) -> None:
    """Test success against training minutes; ``clock`` says where the minutes were spent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, r in enumerate(results):
        color = f"C{i}"
        points = [p for p in r["curve"] if p.get("success") is not None]
        if points:
            ax.plot([p["minutes"] for p in points], [100 * p["success"] for p in points], marker="o",
                    color=color, label=f"seed {r['seed']}")  # fmt: skip
            sft_end = r["sft"]["seconds"] / 60
            ax.axvline(sft_end, color="grey", lw=0.5, ls=":")
        else:
            ax.scatter([r["sft"]["seconds"] / 60, (r["sft"]["seconds"] + r["grpo"]["seconds"]) / 60],
                       [100 * r["sft"]["test"]["success"], 100 * r["grpo"]["test"]["success"]],
                       color=color, label=f"seed {r['seed']} (SFT, GRPO)")  # fmt: skip
    ax.axhline(70, color="red", lw=0.8, ls="--", label="target 70 %")
    ax.axhline(35.9, color="grey", lw=0.8, ls="--", label="Q-learning 35.9 %")
    ax.set_xlabel(f"training minutes ({clock})")
    ax.set_ylabel("SQLLookup-v1 test success (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _setting(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=JSON")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"{key}: {value!r} is not JSON ({exc.msg})") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny", help="the base: tiny (shipped) or a model directory")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--curve-seeds", type=int, nargs="*", default=[0], help="seeds whose checkpoints are evaluated")
    parser.add_argument("--sft-episodes", type=int, default=TINY["sft-sqllookup"]["episodes"])
    parser.add_argument("--sft-epochs", type=int, default=TINY["sft-sqllookup"]["epochs"], help="passes over the demos")
    parser.add_argument("--sft-checkpoint-every", type=int, default=96)
    parser.add_argument(
        "--sft-set",
        type=_setting,
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="a field of the SFT recipe, e.g. --sft-set lr_schedule='\"cosine\"' (repeatable)",
    )
    parser.add_argument("--grpo-minutes", type=float, default=3.0)
    parser.add_argument("--grpo-checkpoint-every", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", default="runs/sql_lm", help="where the runs go")
    parser.add_argument("--results", default="benchmarks/results/sql_lm", help="results prefix (.json, .md, .png)")
    args = parser.parse_args()
    args.sft_set = dict(args.sft_set)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out = Path(args.runs)
    results_path = Path(args.results)
    results_path.parent.mkdir(parents=True, exist_ok=True)
    results = []
    clock = "one GPU" if torch.cuda.is_available() else f"{args.threads} torch thread(s) on the CPU"
    for seed in args.seeds:
        results.append(run_seed(args, seed, out))
        payload = {"model": args.model, "env_id": ENV_ID, "settings": vars(args), "results": results}
        results_path.with_suffix(".json").write_text(json.dumps(payload, indent=1) + "\n")
        results_path.with_suffix(".md").write_text(table(results))
        plot(results, results_path.with_suffix(".png"), f"SQLLookup-v1, {args.model} base: SFT then GRPO", clock)
    print(table(results))


if __name__ == "__main__":
    main()
