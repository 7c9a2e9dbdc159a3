"""Hashes of seeded runs: a refactor that changes no behaviour leaves every hash as it was.

Every trainer (``agentgym train``), the evaluator (``agentgym eval``), the flywheel and the audit run on a tiny
budget with fixed seeds, one thread each, in fresh processes. Each output file is hashed by content: tensors
(``.safetensors``, ``.pt``, ``.npz``) by their names, dtypes, shapes and bytes; JSON and JSONL by their values with
wall-clock fields left out; plots and CSV copies are skipped. Record the hashes before a change and compare after::

    python benchmarks/behaviour_hashes.py --out runs/hashes_before.json          # ~6 min on 2 cores
    python benchmarks/behaviour_hashes.py --out runs/hashes_after.json --compare runs/hashes_before.json

``--compare`` prints every file whose hash changed (and files that appeared or went) and exits 1 if any did. Each
``episodes.jsonl`` also gets a ``(content)`` hash of what its episodes did (:func:`episode_content`), which a change of
the file's format leaves as it was.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TMP_DIR: list[str] = []
VOLATILE = re.compile(
    r"(time|seconds|elapsed|wall|_per_s|per_second|date|created|started|finished|host|python|torch_|platform|version"
    r"|path|dir$|^out$|git|cpu|gpus)",
    re.I,
)
"""JSON keys whose values are clocks, machines or locations rather than behaviour."""

ANSWER = '<tool_call>{{"name": "answer", "arguments": {{"suitable": {}}}}}</tool_call>'
PAIRS = [
    {
        side: [
            {"role": "user", "content": f"temp {10 + i}°C · AQI 40"},
            {"role": "assistant", "content": ANSWER.format(v)},
        ]
        for side, v in (("chosen", "true"), ("rejected", "false"))
    }
    for i in range(8)
]
"""Preference pairs the reward model and DPO train on."""


def runs(tmp: Path) -> dict[str, list[list[str]]]:
    """Each run's ``agentgym`` (or module) command lines, in order; ``{tmp}`` paths are inside ``tmp``."""
    sft, pairs = tmp / "sft", tmp / "pairs.jsonl"

    def train(algorithm: str, *args: str, **settings: object) -> list[str]:
        sets = [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]
        return ["train", algorithm, *args, *sets, "--out", str(tmp / algorithm), "--no-progress"]

    llm = ("--model", str(sft / "final"))
    grpo = dict(tasks_per_step=2, num_generations=2, eval_episodes=4, checkpoint_every=1)
    return {
        "q-learning": [train("q-learning", "--episodes", "100", "--seed", "0")],
        "sarsa": [train("sarsa", "--episodes", "100", "--seed", "1")],
        "reinforce": [train("reinforce", "--env", "WeatherRun-v0", "--episodes", "200", eval_every=100)],
        "ppo": [train("ppo", "--timesteps", "1024")],
        "sft": [train("sft", "--model", "tiny", "--episodes", "64", eval_episodes=8)],
        "grpo": [
            train("grpo", *llm, "--recipe", "tiny", "--steps", "2", **grpo),
            train("grpo", *llm, "--recipe", "tiny", "--steps", "3", "--resume", **grpo),
        ],
        "llm-ppo": [train("llm-ppo", *llm, "--steps", "1", episodes_per_step=4, eval_episodes=4)],
        "reward-model": [train("reward-model", *llm, data=pairs, epochs=1)],
        "dpo": [train("dpo", *llm, "--recipe", "tiny", "--rounds", "1", data=pairs, epochs=1, eval_episodes=4)],
        **{
            f"eval-{agent}-{env}": [
                ["eval", "--env", env, "--agent", agent, "--episodes", "6", "--seed", "3"]
                + ["--out", str(tmp / f"eval-{agent}-{env}")]
            ]
            for env in ("CliffWalk-v0", "WeatherRun-v0", "SQLLookup-v0", "CodeSandbox-v0")
            for agent in ("random", "oracle")
        },
        "eval-grpo-model": [
            ["eval", "--env", "WeatherRun-v0", "--agent", f"hf:{tmp / 'grpo' / 'final'}", "--episodes", "4"]
            + ["--out", str(tmp / "eval-grpo-model")]
        ],
        "flywheel": [
            ["data", str(tmp / "eval-oracle-WeatherRun-v0" / "episodes.jsonl"), str(tmp / "grpo" / "episodes.jsonl")]
            + ["--out", str(tmp / "flywheel")]
        ],
        "audit": [["audit", str(tmp / "grpo"), "--json"]],
    }


TMP = "{tmp}"
"""The run's temporary directory, replaced by this marker in every string before hashing."""


def _plain(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(TMP_DIR[0], TMP) if TMP_DIR else value
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in sorted(value.items()) if not VOLATILE.search(k)}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _tensors_hash(path: Path) -> str:
    import numpy as np
    import torch

    h = hashlib.sha256()
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        state: Any = load_file(path)
    elif path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            for k in sorted(z.files):
                h.update(f"{k}:{z[k].dtype}:{z[k].shape}".encode() + z[k].tobytes())
        return h.hexdigest()[:16]
    else:
        state = torch.load(path, map_location="cpu", weights_only=False)

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            t = value.detach().contiguous().cpu()
            h.update(f"{prefix}:{t.dtype}:{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        elif isinstance(value, dict):
            for k in sorted(value, key=str):
                if not VOLATILE.search(str(k)):
                    walk(f"{prefix}.{k}", value[k])
        elif isinstance(value, list | tuple):
            for i, v in enumerate(value):
                walk(f"{prefix}[{i}]", v)
        else:
            h.update(f"{prefix}={_plain(value)!r}".encode())

    walk("", state)
    return h.hexdigest()[:16]


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def episode_content(row: dict[str, Any]) -> dict[str, Any]:
    """What an ``episodes.jsonl`` line says happened, in a form every version of the file can give: the actions,
    their format checks, the return, the outcome. An episode-file format change leaves it as it was."""
    total = math.fsum(row["rewards"]) if "rewards" in row else row["env_reward"]  # old training logs: the return
    keys = ("actions", "canonical", "valid", "success", "truncation")
    return {**{k: row.get(k) for k in keys}, "return": round(total, 9)}


def file_hash(path: Path) -> str | None:
    """The content hash of one output file, or None for files that carry no behaviour (plots, CSV copies, logs)."""
    if path.suffix in {".safetensors", ".pt", ".npz"}:
        return _tensors_hash(path)
    if path.suffix == ".json":
        return _digest(_plain(json.loads(path.read_text())))
    if path.suffix == ".jsonl":
        rows = [_digest(_plain(json.loads(line))) for line in path.read_text().splitlines() if line.strip()]
        return _digest(sorted(rows))  # parallel episodes end in any order
    if path.suffix in {".txt", ".md"} or path.name in {"tokenizer.json", "SHA256SUMS"}:
        return hashlib.sha256(_plain(path.read_text()).encode()).hexdigest()[:16]
    return None


CLI = "import sys, torch; torch.set_num_threads(1); from agentgym.app.cli import main; sys.exit(main(sys.argv[1:]))"


def run_all(only: list[str] | None, keep: str | None = None) -> dict[str, Any]:
    hashes: dict[str, Any] = {}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(keep) if keep else Path(d)
        tmp.mkdir(parents=True, exist_ok=True)
        TMP_DIR[:] = [str(tmp)]
        (tmp / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PAIRS))
        for name, commands in runs(tmp).items():
            if only and name not in only:
                continue
            start = time.perf_counter()
            out_text = ""
            for argv in commands:
                proc = subprocess.run([sys.executable, "-c", CLI, *argv], env=env, capture_output=True, text=True)
                if proc.returncode != 0:
                    raise SystemExit(f"{name}: {' '.join(argv)} exited {proc.returncode}\n{proc.stderr[-2000:]}")
                out_text = proc.stdout
            out_dir = tmp / name
            files: dict[str, str] = {}
            if out_dir.is_dir():
                for path in sorted(p for p in out_dir.rglob("*") if p.is_file()):
                    if (digest := file_hash(path)) is not None:
                        files[str(path.relative_to(out_dir))] = digest
                    if path.name == "episodes.jsonl":
                        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
                        files["episodes.jsonl (content)"] = _digest(sorted(_digest(episode_content(r)) for r in rows))
            else:  # a report on stdout (audit)
                files["stdout"] = _digest(_plain(json.loads(out_text)))
            hashes[name] = files
            print(f"{name}: {len(files)} files hashed in {time.perf_counter() - start:.0f} s", flush=True)
    return hashes


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Lines naming each run/file whose hash differs, appeared or went."""
    changes = []
    for run in sorted(set(before) | set(after)):
        b, a = before.get(run, {}), after.get(run, {})
        for f in sorted(set(b) | set(a)):
            if b.get(f) != a.get(f):
                changes.append(f"{run}/{f}: {b.get(f, 'absent')} -> {a.get(f, 'absent')}")
    return changes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="where the hashes are written (JSON)")
    parser.add_argument("--compare", type=Path, help="hashes recorded before the change")
    parser.add_argument("--keep", help="play in this directory and keep the outputs (to diff two runs)")
    parser.add_argument("--only", nargs="*", help="run names to play (default: all)")
    args = parser.parse_args()
    hashes = run_all(args.only, args.keep)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")
    total = sum(len(f) for f in hashes.values())
    print(f"{total} files in {len(hashes)} runs hashed -> {args.out}")
    if args.compare:
        before = json.loads(args.compare.read_text())
        if args.only:
            before = {k: v for k, v in before.items() if k in args.only}
        changes = compare(before, hashes)
        print("\n".join(changes) if changes else f"all {total} hashes as before")
        return 1 if changes else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
