"""The tolerant tool-call parser (agentgym.core.parser) and the Tool it resolves calls against."""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.core import parser
from agentgym.core.parser import ParseResult, parse_tool_calls
from agentgym.core.tools import Tool, ToolCall, ToolError, tool


@tool
def get_weather(city: str, unit: Literal["C", "F"] = "C") -> str:
    """Current weather for a city.

    Args:
        city: City name, e.g. "Zürich".
        unit: Temperature unit.
    """
    return f"18°{unit} in {city}"


@tool
def get_air_quality(city: str) -> str:
    """Air quality index for a city.

    Args:
        city: City name.
    """
    return f"AQI 42 in {city}"


@tool
def answer(suitable: bool, reason: str = "") -> str:
    """Give the final answer.

    Args:
        suitable: Whether the weather suits a picnic.
        reason: Why, in one sentence.
    """
    return "ok"


TOOLS = [get_weather, get_air_quality, answer]

W = "get_weather"
AQ = "get_air_quality"
SH = {"city": "Shanghai"}


def calls_of(result: ParseResult) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, dict(c.arguments)) for c in result.calls]


# ----------------------------------------------------------------------------- accepted formats

CANONICAL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Shanghai"}}</tool_call>'

# (text, expected calls, format, canonical)
ACCEPTED = {
    "canonical": (CANONICAL, [(W, SH)], "tool_call", True),
    "canonical-whitespace-inside-tag": (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Shanghai"}}\n</tool_call>',
        [(W, SH)],
        "tool_call",
        True,
    ),
    "canonical-in-prose": (
        f"I'll check the weather first.\n{CANONICAL}\nThen decide.",
        [(W, SH)],
        "tool_call",
        True,
    ),
    "canonical-true-literal": (
        '<tool_call>{"name": "answer", "arguments": {"suitable": true}}</tool_call>',
        [("answer", {"suitable": True})],
        "tool_call",
        True,
    ),
    "canonical-two-blocks": (
        CANONICAL + '\n<tool_call>{"name": "get_air_quality", "arguments": {"city": "Beijing"}}</tool_call>',
        [(W, SH), (AQ, {"city": "Beijing"})],
        "tool_call",
        True,
    ),
    "tool_call-list-in-one-block": (
        '<tool_call>[{"name": "get_weather", "arguments": {"city": "A"}}, '
        '{"name": "get_air_quality", "arguments": {"city": "B"}}]</tool_call>',
        [(W, {"city": "A"}), (AQ, {"city": "B"})],
        "tool_call",
        True,
    ),
    "tool_call-python-body": (
        '<tool_call>get_weather(city="Shanghai")</tool_call>',
        [(W, SH)],
        "tool_call",
        False,
    ),
    "tool_call-extra-key": (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Shanghai"}, "id": "c1"}</tool_call>',
        [(W, SH)],
        "tool_call",
        False,
    ),
    "tool_call-arguments-as-json-string": (
        '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Shanghai\\"}"}</tool_call>',
        [(W, SH)],
        "tool_call",
        False,
    ),
    "tool_call-missing-closing-tag": (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Shanghai"}}',
        [(W, SH)],
        "tool_call",
        False,
    ),
    "tool_call-missing-closing-tag-and-brace": (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Shanghai"}',
        [(W, SH)],
        "tool_call",
        False,
    ),
    "tool_call-uppercase-closing-tag": (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Shanghai"}}</TOOL_CALL>',
        [(W, SH)],
        "tool_call",
        False,
    ),
    "tool_call-fenced-body": (
        '<tool_call>\n```json\n{"name": "get_weather", "arguments": {"city": "Shanghai"}}\n```\n</tool_call>',
        [(W, SH)],
        "tool_call",
        False,
    ),
    "tool_call-openai-item-in-tag": (
        '<tool_call>{"type": "function", "function": '
        '{"name": "get_weather", "arguments": {"city": "Shanghai"}}}</tool_call>',
        [(W, SH)],
        "tool_call",
        False,
    ),
    "tool_call-padded-name": (
        '<tool_call>{"name": " get_weather ", "arguments": {"city": "Shanghai"}}</tool_call>',
        [(W, SH)],
        "tool_call",
        False,
    ),
    "tool_call-name-upper": (
        '<tool_call>{"name": "GET_WEATHER", "arguments": {"city": "Shanghai"}}</tool_call>',
        [(W, SH)],
        "tool_call",
        False,
    ),
    "tool_call-name-hyphen": (
        '<tool_call>{"name": "get-weather", "arguments": {"city": "Shanghai"}}</tool_call>',
        [(W, SH)],
        "tool_call",
        False,
    ),
    "single-quotes": (
        "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Shanghai'}}</tool_call>",
        [(W, SH)],
        "tool_call",
        False,
    ),
    "trailing-commas": (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Shanghai",},}</tool_call>',
        [(W, SH)],
        "tool_call",
        False,
    ),
    "unquoted-keys-and-strings": (
        "<tool_call>{name: get_weather, arguments: {city: Shanghai}}</tool_call>",
        [(W, SH)],
        "tool_call",
        False,
    ),
    "python-literals-True-None": (
        '<tool_call>{"name": "answer", "arguments": {"suitable": True, "reason": None}}</tool_call>',
        [("answer", {"suitable": True, "reason": None})],
        "tool_call",
        False,
    ),
    "call-tag-pipes": (
        '<|call|>get_weather(city="Shanghai")<|/call|>',
        [(W, SH)],
        "call_tag",
        False,
    ),
    "call-tag-plain": ('<call>get_weather(city="Shanghai")</call>', [(W, SH)], "call_tag", False),
    "call-tag-json": (
        '<call>{"name": "get_weather", "arguments": {"city": "Shanghai"}}</call>',
        [(W, SH)],
        "call_tag",
        False,
    ),
    "function_call-tag": (
        '<function_call>{"name": "get_weather", "arguments": {"city": "Shanghai"}}</function_call>',
        [(W, SH)],
        "call_tag",
        False,
    ),
    "mixed-tags-in-order": (
        CANONICAL + '<call>get_air_quality("Beijing")</call>',
        [(W, SH), (AQ, {"city": "Beijing"})],
        "tool_call",
        False,
    ),
    "python-keyword": (
        'get_weather(city="Shanghai", unit="F")',
        [(W, {"city": "Shanghai", "unit": "F"})],
        "python",
        False,
    ),
    "python-positional": (
        'get_weather("Shanghai", "F")',
        [(W, {"city": "Shanghai", "unit": "F"})],
        "python",
        False,
    ),
    "python-mixed-positional-keyword": (
        "get_weather('Shanghai', unit='F')",
        [(W, {"city": "Shanghai", "unit": "F"})],
        "python",
        False,
    ),
    "python-in-prose": ('Let me look: get_weather("Shanghai"). Done.', [(W, SH)], "python", False),
    "python-any-case": ('Get_Weather(city="Shanghai")', [(W, SH)], "python", False),
    "python-bare-word-and-true": (
        "answer(suitable=true, reason=sunny)",
        [("answer", {"suitable": True, "reason": "sunny"})],
        "python",
        False,
    ),
    "python-two-calls": (
        'get_weather(city="A"); get_air_quality(city="B")',
        [(W, {"city": "A"}), (AQ, {"city": "B"})],
        "python",
        False,
    ),
    "python-fenced": ('```python\nget_weather(city="Shanghai")\n```', [(W, SH)], "python", False),
    "python-namespaced": ('functions.get_weather(city="Shanghai")', [(W, SH)], "python", False),
    "python-tool-name-inside-string-arg": (
        'answer(suitable=True, reason="get_weather(city=X) said sunny")',
        [("answer", {"suitable": True, "reason": "get_weather(city=X) said sunny"})],
        "python",
        False,
    ),
    "python-after-prose-mention-with-parens": (
        'I would use get_weather (the weather tool) here: get_weather(city="Shanghai")',
        [(W, SH)],
        "python",
        False,
    ),
    "json-name-arguments": (
        '{"name": "get_weather", "arguments": {"city": "Shanghai"}}',
        [(W, SH)],
        "json",
        False,
    ),
    "json-function-parameters": (
        '{"function": "get_weather", "parameters": {"city": "Shanghai"}}',
        [(W, SH)],
        "json",
        False,
    ),
    "json-tool-args": (
        '{"tool": "get_weather", "args": {"city": "Shanghai"}}',
        [(W, SH)],
        "json",
        False,
    ),
    "json-single-key": ('{"get_weather": {"city": "Shanghai"}}', [(W, SH)], "json", False),
    "json-list": (
        '[{"name": "get_weather", "arguments": {"city": "A"}}, {"tool": "get_air_quality", "args": {"city": "B"}}]',
        [(W, {"city": "A"}), (AQ, {"city": "B"})],
        "json",
        False,
    ),
    "json-missing-closing-braces": (
        '{"name": "get_weather", "arguments": {"city": "Shanghai"',
        [(W, SH)],
        "json",
        False,
    ),
    "json-in-prose-single-quotes-trailing-commas": (
        "Sure! Here it is: {'name': 'get_weather', 'arguments': {'city': 'Shanghai',},} Hope that helps.",
        [(W, SH)],
        "json",
        False,
    ),
    "json-fenced": (
        'Calling:\n```json\n{"name": "get_weather", "arguments": {"city": "Shanghai"}}\n```',
        [(W, SH)],
        "json",
        False,
    ),
    "json-unicode-escape": (
        '{"name": "get_weather", "arguments": {"city": "\\u4e0a\\u6d77"}}',
        [(W, {"city": "上海"})],
        "json",
        False,
    ),
    "openai-arguments-string": (
        '{"tool_calls": [{"id": "c1", "type": "function", "function": '
        '{"name": "get_weather", "arguments": "{\\"city\\": \\"Shanghai\\"}"}}]}',
        [(W, SH)],
        "openai",
        False,
    ),
    "openai-two-calls": (
        '{"tool_calls": [{"type": "function", "function": '
        '{"name": "get_weather", "arguments": {"city": "A"}}}, '
        '{"type": "function", "function": '
        '{"name": "get_air_quality", "arguments": "{\\"city\\": \\"B\\"}"}}]}',
        [(W, {"city": "A"}), (AQ, {"city": "B"})],
        "openai",
        False,
    ),
    "react": (
        'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Shanghai"}',
        [(W, SH)],
        "react",
        False,
    ),
    "react-with-observation-after": (
        'Action: get_weather\nAction Input: {"city": "Shanghai"}\nObservation:',
        [(W, SH)],
        "react",
        False,
    ),
    "react-fenced-input": (
        'Action: get_weather\nAction Input: ```json\n{"city": "Shanghai"}\n```',
        [(W, SH)],
        "react",
        False,
    ),
    "react-two-actions": (
        'Action: get_weather\nAction Input: {"city": "A"}\nAction: get_air_quality\nAction Input: {"city": "B"}',
        [(W, {"city": "A"}), (AQ, {"city": "B"})],
        "react",
        False,
    ),
    "react-no-input": ("Action: get_weather", [(W, {})], "react", False),
    # a plain value goes to the tool's one parameter, or its one required parameter (get_weather's city)
    "react-plain-input": ("Action: get_weather\nAction Input: Shanghai", [(W, SH)], "react", False),
    "react-plain-input-one-parameter": ("Action: get_air_quality\nAction Input: Shanghai", [(AQ, SH)], "react", False),
    "react-plain-input-words": (
        "Thought: check.\nAction: get_weather\nAction Input: New York\nObservation:",
        [(W, {"city": "New York"})],
        "react",
        False,
    ),
    "react-plain-input-quoted": (
        'Action: get_weather\nAction Input: "New York"',
        [(W, {"city": "New York"})],
        "react",
        False,
    ),
    "react-plain-input-single-quoted": (
        "Action: get_weather\nAction Input: 'Zürich'",
        [(W, {"city": "Zürich"})],
        "react",
        False,
    ),
    "react-plain-input-half-quoted": (
        'Action: get_weather\nAction Input: "New" York',
        [(W, {"city": '"New" York'})],
        "react",
        False,
    ),
    "react-plain-input-fenced": ("Action: get_weather\nAction Input: ```\nShanghai\n```", [(W, SH)], "react", False),
    "react-plain-input-bool": ("Action: answer\nAction Input: yes", [("answer", {"suitable": "yes"})], "react", False),
    "react-plain-then-json": (
        'Action: get_weather\nAction Input: A\nAction: get_air_quality\nAction Input: {"city": "B"}',
        [(W, {"city": "A"}), (AQ, {"city": "B"})],
        "react",
        False,
    ),
    "null-bytes-removed": (CANONICAL.replace("get_", "get\x00_"), [(W, SH)], "tool_call", True),
}


@pytest.mark.parametrize(("text", "expected", "fmt", "canonical"), ACCEPTED.values(), ids=ACCEPTED.keys())
def test_accepted_formats(text: str, expected: list, fmt: str, canonical: bool) -> None:
    result = parse_tool_calls(text, TOOLS)
    assert result.error is None, result.error
    assert result.ok
    assert calls_of(result) == expected
    assert result.format == fmt
    assert result.canonical is canonical
    assert all(isinstance(c, ToolCall) for c in result.calls)


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Shanghai"}}</tool_call>',
        'get_weather(city="Shanghai")',
        '{"tool": "get_weather", "args": {"city": "Shanghai"}}',
    ],
)
def test_tool_names_as_strings(text: str) -> None:
    """Plain names work too (no signature, so keyword arguments only)."""
    result = parse_tool_calls(text, ["get_weather", "get_air_quality"])
    assert calls_of(result) == [(W, SH)]


def test_no_tools_keeps_the_name_as_written() -> None:
    result = parse_tool_calls('<tool_call>{"name": "Anything", "arguments": {"x": 1}}</tool_call>')
    assert calls_of(result) == [("Anything", {"x": 1})]
    assert result.canonical is True


def test_canonical_text_round_trips() -> None:
    call = ToolCall(W, {"city": "Zürich", "unit": "F"})
    result = parse_tool_calls(call.to_text(), TOOLS)
    assert result.calls == (call,)
    assert result.canonical is True


# ----------------------------------------------------------------------------- rejected actions

# (text, substrings the error must contain)
REJECTED = {
    "unknown-tool-typo-tagged": (
        '<tool_call>{"name": "get_wether", "arguments": {"city": "Shanghai"}}</tool_call>',
        ["unknown tool 'get_wether'", "Did you mean 'get_weather'?"],
    ),
    "unknown-tool-typo-python": ('get_wether(city="Shanghai")', ["Did you mean 'get_weather'?"]),
    "unknown-tool-closest-other": (
        '{"name": "air_quality", "arguments": {}}',
        ["Did you mean 'get_air_quality'?"],
    ),
    "unknown-tool-case-typo": (
        '{"name": "GET_WHEATHER", "arguments": {}}',
        ["Did you mean 'get_weather'?"],
    ),
    "unknown-tool-no-close-match": (
        '{"name": "zzzzqqq", "arguments": {}}',
        ["unknown tool 'zzzzqqq'", "Available tools: get_weather, get_air_quality, answer"],
    ),
    "too-many-positional": (
        'get_weather("a", "C", "extra")',
        ["get_weather takes 2 argument(s)", "got 3"],
    ),
    "positional-and-keyword-clash": ('get_weather("a", city="b")', ["'city' given twice"]),
    "kwargs-splat": ('get_weather(**{"city": "a"})', ["**kwargs"]),
    "non-literal-argument": ("get_weather(city=open('x'))", ["could not read the argument"]),
    "unclosed-paren": ('get_weather(city="Shanghai"', ["unclosed parenthesis"]),
    "unclosed-paren-after-good-call": ('get_weather(city="A") get_air_quality(city="B"', ["unclosed parenthesis"]),
    "malformed-call-before-good-call": ('get_weather(city=) get_air_quality(city="B")', ["get_weather(city=)"]),
    "arguments-not-object": (
        '{"name": "get_weather", "arguments": ["Shanghai"]}',
        ["must be a JSON object"],
    ),
    "react-list-input": (
        'Action: get_weather\nAction Input: ["Shanghai"]',
        ["must be a JSON object"],
    ),
    "react-plain-input-unknown-tool": ("Action: get_wether\nAction Input: Shanghai", ["Did you mean 'get_weather'?"]),
    "empty-tag": ("<tool_call></tool_call>", ["empty"]),
    "open-tag-only": ("<tool_call>", ["empty"]),
    "closing-tag-only": ("</tool_call>", ["no tool call found"]),
    "invalid-json-in-tag": (
        '<tool_call>{"name": "get_weather", "arguments": {"city": @}}</tool_call>',
        ["JSON"],
    ),
    "deep-nesting-in-tag": ("<tool_call>" + "[" * 10_000 + "</tool_call>", ["nested too deeply"]),
    "deep-objects-in-tag": ("<tool_call>" + '{"name": ' * 3_000, ["nested too deeply"]),
    "tag-json-without-name": ('<tool_call>{"city": "Shanghai"}</tool_call>', ['"name"']),
    "prose-only": ("I think it will be sunny tomorrow.", ["no tool call found"]),
    "too-many-calls": ('get_weather(city="X")\n' * 17, ["17 tool calls", "limit is 16"]),
    "empty": ("", ["empty"]),
    "whitespace": (" \n\t  \r\n", ["empty"]),
    "only-null-bytes": ("\x00\x00", ["empty"]),
}


@pytest.mark.parametrize(("text", "fragments"), REJECTED.values(), ids=REJECTED.keys())
def test_rejected_actions(text: str, fragments: list[str]) -> None:
    result = parse_tool_calls(text, TOOLS)
    assert not result.ok
    assert isinstance(result.error, str) and result.error
    for fragment in fragments:
        assert fragment in result.error
    assert result.calls == ()
    assert result.format is None
    assert result.canonical is False


@tool
def convert(amount: float, currency: str) -> str:
    """Convert money.

    Args:
        amount: How much.
        currency: To which currency.
    """
    return "ok"


@tool
def list_cities() -> str:
    """All cities."""
    return "A, B"


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("Action: convert\nAction Input: 5 EUR", ["convert takes 2 arguments (amount, currency)", '{"amount": "...",']),
        ("Action: list_cities\nAction Input: all of them", ["list_cities takes no arguments", "leave it empty"]),
    ],
    ids=["two-required", "no-parameters"],
)
def test_react_plain_input_without_one_parameter_to_take_it_is_explained(text: str, fragments: list[str]) -> None:
    result = parse_tool_calls(text, [*TOOLS, convert, list_cities])
    assert result.calls == () and result.error is not None and result.no_call is False
    for fragment in fragments:
        assert fragment in result.error


@pytest.mark.parametrize("tools", [None, ["get_weather"]], ids=["none", "names-only"])
def test_react_plain_input_needs_a_signature(tools: list | None) -> None:
    result = parse_tool_calls("Action: get_weather\nAction Input: Shanghai", tools)
    assert result.error is not None and "write Action Input as a JSON object" in result.error


def test_react_plain_input_validates_like_any_call() -> None:
    """The plain value is coerced or refused by the tool's model, as a JSON value would be."""
    (call,) = parse_tool_calls("Action: answer\nAction Input: false", TOOLS).calls
    assert answer.validate(call.arguments) == {"suitable": False, "reason": ""}
    (call,) = parse_tool_calls("Action: answer\nAction Input: perhaps", TOOLS).calls
    with pytest.raises(ToolError, match="argument 'suitable' must be boolean"):
        answer.validate(call.arguments)


@pytest.mark.parametrize(
    ("text", "no_call"),
    [
        ("I think it will be sunny tomorrow.", True),
        ("```python\nprint(sorted([3, 1, 2]))\n```", True),  # print is no tool
        ('{"name": "alice", "age": 3}', True),
        ('get_wether(city="A")', True),
        ('get_wether(city="A") get_weather(city="B")', False),  # one known tool was called
        ('get_weather(city="A"', False),  # a malformed call of a known tool
        ('<tool_call>{"name": "get_weather", "arguments": {"city": @}}</tool_call>', False),
        ("", False),
        ('get_weather(city="A")', False),
    ],
)
def test_no_call_says_whether_any_known_tool_was_called(text: str, no_call: bool) -> None:
    """``no_call`` lets a task read text that holds no tool call (``ToolEnv.fallback_call``) without
    overriding the error of a malformed call of a real tool."""
    assert parse_tool_calls(text, TOOLS).no_call is no_call


@pytest.mark.parametrize("tools", [None, [], ["get_weather"]], ids=["none", "empty", "names-only"])
def test_positional_arguments_need_a_signature(tools: list | None) -> None:
    result = parse_tool_calls('get_weather("Shanghai")', tools)
    assert result.error is not None
    assert "pass arguments by name" in result.error
    # ... while keyword arguments are fine without one
    assert calls_of(parse_tool_calls('get_weather(city="Shanghai")', tools)) == [(W, SH)]


@pytest.mark.parametrize("value", [None, 3, 2.5, b"bytes", ["get_weather"], {"name": "get_weather"}])
def test_non_str_input_is_an_error_result(value: Any) -> None:
    result = parse_tool_calls(value, TOOLS)
    assert not result.ok
    assert type(value).__name__ in result.error
    assert result.calls == ()


def test_text_over_max_chars_is_rejected_without_scanning(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: Any) -> None:
        raise AssertionError("a finder ran on an over-long action")

    monkeypatch.setattr(parser, "_FINDERS", (boom,))
    text = CANONICAL + " " * 100
    result = parse_tool_calls(text, TOOLS, max_chars=len(CANONICAL))
    assert result.error is not None
    assert f"{len(text):,} characters" in result.error
    assert f"limit is {len(CANONICAL):,}" in result.error
    default = parse_tool_calls("x" * (parser.MAX_ACTION_CHARS + 1), TOOLS)
    assert default.error is not None and "limit" in default.error


def test_text_at_max_chars_is_parsed() -> None:
    result = parse_tool_calls(CANONICAL, TOOLS, max_chars=len(CANONICAL))
    assert calls_of(result) == [(W, SH)]


@pytest.mark.parametrize(
    "text",
    [
        "[" * 10_000,
        "{" * 30_000,
        '{"name": ' * 3_000,
        "get_weather(" + "(" * 5_000 + ")" * 5_001,
        "(" * 20_000,
    ],
    ids=["brackets", "braces", "nested-name", "nested-parens", "parens"],
)
def test_deep_nesting_is_an_error_not_a_crash(text: str) -> None:
    result = parse_tool_calls(text, TOOLS)
    assert result.error is not None and result.calls == ()


@pytest.mark.parametrize(
    "text",
    [
        "get_weather(" * 2_700,
        "get_weather('" * 2_500,
        "get_weather (x) " * 2_000,
        '{"a": ' * 5_000,
        "Action: a\nAction Input: {\n" * 1_100,
        "<call>{" * 4_000,
    ],
    ids=["open-calls", "open-calls-quoted", "prose-parens", "open-objects", "react", "open-tags"],
)
def test_hostile_input_at_the_length_limit_is_fast(text: str) -> None:
    """Work stays about linear in the text (a quadratic rescan of 32K chars takes seconds)."""
    start = time.perf_counter()
    result = parse_tool_calls(text, TOOLS)
    assert time.perf_counter() - start < 1.0
    assert result.error is not None


# ----------------------------------------------------------------------------- Tool


def test_tool_schema_is_openai_style() -> None:
    assert isinstance(get_weather, Tool)
    assert get_weather.name == "get_weather"
    assert get_weather.parameters == ("city", "unit")
    assert get_weather.schema == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": 'City name, e.g. "Zürich".'},
                    "unit": {
                        "type": "string",
                        "enum": ["C", "F"],
                        "default": "C",
                        "description": "Temperature unit.",
                    },
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }


def test_tool_schema_bool_and_default() -> None:
    params = answer.schema["function"]["parameters"]
    assert params["properties"]["suitable"] == {
        "type": "boolean",
        "description": "Whether the weather suits a picnic.",
    }
    assert params["properties"]["reason"]["default"] == ""
    assert params["required"] == ["suitable"]
    assert answer.signature == 'answer(suitable: boolean, reason: string = "")'


def test_tool_is_still_callable() -> None:
    assert get_weather("Oslo", unit="F") == "18°F in Oslo"


@tool
def typed(n: int, s: str, flag: bool) -> str:
    """A tool with one argument of each basic type.

    Args:
        n: A count.
        s: A label.
        flag: A switch.
    """
    return ""


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"n": "12", "s": 12, "flag": "yes"}, {"n": 12, "s": "12", "flag": True}),
        ({"n": 12, "s": "x", "flag": "true"}, {"n": 12, "s": "x", "flag": True}),
        ({"n": 12.0, "s": "x", "flag": "no"}, {"n": 12, "s": "x", "flag": False}),
        ({"n": 0, "s": "", "flag": 1}, {"n": 0, "s": "", "flag": True}),
    ],
)
def test_validate_coerces(arguments: dict, expected: dict) -> None:
    validated = typed.validate(arguments)
    assert validated == expected
    assert [type(v) for v in validated.values()] == [int, str, bool]


def test_validate_fills_defaults_and_checks_enum() -> None:
    assert get_weather.validate({"city": "Oslo"}) == {"city": "Oslo", "unit": "C"}
    with pytest.raises(ToolError, match=r"argument 'unit' must be one of \"C\", \"F\", got \"K\""):
        get_weather.validate({"city": "Oslo", "unit": "K"})


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"s": "x", "flag": True}, "typed: missing required argument 'n' (integer)"),
        ({"n": "abc", "s": "x", "flag": True}, "argument 'n' must be integer, got \"abc\""),
        ({"n": 1.5, "s": "x", "flag": True}, "argument 'n' must be integer, got 1.5"),
        ({"n": 1, "s": "x", "flag": "maybe"}, "argument 'flag' must be boolean, got \"maybe\""),
        ({"n": 1, "s": ["x"], "flag": True}, "argument 's' must be string"),
        (
            {"n": 1, "s": "x", "flag": True, "extra": 1},
            "unexpected argument 'extra' (typed takes: n, s, flag)",
        ),
    ],
)
def test_validate_errors_name_argument_and_type(arguments: dict, message: str) -> None:
    with pytest.raises(ToolError) as excinfo:
        typed.validate(arguments)
    assert message in str(excinfo.value)


def test_validate_reports_every_problem() -> None:
    with pytest.raises(ToolError) as excinfo:
        typed.validate({"n": "abc", "zzz": 1})
    text = str(excinfo.value)
    for fragment in (
        "'n' must be integer",
        "missing required argument 's'",
        "missing required argument 'flag'",
        "'zzz'",
    ):
        assert fragment in text


def test_tool_rejects_var_args() -> None:
    def splat(*args: int) -> None:
        pass

    with pytest.raises(TypeError, match="args"):
        Tool(splat)


def test_parsed_then_validated_end_to_end() -> None:
    result = parse_tool_calls("answer('yes', reason=12)", TOOLS)
    (call,) = result.calls
    assert answer.validate(call.arguments) == {"suitable": True, "reason": "12"}


# ----------------------------------------------------------------------------- fuzzing

FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<|call|>",
    "<|/call|>",
    "<call>",
    "</call>",
    "<function_call>",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    '"',
    "'",
    "`",
    "```",
    "```json\n",
    ":",
    ",",
    "=",
    "\\",
    "\\u",
    "\\u12",
    "\x00",
    "\n",
    " ",
    '"name"',
    '"arguments"',
    '"tool_calls"',
    '"function"',
    "name",
    "arguments",
    "Action:",
    "Action Input:",
    "Observation:",
    "get_weather",
    "GET_WEATHER",
    "get_air_quality",
    "answer",
    "get_wether",
    "city",
    "Shanghai",
    "true",
    "True",
    "None",
    "null",
    "1",
    "-2.5e3",
    "**",
    "*",
    ";",
    ".",
    "functions.",
    "中文",
    "\ud7ff",
    "😀",
]


def _check(result: ParseResult) -> None:
    assert isinstance(result, ParseResult)
    if result.error is None:
        assert len(result.calls) >= 1
        assert len(result.calls) <= parser.MAX_CALLS
        assert result.format in {"tool_call", "call_tag", "react", "openai", "json", "python"}
        for call in result.calls:
            assert isinstance(call.name, str) and call.name
            assert isinstance(call.arguments, dict)
            assert all(isinstance(k, str) for k in call.arguments)
    else:
        assert isinstance(result.error, str) and result.error
        assert result.calls == ()
        assert result.canonical is False


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_fuzz_any_text(text: str) -> None:
    _check(parse_tool_calls(text, TOOLS))
    _check(parse_tool_calls(text))


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=3), max_size=40).map("".join))
def test_fuzz_fragments(text: str) -> None:
    _check(parse_tool_calls(text, TOOLS))
    _check(parse_tool_calls(text, ["get_weather"]))


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=12,
    ),
    st.sampled_from(["get_weather", "answer", "GET_WEATHER", "nope"]),
)
def test_fuzz_arguments_round_trip_or_error(arguments: Any, name: str) -> None:
    """Any JSON value as the arguments of a canonical call: the exact value back, or an error."""
    text = f'<tool_call>{{"name": "{name}", "arguments": {json.dumps(arguments)}}}</tool_call>'
    result = parse_tool_calls(text, TOOLS)
    _check(result)
    if name == "nope":
        assert result.error is not None
        if isinstance(arguments, dict):
            assert "unknown tool 'nope'" in result.error
    elif isinstance(arguments, dict):
        assert result.calls[0].arguments == arguments
        assert result.canonical is (name == name.lower())
    elif arguments is None:  # "arguments": null reads as no arguments, tolerated but not canonical
        assert result.calls[0].arguments == {}
        assert result.canonical is False
    elif not isinstance(arguments, str):  # a string is read as JSON text: either outcome is fine
        assert result.error is not None and "must be a JSON object" in result.error


@pytest.mark.parametrize(
    "text, code",
    [
        ('run_python(code="def f(x):\n    return x")', "def f(x):\n    return x"),
        ("run_python('for i in range(2):\n    print(i)')", "for i in range(2):\n    print(i)"),
        ('run_python(code="""a = 1\nprint(\'x\\n\')""")', "a = 1\nprint('x\n')"),  # Python's own escapes
        ('run_python(code="s = \\"q\\"\nprint(s)")', 's = "q"\nprint(s)'),
    ],
)
def test_raw_newlines_inside_python_call_strings_are_read(text, code):
    @tool
    def run_python(code: str) -> str:
        """Run a program."""

    result = parse_tool_calls(text, [run_python])
    assert result.error is None and result.calls[0].arguments == {"code": code}


def test_a_call_after_an_unclosed_brace_is_still_found():
    """Bounding the JSON reader's total work must not cost the common case: prose with a stray '{' first."""
    text = "I think {maybe this: " + "x" * 5000 + ' {"name": "move", "arguments": {"direction": "up"}}'
    result = parse_tool_calls(text, ["move"])
    assert [(c.name, c.arguments) for c in result.calls] == [("move", {"direction": "up"})]
