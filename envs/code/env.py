"""CodeSandbox: write a Python function, run it and its tests in a sandbox, submit it to hidden unit tests."""

from __future__ import annotations

import builtins
import itertools
import re
import warnings
from collections.abc import Hashable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import Field

from agentgym import core
from agentgym.core import TaskInfo, ToolEnv
from agentgym.core.data import TaskList, check_split, sha256_file
from agentgym.core.tools import ToolCall, ToolResult, tool
from agentgym.core.wrappers import DiscreteView, candidate_state_key, candidate_state_keys
from agentgym.envs.code.dataset import TASK_FILES, CodeTask, candidates, load_tasks
from agentgym.envs.sandbox import Sandbox, SandboxResult, TestReport

__all__ = ["CANDIDATES", "CodeOracle", "CodeSandboxEnv", "RewardWeights", "python_fence"]

CANDIDATES = 3
"""Candidate solutions per task in the discrete view: the reference and the task's two wrong solutions."""
OUTCOMES = ("?", "pass", "fail")
"""What the discrete view remembers of a candidate: visible tests not run yet, all passed, or not all passed."""
STDOUT_CHARS = 2_000
STDERR_CHARS = 1_500
BUILTIN_ERRORS = frozenset(
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
) | {"Timeout"}
"""The exception names ``submit`` may show (``Timeout``: a call ran past ``call_timeout``); any other name is one the
code chose (a class made with ``type(text, ...)`` or a forged record) and reads ``an exception``."""


class RewardWeights(core.RewardWeights):
    """CodeSandbox's reward terms (all reported in ``info["reward_components"]``)."""

    hidden_tests: float = Field(1.0, description="At submit: this times the fraction of hidden tests passed.")
    test_improvement: float = Field(
        0.0,
        description="Process reward: this times each rise of the best fraction of visible tests passed by "
        "run_tests in the episode (so at most this much per episode).",
    )


_TASK_TEXT = """\
Problem {id}{tags}

{prompt}

Write this function in Python (standard library only):

    {signature}:

Visible tests:
{tests}

run_python runs a program and shows its output; run_tests runs the visible tests on your code; submit ends the \
episode and scores your code on {hidden} hidden tests (the reward is the fraction passed). Each run has a \
{timeout:g} s time limit."""


class CodeSandboxEnv(DiscreteView, ToolEnv):
    """CodeSandbox: write a Python function to a spec, test it in a sandbox, and submit it to hidden unit tests.

    The agent gets a problem ("Run-length encode a string …"), the function's signature and two visible tests,
    and can run code and the visible tests as often as it likes before it submits. The submission is scored by
    hidden tests, as in HumanEval and MBPP. All code runs in :class:`~agentgym.envs.sandbox.Sandbox` (bubblewrap, or
    an ``unshare``-based layer as root): the agent's code is untrusted.

    ## Tools
    - ``run_python(code)``: runs a program; shows how it ended (``exit status 0``, ``killed by signal 11
      (SIGSEGV)``, ``stopped: ran past the wall-clock time limit``), its stdout (first 2,000 characters) and
      stderr (last 1,500, where a traceback ends).
    - ``run_tests(code)``: defines the code and runs the visible tests on it: which passed, and for each failure
      the value returned or the exception (``IndexError: list index out of range (line 4)``).
    - ``submit(code)``: runs the hidden tests and ends the episode, always (a submission that cannot be scored scores
      0). It shows the number passed and the first failure as a built-in exception's name and line, or how the run
      ended — never the code's output or messages, since the code can read the hidden test inputs (they run in its
      process) and would otherwise echo them back to the agent.

    An action that holds no tool call but one fenced ``python`` (or ``py``) block, with or without prose around it,
    runs that block with ``run_python``: ``info["format"]`` is ``"code_fence"`` and ``info["canonical"]`` False, so
    format compliance still counts it as a miss. An action with several fenced blocks is not guessed at.

    ## Rewards (``rewards=`` / :class:`RewardWeights`)
    ``hidden_tests`` (1.0) × the fraction of hidden tests the submission passes; ``test_improvement`` (default 0,
    the process reward below under its older component name) × each rise of the best visible-test pass
    fraction the episode's ``run_tests`` calls reached; ``invalid_action`` (default 0) for an unreadable action.
    The maximum is 1.0 with the defaults. ``info["success"]`` is True after a submission that passes every hidden
    test.

    Process reward (``process_reward=p``, default 0: off, and every reward is as without it): a ``run_tests``
    call pays, in the component ``"process"``, ``p`` × how far it raised the best fraction of visible tests
    passed so far in the episode (0 → ½ → 1 pays ``p/2`` twice). Repeating a call, a worse or equal result,
    ``run_python`` and ``submit`` pay nothing, so an episode earns at most ``p`` (``env.unwrapped.process_reward``
    is that bound). The check is verifiable (the visible tests are judged outside the sandbox like the hidden
    ones), but code that special-cases the two visible inputs earns it too: keep ``p`` small next to the
    success reward, which is unchanged (success rates stay comparable).

    Test results are judged outside the sandbox: the code's values are sent out as ``repr`` text and compared
    with the expected values there, which never enter the sandbox, so code that patches ``sys.exit``,
    ``unittest``, ``assert`` or builtins, prints "OK" or exits early cannot fake a pass.

    ## Observation and summary
    Text; the state summary reads ``runs 3 · visible tests 2/3 · last error: IndexError line 4 · not submitted``
    (``visible tests ?/2`` before the first ``run_tests``; after ``submit``: ``submitted 5/6``).
    Through :class:`~agentgym.core.wrappers.DiscreteToolActions`: 6 actions — ``run_tests`` and ``submit`` for each
    of 3 candidate solutions (the reference, one that fails a visible test, one that passes the visible tests
    but fails a hidden one, in a fixed per-task order) — and 28 states: what running each candidate's visible
    tests showed (not run / pass / fail) plus ``submitted``. A table cannot read code, so the best it can learn
    is to run the candidates and submit one that passes; two do, so that caps success at 50 % (and the reward
    above it, since the edge slip passes most hidden tests). Honest, and small.

    ## Data
    Default: 65 frozen problems (47 train, 18 test; strings, lists, dicts, math, parsing, algorithms; easy,
    medium, hard), each with 2 visible and 6 hidden tests, checked against its SHA-256 (``agentgym.envs.
    code_data``). ``split="train"``, ``"test"`` or ``"all"``. ``reset(seed=s)`` draws a task;
    ``options={"task_index": i}`` picks task ``i``. Your own problems: ``tasks_path=`` (JSON Lines; the format
    is in ``agentgym.envs.code.dataset``), with ``tasks_sha256=`` to pin the file; each reference solution is run
    on its tests when the env is made (``validate=False`` skips that).

    ``task_set="v1"`` (what ``agentgym/CodeSandbox-v1`` passes): 303 problems from 10 parametrised families
    (184 train, 119 test; ``agentgym.envs.code.build.families``), same tools, rules and reward.

    ## Arguments
    ``split``, ``task_set``, ``tasks_path``, ``tasks_sha256``, ``validate`` (above); ``sandbox`` (a configured
    :class:`~agentgym.envs.sandbox.Sandbox`), or ``layer`` (``"auto"``, ``"bwrap"``, ``"unshare"``), ``allow_unsafe``
    and ``timeout`` (5 s per run) to make one; ``rewards``; ``test_improvement_reward`` (shortcut for
    ``rewards={"test_improvement": x}``); ``process_reward`` (above); ``warm`` (run code in the sandbox's warm
    mode: runs fork from a zygote, ~4× the throughput, root only; see :mod:`agentgym.envs.sandbox`); ``history``;
    ``render_mode``.

    ## Time
    Each run has ``timeout`` (5 s) of wall clock; one action's runs together have 1.5 × that: a run gets what is
    left (the observation says so when that stopped it), and calls reached after it is spent are not run.

    ## Episode end
    Terminates on ``submit``; truncates after 10 actions (``max_episode_steps``).

    ## Version history
    - v0: initial version.
    - v1: the v1 task set (303 generated problems, 119 in the test split); same tools, rules and reward.
    """

    def __init__(
        self,
        *,
        split: str = "train",
        task_set: str = "v0",
        tasks_path: str | Path | None = None,
        tasks_sha256: str | None = None,
        validate: bool | None = None,
        sandbox: Sandbox | None = None,
        layer: str = "auto",
        allow_unsafe: bool = False,
        timeout: float = 5.0,
        rewards: RewardWeights | dict[str, float] | None = None,
        test_improvement_reward: float | None = None,
        process_reward: float = 0.0,
        warm: bool = False,
        history: int = 0,
        render_mode: str | None = None,
    ) -> None:
        self.rewards: RewardWeights
        super().__init__(
            rewards=RewardWeights.of(rewards, test_improvement=test_improvement_reward),
            process_reward=process_reward,
            history=history,
            render_mode=render_mode,
        )
        self.split = check_split(split)
        if task_set not in TASK_FILES:
            raise ValueError(f"task_set must be one of {', '.join(TASK_FILES)}, got {task_set!r}")
        path = Path(tasks_path) if tasks_path is not None else TASK_FILES[task_set][0]
        all_tasks = load_tasks(path, sha256=tasks_sha256)
        self.data_checksum = sha256_file(path)
        self.task_list = TaskList(all_tasks, split, self.data_checksum)
        self.tasks: list[CodeTask] = self.task_list.tasks
        if sandbox is None:
            sandbox = Sandbox(layer, allow_unsafe=allow_unsafe, timeout=timeout, warm=warm)
        elif warm and not sandbox.warm:
            raise ValueError("warm=True with a cold sandbox: pass Sandbox(..., warm=True) or leave warm out")
        self.sandbox = sandbox
        if tasks_path is not None if validate is None else validate:  # by default, only your own tasks
            self.validate_tasks()
        short = [t.id for t in self.tasks if len(t.wrong_solutions) < CANDIDATES - 1]
        self._discrete_problem = (
            f"the discrete view needs {CANDIDATES - 1} wrong solutions per task; tasks without them: "
            f"{', '.join(short[:5])}{' …' if len(short) > 5 else ''}"
            if short
            else None
        )
        self._start(self.tasks[0])

    def validate_tasks(self) -> None:
        """Run each task's reference solution on all its tests in the sandbox; ``ValueError`` for the first that
        fails. (``agentgym.envs.code.dataset.verify_tasks`` also checks that wrong solutions fail.)"""
        for task in self.tasks:
            report = self.sandbox.run_tests(task.solution, task.visible() + task.hidden())
            failed = next((o for o in report.outcomes if not o.passed), None)
            if failed is not None:
                raise ValueError(f"task {task.id!r}: the reference solution fails {failed.explain()}")

    # ----------------------------------------------------------------- tools

    @tool
    def run_python(self, code: str) -> ToolResult:
        """Run a Python program in the sandbox and see how it ended, its stdout and its stderr.

        Args:
            code: The program's source, e.g. "print(sorted([3, 1, 2]))".
        """
        self.runs += 1
        timeout = self.call_time()
        result = self.sandbox.run(code, timeout=timeout)
        self.last_error = result.error_summary()
        return ToolResult(_format_run(result) + self._budget_note(result, timeout), error=not result.ok)

    @tool
    def run_tests(self, code: str) -> ToolResult:
        """Run the visible tests on your code: which passed, and why the others failed.

        Args:
            code: Source that defines the function (it may define helpers too).
        """
        self.runs += 1
        timeout = self.call_time()
        report = self.sandbox.run_tests(code, self.task.visible(), timeout=timeout)
        self.visible_passed = report.passed
        self.last_error = report.first_error()
        self.outcomes[code.strip()] = "pass" if report.passed == report.total else "fail"
        reward = {}
        rise = report.fraction - self.best_visible
        if rise > 0:
            if self.rewards.test_improvement:
                reward["test_improvement"] = self.rewards.test_improvement * rise
            if self.process_reward:
                reward["process"] = self.process_reward * rise
            self.best_visible = report.fraction
        return ToolResult(_format_tests(report) + self._budget_note(report.result, timeout), reward)

    @tool
    def submit(self, code: str) -> ToolResult:
        """Submit your solution: it is scored by the hidden tests, and the episode ends.

        Args:
            code: Source that defines the function.
        """
        self.submitted = True
        self.hidden_passed = 0
        timeout = self.call_time()
        try:
            report = self.sandbox.run_tests(code, self.task.hidden(), timeout=timeout)
        except Exception as exc:  # noqa: BLE001 (the sandbox itself failed: the submission scores 0, the episode ends)
            warnings.warn(f"CodeSandbox: the hidden tests could not be run: {exc!r}", RuntimeWarning, stacklevel=2)
            text = f"Submitted: the hidden tests could not be run ({type(exc).__name__}); reward 0.000."
            return ToolResult(text, {"hidden_tests": 0.0}, terminated=True)
        self.hidden_passed = report.passed
        score = self.rewards.hidden_tests * report.fraction
        text = f"Submitted: {report.passed}/{report.total} hidden tests passed (reward {score:.3f})."
        if report.load_error is not None:
            error = report.load_error
            text += f" Your code failed before the tests ran: {_public_error(error['error'], error['line'], code)}."
        elif report.passed < report.total and (first := _first_hidden_failure(report, code)):
            text += f" First error: {first}."
        return ToolResult(text + self._budget_note(report.result, timeout), {"hidden_tests": score}, terminated=True)

    def call_time_limit(self) -> float:
        """A program's wall-clock ``timeout`` (5 s): one action's programs together run at most 1.5 × that."""
        return self.sandbox.limits.timeout

    def _budget_note(self, result: SandboxResult, timeout: float | None) -> str:
        """Why a run stopped early when it was held to less than its own time limit: the action's budget."""
        if not result.timed_out or timeout is None or timeout >= self.sandbox.limits.timeout:
            return ""
        return (
            f"\n(It had {timeout:.2g} s, what was left of this action's time budget of "
            f"{self.step_time_factor * self.sandbox.limits.timeout:g} s for all its calls.)"
        )

    # ----------------------------------------------------------------- ToolEnv hooks

    def reward_bounds(self) -> tuple[float, float]:
        """Per action: ``test_improvement`` + ``process_reward``, times the rise of the best visible pass fraction
        (it rises by at most 1 in a whole episode, however many calls an action runs) plus, at ``submit``,
        ``hidden_tests`` × the fraction passed (0 to 1). With the default weights: ``(0, 1)``."""
        w = self.rewards
        low = min(0.0, w.test_improvement) + min(0.0, w.hidden_tests)
        high = max(0.0, w.test_improvement) + self.process_reward + max(0.0, w.hidden_tests)
        return min(low, self.invalid_action_reward), max(high, self.invalid_action_reward)

    def _start(self, task: CodeTask) -> None:
        self.task = task
        self.runs = 0
        self.visible_passed: int | None = None
        self.best_visible = 0.0
        self.last_error: str | None = None
        self.submitted = False
        self.hidden_passed = 0
        self.outcomes: dict[str, str] = {}
        self.candidates = candidates(task, CANDIDATES) if len(task.wrong_solutions) >= CANDIDATES - 1 else []

    def _reset_task(self, options: dict[str, Any]) -> None:
        self._start(self.task_list.pick(options, self.np_random))

    def task_prompt(self) -> str:
        task = self.task
        tags = ", ".join(t for t in (task.topic, task.difficulty) if t)
        return _TASK_TEXT.format(
            id=task.id,
            tags=f" ({tags})" if tags else "",
            prompt=task.prompt,
            signature=task.signature,
            tests="\n".join(f"    assert {t}" for t in task.visible_tests),
            hidden=len(task.hidden_tests),
            timeout=self.sandbox.limits.timeout,
        )

    def summary(self) -> str:
        seen = "?" if self.visible_passed is None else self.visible_passed
        parts = [f"runs {self.runs}", f"visible tests {seen}/{len(self.task.visible_tests)}"]
        if self.last_error:
            parts.append(f"last error: {self.last_error}")
        parts.append(
            f"submitted {self.hidden_passed}/{len(self.task.hidden_tests)}" if self.submitted else "not submitted"
        )
        return " · ".join(parts)

    @property
    def success(self) -> bool:
        return self.submitted and self.hidden_passed == len(self.task.hidden_tests)

    @property
    def task_info(self) -> TaskInfo:
        """Declares ``parallel_episodes``: episodes may be played in threads at once (``agentgym eval --concurrency``),
        since their work runs in sandbox processes."""
        return replace(
            super().task_info,
            parallel_episodes=True,
            discrete_view=not self._discrete_problem,
        )

    def state_key(self) -> Hashable:
        if self.submitted:
            return "submitted"
        return candidate_state_key("c", self.candidates, self.outcomes)

    def state_keys(self) -> list[Hashable]:
        if self._discrete_problem:
            raise ValueError(self._discrete_problem)
        return candidate_state_keys("c", CANDIDATES, OUTCOMES, "submitted")

    def action_menu(self) -> list[str]:
        if self._discrete_problem:
            raise ValueError(self._discrete_problem)
        return [ToolCall("run_tests", {"code": c}).to_text() for c in self.candidates] + [
            ToolCall("submit", {"code": c}).to_text() for c in self.candidates
        ]

    def oracle(self) -> CodeOracle:
        return CodeOracle(self.tasks)

    def close(self) -> None:
        """Stop the sandbox's warm-mode zygotes, if any (the env still works: a later run starts new ones)."""
        self.sandbox.close()
        super().close()

    def render_text(self) -> str:
        return f"{self.task.id}: {self.summary()}\n"

    def fallback_call(self, text: str) -> tuple[ToolCall, str] | None:
        """A bare fenced ``python`` block (no tool call in the action) is a ``run_python`` call."""
        code = python_fence(text)
        return None if code is None else (ToolCall("run_python", {"code": code}), "code_fence")


_FENCE_LINE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[ \t]*$", re.M)  # one way to match each line: linear time
_PYTHON_FENCES = frozenset({"python", "python3", "py"})


def python_fence(text: str) -> str | None:
    """The code of the one fenced block in ``text`` when it is labelled ``python``, ``python3`` or ``py``; None when
    there is none, several, or it is empty."""
    fences = list(itertools.islice(_FENCE_LINE.finditer(text), 3))  # a third fence line already means "not one"
    if len(fences) != 2 or fences[0].group(1).lower() not in _PYTHON_FENCES or fences[1].group(1):
        return None
    code = text[fences[0].end() + 1 : fences[1].start()].rstrip("\n")
    return code if code.strip() else None


def _format_run(result: SandboxResult) -> str:
    lines = [result.status() + "."]
    if result.stdout:
        out = result.stdout if len(result.stdout) <= STDOUT_CHARS else result.stdout[:STDOUT_CHARS] + " …[cut]"
        cut = " (cut at the output limit)" if result.stdout_truncated else ""
        lines.append(f"stdout{cut}:\n{out.rstrip()}")
    if result.stderr:
        err = result.stderr if len(result.stderr) <= STDERR_CHARS else "[cut]… " + result.stderr[-STDERR_CHARS:]
        lines.append(f"stderr:\n{err.rstrip()}")
    if not result.stdout and not result.stderr:
        lines.append("(no output)")
    return "\n".join(lines)


def _format_tests(report: TestReport) -> str:
    lines = [f"Visible tests: {report.passed}/{report.total} passed."]
    if report.load_error is not None:
        lines.append(f"Your code failed before the tests ran: {report.load_error_text()}")
    else:
        for k, outcome in enumerate(report.outcomes, 1):
            lines.append(f"{'PASS' if outcome.passed else 'FAIL'} test {k}: {outcome.explain()}")
    if report.result.stdout.strip():
        out = report.result.stdout
        lines.append("Your code printed:\n" + (out if len(out) <= 500 else out[:500] + " …[cut]").rstrip())
    return "\n".join(lines)


def _public_error(name: str, line: int | None, code: str) -> str:
    """``IndexError line 4``: a built-in exception's name (else ``an exception``) and a line of ``code``."""
    shown = name if name in BUILTIN_ERRORS else "an exception"
    return f"{shown} line {line}" if line is not None and 1 <= line <= code.count("\n") + 1 else shown


def _first_hidden_failure(report: TestReport, code: str) -> str | None:
    """The first hidden test that failed without a value, in words the code cannot choose."""
    for outcome in report.outcomes:
        if not outcome.passed and outcome.got is None:
            if outcome.error_type is None:  # no record: how the run ended, as the harness saw it
                return report.result.error_summary() or "no result"
            return _public_error(outcome.error_type, outcome.line, code)
    return None


_PROBLEM = re.compile(r"^(?:Task: )?Problem (\S+)", re.M)
_VISIBLE = re.compile(r"visible tests (\S+)/\d+")


class CodeOracle:
    """The scripted expert: runs the visible tests on the task's reference solution, then submits it.

    It reads only the observation text (the problem id and the state summary) and knows the tasks'
    reference solutions, so it plays any CodeSandbox env through the same interface a model does and scores
    1.0 on every task. ``predict(obs) -> (action_text, None)``.
    """

    def __init__(self, tasks: Sequence[CodeTask]) -> None:
        self.solutions = {task.id: task.solution for task in tasks}

    def predict(self, observation: str, state: Any = None, deterministic: bool = True) -> tuple[str, None]:
        problem = _PROBLEM.search(observation or "")
        solution = self.solutions.get(problem.group(1)) if problem else None
        if solution is None:
            return ToolCall("run_python", {"code": "print('unknown problem')"}).to_text(), None
        progress = _VISIBLE.findall(observation)
        if not progress or progress[-1] == "?":
            return ToolCall("run_tests", {"code": solution}).to_text(), None
        return ToolCall("submit", {"code": solution}).to_text(), None
