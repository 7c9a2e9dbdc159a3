"""CodeSandbox-v0: frozen problems verified in the sandbox, tools and summary, rewards, the oracle, the discrete
view, seeded determinism, user task files, and hostile submissions through the env.

Every test here runs code in the strongest sandbox layer this machine has (recorded as the test's ``layer``
property); without one (no bubblewrap and not root) they are skipped with the reason.
"""

from __future__ import annotations

import json

import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.wrappers import TimeLimit

from agentgym.app.evaluation.runner import evaluate
from agentgym.core.tools import ToolCall
from agentgym.core.wrappers import DiscreteToolActions
from agentgym.envs.code.dataset import (
    DIFFICULTIES,
    TASKS_V0,
    TASKS_V0_SHA256,
    build_tasks,
    entry_point,
    load_tasks,
    parse_test,
    sha256_file,
    verify_tasks,
    write_tasks,
)
from agentgym.envs.code.env import CodeSandboxEnv
from agentgym.envs.sandbox import Sandbox, SandboxUnavailable, layer_status
from agentgym.envs.sandbox import harness as sandbox_module

MAX_STEPS = 10
STATUS = layer_status()
LAYER = next((layer for layer in ("bwrap", "unshare") if STATUS[layer] is None), None)
pytestmark = pytest.mark.skipif(LAYER is None, reason=f"no sandbox layer on this machine: {STATUS}")


@pytest.fixture(autouse=True)
def _record_layer(record_property):
    record_property("layer", LAYER)


@pytest.fixture(scope="module")
def box():
    return Sandbox(LAYER, timeout=5.0)


def make(**kwargs):
    return TimeLimit(CodeSandboxEnv(**kwargs), MAX_STEPS)


def call(name, /, **arguments):
    return ToolCall(name, arguments).to_text()


def result_text(observation):
    return observation.split("Result: ", 1)[1].rsplit("\nState: ", 1)[0]


def index_of(env, task_id):
    return next(i for i, t in enumerate(env.unwrapped.tasks) if t.id == task_id)


# ----------------------------------------------------------------------------- frozen data


def test_shipped_file_matches_its_checksum_and_every_solution_checks_out(tmp_path, box):
    """Rebuilding runs every solution on all its tests in the sandbox (verify_tasks): each reference passes every
    test, each wrong solution fails a hidden test (the first also a visible one, the second no visible one)."""
    assert sha256_file(TASKS_V0) == TASKS_V0_SHA256
    assert write_tasks(build_tasks(box), tmp_path / "tasks.jsonl") == TASKS_V0_SHA256
    assert verify_tasks(load_tasks()[:1], box) == []
    broken = load_tasks()[0].model_copy(update={"wrong_solutions": (load_tasks()[0].solution,) * 2})
    assert verify_tasks([broken], box) == [
        "rle_encode: wrong solution 1 passes every hidden test",
        "rle_encode: wrong solution 1 (a visible slip) passes every visible test",
        "rle_encode: wrong solution 2 passes every hidden test",
    ]


def test_tampered_file_is_refused(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(TASKS_V0.read_text(encoding="utf-8").replace("a3b1c2", "a3b1c3", 1), encoding="utf-8")
    with pytest.raises(ValueError, match="the data changed"):
        load_tasks(path, sha256=TASKS_V0_SHA256)
    with pytest.raises(ValueError, match="the data changed"):
        CodeSandboxEnv(tasks_path=path, tasks_sha256=TASKS_V0_SHA256)


def test_problem_set_shape():
    tasks = load_tasks()
    assert len(tasks) >= 60
    assert len({t.id for t in tasks}) == len(tasks) and len({t.prompt for t in tasks}) == len(tasks)
    assert all(2 <= len(t.visible_tests) <= 3 and len(t.hidden_tests) >= 5 for t in tasks)
    assert all(len(t.wrong_solutions) == 2 and t.solution not in t.wrong_solutions for t in tasks)
    topics = {"strings", "lists", "dicts", "math", "parsing", "algorithms"}
    for split in ("train", "test"):
        assert {t.topic for t in tasks if t.split == split} == topics
    assert {t.difficulty for t in tasks} == set(DIFFICULTIES)
    assert 15 <= sum(t.split == "test" for t in tasks) <= 25
    assert all(t.entry_point in t.solution and t.signature.startswith(f"def {t.entry_point}(") for t in tasks)


def test_test_syntax_is_checked_with_clear_messages():
    assert parse_test("add(1, 2) == 3") == ("add(1, 2)", 3)
    assert parse_test("  f('a', [1]) == {'x': (1, None)} ") == ("f('a', [1])", {"x": (1, None)})
    assert entry_point("def add(a: int, b: int) -> int") == "add"
    for bad, message in [
        ("add(1, 2)", "must read `call == expected`"),
        ("add(1, 2) == 3 == 3", "must read `call == expected`"),
        ("add(1, 2) != 3", "must read `call == expected`"),
        ("add(1, 2) == three", "must be a Python literal"),
        ("add(1, 2) == 1 + 2", "must be a Python literal"),
        ("add(1, ", "not a Python expression"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_test(bad)
    with pytest.raises(ValueError, match="one `def name"):
        entry_point("lambda x: x")


# ----------------------------------------------------------------------------- tools, summary, rewards


def test_tools_summary_and_observations():
    env = make(split="all")
    obs, info = env.reset(options={"task_index": index_of(env, "rle_encode")})
    assert obs.startswith("Problem rle_encode (strings, easy)\n") and "    def rle_encode(s: str) -> str:" in obs
    assert "assert rle_encode('aaabcc') == 'a3b1c2'" in obs and "6 hidden tests" in obs
    assert info["summary"] == "runs 0 · visible tests ?/2 · not submitted"

    obs, *_ = env.step(call("run_python", code="print('hi')\nimport sys\nprint('oops', file=sys.stderr)"))
    assert result_text(obs) == "exit status 0.\nstdout:\nhi\nstderr:\noops"

    obs, _, _, _, info = env.step(call("run_tests", code="def rle_encode(s):\n    return s[0] + str(len(s))\n"))
    assert result_text(obs).splitlines() == [
        "Visible tests: 1/2 passed.",
        "FAIL test 1: rle_encode('aaabcc') returned 'a6', expected 'a3b1c2'",
        "PASS test 2: rle_encode('z') == 'z1'",
    ]
    assert info["summary"] == "runs 2 · visible tests 1/2 · not submitted"

    obs, _, _, _, info = env.step(call("run_tests", code="def rle_encode(s):\n    x = 1\n    return s[10]\n"))
    assert "FAIL test 2: rle_encode('z'): IndexError: string index out of range (line 3)" in obs
    assert info["summary"] == "runs 3 · visible tests 0/2 · last error: IndexError line 3 · not submitted"

    obs, _, _, _, info = env.step(call("run_tests", code="def rle_encode(s)\n    return s\n"))
    assert "Your code failed before the tests ran: SyntaxError: expected ':' (line 1)" in obs
    assert info["summary"].endswith("last error: SyntaxError line 1 · not submitted")

    obs, reward, terminated, _, info = env.step(call("submit", code="def rle_encode(s):\n    return ''\n"))
    assert terminated and reward == pytest.approx(1 / 6) and not info["success"]
    assert result_text(obs) == "Submitted: 1/6 hidden tests passed (reward 0.167)."
    assert info["summary"] == "runs 4 · visible tests 0/2 · last error: SyntaxError line 1 · submitted 1/6"


def test_runaway_and_crashing_code_is_an_observation():
    env = make(split="all", timeout=1.0)
    env.reset(seed=0)
    obs, reward, terminated, *_ = env.step(call("run_python", code="while True:\n    pass"))
    assert "stopped: ran past the wall-clock time limit." in obs and "last error: timeout" in obs
    obs, *_ = env.step(call("run_python", code="import ctypes\nctypes.string_at(0)"))
    assert "killed by signal 11 (SIGSEGV)" in obs and "last error: SIGSEGV" in obs
    obs, *_ = env.step(call("run_python", code="print('x' * 100_000)"))
    assert "stdout (cut at the output limit):" in obs and "last error: output limit" in obs
    assert not terminated and reward == 0.0


def test_process_reward_for_run_tests_improvement():
    env = make(split="all", test_improvement_reward=0.5)
    env.reset(options={"task_index": index_of(env, "rle_encode")})
    half = "def rle_encode(s):\n    return 'z1'\n"
    full = env.unwrapped.task.solution
    rewards = [env.step(call("run_tests", code=code))[1] for code in (half, half, full, full)]
    assert rewards == pytest.approx([0.25, 0.0, 0.25, 0.0])  # at most 0.5 per episode, only for improvements
    _, reward, _, _, info = env.step(call("submit", code=full))
    assert reward == 1.0 and info["reward_components"] == {"hidden_tests": 1.0} and info["success"]
    assert make().unwrapped.rewards.test_improvement == 0.0  # off by default


SCRIPT = ("wrong", "half", "half", "full", "full", "submit")


def play_script(env):
    """A short scripted episode on rle_encode: visible tests passing 0/2, 1/2, 1/2, 2/2, 2/2, then submit."""
    env.reset(options={"task_index": index_of(env, "rle_encode")})
    full = env.unwrapped.task.solution
    codes = {"wrong": "def rle_encode(s):\n    return 0\n", "half": "def rle_encode(s):\n    return 'z1'\n"}
    steps = []
    for move in SCRIPT:
        if move == "submit":
            _, reward, terminated, _, info = env.step(call("submit", code=full))
        else:
            _, reward, terminated, _, info = env.step(call("run_tests", code=codes.get(move, full)))
        steps.append((reward, info["reward_components"], terminated, info.get("success")))
    return steps


def test_process_reward_pays_only_improvements_of_the_best_visible_fraction():
    env = make(split="all", process_reward=0.2)
    assert env.unwrapped.process_reward == 0.2  # the per-episode bound (agentgym audit reads it)
    steps = play_script(env)
    # by hand: 0/2 pays 0; 1/2 pays 0.2 × ½; the repeat pays 0; 2/2 pays 0.2 × ½ more; the repeat 0; submit 1.0
    assert [r for r, *_ in steps] == pytest.approx([0.0, 0.1, 0.0, 0.1, 0.0, 1.0])
    assert [c for _, c, *_ in steps] == [{}, {"process": pytest.approx(0.1)}, {}, {"process": pytest.approx(0.1)},
                                         {}, {"hidden_tests": 1.0}]  # fmt: skip
    assert sum(c.get("process", 0.0) for _, c, *_ in steps) == pytest.approx(0.2)  # = the bound
    assert steps[-1][2:] == (True, True)  # the success reward and success are unchanged
    assert env.unwrapped.reward_bounds() == (0.0, pytest.approx(1.2))


def test_repeating_a_call_pays_no_process_reward():
    env = make(split="all", process_reward=0.5)
    env.reset(options={"task_index": index_of(env, "rle_encode")})
    action = call("run_tests", code=env.unwrapped.task.solution)
    rewards = [env.step(action)[1] for _ in range(6)]
    assert rewards == [0.5, 0.0, 0.0, 0.0, 0.0, 0.0]
    obs, reward, *_ = env.step(call("run_python", code="print(1)"))
    assert reward == 0.0


def test_process_reward_off_changes_nothing():
    default, off = play_script(make(split="all")), play_script(make(split="all", process_reward=0.0))
    assert default == off
    assert [r for r, *_ in off] == [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert all("process" not in c for _, c, *_ in off)
    assert make().unwrapped.process_reward == 0.0
    for bad in (-0.1, float("nan"), float("inf"), "0.1"):
        with pytest.raises(ValueError, match="process_reward"):
            CodeSandboxEnv(split="all", process_reward=bad)


def test_oracle_scores_100_percent_on_both_splits():
    for split in ("train", "test"):
        env = make(split=split)
        report = evaluate(env.unwrapped.oracle(), env, agent="oracle")
        assert report.episodes == env.unwrapped.num_tasks
        assert report.success_rate == 1.0 and report.mean_return == 1.0 and report.mean_turns == 2


def test_wrong_solutions_score_below_one():
    env = make(split="all")
    scores = []
    for task_id in ("second_largest", "parse_time_12h", "coin_change"):
        i = index_of(env, task_id)
        for wrong in env.unwrapped.tasks[i].wrong_solutions:
            env.reset(options={"task_index": i})
            _, reward, terminated, _, info = env.step(call("submit", code=wrong))
            assert terminated and not info["success"]
            scores.append(reward)
    assert all(0 <= s < 1 for s in scores) and max(scores) > 0


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
def test_check_env_text_and_discrete():
    check_env(CodeSandboxEnv(), skip_render_check=True)
    discrete = DiscreteToolActions(CodeSandboxEnv())
    check_env(discrete, skip_render_check=True)
    assert discrete.action_space.n == 6 and discrete.observation_space.n == 28


def test_discrete_view_runs_and_submits_candidates():
    env = DiscreteToolActions(CodeSandboxEnv(split="test"))
    s, _ = env.reset(options={"task_index": 0})
    assert env.state_keys[s] == "c1 ? · c2 ? · c3 ?"
    base = env.unwrapped
    assert sorted(base.candidates) == sorted([base.task.solution, *base.task.wrong_solutions])
    outcomes = []
    for k in range(3):
        s, *_ = env.step(k)
        outcomes.append(env.state_keys[s].split(" · ")[k].split()[1])
    assert sorted(outcomes) == ["fail", "pass", "pass"]  # the visible slip fails; the edge slip does not show
    s, reward, terminated, _, info = env.step(3 + base.candidates.index(base.task.solution))
    assert terminated and reward == 1.0 and info["success"] and env.state_keys[s] == "submitted"
    slots = set()
    for i in range(base.num_tasks):
        env.reset(options={"task_index": i})
        slots.add(base.candidates.index(base.task.solution))
    assert slots == {0, 1, 2}  # the reference's slot varies, so the menu does not give it away


def test_same_seed_same_episode():
    def play(seed):
        env = make()
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for action in (
            call("run_python", code="print({'b', 'a', 'c'}, hash('x') % 1000)"),
            call("run_tests", code="def f(x):\n    return x\n"),
        ):
            out.append(env.step(action)[0])
        return out

    assert play(7) == play(7)
    assert len({play(s)[0] for s in range(6)}) > 3


# ----------------------------------------------------------------------------- your own tasks


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


ADD = {
    "id": "add",
    "prompt": "Add two integers.",
    "signature": "def add(a: int, b: int) -> int",
    "visible_tests": ["add(1, 2) == 3"],
    "hidden_tests": ["add(-1, 1) == 0", "add(10 ** 12, 1) == 1000000000001"],
    "solution": "def add(a: int, b: int) -> int:\n    return a + b\n",
}


def test_user_task_file(tmp_path):
    shout = {
        **ADD,
        "id": "shout",
        "prompt": "Upper-case a word and add '!'.",
        "signature": "def shout(word: str) -> str",
        "visible_tests": ["shout('hi') == 'HI!'"],
        "hidden_tests": ["shout('') == '!'", "shout('a b') == 'A B!'"],
        "solution": "def shout(word):\n    return word.upper() + '!'\n",
        "wrong_solutions": ["def shout(word):\n    return word + '!'\n", "def shout(word):\n    return 'HI!'\n"],
        "difficulty": "easy",
        "split": "test",
    }
    path = write_jsonl(tmp_path / "mine.jsonl", [ADD, shout])
    env = make(tasks_path=path, split="all")
    assert env.unwrapped.num_tasks == 2 and env.unwrapped.data_checksum == sha256_file(path)
    assert evaluate(env.unwrapped.oracle(), env).success_rate == 1.0
    assert make(tasks_path=path, split="test").unwrapped.num_tasks == 1
    with pytest.raises(ValueError, match="2 wrong solutions per task; tasks without them: add"):
        DiscreteToolActions(env)
    with pytest.raises(ValueError, match="SHA-256"):
        CodeSandboxEnv(tasks_path=path, tasks_sha256="0" * 64)


@pytest.mark.parametrize(
    "records, message",
    [
        ([{**ADD, "solution": "def add(a, b):\n    return a - b\n"}], "task 'add': the reference solution fails"),
        ([{**ADD, "visible_tests": ["add(1, 2)"]}], "must read `call == expected`"),
        ([{**ADD, "hidden_tests": []}], "hidden_tests"),
        ([{**ADD, "signature": "add(a, b)"}], "one `def name"),
        ([{**ADD, "difficulty": "brutal"}], "difficulty"),
        ([{k: v for k, v in ADD.items() if k != "solution"}], "solution"),
        ([ADD, ADD], "duplicate task id 'add'"),
        ([{**ADD, "split": "dev"}], "no tasks in split 'train'"),
        ([], "holds no tasks"),
    ],
)
def test_bad_user_tasks_are_explained(tmp_path, records, message):
    path = write_jsonl(tmp_path / "mine.jsonl", records)
    with pytest.raises(ValueError, match=message):
        CodeSandboxEnv(tasks_path=path)


def test_bad_config_is_explained(monkeypatch):
    with pytest.raises(ValueError, match="split must be"):
        CodeSandboxEnv(split="validation")
    with pytest.raises(ValueError, match="task_index"):
        CodeSandboxEnv().reset(options={"task_index": 10_000})
    with pytest.raises(ValueError, match="test_improvment"):
        CodeSandboxEnv(rewards={"test_improvment": 1.0})
    monkeypatch.setattr(sandbox_module, "_probe", lambda layer, python: f"{layer} is not here")
    with pytest.raises(SandboxUnavailable, match="install bubblewrap"):
        CodeSandboxEnv()


# ----------------------------------------------------------------------------- hostile submissions


@pytest.mark.parametrize(
    "code",
    [
        "import sys\nsys.exit(0)",
        "import os\nos._exit(0)",
        "print('OK (6 tests passed)')\nclass Yes:\n    def __eq__(self, o):\n        return True\n"
        "def rle_encode(s):\n    return Yes()\n",
        "import os\nfor fd in range(3, 40):\n    try:\n        for i in range(6):\n"
        "            os.write(fd, repr({'i': i, 'value': repr('PASS')}).encode() + b'\\n')\n"
        "    except OSError:\n        pass\ndef rle_encode(s):\n    return None\n",
        "import builtins\nbuiltins.repr = lambda v: \"'a3b1c2'\"\ndef rle_encode(s):\n    return None\n",
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
    ],
    ids=["sys-exit", "os-exit", "always-equal", "forged-records", "patched-repr", "suicide"],
)
def test_hostile_submission_scores_nothing_and_the_next_episode_scores_normally(code):
    env = make(split="all")
    i = index_of(env, "rle_encode")
    env.reset(options={"task_index": i})
    _, reward, terminated, _, info = env.step(call("submit", code=code))
    # the patched repr can only claim the one value it guessed; rle_encode('') == '' is not it
    assert terminated and reward == 0.0 and not info["success"]
    env.reset(options={"task_index": i})
    _, reward, *_ = env.step(call("submit", code=env.unwrapped.task.solution))
    assert reward == 1.0


# ----------------------------------------------------------------------------- a bare fenced python block


@pytest.mark.parametrize(
    "action",
    [
        "```python\nprint(sorted([3, 1, 2]))\n```",
        "Let me look first:\n\n```Python\nprint(sorted([3, 1, 2]))\n```\nThat should print the list.",
        "```py\nxs = [3, 1, 2]\nprint(sorted(xs))\n```",
        "  ```python3  \nprint(sorted([3, 1, 2]))\n  ```\n",
    ],
    ids=["bare", "with-prose", "py", "indented"],
)
def test_a_bare_python_fence_runs_as_run_python_and_is_not_canonical(action):
    env = make(split="all")
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(action)
    assert info["parse_error"] is None and info["tool_call"]["name"] == "run_python"
    assert info["format"] == "code_fence" and info["canonical"] is False
    assert result_text(obs) == "exit status 0.\nstdout:\n[1, 2, 3]"
    assert info["summary"].startswith("runs 1 ·") and reward == 0.0 and not terminated


@pytest.mark.parametrize(
    ("action", "fragment"),
    [
        ("```\nprint(1)\n```", "unknown tool 'print'"),  # unlabelled: not guessed at
        ("```python\nprint(1)\n```\n```python\nprint(2)\n```", "no tool call found"),  # two blocks
        ("```python\nprint(1)\n", "no tool call found"),  # unclosed
        ("```python\n\n```", "no tool call found"),  # empty
        ("```python\nsubmit(code=def f)\n```", "could not read"),  # a malformed call of a real tool keeps its error
    ],
    ids=["unlabelled", "two-blocks", "unclosed", "empty", "malformed-real-call"],
)
def test_other_fences_are_not_run(action, fragment):
    env = make(split="all")
    env.reset(seed=0)
    _, _, _, _, info = env.step(action)
    assert info["parse_error"] is not None and fragment in info["parse_error"]
    assert info["summary"].startswith("runs 0 ·")


def test_a_tool_call_inside_a_python_fence_is_still_that_call():
    env = make(split="all")
    i = index_of(env, "rle_encode")
    env.reset(options={"task_index": i})
    code = "def rle_encode(s):\n    return s"
    _, _, _, _, info = env.step(f"```python\nrun_tests(code={code!r})\n```")
    assert info["tool_call"] == {"name": "run_tests", "arguments": {"code": code}} and info["format"] == "python"
