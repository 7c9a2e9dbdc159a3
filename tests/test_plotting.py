"""Learning-curve plots: a grid that reads at a glance, evaluation points as markers, phases marked."""

from __future__ import annotations

import matplotlib.image

from agentgym.trainers.run.plotting import _effective_window, learning_phases, plot_learning_curves

# A run from the base: no tools for 4 steps, then tools; test success reaches 90 % at step 12.
ROWS = [
    {"step": s, "tool_use": float(s >= 4), "success": min(1.0, s / 13), "reward": s / 10, "kl": 0.01 * s}
    | ({"eval_tool_use": float(s >= 4), "eval_success": min(1.0, s / 13)} if s % 3 == 0 else {})
    for s in range(1, 16)
]


def test_phases_are_where_tool_use_and_success_set_in_read_from_the_evaluations():
    assert learning_phases(ROWS) == [(6, "uses tools"), (12, "success ≥ 90%")]  # the first evaluations past each
    training = [{k: v for k, v in r.items() if not k.startswith("eval_")} for r in ROWS]
    assert learning_phases(training) == [(4, "uses tools"), (12, "success ≥ 90%")]
    # a run that uses tools from its first step (after SFT) has no phase without them; one never solved has one phase
    assert learning_phases([{"step": 1, "tool_use": 1.0, "success": 0.2}]) == []
    assert learning_phases([{"step": 1, "tool_use": 0.0, "success": 0.0}, {"step": 2, "tool_use": 0.6}]) == [
        (2, "uses tools")
    ]


def test_a_short_run_is_smoothed_over_a_fifth_of_its_points_at_most():
    assert _effective_window(10, 10) == 2
    assert _effective_window(10, 4) == 1  # no smoothing at all
    assert _effective_window(10, 500) == 10


def test_the_curves_are_a_grid_with_evaluations_in_their_metric_panel(tmp_path):
    keys = ("tool_use", "success", "reward", "kl", "eval_success", "frac_zero_std")  # frac_zero_std: not logged
    path = plot_learning_curves(
        {"GRPO": ROWS}, tmp_path / "curve.png", keys=keys, x="step", phases=learning_phases(ROWS)
    )
    height, width = matplotlib.image.imread(path).shape[:2]
    # four panels (eval_success joins success's; the unlogged metric gets none) in a 3-wide grid: 2 rows, not a strip
    assert 1.0 < width / height < 2.0
    strip = plot_learning_curves({"GRPO": ROWS}, tmp_path / "strip.png", keys=keys, x="step", columns=6)
    h, w = matplotlib.image.imread(strip).shape[:2]
    assert w / h > 3.5
