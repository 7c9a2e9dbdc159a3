"""CodeSandbox's data: function-level Python problems with visible and hidden unit tests.

The v0 set (``data/code_tasks_v0.jsonl``) holds 65 problems written for agentgym (``problems.py`` is their
source) in six topics — strings, lists, dicts, math, parsing, algorithms — tagged ``easy``, ``medium`` or
``hard``; 47 train and 18 test (every third problem of each topic is in the test split). Each has 2 visible
tests, 6 hidden ones, a reference solution and two wrong ones: one that fails a visible test and one that
passes the visible tests but fails a hidden one (an edge case the prompt states). :func:`build_tasks` checks
all of that; the file ships with a SHA-256 (:data:`TASKS_V0_SHA256`) that :func:`load_tasks` verifies.

## The task file format (also for your own tasks: ``CodeSandboxEnv(tasks_path=...)``)

JSON Lines, one task a line::

    {"id": "add", "prompt": "Add two integers.", "signature": "def add(a: int, b: int) -> int",
     "visible_tests": ["add(1, 2) == 3"], "hidden_tests": ["add(-1, 1) == 0", "add(10**12, 1) == 1000000000001"],
     "solution": "def add(a: int, b: int) -> int:\\n    return a + b\\n"}

- ``id``, ``prompt``, ``signature`` (a ``def`` line, shown to the agent), ``solution`` (the reference: it
  must pass every test; the oracle submits it) are required.
- ``visible_tests`` and ``hidden_tests``: at least one each. A test reads ``call == expected``: ``call`` is any
  Python expression, evaluated inside the sandbox in the namespace of the submitted code; ``expected`` is a
  Python literal (numbers, strings, bytes, None, True/False, lists, tuples, dicts, sets), which never enters the
  sandbox. A value matches by ``==``, with floats equal within 1e-9 (:func:`agentgym.envs.sandbox.values_equal`).
  Visible tests are shown to the agent as ``assert call == expected``; hidden ones only score the submission.
- Optional: ``wrong_solutions`` (plausible wrong code; the discrete view needs 2), ``difficulty`` (``easy``,
  ``medium`` or ``hard``), ``topic``, ``split`` (default ``"train"``).

Solutions and tests run with the sandbox's interpreter (Python ≥ 3.10, standard library only).
"""

from __future__ import annotations

import ast
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentgym.core.data import read_jsonl, sha256_file, write_jsonl
from agentgym.envs.sandbox import Sandbox

__all__ = [
    "DIFFICULTIES",
    "TASKS_V0",
    "TASKS_V0_SHA256",
    "TASKS_V1",
    "TASKS_V1_SHA256",
    "CodeTask",
    "build_tasks",
    "candidates",
    "entry_point",
    "load_tasks",
    "parse_test",
    "sha256_file",
    "verify_tasks",
    "write_tasks",
]

DATA_DIR = Path(__file__).parent / "data"
TASKS_V0 = DATA_DIR / "code_tasks_v0.jsonl"
TASKS_V0_SHA256 = "50c460a07c674957c8e40eb2e853fb84e5f9f4cb46976bc01fd4d9298d9041fa"
TASKS_V1 = DATA_DIR / "code_tasks_v1.jsonl"
TASKS_V1_SHA256 = "14f7bf474a4bdd52a623b87b25c5e4ed6d314c6bedc95b2a1f82364ac77deee3"
"""CodeSandbox-v1's problems (``families.py`` generates them; ``python -m agentgym.envs.code.build.families build``)."""
TASK_FILES = {"v0": (TASKS_V0, TASKS_V0_SHA256), "v1": (TASKS_V1, TASKS_V1_SHA256)}
"""The shipped task sets by version: file and SHA-256."""
DIFFICULTIES = ("easy", "medium", "hard")


def parse_test(text: str) -> tuple[str, Any]:
    """``"add(1, 2) == 3"`` → ``("add(1, 2)", 3)``: the call's source and the expected value.

    Raises ``ValueError`` (with the reason) for text that is not ``expression == literal``.
    """
    source = text.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"test {text!r} is not a Python expression ({exc.msg})") from None
    body = tree.body
    if not (isinstance(body, ast.Compare) and len(body.ops) == 1 and isinstance(body.ops[0], ast.Eq)):
        raise ValueError(f"test {text!r} must read `call == expected`")
    try:
        expected = ast.literal_eval(body.comparators[0])
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        right = ast.get_source_segment(source, body.comparators[0])
        raise ValueError(
            f"test {text!r}: the expected value must be a Python literal (numbers, strings, lists, tuples, dicts, "
            f"sets, True/False/None), got {right!r}"
        ) from None
    call = ast.get_source_segment(source, body.left)
    assert call is not None
    return call, expected


def entry_point(signature: str) -> str:
    """The function name of a ``def`` line: ``"def add(a: int) -> int"`` → ``"add"``."""
    try:
        tree = ast.parse(signature.strip().rstrip(":") + ": ...")
    except SyntaxError:
        tree = None
    if tree is None or len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        raise ValueError(f"signature must be one `def name(...)` line, got {signature!r}")
    return tree.body[0].name


class CodeTask(BaseModel):
    """One problem (a line of a tasks JSONL file; see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    signature: str
    visible_tests: tuple[str, ...] = Field(min_length=1)
    hidden_tests: tuple[str, ...] = Field(min_length=1)
    solution: str = Field(min_length=1)
    wrong_solutions: tuple[str, ...] = ()
    difficulty: Literal["easy", "medium", "hard"] | None = None
    topic: str | None = None
    split: str = "train"

    @field_validator("signature")
    @classmethod
    def _one_def_line(cls, value: str) -> str:
        entry_point(value)
        return value.strip().rstrip(":")

    @field_validator("visible_tests", "hidden_tests")
    @classmethod
    def _readable_tests(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for test in value:
            parse_test(test)
        return value

    @property
    def entry_point(self) -> str:
        return entry_point(self.signature)

    def visible(self) -> list[tuple[str, Any]]:
        """The visible tests as ``(call, expected)`` pairs."""
        return [parse_test(t) for t in self.visible_tests]

    def hidden(self) -> list[tuple[str, Any]]:
        """The hidden tests as ``(call, expected)`` pairs."""
        return [parse_test(t) for t in self.hidden_tests]


def verify_tasks(tasks: list[CodeTask], sandbox: Sandbox, *, workers: int = 2) -> list[str]:
    """Run every task's solutions on all its tests in ``sandbox``; return the problems found (empty: all good).

    The reference must pass every test; every wrong solution must fail a hidden test. With two wrong solutions,
    the first (a "visible slip") must also fail a visible test, and the second (an "edge slip") must pass every
    visible test. Wrong code can loop or allocate without end, which is why it only ever runs in the sandbox.
    """

    def check(task: CodeTask) -> list[str]:
        visible, hidden = task.visible(), task.hidden()
        problems = []
        report = sandbox.run_tests(task.solution, visible + hidden)
        for outcome in report.outcomes:
            if not outcome.passed:
                problems.append(f"{task.id}: the reference solution fails {outcome.explain()}")
        for k, wrong in enumerate(task.wrong_solutions):
            passed = [o.passed for o in sandbox.run_tests(wrong, visible + hidden).outcomes]
            on_visible, on_hidden = passed[: len(visible)], passed[len(visible) :]
            if all(on_hidden):
                problems.append(f"{task.id}: wrong solution {k + 1} passes every hidden test")
            if k == 0 and all(on_visible) and len(task.wrong_solutions) == 2:
                problems.append(f"{task.id}: wrong solution 1 (a visible slip) passes every visible test")
            elif k == 1 and not all(on_visible):
                problems.append(f"{task.id}: wrong solution 2 (an edge slip) fails a visible test")
        return problems

    with ThreadPoolExecutor(workers) as pool:
        return [problem for found in pool.map(check, tasks) for problem in found]


def build_tasks(sandbox: Sandbox | None = None) -> list[CodeTask]:
    """The v0 tasks from ``problems.PROBLEMS`` with their split (every third problem of a topic is a test
    problem), after :func:`verify_tasks` in ``sandbox`` (default: ``Sandbox()``). ``ValueError`` lists problems."""
    from agentgym.envs.code.build.problems import PROBLEMS

    tasks, per_topic = [], {}
    for problem in PROBLEMS:
        index = per_topic.get(problem["topic"], 0)
        per_topic[problem["topic"]] = index + 1
        tasks.append(CodeTask.model_validate({**problem, "split": "test" if index % 3 == 2 else "train"}))
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate problem ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    if any(len(t.wrong_solutions) != 2 for t in tasks):
        raise ValueError("every v0 problem needs exactly 2 wrong solutions")
    problems = verify_tasks(tasks, sandbox or Sandbox())
    if problems:
        raise ValueError("problems that do not check out:\n" + "\n".join(problems))
    return tasks


def write_tasks(tasks: list[CodeTask], path: str | Path) -> str:
    """Write tasks as JSON Lines (keys sorted, UTF-8) and return the file's SHA-256."""
    return write_jsonl(tasks, path)


def load_tasks(path: str | Path = TASKS_V0, sha256: str | None = None) -> list[CodeTask]:
    """Read a tasks JSONL file; a shipped file's checksum (v0, v1) is always checked (``sha256=`` checks yours).

    Raises ``ValueError`` naming the file and line of a bad record, a duplicate id, or an empty file.
    """
    if sha256 is None:
        sha256 = next((sha for file, sha in TASK_FILES.values() if Path(path).resolve() == file.resolve()), None)
    return read_jsonl(path, CodeTask, sha256=sha256, what="task", unique="id")


def candidates(task: CodeTask, n: int = 3) -> list[str]:
    """The discrete view's candidate solutions: the reference and ``n - 1`` wrong ones, in a fixed per-task order."""
    codes = [task.solution, *task.wrong_solutions[: n - 1]]
    random.Random(task.id).shuffle(codes)
    return codes


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Check CodeSandbox's problems and write the tasks file.")
    parser.add_argument("--out", default=str(TASKS_V0), help="where to write the JSONL file")
    args = parser.parse_args()
    checksum = write_tasks(build_tasks(), args.out)
    print(f"{args.out}: SHA-256 {checksum} ({'matches v0' if checksum == TASKS_V0_SHA256 else 'differs from v0'})")
