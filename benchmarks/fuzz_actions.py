"""Fuzzing: mutated tool calls sent to every env's ``step``, which must never raise, never answer with an
observation that is not valid UTF-8, and stay fast on any text.

Each env gets ``--actions`` actions (100,000 by default). An action starts as a valid call of that env — its
canonical menu and oracle actions, each rewritten in every format the parser accepts (``<tool_call>`` JSON,
``<|call|>`` / ``<call>`` / ``<function_call>`` tags, Python calls with keyword or positional arguments, JSON
keyed ``name``/``function``/``tool``, OpenAI ``tool_calls``, ReAct, Markdown fences, lenient JSON, any case,
several calls in one action) — and then gets 1 to 4 mutations: byte flips (decoded with ``surrogateescape``,
so broken UTF-8 becomes lone surrogates), insertions of brackets, quotes, newlines, lone surrogates, control
characters, huge or odd numbers and format markers, long runs of one character, truncations, repetitions,
splices of two actions, and blow-ups to up to 64 KB (twice the parser's 32,768-character limit). Episodes are
reset when they end.

Per env it reports exceptions (must be 0; each one's action is written to ``fuzz_actions_failures.jsonl``
with its env, seed and episode state, a ready reproducer), observations or ``info`` texts that are not valid
UTF-8 (must be 0), and the step time: max, p99.9 and median, and the 5 slowest actions, each timed again on a
fresh env (which tells a slow action from a busy machine; ``--replay ENV:STEP:EPISODE_SEED`` prints one whole:
the actions are a function of the seed alone). Probes then try each format marker followed by a run of 8,000
whitespace characters, on purpose.

CodeSandbox's sandbox is replaced by :class:`EchoSandbox` (in-process: it echoes the submitted code back as
the program's output and test results, so hostile text also flows through the env's rendering of program
output) — the benchmark measures the env's parse / validate / render path, not process isolation
(``sandbox_latency.py`` times the sandbox). ``--real-sandbox`` uses the real one (then give fewer actions:
each run of code costs tens of milliseconds).

    python benchmarks/fuzz_actions.py [--actions 100000] [--seed 0] [--envs CliffWalk WeatherRun] [--real-sandbox]
    python benchmarks/fuzz_actions.py --replay agentgym/SQLLookup-v0:STEP:EPISODE_SEED   # one slow action again
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import platform
import random
import re
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from tqdm.auto import tqdm

import agentgym
from agentgym.core.tools import ToolCall
from agentgym.envs.sandbox import SandboxLimits, SandboxResult, TestOutcome, TestReport

RESULTS = Path(__file__).parent / "results"
MAX_CHARS = 65_536

ENVS: dict[str, dict[str, Any]] = {
    "agentgym/CliffWalk-v0": {},
    "agentgym/WeatherRun-v0": {"split": "test"},
    "agentgym/SQLLookup-v0": {"split": "test"},
    "agentgym/CodeSandbox-v0": {"split": "test"},
}


class EchoSandbox:
    """A stand-in for :class:`agentgym.envs.sandbox.Sandbox` for this benchmark only: runs nothing, answers at once.

    ``run`` reports the code itself as the program's stdout (and its first line as an uncaught exception's
    message, every other run); ``run_tests`` fails or passes each test by a hash of the code, with the code's
    opening as the value returned. The env renders these exactly as it renders real program output."""

    limits = SandboxLimits()

    def run(self, code: str, *, timeout: float | None = None) -> SandboxResult:
        failed = hash(code) % 2 == 1
        error = {"error": "ValueError", "message": code.split("\n", 1)[0][:200], "line": 1} if failed else None
        return SandboxResult(
            stdout=code[:4000],
            stderr=code[-200:] if failed else "",
            exit_code=1 if failed else 0,
            signal=None,
            timed_out=False,
            killed=None,
            duration=0.0,
            layer="echo (benchmark stand-in)",
            error=error,
        )

    def run_tests(self, code: str, tests: Any, *, timeout: float | None = None) -> TestReport:
        outcomes = [
            TestOutcome(call, expected, passed=hash((code, call)) % 3 == 0, got=repr(code[:60]))
            for call, expected in tests
        ]
        return TestReport(outcomes=outcomes, result=self.run(code))


# ------------------------------------------------------------------ seeds: valid calls in every accepted format


def _python_call(call: ToolCall, positional: bool = False) -> str:
    items = call.arguments.items()
    args = [repr(v) for _, v in items] if positional else [f"{k}={v!r}" for k, v in items]
    return f"{call.name}({', '.join(args)})"


def formats(call: ToolCall) -> list[str]:
    """``call`` written in each format the parser accepts (see ``agentgym/core/parser.py`` and DESIGN.md)."""
    args = json.dumps(call.arguments, ensure_ascii=False)
    inner = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
    unquoted = ", ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in call.arguments.items())
    lenient = f"{{'name': '{call.name}', 'arguments': {{{unquoted},}},}}"  # single quotes, bare keys, commas
    openai = {"tool_calls": [{"type": "function", "function": {"name": call.name, "arguments": args}}]}
    return [
        call.to_text(),
        f"<tool_call>{_python_call(call)}</tool_call>",
        f"<tool_call>{inner}",  # no closing tag
        f"<|call|>{_python_call(call)}<|/call|>",
        f"<call>{_python_call(call)}</call>",
        f"<function_call>{inner}</function_call>",
        _python_call(call),
        _python_call(call, positional=True),
        _python_call(ToolCall(call.name.upper(), call.arguments)),
        inner,
        json.dumps({"function": call.name, "parameters": call.arguments}, ensure_ascii=False),
        json.dumps({"tool": call.name, "args": call.arguments}, ensure_ascii=False),
        json.dumps([{"name": call.name, "arguments": call.arguments}], ensure_ascii=False),
        json.dumps(openai, ensure_ascii=False),
        f"Thought: let me act.\nAction: {call.name}\nAction Input: {args}",
        f"Sure.\n```json\n{inner}\n```\nDone.",
        f"<tool_call>{lenient}</tool_call>",
        f"I will call it now. {call.to_text()} and that is all.",
        call.to_text() + "\n" + _python_call(call),
    ]


def seed_actions(env_id: str, kwargs: dict[str, Any], make: Callable[[], gym.Env], episodes: int = 8) -> list[str]:
    """The env's menu and a few oracle episodes' actions, each in every accepted format."""
    from agentgym.core.parser import parse_tool_calls

    env = make()
    base = env.unwrapped
    texts: list[str] = []
    for i in range(episodes):
        obs, _ = env.reset(seed=i)
        try:
            texts += base.action_menu()
        except (NotImplementedError, ValueError):
            pass
        oracle = base.oracle()
        for _ in range(12):
            action = oracle.predict(obs)[0]
            texts.append(action)
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
    calls = {c.to_text(): c for t in texts for c in parse_tool_calls(t, base.tools.values()).calls}
    env.close()
    out = sorted(set(texts))
    for call in calls.values():
        out += formats(call)
    return out


# ------------------------------------------------------------------ mutations

# fmt: off
INSERTS = [
    *"{}[]()<>\"'`,:;=\\\n\r\t ",
    "\ud800", "\udfff", "\udc80", "\ud83d", "\x00", "\x1b[2J", "\x7f", "\x85", "\u2028", "\u202e", "\ufeff",
    "\U0001f600", "e\u0301", "9" * 400, "9" * 5000, "1e309", "-0", "NaN", "Infinity", "-1e-400", "0x1F", "1_000",
    "true", "None", "null", "[" * 200, "{" * 200, '{"a":' * 100, "<tool_call>", "</tool_call>", "<|call|>",
    "<|/call|>", "Action:", "Action Input:", "```", '"name":', '"arguments":', "\\u", "\\ud800", "\\x", "%s%n",
    "${jndi:x}", "'; DROP TABLE t; --", "\n" * 50,
]
# fmt: on


def mutate(text: str, other: str, rng: random.Random) -> str:
    """One random mutation of ``text`` (``other``: a second action, for splices)."""
    kind = rng.randrange(10)
    n = len(text)
    at = rng.randint(0, n)
    if kind == 0 and n:  # flip a bit of one UTF-8 byte; broken UTF-8 decodes to lone surrogates
        data = bytearray(text.encode("utf-8", "surrogatepass"))
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return data.decode("utf-8", "surrogateescape")
    if kind in (1, 2):
        return text[:at] + rng.choice(INSERTS) + text[at:]
    if kind == 3:  # truncate
        return text[:at]
    if kind == 4 and n:  # repeat a slice
        i = rng.randrange(n)
        j = min(n, i + rng.randint(1, 64))
        return text[:i] + text[i:j] * rng.randint(2, 200) + text[j:]
    if kind == 5:  # splice two actions
        return text[:at] + other[rng.randint(0, len(other)) :]
    if kind == 6 and n:  # a random code point somewhere
        i = rng.randrange(n)
        return text[:i] + chr(rng.choice([rng.randrange(0x20, 0x7F), rng.randrange(0x80, 0x10FFFF)])) + text[i + 1 :]
    if kind == 7:  # case
        return text.upper() if rng.random() < 0.5 else text.swapcase()
    if kind == 8:  # a long run of one character (a regex that backtracks over runs is quadratic in them)
        return text[:at] + rng.choice(" \n\t{[(\"'<|:,") * rng.randint(100, 4000) + text[at:]
    return text + (" " if rng.random() < 0.5 else "") + other  # two calls in one action


def fuzzed(seeds: list[str], rng: random.Random) -> str:
    """A seed action with 1-4 mutations, sometimes blown up towards 64 KB."""
    text = rng.choice(seeds)
    for _ in range(rng.randint(1, 4)):
        text = mutate(text, rng.choice(seeds), rng)
    r = rng.random()
    if r < 0.03 and text:  # past the parser's limit: must be refused at once
        text = (text * (MAX_CHARS // len(text) + 1))[: rng.randint(32_000, MAX_CHARS)]
    elif r < 0.08 and text:  # long, under the limit
        text = (text * (32_000 // len(text) + 1))[: rng.randint(2_000, 32_000)]
    return text[:MAX_CHARS]


# ------------------------------------------------------------------ the run


_RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # what ToolEnv shows escaped (all but \n and \t)


def _valid_utf8(*texts: Any) -> bool:
    try:
        for t in texts:
            if t is not None:
                str(t).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def retime(make: Callable[[], gym.Env], action: str, episode_seed: int, repeats: int = 3) -> float:
    """The best of ``repeats`` timings of ``action`` as the first step of a fresh episode (tells a slow action
    from a step that a busy machine or the garbage collector slowed down)."""
    best = float("inf")
    for _ in range(repeats):
        env = make()
        env.reset(seed=episode_seed)
        env.unwrapped._interpretations.clear()  # time the parse too, not the memoised interpretation
        t0 = time.perf_counter()
        env.step(action)
        best = min(best, time.perf_counter() - t0)
        env.close()
    return best


PROBE_MARKERS = ["<", "<|", "</", "<call", "<tool_call>", "<|call|>", "Action:", "Action Input:", "```", "{", "[",
                 '{"name":', '{"tool_calls": [', "(", "=", '"', "'"]  # fmt: skip
PROBE_RUN = 8_000


def probe(make: Callable[[], gym.Env]) -> list[dict[str, Any]]:
    """Each format marker followed by a run of 8,000 spaces, newlines or tabs, as a fresh episode's first step:
    the inputs that make a backtracking regex quadratic, tried on purpose rather than by chance."""
    rows = []
    for marker in PROBE_MARKERS:
        for space in " \n\t":
            env = make()
            env.reset(seed=0)
            t0 = time.perf_counter()
            env.step(marker + space * PROBE_RUN + "x")
            rows.append({"action": f"{marker!r} + {space!r} * {PROBE_RUN} + 'x'", "step_s": time.perf_counter() - t0})
            env.close()
    return sorted(rows, key=lambda r: -r["step_s"])


def action_stream(env_id: str, kwargs: dict[str, Any], seed: int) -> Iterator[str]:
    """The fuzzed actions of ``env_id`` in order: a function of the seed and the env's frozen data alone."""
    seeds = seed_actions(env_id, kwargs, lambda: gym.make(env_id, **kwargs))
    rng = random.Random(f"{seed}:{env_id}")
    while True:
        yield fuzzed(seeds, rng)


def replay(env_id: str, kwargs: dict[str, Any], seed: int, step: int, episode_seed: int) -> None:
    """Print action ``step`` of the run with ``seed`` and time it as a fresh episode's first step."""
    action = next(itertools.islice(action_stream(env_id, kwargs, seed), step, None))
    best = retime(lambda: gym.make(env_id, **kwargs), action, episode_seed)
    print(f"{env_id} action {step} (seed {seed}): {len(action):,} characters, step {1e3 * best:.1f} ms (best of 3)")
    print(ascii(action[:400]) + (" …" if len(action) > 400 else ""))


def fuzz_env(env_id: str, kwargs: dict[str, Any], actions: int, seed: int, failures: list[dict]) -> dict[str, Any]:
    make = lambda: gym.make(env_id, **kwargs)  # noqa: E731
    stream = action_stream(env_id, kwargs, seed)
    env = make()
    episode_seed = seed * 1_000_000
    env.reset(seed=episode_seed)
    times = np.empty(actions)
    exceptions = non_utf8 = raw_control = too_long = parsed = canonical = episodes = 0
    slowest: list[tuple[float, int, str, int]] = []  # a min-heap of the 5 slowest (time, step, action, episode seed)
    limit = env.unwrapped.max_observation_length
    start = time.perf_counter()
    for i in tqdm(range(actions), desc=env_id.split("/")[-1], unit="action", mininterval=1.0):
        action = next(stream)
        t0 = time.perf_counter()
        try:
            obs, _reward, terminated, truncated, info = env.step(action)
        except Exception as exc:  # the finding this benchmark exists for
            times[i] = time.perf_counter() - t0
            exceptions += 1
            failures.append(
                {"env": env_id, "kwargs": kwargs, "episode_seed": episode_seed, "step": i, "action": action,
                 "error": f"{type(exc).__name__}: {exc}"[:500]}
            )  # fmt: skip
            episode_seed += 1
            env = make()
            env.reset(seed=episode_seed)
            continue
        times[i] = dt = time.perf_counter() - t0
        heapq.heappush(slowest, (dt, i, action, episode_seed))
        if len(slowest) > 5:
            heapq.heappop(slowest)
        texts = (obs, info.get("summary"), info.get("parse_error"))
        if not isinstance(obs, str) or not _valid_utf8(*texts):
            non_utf8 += 1
            failures.append({"env": env_id, "episode_seed": episode_seed, "step": i, "action": action,
                             "error": "observation or info text is not valid UTF-8"})  # fmt: skip
        elif any(_RAW_CONTROL.search(t) for t in texts if t):
            raw_control += 1
        too_long += len(obs) > limit
        parsed += info.get("parse_error") is None
        canonical += bool(info.get("canonical"))
        if terminated or truncated:
            episodes += 1
            episode_seed += 1
            env.reset(seed=episode_seed)
    wall = time.perf_counter() - start
    env.close()
    worst = sorted(slowest, reverse=True)
    retimed = [retime(make, action, seed_) for _, _, action, seed_ in worst]
    probes = probe(make)
    return {
        "actions": actions,
        "exceptions": exceptions,
        "non_utf8_observations": non_utf8,
        "raw_control_characters": raw_control,
        "observations_over_limit": too_long,
        "max_step_s": round(float(times.max()), 6),
        "p999_step_s": round(float(np.quantile(times, 0.999)), 6),
        "median_step_s": round(float(np.median(times)), 7),
        "mean_step_s": round(float(times.mean()), 7),
        "slowest": [  # --replay ENV:STEP:EPISODE_SEED prints the whole action
            {
                "step": i,
                "episode_seed": episode_seed_,
                "step_s": round(dt, 6),
                "retimed_s": round(again, 6),
                "chars": len(action),
                "opening": ascii(action[:100]),
            }
            for (dt, i, action, episode_seed_), again in zip(worst, retimed, strict=True)
        ],
        "probe_max_step_s": round(probes[0]["step_s"], 4),
        "probes_over_100ms": [{**r, "step_s": round(r["step_s"], 4)} for r in probes if r["step_s"] > 0.1],
        "parsed_and_valid": round(parsed / actions, 4),
        "canonical": round(canonical / actions, 4),
        "episodes_ended": episodes,
        "wall_s": round(wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=100_000, help="mutated actions per env (default 100,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--envs", nargs="*", default=None, help="env names, e.g. CliffWalk SQLLookup (default: all)")
    parser.add_argument("--real-sandbox", action="store_true", help="CodeSandbox: run code in the real sandbox")
    parser.add_argument("--out", type=Path, default=RESULTS / "fuzz_actions.json")
    parser.add_argument("--replay", metavar="ENV:STEP:EPISODE_SEED", help="print and time one action of a run")
    args = parser.parse_args()
    chosen = {k: v for k, v in ENVS.items() if not args.envs or any(name in k for name in args.envs)}
    if "agentgym/CodeSandbox-v0" in chosen and not args.real_sandbox:
        chosen["agentgym/CodeSandbox-v0"] = {**chosen["agentgym/CodeSandbox-v0"], "sandbox": EchoSandbox()}
    warnings.simplefilter("ignore")  # a tool that raises is turned into an observation, with a warning
    if args.replay:
        env_id, step, episode_seed = args.replay.rsplit(":", 2)
        replay(env_id, chosen.get(env_id, ENVS[env_id]), args.seed, int(step), int(episode_seed))
        return
    failures: list[dict] = []
    results = {}
    for env_id, kwargs in chosen.items():
        results[env_id] = fuzz_env(env_id, kwargs, args.actions, args.seed, failures)
        if "sandbox" in kwargs:
            results[env_id]["sandbox"] = "EchoSandbox (in-process stand-in; see the module docstring)"
    print(f"\n{'env':<26}{'exceptions':>11}{'non-UTF-8':>10}{'max ms':>9}{'(retimed)':>10}{'p99.9 ms':>10}"
          f"{'median µs':>11}{'probe max ms':>13}{'valid':>8}{'wall s':>8}")  # fmt: skip
    for env_id, r in results.items():
        print(f"{env_id:<26}{r['exceptions']:>11}{r['non_utf8_observations']:>10}{1e3 * r['max_step_s']:>9.2f}"
              f"{1e3 * r['slowest'][0]['retimed_s']:>10.2f}{1e3 * r['p999_step_s']:>10.2f}"
              f"{1e6 * r['median_step_s']:>11.1f}{1e3 * r['probe_max_step_s']:>13.1f}{r['parsed_and_valid']:>8.1%}"
              f"{r['wall_s']:>8.1f}")  # fmt: skip
        for row in r["probes_over_100ms"]:
            print(f"    slow probe: {row['action']}: {1e3 * row['step_s']:.0f} ms")
    meta = {
        "actions_per_env": args.actions,
        "seed": args.seed,
        "package_version": agentgym.__version__,
        "python": platform.python_version(),
        "machine": platform.processor() or platform.machine(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "envs": results}, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")
    if failures:
        path = args.out.with_name(args.out.stem + "_failures.jsonl")
        path.write_text("".join(json.dumps(f, ensure_ascii=True, default=str) + "\n" for f in failures))
        print(f"{len(failures)} failures: reproducers in {path}")


if __name__ == "__main__":
    main()
