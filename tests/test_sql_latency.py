"""Guard on the SQL safety layer's speed: a ratio against bare ``sqlite3`` in the same process (issue 42).

``benchmarks/sql_latency.py`` measures the real figures (date arithmetic ~1.2×, all queries ~1.05× recorded); this
guard only catches a regression of the size issue 42 found (date arithmetic at 19–22×, from a Python call and a
private connection per date value), so its bar is wide: ≤ 3×, best of a few interleaved rounds.
"""

from __future__ import annotations

import sqlite3
import time

import pytest

from agentgym.envs.sql.dataset import DATABASE_V0
from agentgym.envs.sql.safety import ReadOnlySQLite

QUERIES = {
    "date arithmetic": "SELECT ROUND(AVG(julianday(shipped_date) - julianday(order_date)), 1) FROM orders "
    "WHERE strftime('%Y', order_date) = '2023'",
    "3-table join": "SELECT DISTINCT p.name FROM orders o JOIN order_items oi ON oi.order_id = o.id "
    "JOIN products p ON p.id = oi.product_id WHERE o.customer_id = 19 ORDER BY p.name",
}
REPEATS, ROUNDS, BAR = 50, 5, 3.0


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_the_safety_layer_costs_at_most_3x_bare_sqlite(name):
    query = QUERIES[name]
    bare = sqlite3.connect(DATABASE_V0)
    runs = {"bare": lambda: bare.execute(query).fetchall(), "safe": lambda: db.query(query)}
    with ReadOnlySQLite(DATABASE_V0) as db:
        assert db.query(query, max_rows=1000).rows == tuple(bare.execute(query).fetchall())
        best = {kind: float("inf") for kind in runs}
        for _ in range(ROUNDS):  # interleaved, so load from other processes hits both alike
            for kind, run in runs.items():
                start = time.perf_counter()
                for _ in range(REPEATS):
                    run()
                best[kind] = min(best[kind], time.perf_counter() - start)
    ratio = best["safe"] / best["bare"]
    assert ratio <= BAR, f"{name}: ReadOnlySQLite at {ratio:.2f}× bare sqlite3 (bar {BAR}×)"
