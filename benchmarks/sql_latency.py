"""SQLLookup: latency of a ``run_sql`` tool call next to a bare ``sqlite3`` execute of the same query.

Three ways to run each typical query against the shipped company database, interleaved round by round:

- ``bare``: ``conn.execute(q).fetchall()`` on a plain ``sqlite3.connect(path)`` (the peer, 1.0×);
- ``safe``: ``ReadOnlySQLite.query(q, max_rows=20)``: the hardened layer alone (statement check,
  authorizer, limits, progress-handler deadline, row-by-row fetch and count);
- ``tool``: ``env.step(run_sql(q))`` on ``SQLLookupEnv(query_cache=0)``: the whole tool call (parse —
  memoised per action string —, validation, the safe query, the text table, summary, observation).

Prints median and p95 per query, and the ratios of the medians summed over queries.

    python benchmarks/sql_latency.py                # 200 rounds, ~10 s
    python benchmarks/sql_latency.py --rounds 500
"""

from __future__ import annotations

import argparse
import platform
import sqlite3
import statistics
import time

from agentgym.core.tools import ToolCall
from agentgym.envs.sql.dataset import DATABASE_V0
from agentgym.envs.sql.env import SQLLookupEnv
from agentgym.envs.sql.safety import ReadOnlySQLite

QUERIES = {
    "lookup by key": "SELECT first_name, last_name, salary FROM employees WHERE id = 42",
    "filter + order": "SELECT name, unit_price FROM products WHERE category = 'Electronics' ORDER BY unit_price DESC",
    "count": "SELECT COUNT(*) FROM customers WHERE country = 'Germany'",
    "3-table join": (
        "SELECT DISTINCT p.name FROM orders o JOIN order_items oi ON oi.order_id = o.id "
        "JOIN products p ON p.id = oi.product_id WHERE o.customer_id = 19 ORDER BY p.name"
    ),
    "group by": (
        "SELECT c.country, COUNT(*) AS n FROM orders o JOIN customers c ON c.id = o.customer_id "
        "GROUP BY c.country ORDER BY n DESC"
    ),
    "date arithmetic": (
        "SELECT ROUND(AVG(julianday(shipped_date) - julianday(order_date)), 1) FROM orders "
        "WHERE strftime('%Y', order_date) = '2023'"
    ),
    "nested": "SELECT name FROM products WHERE id NOT IN (SELECT product_id FROM order_items) ORDER BY name",
    "full scan, 3,300 rows": "SELECT * FROM order_items",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()

    bare = sqlite3.connect(DATABASE_V0)
    safe = ReadOnlySQLite(DATABASE_V0)
    env = SQLLookupEnv(query_cache=0)
    env.reset(seed=0)
    actions = {name: ToolCall("run_sql", {"query": q}).to_text() for name, q in QUERIES.items()}

    def run_bare(name: str) -> None:
        bare.execute(QUERIES[name]).fetchall()

    def run_safe(name: str) -> None:
        safe.query(QUERIES[name], max_rows=20)

    def run_tool(name: str) -> None:
        env.step(actions[name])
        if env.steps >= 1000:
            env.reset(seed=0)

    runners = {"bare": run_bare, "safe": run_safe, "tool": run_tool}
    times: dict[str, dict[str, list[float]]] = {k: {q: [] for q in QUERIES} for k in runners}
    for name in QUERIES:  # warm-up: page cache, statement cache, memoised parse
        for run in runners.values():
            run(name)
    for _ in range(args.rounds):
        for name in QUERIES:
            for kind, run in runners.items():
                started = time.perf_counter()
                run(name)
                times[kind][name].append(time.perf_counter() - started)

    def stats(values: list[float]) -> tuple[float, float]:
        ordered = sorted(values)
        return statistics.median(ordered) * 1e6, ordered[int(0.95 * (len(ordered) - 1))] * 1e6

    print(
        f"SQLite {sqlite3.sqlite_version}, Python {platform.python_version()}, {args.rounds} rounds, "
        "µs per call (median / p95)\n"
    )
    print(f"{'query':24s} {'bare sqlite3':>16s} {'ReadOnlySQLite':>16s} {'run_sql tool':>16s} {'safe/bare':>10s} "
          f"{'tool/bare':>10s}")  # fmt: skip
    totals = {k: 0.0 for k in runners}
    for name in QUERIES:
        cells, medians = [], {}
        for kind in runners:
            median, p95 = stats(times[kind][name])
            medians[kind] = median
            totals[kind] += median
            cells.append(f"{median:7.0f} / {p95:6.0f}")
        print(
            f"{name:24s} {cells[0]:>16s} {cells[1]:>16s} {cells[2]:>16s} "
            f"{medians['safe'] / medians['bare']:9.2f}× {medians['tool'] / medians['bare']:9.2f}×"
        )
    print(
        f"\nsum of medians: bare {totals['bare']:.0f} µs, safe {totals['safe']:.0f} µs, tool {totals['tool']:.0f} µs"
        f"\nsafety layer overhead (safe/bare) = {totals['safe'] / totals['bare']:.2f}×; "
        f"whole tool call (tool/bare) = {totals['tool'] / totals['bare']:.2f}×"
    )


if __name__ == "__main__":
    main()
