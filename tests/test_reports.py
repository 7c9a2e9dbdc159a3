"""Summaries and reports: pass@k, per-tag breakdowns, provenance, and a report figure whose labels never overlap."""

import itertools
import math
import platform
import subprocess
import sys
import time
from pathlib import Path

import gymnasium
import pytest

from agentgym.app.evaluation.reports import (
    EpisodeRecord,
    _git_state,
    breakdown_tables,
    collect_provenance,
    success_figure,
)
from agentgym.core.summary import (
    RunConfig,
    RunSummary,
    TaskFacts,
    mean_pass_at_k,
    pass_at_k,
    summarize,
    tag_breakdown,
    wilson_interval,
)

REPO = Path(__file__).resolve().parents[1]


def brute_force_pass_at_k(n, c, k):
    """The definition: the share of the k-subsets of n samples (c of them successes) holding a success."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    return sum(any(s) for s in subsets) / len(subsets)


def test_pass_at_k_by_hand():
    assert pass_at_k(5, 2, 1) == pytest.approx(2 / 5)  # pass@1 is the success fraction
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)  # 1 - C(3,3)/C(5,3)
    assert pass_at_k(5, 2, 4) == 1.0  # 3 failures cannot fill 4 draws
    assert pass_at_k(10, 0, 10) == 0.0 and pass_at_k(1, 1, 1) == 1.0
    for n, c, k in itertools.product(range(1, 9), range(0, 9), range(1, 9)):
        if c <= n and k <= n:
            assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12)
    # Chen et al.'s numerically stable product form, at a size where C(n, k) has dozens of digits
    n, c, k = 200, 37, 50
    product = 1 - math.prod(1 - k / i for i in range(n - c + 1, n + 1))
    assert pass_at_k(n, c, k) == pytest.approx(product, rel=1e-12)
    for bad in [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6)]:
        with pytest.raises(ValueError, match="pass@k needs"):
            pass_at_k(*bad)


def episodes(outcomes):
    """EpisodeRecords with the given successes, indexed in order."""
    return [EpisodeRecord(index=i, reset={"seed": i}, success=ok) for i, ok in enumerate(outcomes)]


def config(n):
    return RunConfig(
        env_id="e", env_kwargs={}, split=None, agent="a", agent_settings={}, seed=0, episodes=n, all_tasks=False
    )


META = {"env_version": 0, "data_checksum": None, "package_version": "0"}


def test_mean_pass_at_k_averages_over_tasks_with_enough_samples():
    # task 0: 4 samples, 1 success; task 1: 2 samples, both successes; task 2: 1 sample, a failure
    outcomes = [True, False, False, False, True, True, False]
    tasks = [TaskFacts(t) for t in (0, 0, 0, 0, 1, 1, 2)]
    result = mean_pass_at_k(episodes(outcomes), tasks)
    assert (result.min_samples, result.max_samples) == (1, 4)
    assert result.tasks == {"1": 3, "2": 2}  # k = 5 is more than any task's samples
    assert result.values["1"] == pytest.approx((1 / 4 + 1 + 0) / 3)
    assert result.values["2"] == pytest.approx(((1 - 3 / 6) + 1) / 2)  # 1 - C(3,2)/C(4,2) for task 0
    assert mean_pass_at_k(episodes([True, False]), [TaskFacts(0), TaskFacts(1)]) is None  # each task once
    assert mean_pass_at_k(episodes([True, False]), [TaskFacts(0), None]) is None  # a task not known
    assert mean_pass_at_k(episodes([True, False]), []) is None


def test_tag_breakdown_counts_every_episode_once_per_tag_with_wilson_intervals():
    outcomes = [True, True, False, True, False, False]
    tags = [{"difficulty": "join"}] * 3 + [{"difficulty": "date"}] * 2 + [{}]
    breakdown = tag_breakdown(episodes(outcomes), [TaskFacts(i, t) for i, t in enumerate(tags)])
    assert list(breakdown) == ["difficulty"] and list(breakdown["difficulty"]) == ["date", "join", "untagged"]
    join = breakdown["difficulty"]["join"]
    assert (join.episodes, join.successes, join.success_rate) == (3, 2, pytest.approx(2 / 3))
    assert join.success_ci95 == wilson_interval(2, 3)
    assert sum(s.episodes for s in breakdown["difficulty"].values()) == len(outcomes)
    assert tag_breakdown(episodes(outcomes), []) == {}


def test_untagged_summaries_keep_their_fields_and_tagged_ones_add_them_before_timing():
    plain = summarize(episodes([True, False]), config(2), **META)
    assert "by_tag" not in plain.model_dump_json() and "pass_at_k" not in plain.model_dump()
    tasks = [TaskFacts(0, {"difficulty": "easy"}), TaskFacts(0, {"difficulty": "easy"})]
    tagged = summarize(episodes([True, False]), config(2), tasks=tasks, **META)
    keys = list(tagged.model_dump())
    assert keys[-3:] == ["by_tag", "pass_at_k", "timing"] and keys[:-3] == list(plain.model_dump())[:-1]
    assert RunSummary.model_validate_json(tagged.model_dump_json()) == tagged  # the round trip keeps them
    assert RunSummary.model_validate_json(plain.model_dump_json()) == plain
    table = breakdown_tables({"r": tagged})
    assert "| r | 50.0% [9.5%, 90.5%] n=2 |" in table and "| r | 2 | 50.0% (1) | 100.0% (1) |" in table


def test_provenance_names_versions_commit_and_machine_without_importing_torch():
    start = time.perf_counter()
    facts = collect_provenance()
    elapsed = time.perf_counter() - start
    assert elapsed <= 2.0, f"collect_provenance took {elapsed:.2f} s"  # ~20 ms: two git calls and a file read
    assert facts.python == f"{platform.python_implementation()} {platform.python_version()}"
    assert facts.packages["gymnasium"] == gymnasium.__version__ and "agentgym-suite" in facts.packages
    assert facts.platform == platform.platform() and facts.cpu_count >= 1
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # the tests run from a checkout
        assert facts.git_commit == head.stdout.strip() and isinstance(facts.git_dirty, bool)
    code = "import sys, agentgym.app.evaluation.reports as r; r.collect_provenance(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_no_commit_outside_a_checkout_or_inside_another_repository(tmp_path):
    assert _git_state(tmp_path) == (None, None)  # no .git: not even a git call
    subprocess.run(["git", "init", "-q", str(tmp_path / "other")], check=True)
    inner = tmp_path / "other" / "site-packages"
    inner.mkdir()
    (inner / ".git").write_text("gitdir: nowhere\n")  # a broken .git file: git fails, the answer is None
    assert _git_state(inner) == (None, None)
    assert _git_state(tmp_path / "other") == (None, None)  # a repository without commits has no HEAD


def summary(label_agent, rate):
    n = 50
    ok = round(rate * n)
    records = episodes([True] * ok + [False] * (n - ok))
    return summarize(records, config(n).model_copy(update={"agent": label_agent}), **META)


def label_boxes(fig):
    """The window extents of the tick labels the figure draws (ticks inside the axes' view limits)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = []
    for ax in fig.axes:
        for labels, (low, high), along in [
            (ax.get_xticklabels(), sorted(ax.get_xlim()), 0),
            (ax.get_yticklabels(), sorted(ax.get_ylim()), 1),
        ]:
            for label in labels:
                if label.get_visible() and label.get_text() and low <= label.get_position()[along] <= high:
                    boxes.append(label.get_window_extent(renderer))
    return boxes


@pytest.mark.parametrize("count", [2, 8])
def test_report_figure_labels_never_overlap(count):
    runs = {
        f"runs/benchmark-2024/{name}-sampled-temperature-0.7-seed-{i}": summary(
            f"openai:Qwen/Qwen2.5-7B-Instruct@http://inference-{i}.internal.example:8000/v1", i / count
        )
        for i, name in zip(range(count), itertools.cycle(["qwen", "llama", "mistral"]), strict=False)
    }
    fig = success_figure(runs)
    try:
        boxes = label_boxes(fig)
        assert len(boxes) >= count
        figure = fig.bbox
        for box in boxes:  # every label is inside the figure (not cut off)
            assert box.x0 >= figure.x0 - 1 and box.x1 <= figure.x1 + 1 and box.y0 >= figure.y0 - 1
            assert box.y1 <= figure.y1 + 1
        overlapping = [(a, b) for a, b in itertools.combinations(boxes, 2) if a.overlaps(b)]
        assert not overlapping, f"{len(overlapping)} pairs of labels overlap"
        title = fig.axes[0].title.get_window_extent(fig.canvas.get_renderer())
        assert not any(title.overlaps(b) for b in boxes)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
