"""agentgym view on a run of 100,000 WeatherRun episodes: seconds to open it and to filter it, over HTTP.

The run is 100,000 copies of real oracle episodes (``agentgym eval``'s lines, each with its own index; ~3 KB a line).
Timed through the viewer's own HTTP API (what the page fetches): the runs list (which indexes the file), the first
page, the last page, a text search and a success filter over every line (which reads each line once). Peer: loading
the same file whole with :func:`agentgym.app.evaluation.reports.load_episodes` (what a viewer without the line index would do
before showing anything). Rounds interleave ours and the peer; best and median of ``--rounds``.

    python benchmarks/viewer_large_run.py [--episodes 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from agentgym.app.cli import main
from agentgym.app.evaluation.reports import load_episodes
from agentgym.app.serving.viewer import ViewerServer
from agentgym.core.episode import EpisodeRecord


def build(root: Path, episodes: int) -> Path:
    main(["eval", "--env", "WeatherRun-v0", "--agent", "oracle", "--episodes", "100", "--out", str(root / "seed"),
          "--no-progress"])  # fmt: skip
    lines = [EpisodeRecord.from_line(x) for x in (root / "seed" / "episodes.jsonl").read_text().splitlines()]
    run = root / "runs" / "big"
    run.mkdir(parents=True)
    with (run / "episodes.jsonl").open("w") as f:
        for i in range(episodes):
            record = lines[i % len(lines)].model_copy(update={"index": i, "success": i % 7 != 0})
            f.write(record.to_line() + "\n")
    return run


def timed(fn) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main_() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = build(Path(tmp), args.episodes)
        size = (run / "episodes.jsonl").stat().st_size
        results: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            with ViewerServer([run.parent], play_dir=Path(tmp) / "play", port=0) as server:  # a fresh index each round
                get = lambda path, **p: httpx.get(server.url + path, params=p, timeout=600).json()  # noqa: E731
                steps = {
                    "open (runs list: index the file)": lambda: get("/api/runs"),
                    "first page (50 episodes)": lambda: get("/api/episodes", run="0:big"),
                    "last page": lambda: get("/api/episodes", run="0:big", offset=args.episodes - 50),
                    "text search (every line)": lambda: get("/api/episodes", run="0:big", q='index":99999,'),
                    "failure filter (every line parsed)": lambda: get("/api/episodes", run="0:big", outcome="failure"),
                    "failure filter again (cached)": lambda: get("/api/episodes", run="0:big", outcome="failure"),
                }
                for name, fn in steps.items():
                    results.setdefault(name, []).append(timed(fn))
            results.setdefault("peer: load_episodes (whole file)", []).append(
                timed(lambda: load_episodes(run / "episodes.jsonl"))
            )
    open_s = [a + b for a, b in zip(results["open (runs list: index the file)"], results["first page (50 episodes)"],
                                    strict=True)]  # fmt: skip
    peer = results["peer: load_episodes (whole file)"]
    report = {
        "episodes": args.episodes,
        "file_mb": round(size / 1e6, 1),
        "seconds": {
            k: {"best": round(min(v), 3), "median": round(statistics.median(v), 3)} for k, v in results.items()
        },
        "open_to_first_page_s": round(min(open_s), 3),
        "peer_over_open": round(min(peer) / min(open_s), 1),
    }
    print(json.dumps(report, indent=2))
    out = Path(__file__).with_name("results") / "viewer_large_run.json"
    out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main_()
