"""Keep the wall clock out of agent SQL while SQLite's own date functions run at native speed.

SQLite's ``date``, ``time``, ``datetime``, ``julianday``, ``unixepoch``, ``strftime`` and ``timediff`` read the clock
when a time value is ``'now'`` (or missing), and the machine's time zone for ``'localtime'`` and ``'utc'``. A frozen
snapshot must answer the same on every machine and every day, so :class:`~agentgym.envs.sql.safety.ReadOnlySQLite`
refuses them, however the word is written or built: ``'NOW'``, ``X'6E6F77'``, ``'n' || 'ow'``, a column holding it.

:func:`guard_dates` does that before SQLite compiles the query. It splits the text into SQLite's tokens, finds
every call of a date function, and rewrites each argument by what it is:

- a literal (``'2024-01-31'``, ``'+1 day'``, ``X'…'``, a number) is checked now and left as it is;
- a column (``order_date``, ``o.order_date``) is passed through when its value cannot start a clock word: a number,
  NULL, or text that sorts before ``'A'`` (a date starts with a digit; SQLite reads a clock word only from a value's
  first character on). Anything else goes to :func:`clock_guard` first:
  ``CASE WHEN x < 'A' OR x IS NULL THEN x ELSE agentgym_clock_guard(x) END``, all native for a date;
- anything else (a concatenation, a subquery, a nested call) goes to :func:`clock_guard`.

A date call with fewer arguments than a time value needs (``date()``, ``strftime('%Y')``) is refused too.
:data:`CLOCK_GUARD` (the SQL name of :func:`clock_guard`) returns its argument unchanged or raises.

The caller checks the rewrite against SQLite itself: its authorizer counts the date-function calls SQLite compiles,
and a query whose count differs from :attr:`GuardedSQL.calls` (a view or generated column with date calls, a CTE
compiled twice, text this tokenizer reads otherwise than SQLite) runs the slow, always-safe way instead.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Any

__all__ = ["CLOCK_GUARD", "CLOCK_WORDS", "DATE_FUNCTIONS", "ClockRefused", "GuardedSQL", "clock_guard", "guard_dates"]

CLOCK_WORDS = frozenset({"now", "localtime", "utc"})
"""Time values and modifiers that read the wall clock or the machine's time zone."""

DATE_FUNCTIONS = {"date": 1, "time": 1, "datetime": 1, "julianday": 1, "unixepoch": 1, "strftime": 2, "timediff": 2}
"""Each date function, with the argument count below which SQLite reads the clock (``date()`` means today)."""

CLOCK_GUARD = "agentgym_clock_guard"

_MENTION = re.compile("date|time|julianday|unixepoch", re.I)  # every date function's name contains one of these

# SQLite's tokenizer (tokenize.c), for the tokens that matter here. Identifier characters: ASCII letters, digits,
# '_', '$' and every non-ASCII character. White space: \t \n \f \r and space (\v is illegal). Anything else that
# SQLite reads as one token but this does not name (an illegal character) makes guard_dates give up.
_ID_START = r"A-Za-z_\u0080-\U0010ffff"
_ID_CHAR = _ID_START + r"0-9$"
_TOKEN = re.compile(
    rf"""(?P<space>[\t\n\f\r ]+|--[^\n]*|/\*.*?(?:\*/|\Z))
    |(?P<string>'(?:[^']|'')*')
    |(?P<blob>[xX]'[0-9A-Fa-f]*')
    |(?P<quoted>"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\])
    |(?P<number>(?:0[xX][0-9A-Fa-f]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)[{_ID_CHAR}]*)
    |(?P<variable>\?\d*|[:@$][{_ID_CHAR}]+)
    |(?P<id>[{_ID_START}][{_ID_CHAR}]*)
    |(?P<op>->>|->|\|\||<=|>=|==|!=|<>|<<|>>|[-+*/%&|~<>=(),;.])""",
    re.S | re.X,
)
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


class ClockRefused(ValueError):
    """A date function would read the wall clock or the time zone."""

    def __init__(self, function: str | None = None) -> None:
        what = f"{function}() without a date, or with" if function else "a date function with"
        super().__init__(
            f"{what} 'now', 'localtime' or 'utc', is not available: the database is a frozen snapshot; use the dates "
            "given in the question"
        )


def is_clock(value: Any) -> bool:
    """Whether SQLite could read ``value`` as a clock word (what it reads stops at a NUL; case and spaces ignored)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return isinstance(value, str) and value.split("\x00", 1)[0].strip().lower() in CLOCK_WORDS


def clock_guard(value: Any) -> Any:
    """``value`` unchanged, or :class:`ClockRefused` if it is a clock word (SQL: ``agentgym_clock_guard(x)``)."""
    if is_clock(value):
        raise ClockRefused()
    return value


@dataclass(frozen=True)
class GuardedSQL:
    """A query rewritten so that no date call in it reads the clock; ``calls``: how many date calls it has."""

    sql: str
    calls: int


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    start: int
    end: int

    @property
    def name(self) -> str | None:
        """The identifier this token names, as SQLite compares function names (ASCII case folded), or None."""
        if self.kind == "id":
            return self.text.translate(_ASCII_LOWER)
        if self.kind == "quoted":
            quote = self.text[0]
            inner = self.text[1:-1]
            return (inner if quote == "[" else inner.replace(quote * 2, quote)).translate(_ASCII_LOWER)
        return None


def _tokens(sql: str) -> list[_Token] | None:
    tokens, pos = [], 0
    while pos < len(sql):
        match = _TOKEN.match(sql, pos)
        if match is None:
            return None  # an illegal character, an unclosed string or identifier: SQLite will say what is wrong
        if match.lastgroup != "space":
            tokens.append(_Token(match.lastgroup, match.group(), match.start(), match.end()))
        pos = match.end()
    return tokens


def guard_dates(sql: str) -> GuardedSQL | None:
    """``sql`` with every date-function argument guarded (see the module docstring).

    Raises :class:`ClockRefused` for a clock word written as a literal or a call without a time value. Returns None
    when the text is not tokenized as SQLite would (the caller then runs the query the slow way, where SQLite itself
    reports the error).
    """
    if _MENTION.search(sql) is None:
        return GuardedSQL(sql, 0)
    tokens = _tokens(sql)
    if tokens is None:
        return None
    partner: dict[int, int] = {}  # index of each '(' -> index of its ')'
    stack: list[int] = []
    for i, token in enumerate(tokens):
        if token.text == "(":
            stack.append(i)
        elif token.text == ")":
            if not stack:
                return None
            partner[stack.pop()] = i
    if stack:
        return None
    type_names = _cast_type_names(tokens, partner)
    rewriter = _Rewriter(sql, tokens, partner, type_names)
    text = rewriter.render(0, len(tokens))
    if text is not None and rewriter.calls == 0:
        return GuardedSQL(sql, 0)
    if text is None or len(text) > 4 * len(sql) + 1_000:
        return None  # (a rewrite many times the query's length is not worth keeping: the slow way is fast enough)
    return GuardedSQL(sql[: tokens[0].start] + text + sql[tokens[-1].end :], rewriter.calls)


def _cast_type_names(tokens: list[_Token], partner: dict[int, int]) -> set[int]:
    """Indexes of the tokens that name a type in ``CAST(x AS type)``: ``date(5)`` there is no call."""
    names: set[int] = set()
    for i, token in enumerate(tokens[:-1]):
        if token.name == "cast" and tokens[i + 1].text == "(":
            close = partner[i + 1]
            depth_zero_as = [
                k
                for k in range(i + 2, close)
                if tokens[k].name == "as" and tokens[k].kind == "id" and _depth(tokens, partner, i + 1, k) == 0
            ]
            if depth_zero_as:
                names.update(range(depth_zero_as[-1] + 1, close))
    return names


def _depth(tokens: list[_Token], partner: dict[int, int], open_: int, k: int) -> int:
    """How many parentheses, inside the one at ``open_``, enclose token ``k``."""
    depth, j = 0, open_ + 1
    while j < k:
        if j in partner and partner[j] > k:
            depth += 1
            j += 1
        elif j in partner:
            j = partner[j] + 1
        else:
            j += 1
    return depth


class _Rewriter:
    def __init__(self, sql: str, tokens: list[_Token], partner: dict[int, int], type_names: set[int]) -> None:
        self.sql, self.tokens, self.partner, self.type_names = sql, tokens, partner, type_names
        self.calls = 0

    def _is_call(self, i: int) -> bool:
        tokens = self.tokens
        if tokens[i].name not in DATE_FUNCTIONS or i + 1 >= len(tokens) or tokens[i + 1].text != "(":
            return False
        if i in self.type_names:
            return False
        after = self.partner[i + 1] + 1  # a CTE declared as date(a) AS (…) / AS [NOT] MATERIALIZED (…)
        if after + 1 < len(tokens) and tokens[after].kind == "id" and tokens[after].name == "as":
            return tokens[after + 1].text != "(" and tokens[after + 1].name not in ("materialized", "not")
        return True

    def render(self, lo: int, hi: int) -> str | None:
        """The source text of tokens ``lo``..``hi-1`` (spaces and comments between them kept), date calls rewritten."""
        if lo >= hi:
            return ""
        out, pos, i = [], self.tokens[lo].start, lo
        while i < hi:
            if self._is_call(i):
                close = self.partner[i + 1]
                call = self._call(i, close)
                if call is None:
                    return None
                out += [self.sql[pos : self.tokens[i].start], call]
                pos, i = self.tokens[close].end, close + 1
            else:
                i += 1
        out.append(self.sql[pos : self.tokens[hi - 1].end])
        return "".join(out)

    def _call(self, i: int, close: int) -> str | None:
        name = self.tokens[i].name
        args, start, k = [], i + 2, i + 2
        while k < close:  # split at the commas outside nested parentheses
            if k in self.partner:
                k = self.partner[k] + 1
                continue
            if self.tokens[k].text == ",":
                args.append((start, k))
                start = k + 1
            k += 1
        if start < close or args:
            args.append((start, close))
        if any(lo >= hi for lo, hi in args):
            return None  # date(, x): a syntax error
        if len(args) < DATE_FUNCTIONS[name]:
            raise ClockRefused(name)
        guarded = []
        for lo, hi in args:
            arg = self._argument(name, lo, hi)
            if arg is None:
                return None
            guarded.append(arg)
        self.calls += 1
        return f"{name}({', '.join(guarded)})"

    def _argument(self, function: str, lo: int, hi: int) -> str | None:
        tokens = self.tokens
        first = tokens[lo]
        if hi - lo == 1 and first.kind in ("string", "blob", "number"):
            value: Any = first.text
            if first.kind == "string":
                value = first.text[1:-1].replace("''", "'")
            elif first.kind == "blob":
                value = bytes.fromhex(first.text[2:-1]) if len(first.text) % 2 == 1 else None
                if value is None:
                    return None  # an odd number of hex digits: SQLite refuses the blob
            if is_clock(value):
                raise ClockRefused(function)
            return first.text
        text = self.render(lo, hi)
        if text is None:
            return None
        column = (hi - lo) in (1, 3, 5) and all(
            tokens[k].kind in ("id", "quoted") if (k - lo) % 2 == 0 else tokens[k].text == "." for k in range(lo, hi)
        )
        if column:
            return f"CASE WHEN {text} < 'A' OR {text} IS NULL THEN {text} ELSE {CLOCK_GUARD}({text}) END"
        return f"{CLOCK_GUARD}({text})"
