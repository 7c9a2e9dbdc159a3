"""The tolerant tool-call parser: whatever a model wrote → tool calls, or an error it can act on.

Canonical format (what system prompts teach and Qwen-style chat templates emit)::

    <tool_call>{"name": "get_weather", "arguments": {"city": "Shanghai"}}</tool_call>

Also accepted, in this order of precedence:

``tool_call``   ``<tool_call>…</tool_call>`` holding JSON or a Python-style call (closing tag optional)
``call_tag``    ``<|call|>get_weather(city="Shanghai")<|/call|>``, ``<call>…</call>``, ``<function_call>…``
``react``       ``Action: get_weather`` followed by ``Action Input: {"city": "Shanghai"}``, or by a plain value
                (``Action Input: Shanghai``) for a tool with one parameter, or one required parameter
``openai``      ``{"tool_calls": [{"type": "function", "function": {"name": …, "arguments": "…"}}]}``
``json``        objects keyed ``name``/``arguments``, ``function``/``parameters``, ``tool``/``args`` (or a list)
``python``      ``get_weather("Shanghai")``, ``get_weather(city='Shanghai')``

Anywhere, including inside Markdown code fences and surrounded by prose. JSON is read leniently:
single quotes, trailing commas, unquoted keys, ``True``/``None``, missing closing brackets. Tool
names match in any case. :func:`parse_tool_calls` never raises: it returns a :class:`ParseResult`
whose ``error`` says what was wrong (for an unknown tool, the closest real one).
"""

from __future__ import annotations

import ast
import bisect
import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentgym.core.tools import Tool, ToolCall

__all__ = ["ParseResult", "parse_tool_calls", "MAX_ACTION_CHARS"]

MAX_ACTION_CHARS = 32_768
"""Longer actions are rejected outright (this bounds the parser's work on hostile input)."""

MAX_CALLS = 16
_MAX_JSON_STARTS = 64  # candidate '{' / '[' positions tried in one action
_JSON_SCAN_BUDGET = 1  # characters read across all attempts, × the text (at least 8 KiB): linear time
_MAX_NUMBER_CHARS = 400  # digits in one number (Python refuses int() of more than 4,300)
_MAX_DEPTH = 50  # brackets nested in one JSON value


@dataclass(frozen=True)
class ParseResult:
    """The calls found in an action, in order, with the format they were written in.

    ``canonical`` is True only when every call was a ``<tool_call>`` block holding strict JSON with
    exactly ``name`` and ``arguments`` and the exact tool name — format compliance, measured apart
    from the parser's tolerance. ``error`` is None on success; then ``calls`` is non-empty.
    """

    calls: tuple[ToolCall, ...] = ()
    format: str | None = None
    canonical: bool = False
    error: str | None = None
    no_call: bool = False
    """True when the error is that no call of a known tool was read: no call syntax at all, or only calls of names
    that are no tool (``print(x)``). The text may be something else a task reads (``ToolEnv.fallback_call``)."""

    @property
    def ok(self) -> bool:
        return self.error is None


class _Unparsable(ValueError):
    """Text that looks like a call in some format but cannot be read; the message says why."""


class _UnknownTool(_Unparsable):
    """A call of a name that is no tool."""


class _Bound(_Unparsable):
    """Text refused because it passes one of the parser's bounds; the message names the bound."""


def _long_number(length: int, where: str = "") -> _Bound:
    return _Bound(
        f"a number of {length:,} characters{where}; numbers may have at most {_MAX_NUMBER_CHARS} (the parser's limit)"
    )


@dataclass
class _Raw:
    name: str
    arguments: dict[str, Any]
    positional: tuple[Any, ...] = ()
    strict: bool = False
    plain: str | None = None  # a ReAct input that is a plain value, not a JSON object: for the one parameter


# ----------------------------------------------------------------------------- lenient JSON


class _LenientJSON:
    """A forgiving JSON reader: JSON, plus Python literals, single quotes, unquoted keys and
    strings, trailing commas, comments-free truncation (unclosed brackets at end of input)."""

    _WORD = re.compile(r"[A-Za-z_$][\w$.\-]*")
    _NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
    _CONSTANTS = {"true": True, "false": False, "null": None, "none": None}
    _SPACE = re.compile(r"[ \t\r\n]*")
    _SEPARATORS = re.compile(r"[ \t\r\n,]*")  # between items: any run of blanks and commas (trailing commas)

    def __init__(self, text: str, pos: int = 0, stop: int | None = None) -> None:
        self.s, self.i = text, pos
        self.stop = len(text) if stop is None else stop  # no value starts past it (a reader's share of a budget)

    def _ws(self) -> None:
        self.i = self._SPACE.match(self.s, self.i).end()

    def value(self, depth: int = 0) -> Any:
        if depth > _MAX_DEPTH:
            raise _Bound(f"JSON nested too deeply: more than {_MAX_DEPTH} levels (the parser's limit)")
        s = self.s
        i = self.i = self._SPACE.match(s, self.i).end()
        if i >= len(s):
            raise _Unparsable("unexpected end of JSON")
        if i > self.stop:
            raise _Unparsable("the JSON runs past the characters the parser reads")
        c = s[i]
        if c == "{":
            return self._object(depth)
        if c == "[":
            return self._array(depth)
        if c in "\"'":
            return self._string()
        if m := self._NUMBER.match(s, i):
            self.i = m.end()
            text = m.group()
            if len(text) > _MAX_NUMBER_CHARS:  # int() of thousands of digits raises, and is quadratic before that
                raise _long_number(len(text), f" at position {i}")
            return float(text) if "." in text or "e" in text or "E" in text else int(text)
        if m := self._WORD.match(s, i):
            self.i = m.end()
            word = m.group()
            return self._CONSTANTS.get(word.lower(), word)
        raise _Unparsable(f"unexpected character {c!r} at position {i}")

    def _object(self, depth: int) -> dict[str, Any]:
        s, out = self.s, {}
        i = self.i + 1
        while True:
            i = self.i = self._SEPARATORS.match(s, i).end()
            if i >= len(s) or s[i] == "}":
                self.i = i + 1
                return out
            if s[i] in "\"'":
                key = self._string()
            elif m := self._WORD.match(s, i):
                key, self.i = m.group(), m.end()
            else:
                raise _Unparsable(f"expected a key at position {i}")
            i = self._SPACE.match(s, self.i).end()
            if i >= len(s) or s[i] not in ":=":
                raise _Unparsable(f"expected ':' after key {key!r}")
            self.i = i + 1
            out[str(key)] = self.value(depth + 1)
            i = self.i

    def _array(self, depth: int) -> list[Any]:
        s, out = self.s, []
        i = self.i + 1
        while True:
            i = self.i = self._SEPARATORS.match(s, i).end()
            if i >= len(s) or s[i] == "]":
                self.i = i + 1
                return out
            out.append(self.value(depth + 1))
            i = self.i

    _ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/"}
    # A string's body in one regex step (each character matches one way: linear, in C), and its escapes.
    _BODY = {q: re.compile(rf"[^{q}\\]*(?:\\[\s\S][^{q}\\]*)*") for q in "\"'"}
    _ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[\s\S])")

    def _string(self) -> str:
        s, quote = self.s, self.s[self.i]
        end = self._BODY[quote].match(s, self.i + 1).end()
        if end >= len(s) or s[end] != quote:  # the end, or a last lone backslash
            self.i = len(s)  # read to the end: what the scan budget counts
            raise _Unparsable("unterminated string")
        body = s[self.i + 1 : end]
        self.i = end + 1
        return self._ESCAPE.sub(self._unescape, body) if "\\" in body else body

    @classmethod
    def _unescape(cls, m: re.Match[str]) -> str:
        code = m.group(1)
        return chr(int(code[1:], 16)) if len(code) == 5 else cls._ESCAPES.get(code, code)


def loads_lenient(text: str) -> Any:
    """Read one JSON-like value from ``text`` (see :class:`_LenientJSON`); raises ``ValueError``."""
    reader = _LenientJSON(text)
    value = reader.value()
    reader._ws()
    if reader.i < len(text):
        raise _Unparsable(f"unexpected text after the value at position {reader.i}")
    return value


# ----------------------------------------------------------------------------- call shapes

_NAME_KEYS = ("name", "function", "tool", "tool_name", "action")
_ARG_KEYS = ("arguments", "parameters", "args", "params", "input", "action_input", "kwargs")


def _arguments(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        value = value.strip()
        if not value:
            return {}
        try:
            value = loads_lenient(value)
        except ValueError as exc:
            raise _Unparsable(f"could not read the arguments as JSON: {exc}") from None
    if not isinstance(value, dict):
        raise _Unparsable(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def _calls_from_json(obj: Any, known: Mapping[str, Any]) -> tuple[list[_Raw], str] | None:
    """Interpret a decoded JSON value as calls; None if it does not look like one."""
    if isinstance(obj, list):
        out: list[_Raw] = []
        fmt = "json"
        for item in obj:
            found = _calls_from_json(item, known)
            if found is None:
                return None
            out.extend(found[0])
            fmt = found[1]
        return (out, fmt) if out else None
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("tool_calls"), list):
        found = _calls_from_json(obj["tool_calls"], known)
        return (_not_strict(found[0]), "openai") if found else None
    if isinstance(obj.get("function"), dict):  # an OpenAI tool_call item
        found = _calls_from_json(obj["function"], known)
        return (_not_strict(found[0]), "openai") if found else None
    name_key = next((k for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if name_key is None:
        # {"get_weather": {"city": "X"}}: a single key naming a known tool
        if len(obj) == 1:
            ((key, val),) = obj.items()
            if key.lower() in known and isinstance(val, dict | type(None)):
                return [_Raw(key, _arguments(val))], "json"
        return None
    arg_key = next((k for k in _ARG_KEYS if k in obj), None)
    name = obj[name_key].strip()
    strict = set(obj) == {"name", "arguments"} and isinstance(obj["arguments"], dict) and name == obj["name"]
    return [_Raw(name, _arguments(obj.get(arg_key)), strict=strict)], "json"


def _bounded_int(text: str) -> int:
    if len(text) > _MAX_NUMBER_CHARS:
        raise _long_number(len(text))
    return int(text)


def _not_strict(raws: list[_Raw]) -> list[_Raw]:
    for raw in raws:
        raw.strict = False
    return raws


def _literal(node: ast.expr) -> Any:
    """A Python literal, with bare names read as strings (``true``/``null`` as JSON would); a number longer than
    :data:`_MAX_NUMBER_CHARS` is refused as it is in JSON."""
    for part in ast.walk(node):
        if isinstance(part, ast.Constant) and type(part.value) in (int, float, complex):
            if (length := (part.end_col_offset or 0) - part.col_offset) > _MAX_NUMBER_CHARS:
                raise _long_number(length)
    if isinstance(node, ast.Name):
        return _LenientJSON._CONSTANTS.get(node.id.lower(), node.id)
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _Unparsable(f"could not read the argument {ast.unparse(node)!r} as a value") from None


def _escape_newlines_in_strings(text: str) -> str:
    """Escape raw line breaks inside single-line quoted strings, as models write multi-line code in
    ``run_python(code="def f():\n    ...")`` with real newlines. Triple-quoted strings are left alone."""
    out, quote, i = [], None, 0
    while i < len(text):
        c = text[i]
        if quote is None:
            if text.startswith(('"""', "'''"), i):  # a triple-quoted string: copy it through
                end = text.find(text[i : i + 3], i + 3)
                end = len(text) if end < 0 else end + 3
                out.append(text[i:end])
                i = end
                continue
            if c in "\"'":
                quote = c
        elif c == "\\" and i + 1 < len(text):
            out.append(text[i : i + 2])
            i += 2
            continue
        elif c == quote:
            quote = None
        elif c == "\n":
            c = "\\n"
        out.append(c)
        i += 1
    return "".join(out)


def _python_call(text: str) -> _Raw:
    """Read ``name(arg, key=value)`` as a call; raises :class:`_Unparsable`."""
    text = text.strip()
    try:
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError:
            tree = ast.parse(_escape_newlines_in_strings(text), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        if "Exceeds the limit" in str(exc):  # Python refuses an int literal of more than 4,300 digits
            raise _long_number(max(len(run) for run in re.findall(r"\d+", text))) from None
        if "too many nested" in str(exc) or isinstance(exc, RecursionError | MemoryError):
            raise _Bound(
                f"brackets in {_clip(text, 30)!r} are nested deeper than Python's parser reads (its limit)"
            ) from None
        raise _Unparsable(f"could not read {_clip(text)!r} as a call like name(arg=value)") from None
    node = tree.body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name | ast.Attribute):
        raise _Unparsable(f"{_clip(text)!r} is not a call like name(arg=value)")
    name = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
    kwargs = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise _Unparsable("**kwargs cannot be used in a tool call")
        kwargs[kw.arg] = _literal(kw.value)
    return _Raw(name, kwargs, tuple(_literal(a) for a in node.args))


def _clip(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _closing_paren(text: str, start: int) -> int:
    """Index just past the parenthesis that closes the one at ``start`` (quotes respected), or -1."""
    depth, quote, i = 0, None, start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _body_calls(body: str, known: Mapping[str, Any]) -> list[_Raw]:
    """The calls inside a tag: JSON (one object or a list) or a Python-style call."""
    body = body.strip()
    unfenced = _strip_fence(body)
    body, was_fenced = unfenced, unfenced != body  # a fenced body is tolerated, not canonical
    if body[:1] in "{[":
        try:
            strict_obj = json.loads(body, parse_int=_bounded_int)
            strict = not was_fenced
        except (ValueError, RecursionError):  # deep nesting: the lenient reader says so plainly
            strict_obj, strict = None, False
        try:
            obj = strict_obj if strict else loads_lenient(body)
        except ValueError as exc:
            raise _Unparsable(f"could not read the JSON inside the tag: {exc}") from None
        found = _calls_from_json(obj, known)
        if found is None:
            raise _Unparsable('the JSON inside the tag needs "name" and "arguments" keys')
        for raw in found[0]:
            raw.strict = raw.strict and strict
        return found[0]
    return [_python_call(body)]


_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n?(.*?)\n?```$", re.S)


def _strip_fence(text: str) -> str:
    m = _FENCE.match(text.strip())
    return m.group(1) if m else text


# ----------------------------------------------------------------------------- finders

# Each run of whitespace can match in one way only ("\s*|?\s*" backtracked quadratically over "<" + spaces).
_OPEN = re.compile(r"<\s*(?:(\|)\s*)?(tool_call|function_call|call)\s*(?:\|\s*)?>", re.I)
_CLOSE = re.compile(r"<\s*(?:\|\s*)?/\s*(?:tool_call|function_call|call)\s*(?:\|\s*)?>", re.I)


def _find_tagged(text: str, known: Mapping[str, Any], notes: list[str]) -> tuple[list[_Raw], str] | None:
    opens = list(_OPEN.finditer(text))
    if not opens:
        return None
    calls: list[_Raw] = []
    canonical_tags = True
    for k, m in enumerate(opens):
        end = opens[k + 1].start() if k + 1 < len(opens) else len(text)
        close = _CLOSE.search(text, m.end(), end)
        body = text[m.end() : close.start() if close else end]
        if not body.strip():
            continue
        found = _body_calls(body, known)
        is_canonical_tag = m.group(0) == "<tool_call>" and close is not None and close.group(0) == "</tool_call>"
        canonical_tags &= is_canonical_tag
        if not is_canonical_tag:
            for raw in found:
                raw.strict = False
        calls.extend(found)
    if not calls:
        raise _Unparsable("the tool-call tag is empty")
    first = opens[0].group(2).lower()
    return calls, "tool_call" if first == "tool_call" else "call_tag"


# ReAct, read in one pass (a lazy regex with a look-ahead was quadratic on floods of newlines):
# "Action: NAME" ending its line, optionally "Action Input: …" on the next non-blank line, the input running to
# the next line that starts with Observation:, Thought: or Action:.
_REACT_HEAD = re.compile(r"Action[ \t]*:[ \t]*`*([A-Za-z_][\w.\-]*)`*[ \t]*(?:\n|\Z)", re.I)
_REACT_INPUT = re.compile(r"[ \t\n]*Action[ _]Input[ \t]*:[ \t]*", re.I)
_REACT_STOP = re.compile(r"^[ \t]*(?:Observation|Thought|Action)[ \t]*:", re.I | re.M)


def _find_react(text: str, known: Mapping[str, Any], notes: list[str]) -> tuple[list[_Raw], str] | None:
    if "action" not in text.lower():
        return None
    stops = [m.start() for m in _REACT_STOP.finditer(text)]
    calls, pos = [], 0
    while len(calls) <= MAX_CALLS and (m := _REACT_HEAD.search(text, pos)):
        pos = m.end()
        raw_input = ""
        if m.group(0).endswith("\n") and (inp := _REACT_INPUT.match(text, pos)):
            k = bisect.bisect_left(stops, inp.end())
            end = stops[k] if k < len(stops) else len(text)
            raw_input, pos = text[inp.end() : end], end
        calls.append(_react_call(m.group(1), _strip_fence(raw_input.strip())))
    return (calls, "react") if calls else None


def _react_call(name: str, raw_input: str) -> _Raw:
    """``Action Input`` as arguments: a JSON object (or nothing), else a plain value for the tool's one parameter,
    unquoted when it is one quoted string (``"New York"``) and taken as written otherwise (``New York``)."""
    if not raw_input or raw_input[0] in "{[":
        return _Raw(name, _arguments(raw_input))
    if raw_input[0] in "\"'":
        try:
            value = loads_lenient(raw_input)
        except ValueError:
            value = None
        if isinstance(value, str):
            return _Raw(name, {}, plain=value)
    return _Raw(name, {}, plain=raw_input)


def _find_json(text: str, known: Mapping[str, Any], notes: list[str]) -> tuple[list[_Raw], str] | None:
    calls: list[_Raw] = []
    fmt = "json"
    i, tried, scanned = 0, 0, 0
    budget = max(_JSON_SCAN_BUDGET * len(text), 8192)  # what all attempts together read: linear time
    while True:
        starts = [p for p in (text.find("{", i), text.find("[", i)) if p >= 0]
        if not starts:
            break
        if tried >= _MAX_JSON_STARTS or scanned >= budget:
            if not calls:
                notes.append(
                    f"the parser tries the first {_MAX_JSON_STARTS} '{{' or '[' of an action as JSON (its limit)"
                    if tried >= _MAX_JSON_STARTS
                    else f"the parser reads at most {budget:,} characters of JSON that is no call (its limit)"
                )
            break
        start = min(starts)
        tried += 1
        reader = _LenientJSON(text, start, start + budget - scanned)
        try:
            obj = reader.value()
        except (_Unparsable, RecursionError) as exc:
            if isinstance(exc, _Bound) and not notes:
                notes.append(str(exc))
            scanned += reader.i - start
            i = start + 1
            continue
        scanned += reader.i - start
        found = _calls_from_json(obj, known)
        if found is None:
            i = start + 1
            continue
        calls.extend(found[0])
        fmt = found[1] if found[1] == "openai" else fmt
        i = reader.i
    return (calls, fmt) if calls else None


def _find_python(text: str, known: Mapping[str, Any], notes: list[str]) -> tuple[list[_Raw], str] | None:
    if "(" not in text:
        return None
    lowered = text.lower()  # cheap prefilter: only names that occur at all go into the regex
    names = "|".join(re.escape(n) for n in sorted(known, key=len, reverse=True) if n in lowered)
    calls = []
    first_error: _Unparsable | None = None
    if names:
        done = 0  # end of the last candidate: names inside its arguments are not calls
        for m in re.finditer(rf"(?<![\w.])({names})\s*\(", text, re.I):
            if m.start() < done:
                continue
            end = _closing_paren(text, m.end() - 1)
            if end < 0:  # fatal, as a truncated call must not be dropped (and rescanning is quadratic)
                raise _Unparsable(f"unclosed parenthesis in {_clip(text[m.start() :])!r}")
            done = end
            try:
                calls.append(_python_call(text[m.start() : end]))
            except _Unparsable as exc:
                if m.end(1) == m.end() - 1:  # written as a call, "name(": a malformed call is fatal
                    raise
                first_error = first_error or exc  # prose such as "get_weather (the tool)": go on
        if not calls and first_error is not None:
            raise first_error
    if not calls:
        # An unknown name is worth an error only when the whole action is one call.
        whole = _strip_fence(text.strip())
        if re.fullmatch(r"[A-Za-z_][\w.]*\s*\(.*\)\s*;?", whole, re.S):
            try:
                calls.append(_python_call(whole.rstrip(";")))
            except _Unparsable:
                return None
    return (calls, "python") if calls else None


_FINDERS = (_find_tagged, _find_react, _find_json, _find_python)


# ----------------------------------------------------------------------------- entry point


def _tool_table(tools: Iterable[Tool | str] | None) -> dict[str, Tool | str]:
    return {(t if isinstance(t, str) else t.name).lower(): t for t in tools or ()}


def _lookup(name: str, known: Mapping[str, Tool | str]) -> Tool | str | None:
    return known.get(name.lower()) or known.get(name.lower().replace("-", "_"))


def _plain_parameter(spec: Tool | str, plain: str) -> str:
    """The parameter a plain ReAct input is for: the tool's only one, or its only required one."""
    name = spec if isinstance(spec, str) else spec.name
    if isinstance(spec, str):
        raise _Unparsable(f'{name}: write Action Input as a JSON object, e.g. {{"arg": "value"}}')
    params = spec.parameters
    if len(params) == 1:
        return params[0]
    required = [p for p in params if spec.arguments_model.model_fields[p].is_required()]
    if len(required) == 1:
        return required[0]
    if not params:
        raise _Unparsable(f"{name} takes no arguments, got Action Input {_clip(plain)!r}: leave it empty")
    example = json.dumps(dict.fromkeys(params, "..."))
    raise _Unparsable(
        f"{name} takes {len(params)} arguments ({', '.join(params)}): write Action Input as a JSON object, "
        f"e.g. {example}"
    )


def _resolve(raw: _Raw, known: Mapping[str, Tool | str]) -> ToolCall:
    if not known:
        if raw.positional:
            raise _Unparsable(f"{raw.name}: pass arguments by name, e.g. {raw.name}(arg=value)")
        if raw.plain is not None:
            raise _Unparsable(f'{raw.name}: write Action Input as a JSON object, e.g. {{"arg": "value"}}')
        return ToolCall(raw.name, raw.arguments)
    spec = _lookup(raw.name, known)
    if spec is None:
        names = [t if isinstance(t, str) else t.name for t in known.values()]
        close = difflib.get_close_matches(raw.name[:64], names, n=1, cutoff=0.5) or difflib.get_close_matches(
            raw.name[:64].lower(), [n.lower() for n in names], n=1, cutoff=0.5
        )
        hint = f" Did you mean '{names[[n.lower() for n in names].index(close[0].lower())]}'?" if close else ""
        raise _UnknownTool(f"unknown tool '{_clip(raw.name, 40)}'.{hint} Available tools: {', '.join(names)}")
    name = spec if isinstance(spec, str) else spec.name
    arguments = dict(raw.arguments)
    if raw.plain is not None:
        arguments[_plain_parameter(spec, raw.plain)] = raw.plain
    if raw.positional:
        if isinstance(spec, str):
            raise _Unparsable(f"{name}: pass arguments by name, e.g. {name}(arg=value)")
        if len(raw.positional) > len(spec.parameters):
            raise _Unparsable(
                f"{name} takes {len(spec.parameters)} argument(s) ({', '.join(spec.parameters) or 'none'}), "
                f"got {len(raw.positional)}"
            )
        for param, value in zip(spec.parameters, raw.positional, strict=False):
            if param in arguments:
                raise _Unparsable(f"{name}: argument '{param}' given twice")
            arguments[param] = value
    raw.strict = raw.strict and name == raw.name
    return ToolCall(name, arguments)


def parse_tool_calls(
    text: Any, tools: Iterable[Tool | str] | None = None, *, max_chars: int = MAX_ACTION_CHARS
) -> ParseResult:
    """Find the tool calls in ``text``. Never raises.

    Args:
        text: What the policy wrote (anything; a non-string is an error result).
        tools: The tools (or tool names) that exist. With them, names are matched in any case,
            positional arguments are mapped to parameters, and an unknown name gets a suggestion.
        max_chars: Longer text is rejected without being scanned.
    """
    if not isinstance(text, str):
        return ParseResult(error=f"an action must be text, got {type(text).__name__}")
    if len(text) > max_chars:
        return ParseResult(error=f"the action is {len(text):,} characters long; the limit is {max_chars:,}")
    text = text.replace("\x00", "")
    if not text.strip():
        return ParseResult(error="the action is empty: write a tool call")
    known = _tool_table(tools)
    notes: list[str] = []  # a bound that kept a finder from reading part of the text
    try:
        for finder in _FINDERS:
            found = finder(text, known, notes)
            if found:
                raws, fmt = found
                break
        else:
            why = f": {notes[0]}" if notes else ""
            return ParseResult(error=f"no tool call found in the action{why}", no_call=True)
        if len(raws) > MAX_CALLS:
            return ParseResult(error=f"{len(raws)} tool calls in one action; the limit is {MAX_CALLS}")
        calls = tuple(_resolve(raw, known) for raw in raws)
    except _UnknownTool as exc:  # no call of a known tool, if none of the names is one
        return ParseResult(error=str(exc)[:500], no_call=not any(_lookup(raw.name, known) for raw in raws))
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:  # _Unparsable is a ValueError
        return ParseResult(error=str(exc)[:500] or "could not read the tool call")
    canonical = fmt == "tool_call" and all(raw.strict for raw in raws)
    return ParseResult(calls=calls, format=fmt, canonical=canonical)


def format_instructions(tools: Sequence[Tool]) -> str:
    """The prompt text that teaches the canonical format, with an example using the first tool."""
    example = ToolCall(tools[0].name, {p: "..." for p in tools[0].parameters[:1]}) if tools else None
    lines = ["Call a tool by writing:", '<tool_call>{"name": TOOL, "arguments": {ARG: VALUE}}</tool_call>']
    if example:
        lines.append(f"For example: {example.to_text()}")
    return "\n".join(lines)
