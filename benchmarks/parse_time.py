"""Parse time per action of ``agentgym.parse_tool_calls``, for each accepted call format.

Every case calls ``parse_tool_calls(text, tools)`` directly: ``ToolEnv`` memoises parses per
action string, so this is the cost of a *new* action string (e.g. each LLM sample), not of a
repeated menu action. The peer is ``json.loads`` of the canonical call's inner JSON, the floor
for reading ``{"name": ..., "arguments": ...}``; the ratio column is parse time / json.loads time.

Timing uses ``timeit``: ``autorange`` estimates the cost of one call, the loop count is set so one
repeat takes about ``--target`` seconds, and the best of ``--repeat`` repeats is reported (the
minimum is the one least disturbed by other processes).

    python benchmarks/parse_time.py [--repeat 5] [--target 0.1]
"""

from __future__ import annotations

import argparse
import json
import timeit

from agentgym import parse_tool_calls, tool


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: City name.
    """
    return f"Sunny in {city}"


@tool
def move(direction: str) -> str:
    """Move one cell.

    Args:
        direction: up, right, down or left.
    """
    return f"moved {direction}"


TOOLS = [get_weather, move]
INNER = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
CANONICAL = f"<tool_call>{INNER}</tool_call>"
_SENTENCE = (
    "The weather in most cities depends on the season, the altitude and the distance to the sea, "
    "and a careful agent would look it up instead of guessing. "
)
PROSE_30KB = (_SENTENCE * (30_000 // len(_SENTENCE) + 1))[:30_000]

FUNCTION = '{"function": "get_weather", "parameters": {"city": "Paris"}}'
OPENAI_FN = {"name": "get_weather", "arguments": '{"city": "Paris"}'}  # arguments: a JSON string
OPENAI = json.dumps({"tool_calls": [{"type": "function", "function": OPENAI_FN}]})
REACT = 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Paris"}'
LENIENT = "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Paris',},}</tool_call>"
UNKNOWN = '<tool_call>{"name": "get_wether", "arguments": {"city": "Paris"}}</tool_call>'
PROSE_AROUND = f"Let me check first.\n{CANONICAL}\nThen I answer."

# (label, action text, expected ParseResult.format or "error")
CASES: list[tuple[str, str, str]] = [
    ("canonical <tool_call> JSON", CANONICAL, "tool_call"),
    ("<|call|> python call", '<|call|>get_weather(city="Paris")<|/call|>', "call_tag"),
    ("<call> JSON", f"<call>{INNER}</call>", "call_tag"),
    ("bare python call", 'get_weather(city="Paris")', "python"),
    ("JSON name/arguments", INNER, "json"),
    ("JSON function/parameters", FUNCTION, "json"),
    ("OpenAI tool_calls", OPENAI, "openai"),
    ("ReAct", REACT, "react"),
    ("fenced JSON", f"```json\n{INNER}\n```", "json"),
    ("lenient JSON (' and trailing ,)", LENIENT, "tool_call"),
    ("prose around canonical call", PROSE_AROUND, "tool_call"),
    ("error: unknown tool", UNKNOWN, "error"),
    ("error: 30 KB prose, no call", PROSE_30KB, "error"),
]


def best_per_call(fn, repeat: int, target: float) -> float:
    """Seconds per call: best of ``repeat`` timeit runs of about ``target`` seconds each."""
    timer = timeit.Timer(fn)
    number, elapsed = timer.autorange()
    number = max(1, round(target * number / elapsed))
    return min(timer.repeat(repeat=repeat, number=number)) / number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timeit repeats (the best is kept)")
    parser.add_argument("--target", type=float, default=0.1, help="seconds per repeat")
    args = parser.parse_args()

    for label, text, expected in CASES:  # make sure each case exercises the path it is named after
        result = parse_tool_calls(text, TOOLS)
        got = "error" if result.error else result.format
        assert got == expected, f"{label}: expected {expected}, got {got} ({result.error})"

    peer = best_per_call(lambda: json.loads(INNER), args.repeat, args.target)
    print(f"json.loads(inner canonical JSON): {peer * 1e6:.2f} µs (the 1.0× reference)\n")
    print(f"{'format':<34} {'chars':>6} {'µs/parse':>10} {'× json.loads':>13}")
    for label, text, _ in CASES:
        t = best_per_call(lambda text=text: parse_tool_calls(text, TOOLS), args.repeat, args.target)
        print(f"{label:<34} {len(text):>6} {t * 1e6:>10.1f} {t / peer:>12.0f}×")


if __name__ == "__main__":
    main()
