"""CodeSandbox-v1's problems: parametrised families written for agentgym, the source of ``data/code_tasks_v1.jsonl``.

Each family is a function ``(rng) -> list of problems`` that draws distinct parameter combinations — a different
operation, base, window, shift, recurrence, tie rule, key or output — and writes for each a prompt that states
every rule, a signature, a reference solution and two wrong ones, in the order v0 uses:

1. a **visible slip** (the loop stops one window early, the filter is inverted, no wrap-around, …);
2. an **edge slip**: right on ordinary inputs, wrong on an edge case the prompt states (a negative number, 0,
   an empty list, a tie, an upper-case letter, nested intervals, …).

The tests are computed from the reference: :func:`make_problem` runs the three solutions (our own code, in this
process, under a 1 s alarm) on the family's ordinary and edge inputs, and picks 2 visible tests that the edge slip
passes and the visible slip fails, and 6 hidden ones that include an edge case the edge slip fails and an input
the visible slip fails. :func:`build_tasks` then checks every problem in the sandbox exactly as v0 is checked
(:func:`agentgym.envs.code.dataset.verify_tasks`) and splits each family 3 train : 2 test (indices 1 and 3 of every
five are test problems).

Rebuild (byte for byte; about 30 s, most of it the sandbox check)::

    python -m agentgym.envs.code.build.families build [--out PATH] [--no-verify]
"""

# ruff: noqa: B023  (each family's source() closures are called within the loop iteration that defines them)

from __future__ import annotations

import itertools
import random
import signal
import string
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentgym.envs.code.dataset import TASKS_V1, TASKS_V1_SHA256, CodeTask, entry_point, verify_tasks, write_tasks
from agentgym.envs.sandbox import Sandbox

__all__ = ["FAMILIES", "build_tasks", "generate_tasks", "make_problem"]

SEED = "agentgym-code-v1"
HIDDEN = 6
LOCAL_TIMEOUT = 1.0
"""Seconds one local call of a solution may take while tests are computed (all take microseconds)."""


def _code(text: str) -> str:
    return textwrap.dedent(text).strip() + "\n"


class _Failed:
    """What a call that raised returns: equal to nothing."""

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = object.__hash__


@contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    def stop(signum: int, frame: Any) -> None:
        raise TimeoutError("a solution ran past the local time limit")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _function(source: str, name: str) -> Callable[..., Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<{name}>", "exec"), namespace)  # noqa: S102 (this module's own solutions)
    return namespace[name]


def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    try:
        with _alarm(LOCAL_TIMEOUT):
            return fn(*[_copy(a) for a in args])
    except Exception:  # noqa: BLE001 (a wrong solution may raise anything: it then fails the test)
        return _Failed()


def _copy(value: Any) -> Any:
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def make_problem(
    *,
    id: str,
    topic: str,
    difficulty: str,
    prompt: str,
    signature: str,
    solution: str,
    visible_slip: str,
    edge_slip: str,
    ordinary: list[tuple[Any, ...]],
    edge: list[tuple[Any, ...]],
) -> dict[str, Any]:
    """One problem with tests computed from ``solution`` on argument tuples (``ordinary`` and ``edge`` inputs).

    Visible: 2 ordinary inputs the edge slip gets right, one of which the visible slip gets wrong. Hidden: an edge
    input the edge slip gets wrong, an input the visible slip gets wrong, then the other edge and ordinary inputs
    in turn, 6 in all. ``ValueError`` if the inputs cannot show both slips (a family bug).
    """
    name = entry_point(signature)
    codes = [_code(c) for c in (solution, visible_slip, edge_slip)]
    ref, vis, edg = (_function(c, name) for c in codes)
    plain = {repr(a): a for a in ordinary}
    edges = {repr(a): a for a in edge if repr(a) not in plain}
    args = {**plain, **edges}  # keyed by their repr (arguments may be lists)
    expected = {key: _call(ref, a) for key, a in args.items()}
    for key, value in expected.items():
        if isinstance(value, _Failed):
            raise ValueError(f"{id}: the reference fails on {key}")
    vis_ok = {key: _same(_call(vis, a), expected[key]) for key, a in args.items()}
    edge_ok = {key: _same(_call(edg, a), expected[key]) for key, a in args.items()}
    usable = [key for key in plain if edge_ok[key]]
    first = next((key for key in usable if not vis_ok[key]), None)
    if first is None or len(usable) < 2:
        raise ValueError(f"{id}: no visible tests that show the visible slip and hide the edge slip")
    visible = [first, next(key for key in usable if key != first)]
    hidden = [next((key for key in edges if not edge_ok[key]), None)]
    if hidden[0] is not None and vis_ok[hidden[0]]:
        hidden.append(next((key for key in args if not vis_ok[key] and key not in visible + hidden), None))
    if None in hidden:
        raise ValueError(f"{id}: no hidden tests that catch both slips")
    pool = itertools.zip_longest([k for k in edges if k not in hidden], [k for k in plain if k not in visible + hidden])
    hidden += [key for pair in pool for key in pair if key is not None][: HIDDEN - len(hidden)]
    if len(hidden) < HIDDEN:
        raise ValueError(f"{id}: only {len(hidden)} hidden tests")

    def test(key: str) -> str:
        return f"{name}({', '.join(repr(a) for a in args[key])}) == {expected[key]!r}"

    return {
        "id": id,
        "topic": topic,
        "difficulty": difficulty,
        "prompt": " ".join(prompt.split()),
        "signature": signature,
        "visible_tests": [test(a) for a in visible],
        "hidden_tests": [test(a) for a in hidden],
        "solution": codes[0],
        "wrong_solutions": codes[1:],
    }


def _pick(rng: random.Random, combos: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Every parameter combination, in a fixed shuffled order (the first :data:`SIZES` that check out are used)."""
    return rng.sample(combos, len(combos))


def _ints(rng: random.Random, n: int, lo: int, hi: int) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


# ============================================================================ the families

_DIGIT_AGGS = {
    "digit_sum": ("sum of the digits", "sum(ds)"),
    "digit_product": ("product of the digits", "math.prod(ds)"),
    "max_digit": ("largest digit", "max(ds)"),
    "nonzero_digits": ("number of non-zero digits", "sum(1 for d in ds if d)"),
    "odd_digits": ("number of odd digits", "sum(d % 2 for d in ds)"),
    "alternating_digit_sum": (
        "alternating sum of the digits, starting with + at the least significant digit (digits 3, 2, 1 from the "
        "least significant one give 3 - 2 + 1)",
        "sum(d if i % 2 == 0 else -d for i, d in enumerate(ds))",
    ),
}


def _no_zero_digits(rng: random.Random, base: int) -> int:
    """A number of 3 to 7 base-``base`` digits, none of them 0."""
    n = 0
    for _ in range(rng.randint(3, 7)):
        n = n * base + rng.randint(1, base - 1)
    return n


def digits(rng: random.Random) -> Iterator[dict[str, Any]]:
    """An aggregate of the digits of ``n`` in some base; the edge cases: a negative ``n`` and 0."""
    combos = [
        (a, b)
        for a in _DIGIT_AGGS
        for b in (2, 3, 5, 6, 7, 8, 10, 12, 16)
        if b > 2 or a not in ("digit_product", "max_digit")
    ]
    for agg, base in _pick(rng, combos):
        text, expr = _DIGIT_AGGS[agg]
        name = f"{agg}_base{base}"
        yield {
            "topic": "math",
            "difficulty": "medium" if agg == "alternating_digit_sum" else "easy",
            "prompt": f"""Return the {text} of the integer n written in base {base}. A negative n has the digits of
            its absolute value; 0 has the single digit 0.""",
            "signature": f"def {name}(n: int) -> int",
            "solution": f"""
            import math

            def {name}(n: int) -> int:
                n = abs(n)
                ds = []
                while True:
                    ds.append(n % {base})
                    n //= {base}
                    if n == 0:
                        break
                return {expr}
            """,
            "visible_slip": f"""
            import math

            def {name}(n: int) -> int:
                n = abs(n)
                ds = []
                while n >= {base}:
                    ds.append(n % {base})
                    n //= {base}
                return {expr}
            """,
            "edge_slip": f"""
            import math

            def {name}(n: int) -> int:
                ds = []
                while n > 0:
                    ds.append(n % {base})
                    n //= {base}
                return {expr}
            """,
            "ordinary": [(rng.randint(base, 10**6),) for _ in range(3)]
            + [(_no_zero_digits(rng, base),) for _ in range(6)],
            "edge": [(0,)] + [(-rng.randint(base, 10**5),) for _ in range(5)],
        }


_WINDOW_OPS = {
    "sum": ("sum", "sum(w)"),
    "max": ("largest item", "max(w)"),
    "min": ("smallest item", "min(w)"),
    "spread": ("largest item minus the smallest", "max(w) - min(w)"),
    "evens": ("number of even items", "sum(1 for x in w if x % 2 == 0)"),
}


def windows(rng: random.Random) -> Iterator[dict[str, Any]]:
    """An aggregate of each window of ``k`` items, moved ``step`` at a time; the edge case: fewer than ``k`` items."""
    combos = [(op, k, step) for op in _WINDOW_OPS for k in (2, 3, 4, 5) for step in (1, 2)]
    for op, k, step in _pick(rng, combos):
        text, expr = _WINDOW_OPS[op]
        name = f"window_{op}_{k}" + (f"_step{step}" if step > 1 else "")
        moves = (
            "moving it one item at a time"
            if step == 1
            else f"moving it {step} items at a time (windows start at index 0, {step}, {2 * step}, …)"
        )

        def source(stop: str, short: bool) -> str:
            guard = f"    if len(xs) < {k}:\n        w = xs\n        return [{expr}]\n" if short else ""
            return (
                f"def {name}(xs: list[int]) -> list[int]:\n{guard}    out = []\n"
                f"    for i in range(0, {stop}, {step}):\n        w = xs[i:i + {k}]\n        out.append({expr})\n"
                "    return out\n"
            )

        yield {
            "topic": "lists",
            "difficulty": "easy" if step == 1 else "medium",
            "prompt": f"""Slide a window of {k} consecutive items over the list xs, {moves}, and return the {text}
            of each window, in order. A window never runs past the end of the list, so a list shorter than {k}
            has no windows: return [].""",
            "signature": f"def {name}(xs: list[int]) -> list[int]",
            "solution": source(f"len(xs) - {k} + 1", False),
            "visible_slip": source(f"len(xs) - {k}", False),
            "edge_slip": source(f"len(xs) - {k} + 1", True),
            "ordinary": [
                tuple([_ints(rng, n, -20, 20)]) for n in [k + step * j for j in range(1, 5)] + [k + 1, k + 3, k + 5]
            ],
            "edge": [([],), ([7],)] + [tuple([_ints(rng, n, -9, 9)]) for n in range(2, k)] + [([3, 8],)],
        }


def shift_cipher(rng: random.Random) -> Iterator[dict[str, Any]]:
    """A Caesar shift by ``k`` (encode or decode, letters or letters and digits); the edge case: upper case."""
    combos = [(k, d, digits_too) for k in range(1, 26) for d in ("encode", "decode") for digits_too in (False, True)]
    for k, direction, digits_too in _pick(rng, combos):
        sign = "+" if direction == "encode" else "-"
        kd = k % 9 + 1
        name = (f"shift{k}" if direction == "encode" else f"unshift{k}") + ("_alnum" if digits_too else "")
        way = "forward" if direction == "encode" else "back"
        wrap = "from z to a" if direction == "encode" else "from a to z"
        dwrap = "9 to 0" if direction == "encode" else "0 to 9"
        digit_rule = f" Each digit moves {kd} places {way}, wrapping from {dwrap}." if digits_too else ""
        digit_branch = (
            f"        elif '0' <= c <= '9':\n            out.append(chr((ord(c) - 48 {sign} {kd}) % 10 + 48))\n"
            if digits_too
            else ""
        )
        upper = f"        elif 'A' <= c <= 'Z':\n            out.append(chr((ord(c) - 65 {sign} {k}) % 26 + 65))\n"

        def source(lower: str, with_upper: bool) -> str:
            return (
                f"def {name}(text: str) -> str:\n    out = []\n    for c in text:\n"
                f"        if 'a' <= c <= 'z':\n            out.append({lower})\n"
                + (upper if with_upper else "")
                + digit_branch
                + "        else:\n            out.append(c)\n    return ''.join(out)\n"
            )

        words = ["zebra", "quiz", "apple", "yak", "xylophone", "jazz", "wave", "buzz", "oxen", "vex", "kiwi"]
        ordinary = []
        for _ in range(7):
            text = " ".join(rng.sample(words, 3)) + rng.choice(["", "!", ", ok.", "?"])
            if digits_too:
                text += f" {rng.randint(0, 9999)}"
            ordinary.append((text,))
        yield {
            "topic": "strings",
            "difficulty": "medium" if digits_too else "easy",
            "prompt": f"""{"Encode" if direction == "encode" else "Decode"} text with a shift cipher: each letter
            moves {k} places {way} in the alphabet, wrapping {wrap}; an upper-case letter stays upper-case
            ({"A" if direction == "encode" else chr(65 + k)} becomes {chr(65 + k) if direction == "encode" else "A"}).
            {digit_rule} Every other character is unchanged.""",
            "signature": f"def {name}(text: str) -> str",
            "solution": source(f"chr((ord(c) - 97 {sign} {k}) % 26 + 97)", True),
            "visible_slip": source(f"chr(ord(c) {sign} {k})", True),
            "edge_slip": source(f"chr((ord(c) - 97 {sign} {k}) % 26 + 97)", False),
            "ordinary": ordinary,
            "edge": [("Hello, World!",), ("ZEBRA",), ("",), ("Quiz Yak 42",), ("aZ",)],
        }


def recurrence(rng: random.Random) -> Iterator[dict[str, Any]]:
    """The n-th term of a two-term linear recurrence (optionally modulo m); the edge case: n = 0."""
    combos = [
        (p, q, a0, a1, m)
        for p in (1, 2, 3)
        for q in (-1, 1, 2, 3)
        for a0 in (0, 1, 2, 3)
        for a1 in (1, 2, 5)
        for m in (None, 1000, 10**9 + 7)
        if a0 != a1
    ]
    for p, q, a0, a1, m in _pick(rng, combos):
        name = f"seq_p{p}_q{'m' if q < 0 else ''}{abs(q)}_{a0}_{a1}" + (f"_mod{m}" if m else "")
        qtext = f"- {abs(q)}" if q < 0 else f"+ {q}"
        mod = f" % {m}" if m else ""
        step = f"a, b = b, ({p} * b {'-' if q < 0 else '+'} {abs(q)} * a){mod}"
        yield {
            "topic": "math",
            "difficulty": "hard" if m else "medium",
            "prompt": f"""A sequence starts a(0) = {a0}, a(1) = {a1} and continues a(n) = {p}·a(n-1) {qtext}·a(n-2)
            for n ≥ 2. Return a(n) for any n ≥ 0{f", modulo {m} (a value in 0..{m - 1})" if m else ""}.""",
            "signature": f"def {name}(n: int) -> int",
            "solution": f"""
            def {name}(n: int) -> int:
                a, b = {a0}, {a1}
                for _ in range(n):
                    {step}
                return a{mod}
            """,
            "visible_slip": f"""
            def {name}(n: int) -> int:
                a, b = {a0}, {a1}
                for _ in range(n + 1):
                    {step}
                return a{mod}
            """,
            "edge_slip": f"""
            def {name}(n: int) -> int:
                a, b = {a0}, {a1}
                for _ in range(n - 1):
                    {step}
                return b{mod}
            """,
            "ordinary": [(n,) for n in rng.sample(range(2, 30), 6)] + [(rng.randint(40, 90),)],
            "edge": [(0,), (1,), (2,)],
        }


_SENTENCE_WORDS = "the cat sat on a mat and the dog ran to it as we go by sea or air at noon so be it".split()


def top_word(rng: random.Random) -> Iterator[dict[str, Any]]:
    """The most frequent word of at least ``m`` characters, with a tie rule; the edge cases: ties, no word."""
    combos = [(m, tie, alnum) for m in (1, 2, 3, 4, 5) for tie in ("first", "last") for alnum in (False, True)]
    for m, tie, alnum in _pick(rng, combos):
        name = f"top_word_{m}_{tie}" + ("_alnum" if alnum else "")
        pattern = "[A-Za-z0-9]+" if alnum else "[A-Za-z]+"
        pick = "min" if tie == "first" else "max"
        count = f"""
            def {name}(text: str) -> str:
                counts = {{}}
                for w in WORDS:
                    w = w.lower()
                    if len(w) >= {m}:
                        counts[w] = counts.get(w, 0) + 1
                if not counts:
                    return ""
        """
        regex = f're.findall(r"{pattern}", text)'
        head = "import re\n\n"
        best = f"    best = max(counts.values())\n    return {pick}(w for w, c in counts.items() if c == best)\n"
        pool = [w for w in _SENTENCE_WORDS if len(w) >= m] or ["apple"]
        long_words = ["apple", "banana", "cherry", "melon", "grape", "lemon", "mango", "peach"]
        ordinary = []
        for _ in range(8):
            favourite = rng.choice(long_words)
            words = rng.sample(long_words, 3) + [favourite] * 3 + rng.sample(pool, min(3, len(pool)))
            rng.shuffle(words)
            text = " ".join(w + rng.choice(["", ",", ".", ";"]) for w in words)
            ordinary.append((text[0].upper() + text[1:],))
        edge = [
            ("",),
            ("Peach, peach. peach! mango mango",),
            ("Melon, apple; melon APPLE",),
            ("grape lemon",),
            ("a, b. c!",),
            ("Peach? peach! mango mango",),
        ]
        if alnum:
            edge.append(("route66 route66 apple apple",))
        yield {
            "topic": "parsing",
            "difficulty": "hard" if alnum else "medium",
            "prompt": f"""Return the most frequent word in text, in lower case. A word is a maximal run of
            {"letters and digits" if alnum else "letters"} (A-Z, a-z{", 0-9" if alnum else ""}); case does not
            matter ("The" and "the" are one word); only words of at least {m} characters count. A tie goes to
            the alphabetically {tie} of the tied words. With no word that counts, return "".""",
            "signature": f"def {name}(text: str) -> str",
            "solution": head + _code(count.replace("WORDS", regex)) + best,
            "visible_slip": head + _code(count.replace("WORDS", "text.split()")) + best,
            "edge_slip": head + _code(count.replace("WORDS", regex)) + "    return max(counts, key=counts.get)\n",
            "ordinary": ordinary,
            "edge": edge,
        }


_SPAN_OUTPUTS = {
    "merged": ("the merged intervals as a sorted list of [start, end] pairs", "list[list[int]]", "merged"),
    "groups": ("the number of merged intervals", "int", "len(merged)"),
    "longest": ("the length (end - start) of the longest merged interval, 0 for no intervals", "int",
                "max((e - s for s, e in merged), default=0)"),
    "gap": ("the widest gap between two consecutive merged intervals (0 if there are fewer than two)", "int",
            "max((b[0] - a[1] for a, b in zip(merged, merged[1:])), default=0)"),
    "covered": ("the total length they cover together", "int", "sum(e - s for s, e in merged)"),
}  # fmt: skip


def intervals(rng: random.Random) -> Iterator[dict[str, Any]]:
    """Merge intervals given as [start, end] or [start, length], touching ones merged or not; the edge case: one
    interval inside another."""
    combos = [
        (out, fmt, touching)
        for out in _SPAN_OUTPUTS
        for fmt in ("ends", "lengths")
        for touching in ((True,) if out == "covered" else (True, False))
    ]
    for out, fmt, touching in _pick(rng, combos):
        text, returns, expr = _SPAN_OUTPUTS[out]
        name = f"{out}_spans" + ("_by_length" if fmt == "lengths" else "") + ("" if touching or out == "covered"
                                                                              else "_apart")  # fmt: skip
        given = "[start, end] pairs" if fmt == "ends" else "[start, length] pairs (covering start to start + length)"
        rule = (
            ""
            if out == "covered"
            else " Two intervals that overlap merge into one; intervals that only touch (one ends where the next "
            + ("starts) merge too." if touching else "starts) stay separate.")
        )
        spans = "[[s, e] for s, e in intervals]" if fmt == "ends" else "[[s, s + n] for s, n in intervals]"
        cmp = "<=" if touching else "<"

        def source(order: str, extend: str) -> str:
            return _code(f"""
            def {name}(intervals: list[list[int]]) -> {returns}:
                spans = {order}
                merged = []
                for s, e in spans:
                    if merged and s {cmp} merged[-1][1]:
                        merged[-1][1] = {extend}
                    else:
                        merged.append([s, e])
                return {expr}
            """)

        def case(n: int) -> tuple[list[list[int]]]:
            starts = sorted(rng.sample(range(0, 40), n))
            pairs = []
            for a, b in zip(starts, starts[1:] + [starts[-1] + 9], strict=True):
                end = min(b + rng.choice([-2, 0, 0, 2]), a + 8) if b > a + 1 else a + 1
                end = max(end, a + 1)
                pairs.append([a, end] if fmt == "ends" else [a, end - a])
            rng.shuffle(pairs)
            return (pairs,)

        def nested(outer: list[int], inner: list[int], *more: list[int]) -> tuple[list[list[int]]]:
            items = [outer, inner, *more]
            return ([[s, e] if fmt == "ends" else [s, e - s] for s, e in items],)

        yield {
            "topic": "algorithms",
            "difficulty": "hard",
            "prompt": f"""intervals is a list of {given} of integers, in any order, each with start < end. Merge
            them and return {text}.{rule} An interval may lie entirely inside another; an empty list has no
            intervals.""",
            "signature": f"def {name}(intervals: list[list[int]]) -> {returns}",
            "solution": source(f"sorted({spans})", "max(merged[-1][1], e)"),
            "visible_slip": source(spans, "max(merged[-1][1], e)"),
            "edge_slip": source(f"sorted({spans})", "e"),
            "ordinary": [case(n) for n in (3, 4, 4, 5, 5, 6, 6, 3, 7, 8, 7, 8)],
            "edge": [
                nested([0, 10], [2, 4], [20, 25]),
                nested([5, 30], [6, 8], [9, 12], [40, 41]),
                ([],),
                nested([1, 9], [3, 5]),
                nested([0, 3], [3, 6], [10, 20], [12, 13], [30, 31]),
            ],
        }


_BASE_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def bases(rng: random.Random) -> Iterator[dict[str, Any]]:
    """Write an integer in base b, or read one; the edge cases: 0, and a sign."""
    combos = [
        ("format", b, upper) for b in (*range(2, 10), *range(11, 17)) for upper in (False, True) if upper <= (b > 10)
    ]
    combos += [("parse", b, False) for b in (*range(2, 10), *range(11, 17))]
    for direction, b, upper in _pick(rng, combos):
        digits_ = _BASE_DIGITS[:b].upper() if upper else _BASE_DIGITS[:b]
        if direction == "format":
            name = f"to_base{b}" + ("_upper" if upper else "")
            letters = f", then {digits_[10:]} for 10 to {b - 1}" if b > 10 else ""
            yield {
                "topic": "parsing",
                "difficulty": "medium",
                "prompt": f"""Write the integer n in base {b}, most significant digit first, using the digits
                {digits_[:10][:b]}{letters}, with no leading zeros. 0 is written "0"; a negative number is written
                as "-" followed by its absolute value.""",
                "signature": f"def {name}(n: int) -> str",
                "solution": f"""
                def {name}(n: int) -> str:
                    if n == 0:
                        return "0"
                    sign = "-" if n < 0 else ""
                    n = abs(n)
                    out = ""
                    while n:
                        out = "{digits_}"[n % {b}] + out
                        n //= {b}
                    return sign + out
                """,
                "visible_slip": f"""
                def {name}(n: int) -> str:
                    if n == 0:
                        return "0"
                    sign = "-" if n < 0 else ""
                    n = abs(n)
                    out = ""
                    while n:
                        out += "{digits_}"[n % {b}]
                        n //= {b}
                    return sign + out
                """,
                "edge_slip": f"""
                def {name}(n: int) -> str:
                    sign = "-" if n < 0 else ""
                    n = abs(n)
                    out = ""
                    while n:
                        out = "{digits_}"[n % {b}] + out
                        n //= {b}
                    return sign + out
                """,
                "ordinary": [(rng.randint(b * b, 10**7),) for _ in range(8)],
                "edge": [(0,), (-rng.randint(b, 10**5),), (-1,), (b,), (-(b**3),)],
            }
        else:
            name = f"from_base{b}"
            letters = f", then a to {_BASE_DIGITS[b - 1]} (or A to {_BASE_DIGITS[b - 1].upper()}) for 10 to {b - 1}"
            fmt = _BASE_DIGITS[:b]

            def to_text(n: int) -> str:
                out = ""
                while True:
                    out = fmt[n % b] + out
                    n //= b
                    if n == 0:
                        return out

            parse = (
                f'    value = 0\n    for c in text.lower():\n        value = value * {b} + "{_BASE_DIGITS}".index(c)\n'
            )
            slip_parse = (
                f"    value = 0\n    for i, c in enumerate(text.lower()):\n"
                f'        value += "{_BASE_DIGITS}".index(c) * {b} ** i\n'
            )
            head = f"def {name}(text: str) -> int:\n    text = text.strip()\n"
            signed = '    sign = -1 if text.startswith("-") else 1\n    text = text.lstrip("+-")\n'
            yield {
                "topic": "parsing",
                "difficulty": "medium",
                "prompt": f"""Read text as an integer written in base {b}, most significant digit first (digits 0 to
                {min(b, 10) - 1}{letters if b > 10 else ''}). The number may have one leading "-" (negative) or "+"
                sign, and spaces around it, which are ignored.""",
                "signature": f"def {name}(text: str) -> int",
                "solution": head + signed + parse + "    return sign * value\n",
                "visible_slip": head + signed + slip_parse + "    return sign * value\n",
                "edge_slip": head + '    text = text.lstrip("+-")\n' + parse + "    return value\n",
                "ordinary": [(to_text(rng.randint(b * b, 10**6)),) for _ in range(8)],
                "edge": [(f"-{to_text(rng.randint(b, 10**5))}",), (f"  +{to_text(rng.randint(b, 999))} ",),
                         ("-1",), ("0",), (f" -{to_text(b ** 3).upper()}",)],
            }  # fmt: skip


_GROUP_KEYS = {
    "first": ("its first letter", "w[0]", "str"),
    "last": ("its last letter", "w[-1]", "str"),
    "length": ("its length", "len(w)", "int"),
    "vowels": ("how many vowels (a, e, i, o, u) it has", "sum(c in 'aeiou' for c in w)", "int"),
}
_GROUP_AGGS = {
    "words": ("the list of its words in input order (repeats kept)", "list[str]", "ws", "sorted(ws)"),
    "count": ("how many words it has (repeats counted)", "int", "len(ws)", "len(set(ws))"),
    "distinct": ("its distinct words, sorted", "list[str]", "sorted(set(ws))", "sorted(ws)"),
    "longest": ("its longest word (the first one, on a tie)", "str", "max(ws, key=len)", "max(ws)"),
}


def grouping(rng: random.Random) -> Iterator[dict[str, Any]]:
    """Group words by a key and summarise each group; the edge cases: upper case and empty strings."""
    combos = [(k, a) for k in _GROUP_KEYS for a in _GROUP_AGGS]
    vocab = "bat bee bear boar cat cow crab cod dog duck deer dove eel emu elk tern wren hen".split()
    for key, agg in _pick(rng, combos):
        ktext, kexpr, ktype = _GROUP_KEYS[key]
        atext, atype, aexpr, slip = _GROUP_AGGS[agg]
        name = f"group_by_{key}_{agg}"

        def source(value: str, clean: bool) -> str:
            guard = "        if not w:\n            continue\n        w = w.lower()\n" if clean else ""
            return (
                f"def {name}(words: list[str]) -> dict[{ktype}, {atype}]:\n    groups = {{}}\n    for w in words:\n"
                f"{guard}        groups.setdefault({kexpr}, []).append(w)\n"
                f"    return {{k: {value} for k, ws in groups.items()}}\n"
            )

        ordinary = []
        for _ in range(8):
            words = rng.sample(vocab, 5)
            words += rng.sample(words, 2)
            rng.shuffle(words)
            ordinary.append((words,))
        yield {
            "topic": "dicts",
            "difficulty": "medium",
            "prompt": f"""Group the words of the list words by {ktext}: return a dict that maps each key to {atext}.
            Words are lower-cased first ("Owl" counts as "owl"), empty strings are skipped, and an empty list gives
            {{}}.""",
            "signature": f"def {name}(words: list[str]) -> dict[{ktype}, {atype}]",
            "solution": source(aexpr, True),
            "visible_slip": source(slip, True),
            "edge_slip": source(aexpr, False),
            "ordinary": ordinary,
            "edge": [
                (["Owl", "owl", "Ant", "emu"],),
                (["", "cat", "", "Cat"],),
                ([],),
                (["KIWI", "Kiwi", "seal", "", "Seal", "wren"],),
                (["Eel", "", "gnu", "EMU"],),
            ],
        }


_FILTER_OPS = {
    "count": ("how many numbers in xs are", "int", "len(keep)"),
    "sum": ("the sum of the numbers in xs that are", "int", "sum(keep)"),
    "list": ("the numbers in xs, in order, that are", "list[int]", "keep"),
    "max": ("the largest number in xs that is", "int | None", "max(keep) if keep else None"),
}


def filters(rng: random.Random) -> Iterator[dict[str, Any]]:
    """Count, sum, list or take the largest of the numbers (not) divisible by d; the edge cases: 0 and negatives."""
    combos = [(op, d, neg) for op in _FILTER_OPS for d in range(2, 10) for neg in (False, True)]
    for op, d, negated in _pick(rng, combos):
        text, returns, expr = _FILTER_OPS[op]
        name = f"{op}_{'not_' if negated else ''}multiples_of_{d}"
        test = f"x % {d} != 0" if negated else f"x % {d} == 0"
        inverse = f"x % {d} == 0" if negated else f"x % {d} != 0"
        none = " Return None if there is none." if op == "max" else ""

        def source(cond: str) -> str:
            return f"def {name}(xs: list[int]) -> {returns}:\n    keep = [x for x in xs if {cond}]\n    return {expr}\n"

        ordinary = [(_ints(rng, rng.randint(5, 9), 1, 60),) for _ in range(8)]
        edge = [([0, d, -d, 5 * d + 1],), ([-3 * d, -1, 2 * d],), ([],), ([-(d + 1), -2 * d - 1, 0],),
                ([0],), ([d * 7, -d * 7, 1],)]  # fmt: skip
        yield {
            "topic": "lists",
            "difficulty": "easy",
            "prompt": f"""Return {text} {"not " if negated else ""}divisible by {d}.{none} Negative numbers and 0 count
            like any other number: 0, {d} and -{d} are divisible by {d}, and -1 is not.""",
            "signature": f"def {name}(xs: list[int]) -> {returns}",
            "solution": source(test),
            "visible_slip": source(inverse),
            "edge_slip": source(f"x > 0 and {test}"),
            "ordinary": ordinary,
            "edge": edge,
        }


def letter_counts(rng: random.Random) -> Iterator[dict[str, Any]]:
    """Count the letters of a class in a text, with a case rule and with or without zero counts; the edge case:
    upper-case letters."""
    classes: list[tuple[str, str, str]] = [
        ("vowels", "aeiou", "vowel (a, e, i, o, u)"),
        ("consonants", "bcdfghjklmnpqrstvwxyz", "consonant (a letter other than a, e, i, o, u)"),
        ("letters", string.ascii_lowercase, "letter"),
    ]
    sets = sorted({"".join(sorted(rng.sample(string.ascii_lowercase, 5))) for _ in range(40)})
    classes += [(f"letters_{s}", s, f"of the letters {', '.join(s)}") for s in sets]
    combos = [
        (c, fold, zeros)
        for c in classes
        for fold in (True, False)
        for zeros in ((False, True) if c[0] != "consonants" and c[0] != "letters" else (False,))
    ]
    for (cname, members, ctext), fold, zeros in _pick(rng, combos):
        name = f"count_{cname}" + ("" if fold else "_exact_case") + ("_all" if zeros else "")
        if fold:
            rule = """Case does not matter: "A" counts as "a", and the keys are lower-case letters."""
        else:
            rule = """Case matters: only lower-case letters count ("A" is not "a" and is not counted)."""
        zero = (f" Every one of the {len(members)} letters is a key, with 0 if it does not occur."
                if zeros else " Letters that do not occur are not keys.")  # fmt: skip
        init = f"{{c: 0 for c in {members!r}}}" if zeros else "{}"

        def source(lower: bool, add: str) -> str:
            scan = "text.lower()" if lower else "text"
            return (
                f"def {name}(text: str) -> dict[str, int]:\n    counts = {init}\n    for c in {scan}:\n"
                f"        if c in {members!r}:\n            counts[c] = {add}\n    return counts\n"
            )

        pool = members * 3 + " ,.!" + "xyz"
        ordinary = [("".join(rng.choice(pool) for _ in range(rng.randint(8, 20))).strip() or "ab",) for _ in range(8)]
        upper = "".join(rng.sample(members, min(3, len(members)))).upper()
        yield {
            "topic": "dicts",
            "difficulty": "easy",
            "prompt": f"""Count how often each {ctext} occurs in text: return a dict that maps each such letter that
            occurs to its count. {rule}{zero}""",
            "signature": f"def {name}(text: str) -> dict[str, int]",
            "solution": source(fold, "counts.get(c, 0) + 1"),
            "visible_slip": source(fold, "1"),
            "edge_slip": source(not fold, "counts.get(c, 0) + 1"),
            "ordinary": ordinary,
            "edge": [(f"{upper} {upper.lower()}",), (f"{members.upper()}!",), (f"x{upper}{members}",), ("",),
                     (f"{upper[0]}{upper[0].lower()}{upper[0].lower()}",)],
        }  # fmt: skip


FAMILIES: tuple[Callable[[random.Random], Iterator[dict[str, Any]]], ...] = (
    digits, windows, shift_cipher, recurrence, top_word, intervals, bases, grouping, filters, letter_counts,
)  # fmt: skip
"""The families, in file order."""
SIZES = {
    "digits": 36,
    "windows": 36,
    "shift_cipher": 36,
    "recurrence": 36,
    "top_word": 20,
    "intervals": 18,
    "bases": 34,
    "grouping": 15,
    "filters": 36,
    "letter_counts": 36,
}
"""Problems per family: the first this many parameter combinations for which :func:`make_problem` finds tests."""


def generate_tasks() -> list[CodeTask]:
    """Every v1 problem with its split, from :data:`SEED` (no sandbox; :func:`build_tasks` adds the check)."""
    tasks = []
    for family in FAMILIES:
        rng = random.Random(f"{SEED}/{family.__name__}")
        made: list[dict[str, Any]] = []
        for spec in family(rng):
            try:
                made.append(make_problem(id=f"{family.__name__}-{len(made) + 1:02d}", **spec))
            except ValueError:  # these parameters and inputs cannot show both slips: draw the next combination
                continue
            if len(made) == SIZES[family.__name__]:
                break
        else:
            raise ValueError(f"family {family.__name__} made {len(made)} problems, {SIZES[family.__name__]} wanted")
        for k, problem in enumerate(made):
            tasks.append(CodeTask.model_validate({**problem, "split": "test" if k % 5 in (1, 3) else "train"}))
    ids = [t.id for t in tasks]
    names = [t.entry_point for t in tasks]
    if len(set(ids)) != len(ids) or len(set(names)) != len(names):
        raise ValueError("duplicate problem ids or function names")
    return tasks


def build_tasks(sandbox: Sandbox | None = None, *, verify: bool = True) -> list[CodeTask]:
    """:func:`generate_tasks`, each checked in ``sandbox`` as v0's are (references pass, wrong solutions fail)."""
    tasks = generate_tasks()
    if verify:
        problems = verify_tasks(tasks, sandbox or Sandbox())
        if problems:
            raise ValueError("problems that do not check out:\n" + "\n".join(problems))
    return tasks


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Build CodeSandbox-v1's problems and write the tasks file.")
    parser.add_argument("command", choices=["build"])
    parser.add_argument("--out", default=str(TASKS_V1), help="where to write the JSONL file")
    parser.add_argument("--no-verify", action="store_true", help="skip the sandbox check")
    args = parser.parse_args(argv)
    checksum = write_tasks(build_tasks(verify=not args.no_verify), Path(args.out))
    print(f"{args.out}: SHA-256 {checksum} ({'matches v1' if checksum == TASKS_V1_SHA256 else 'differs from v1'})")


if __name__ == "__main__":
    main()
