"""Hostile input, round 2, against the sandbox (agentgym.envs.sandbox) and CodeSandbox: memory held outside the address
space limit, memory of all a run's processes together, a result channel that costs the harness, values that
cannot be judged, kernel objects that outlive a run, hidden test inputs echoed back to the agent, and raw control
characters in observations.

Each test's id names the layer it ran on (``-warm``: warm mode, root only); a layer this machine lacks is skipped
with the reason. The checks of
what is left on the host after a run (keys, System V objects) need root, which the sandbox needs to give each run
a uid of its own.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import re
import resource
import secrets
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from agentgym.core.tools import ToolCall
from agentgym.envs.code.env import CodeSandboxEnv
from agentgym.envs.sandbox import harness as sandbox
from agentgym.envs.sandbox import inside as sandbox_inside
from agentgym.envs.sandbox.harness import (
    UID_BASE,
    UID_SPAN,
    WORK_INODES,
    Sandbox,
    SandboxLimits,
    layer_status,
    values_equal,
)

STATUS = layer_status()
ROOT = os.geteuid() == 0
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def layer_param(layer: str, warm: bool = False):
    """A layer as a test parameter (``"bwrap"``, or ``"bwrap-warm"`` for warm mode), skipped where it cannot run."""
    reason = STATUS[layer]
    if reason is None and warm and not ROOT:
        reason = "warm mode needs root"
    name = f"{layer}-warm" if warm else layer
    return pytest.param(name, id=name, marks=pytest.mark.skipif(reason is not None, reason=f"{name}: {reason}"))


ISOLATING = [layer_param("bwrap"), layer_param("unshare"), layer_param("bwrap", True), layer_param("unshare", True)]
EVERY_LAYER = [*ISOLATING, layer_param("unsafe")]
ENV_LAYER = next((layer for layer in ("bwrap", "unshare") if STATUS[layer] is None), None)
needs_env_layer = pytest.mark.skipif(ENV_LAYER is None, reason=f"no sandbox layer on this machine: {STATUS}")


@pytest.fixture
def box(request, record_property):
    record_property("layer", request.param)
    layer, _, warm = request.param.partition("-")
    unsafe = layer == "unsafe"
    with Sandbox(layer, timeout=5.0, allow_unsafe=unsafe, _checked=unsafe, warm=bool(warm)) as box:
        yield box


def fresh_uid() -> int:
    """A uid in the sandbox's range that no earlier run used (the range has a million)."""
    return UID_BASE + UID_SPAN // 2 + secrets.randbelow(UID_SPAN // 2)


# ----------------------------------------------------------------------------- 7. the memory bound

OUTSIDE_THE_ADDRESS_SPACE = r"""
import ctypes, fcntl, os, socket
libc = ctypes.CDLL(None, use_errno=True)
MB = 1 << 20
held = {}

def refused(what, fn):
    try:
        return fn()
    except OSError as e:
        print(what, 'refused:', e.strerror)

fds = []
def memfd():  # memory files: not in RLIMIT_AS
    total = 0
    while total < 128 * MB:
        fd = os.memfd_create('hog')
        fds.append(fd)
        os.write(fd, b'x' * (8 * MB))  # under RLIMIT_FSIZE
        total += 8 * MB
    return total
held['memfd'] = refused('memfd', memfd) or 0

def fill(directory, most):  # a memory-backed mount: only its size limit
    total = 0
    try:
        for i in range(most // (4 * MB)):
            with open(f'{directory}/hog{i}', 'wb') as f:
                f.write(b'x' * (4 * MB))
            total += 4 * MB
    except OSError as e:
        print(directory, 'stopped:', e.strerror)
        total += os.path.getsize(f'{directory}/hog{i}') if os.path.exists(f'{directory}/hog{i}') else 0
    return total
memory_backed = []
for line in open('/proc/self/mountinfo'):
    (point, options), kind = line.split(' - ')[0].split()[4:6], line.split(' - ')[1].split()[0]
    if kind in ('tmpfs', 'ramfs') and 'rw' in options.split(','):
        memory_backed.append(point)
for directory in sorted({os.path.realpath(d) for d in (*memory_backed, '/dev', '/dev/shm', '/tmp', '/work')}):
    if os.path.isdir(directory):
        held['fs ' + directory] = fill(directory, 128 * MB)
print('memory-backed rw mounts:', memory_backed)

def sysv():  # a System V segment: memory that no process has to map
    shm = libc.shmget(0, 128 * MB, 0o1600)  # IPC_PRIVATE
    if shm < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    libc.shmat.restype = ctypes.c_void_p
    address = libc.shmat(shm, None, 0)
    ctypes.memset(address, 1, 128 * MB)
    libc.shmdt(ctypes.c_void_p(address))  # detached, and still held
    return 128 * MB
held['sysv shm'] = refused('shmget', sysv) or 0

queued = 0
pairs = []
for _ in range(8):  # socket buffers, grown as far as the host allows
    a, b = socket.socketpair()
    pairs.append((a, b))
    refused('SO_SNDBUF', lambda: a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * MB))
    refused('SO_RCVBUF', lambda: b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * MB))
    a.setblocking(False)
    try:
        while True:
            queued += a.send(b'x' * 65536)
    except BlockingIOError:
        pass
held['sockets'] = queued

queued = 0
pipes = []
for _ in range(8):  # pipe buffers, grown as far as the host allows
    r, w = os.pipe()
    pipes.append((r, w))
    refused('F_SETPIPE_SZ', lambda: fcntl.fcntl(w, 1031, MB))  # /proc/sys/fs/pipe-max-size
    os.set_blocking(w, False)
    try:
        while True:
            queued += os.write(w, b'x' * 65536)
    except BlockingIOError:
        pass
held['pipes'] = queued
print('HELD', {k: v // MB for k, v in held.items()}, sum(held.values()) // MB)
"""


@pytest.mark.parametrize("box", ISOLATING, indirect=True)
def test_memory_outside_the_address_space_is_refused_or_capped(box):
    """Memory files, every writable memory-backed mount, System V segments and grown socket and pipe buffers hold
    memory that RLIMIT_AS does not count (before: one process held 640 MB with memory_mb=512). Now a run holds at
    most the work dir's tmpfs plus default-sized buffers."""
    result = box.run(textwrap.dedent(OUTSIDE_THE_ADDRESS_SPACE))
    assert result.ok, (result.status(), result.stdout[-800:], result.stderr[-800:])
    held_mb = int(result.stdout.rsplit(" ", 1)[1])
    assert held_mb <= box.limits.disk_mb + 8, result.stdout  # measured: 34 MiB (32 of them /work's tmpfs)
    for refusal in ("memfd refused: Function not implemented", "shmget refused: Function not implemented",
                    "SO_SNDBUF refused: Operation not permitted", "F_SETPIPE_SZ refused: Operation not permitted",
                    "/dev stopped: Read-only file system"):  # fmt: skip
        assert refusal in result.stdout, (refusal, result.stdout)
    assert "memory-backed rw mounts: ['/work']" in result.stdout


ALL_PROCESSES = r"""
import os, time
r, w = os.pipe()

def hog():
    chunks = []
    try:
        while True:
            chunks.append(b'x' * (1 << 20))  # written, so resident
    except MemoryError:
        chunks.pop()  # room to report
        return chunks

children = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        held = hog()
        os.write(w, b'%d\n' % len(held))
        time.sleep(30)  # hold it while the others hold theirs
        os._exit(0)
    children += 1
os.close(w)
got = b''
while got.count(b'\n') < children:
    got += os.read(r, 4096)
mine = hog()
print('processes', children + 1, 'held MiB', sum(map(int, got.split())) + len(mine))
"""


@pytest.mark.parametrize("box", ISOLATING, indirect=True)
def test_memory_of_all_processes_together_is_bounded(box):
    """Fork until refused, every process filling its address space at once: the run holds at most processes ×
    memory_mb, and the default product is small (before: 32 × 512 MiB, tens of GB with kernel buffers)."""
    defaults = SandboxLimits()
    assert defaults.processes * defaults.memory_mb <= 2048 and defaults.memory_bound_mb <= 2304
    with Sandbox(box.layer, timeout=5.0, memory_mb=64, processes=6, warm=box.warm, _checked=True) as small:
        result = small.run(ALL_PROCESSES)
    assert result.ok, (result.status(), result.stdout, result.stderr[-500:])
    words = result.stdout.split()
    processes, held = int(words[1]), int(words[4])
    assert 2 <= processes <= 6 and 30 * processes <= held <= 6 * 64, result.stdout  # measured: ~40 MiB each


CAPPED_INODES = [layer_param("unshare"), layer_param("bwrap", True), layer_param("unshare", True)]


@pytest.mark.parametrize("box", CAPPED_INODES, indirect=True)
def test_the_work_dir_holds_a_bounded_number_of_files(box):
    """Each empty file or directory costs ~1.2 KB of kernel memory that no size limit counts (before: 209,000
    directories, 247 MB, in 3 s). The unshare layer and warm mode (which mounts each run's work dir itself) cap
    the work dir's inodes; cold bubblewrap 0.8 cannot (see the module docstring of agentgym.envs.sandbox)."""
    code = "import os\nn = 0\ntry:\n    while True:\n        os.mkdir(f'd{n}')\n        n += 1\n"
    code += "except OSError as e:\n    print(n, e.strerror)"
    result = box.run(code)
    made, _, error = result.stdout.strip().partition(" ")
    assert int(made) < WORK_INODES and error == "No space left on device", result.stdout


# ----------------------------------------------------------------------------- 8. the harness's own channel

RESULT_FD = "import sys\nresult_fd = sys._getframe(1).f_locals['result_fd']\n"
FLOODS = {
    "one-4-MB-list-literal": "os.write(result_fd, b'[' + b'1,' * (2 << 20) + b']\\n')",
    "records-holding-big-literals": "for i in range(8):\n"
    "    os.write(result_fd, repr({'i': i, 'value': '[' + '1,' * 49_000 + ']'}).encode() + b'\\n')",
    "a-million-tiny-records": "os.write(result_fd, b\"{'i': 0, 'value': '1'}\\n\" * 1_000_000)",
    "records-of-nested-fields": "os.write(result_fd, b\"{'i': 0, 'value': {'a': [[[[[[1]]]]]]}}\\n\" * 50_000)",
}


@pytest.mark.parametrize("box", ISOLATING, indirect=True)
@pytest.mark.parametrize("flood", list(FLOODS))
def test_a_hostile_result_channel_costs_the_harness_little(box, flood):
    """Before: one 4 MB line cost the harness 12 s of CPU and 1.9 GB, after the program's time limit. Now the
    harness reads a bounded number of bytes and parses only lines of the runner's shape, values only up to a
    size set by the expected value."""
    code = RESULT_FD + "import os\n" + FLOODS[flood] + "\ndef f():\n    return 1\n"
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu = time.process_time()
    report = box.run_tests(code, [("f()", 2)] * 8)
    cpu = time.process_time() - cpu
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    assert report.passed == 0 and report.total == 8
    assert cpu <= 1.0 and grown_mb <= 64, (cpu, grown_mb)  # measured: ≤ 0.15 s, ≤ 12 MB


@pytest.mark.parametrize("box", ISOLATING, indirect=True)
def test_values_that_cannot_be_judged_fail_and_never_raise(box):
    """Before: 10 ** 400 returned for a float made run_tests raise OverflowError."""
    code = "def f(n):\n    return [10 ** 400, -10 ** 400, 1e999, 10 ** 400, 1.5, [0] * 50_000, object()][n]\n"
    tests = [("f(0)", 1.5), ("f(1)", -1e999), ("f(2)", 10**400), ("f(3)", 10**400), ("f(4)", 1.5), ("f(5)", [0]),
             ("f(6)", None)]  # fmt: skip
    report = box.run_tests(code, tests)
    assert [o.passed for o in report.outcomes] == [False, False, False, True, True, False, False]
    assert report.outcomes[5].got.startswith("[0, 0") and "expected [0]" in report.outcomes[5].explain()
    assert values_equal(10**400, 1.5) is False and values_equal(1.5, 10**400) is False
    assert values_equal(10**300, 1e300) is True  # an int standing in for a float still compares
    assert sandbox_inside.MAX_REPR == sandbox.MAX_REPR  # what the runner sends is what the harness expects


# ----------------------------------------------------------------------------- 9. what outlives a run

KEY_SYSCALLS = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}  # add_key, request_key, keyctl
QUEUE = b"/agentgym-canary"
KERNEL_OBJECTS = rf"""
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
ADD_KEY, REQUEST_KEY, KEYCTL = {KEY_SYSCALLS!r}[platform.machine()]

def attempt(what, call, *args):
    made = 0
    for _ in range(20):
        if call(*args) < 0:
            print(what, 'refused:', os.strerror(ctypes.get_errno()))
            return
        made += 1
    print(what, 'made', made)

KEY_SPEC_USER, KEY_SPEC_SESSION = -4, -3
attempt('add_key user', libc.syscall, ADD_KEY, b'user', b'agentgym-leak', b'x' * 100, 100, KEY_SPEC_USER)
attempt('add_key session', libc.syscall, ADD_KEY, b'user', b'agentgym-leak', b'x' * 100, 100, KEY_SPEC_SESSION)
attempt('request_key', libc.syscall, REQUEST_KEY, b'user', b'agentgym-leak', None, 0)
attempt('keyctl join', libc.syscall, KEYCTL, 1, b'agentgym-session')  # KEYCTL_JOIN_SESSION_KEYRING
attempt('shmget', libc.shmget, 0, 1 << 20, 0o1600)  # IPC_PRIVATE
attempt('semget', libc.semget, 0, 1, 0o1600)
attempt('msgget', libc.msgget, 0, 0o1600)
attempt('mq_open', libc.mq_open, {QUEUE!r}, 0o102, 0o600, None)  # O_RDWR | O_CREAT
"""
OBJECT_KINDS = re.findall(r"attempt\('([^']+)'", KERNEL_OBJECTS)


def key_users() -> dict[int, str]:
    return {int(line.split(":")[0]): line.strip() for line in Path("/proc/key-users").read_text().splitlines()}


def sysv_objects_of(uid: int) -> list[str]:
    """System V objects in the host's IPC namespace owned (uid column 5 in /proc/sysvipc/*) by ``uid``."""
    found = []
    for kind in ("shm", "sem", "msg"):
        for line in Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]:
            columns = line.split()
            if str(uid) in columns[4:9]:
                found.append(f"{kind}: {line}")
    return found


def remove_leftovers(uid: int, python: str) -> None:
    """Undo what a failing run left (so a failure leaves the host as it was): the uid's keys (invalidated as the uid,
    the only one who sees them, with an interpreter it can run), its System V objects and the queue."""
    keyctl = KEY_SYSCALLS[platform.machine()][2]
    code = "import ctypes\nl = ctypes.CDLL(None)\nfor key in open('/proc/keys'):\n"
    code += f"    l.syscall({keyctl}, 21, int(key[:8], 16))  # KEYCTL_INVALIDATE"
    subprocess.run([python, "-I", "-c", code], user=uid, group=uid, check=False, timeout=10)
    libc = ctypes.CDLL(None)
    ipc_rmid = {"shm": lambda i: libc.shmctl(i, 0, None), "sem": lambda i: libc.semctl(i, 0, 0)}
    ipc_rmid["msg"] = lambda i: libc.msgctl(i, 0, None)
    for line in sysv_objects_of(uid):
        kind, _, fields = line.partition(": ")
        ipc_rmid[kind](int(fields.split()[1]))
    libc.mq_unlink(QUEUE)


@pytest.mark.parametrize("box", EVERY_LAYER, indirect=True)
@pytest.mark.filterwarnings("ignore:.*NOT a security boundary")
def test_no_kernel_object_outlives_a_run(box):
    """Before: 189 keyring keys of the uid's quota stayed in the host kernel after one run; on the unsafe layer
    (no IPC namespace) System V objects and message queues would have too. Now every such call is refused."""
    uid = fresh_uid() if ROOT else None
    box.uid = uid
    try:
        result = box.run(textwrap.dedent(KERNEL_OBJECTS))
        assert result.ok, (result.status(), result.stderr[-500:])
        for kind in OBJECT_KINDS:
            assert f"{kind} refused: Function not implemented" in result.stdout, result.stdout
        if ROOT:
            assert uid not in key_users(), key_users()[uid]  # 0 keys left: no entry in the uid's key quota at all
            assert sysv_objects_of(uid) == []
        libc = ctypes.CDLL(None, use_errno=True)  # glibc ≥ 2.34 has the mq_* functions
        assert libc.mq_open(QUEUE, os.O_RDONLY) == -1 and ctypes.get_errno() == 2  # ENOENT in the host's namespace
    finally:
        if ROOT:
            remove_leftovers(uid, box.python.executable)


# ----------------------------------------------------------------------------- 10. the task's secrets

HIDDEN = {
    "id": "secret_fn",
    "prompt": "Return the length of the word.",
    "signature": "def secret_fn(word: str) -> int",
    "visible_tests": ["secret_fn('seen') == 4"],
    "hidden_tests": ["secret_fn('hidden-input-canary-one') == 23", "secret_fn('hidden-input-canary-two') == 23"],
    "solution": "def secret_fn(word):\n    return len(word)\n",
}
NEEDLE = "hidden-input-canary"
STEAL = """
import gc, re, sys
def stolen():
    texts = [repr(o) for o in gc.get_objects() if isinstance(o, (list, dict))]
    frame = sys._getframe()
    while frame is not None:
        texts.append(repr(frame.f_locals))
        frame = frame.f_back
    needle = 'hidden' + '-input-canary-'  # so that the code itself does not hold it
    return ' '.join(sorted({m for t in texts for m in re.findall(needle + '[a-z]+', t)}))
"""
LEAKS = {
    "load-error-message": STEAL + "raise ValueError(stolen())",
    "load-error-class-name": STEAL + "raise type(stolen()[:500], (Exception,), {})()",
    "call-error-class-name": STEAL + "def secret_fn(word):\n    raise type(word * 3, (Exception,), {})()",
    "call-error-message": STEAL + "def secret_fn(word):\n    raise KeyError(stolen())",
    "printed": STEAL + "print(stolen())\nsys.stderr.write(stolen())\ndef secret_fn(word):\n    print(word)\n"
    "    return word",
    "forged-records": STEAL + "import os\nfd = sys._getframe(1).f_locals['result_fd']\n"
    "os.write(fd, (repr({'load_error': True, 'error': stolen(), 'message': stolen(), 'line': 1}) + '\\n').encode())\n"
    "os.write(fd, (repr({'i': 0, 'error': stolen()[:59], 'message': stolen(), 'line': 1}) + '\\n').encode())\n",
    "returned": STEAL + "def secret_fn(word):\n    return stolen()",
}


@pytest.fixture(scope="module")
def secret_env(tmp_path_factory):
    if ENV_LAYER is None:
        pytest.skip(f"no sandbox layer on this machine: {STATUS}")
    path = tmp_path_factory.mktemp("tasks") / "secret.jsonl"
    path.write_text(json.dumps(HIDDEN) + "\n", encoding="utf-8")
    return CodeSandboxEnv(tasks_path=path, split="all", layer=ENV_LAYER, validate=False)


@pytest.mark.parametrize("leak", list(LEAKS))
def test_hidden_inputs_never_reach_the_observation(secret_env, leak):
    """The code can read the hidden calls (they run in its process: frames, gc); submit shows the agent nothing
    the code controls, so they cannot be echoed back (before: a load error's message printed them)."""
    code = LEAKS[leak]
    inside = secret_env.sandbox.run_tests(code, secret_env.task.hidden())
    result = inside.result
    from_the_code = [inside.load_error, [o.got for o in inside.outcomes], result.stdout, result.stderr, result.records]
    assert NEEDLE in json.dumps(from_the_code)  # the control: the code did get hold of them, and sent them out
    secret_env.reset(options={"task_index": 0})
    obs, reward, terminated, _, info = secret_env.step(ToolCall("submit", {"code": code}).to_text())
    assert terminated and reward == 0.0
    assert NEEDLE not in obs and NEEDLE not in json.dumps(info), obs


@needs_env_layer
def test_submit_always_ends_the_episode(tmp_path, monkeypatch):
    """Before: a value that made judging raise (10 ** 400 for a float) left the episode open, so submit could be
    repeated to probe the hidden tests. Now an unscorable value fails its test, and even a sandbox that raises
    ends the episode with reward 0."""
    task = {
        **HIDDEN,
        "id": "half",
        "signature": "def half(n: int) -> float",
        "solution": "def half(n):\n    return n / 2",
    }
    task.update(visible_tests=["half(3) == 1.5"], hidden_tests=["half(5) == 2.5", "half(7) == 3.5"])
    path = tmp_path / "float.jsonl"
    path.write_text(json.dumps(task) + "\n", encoding="utf-8")
    env = CodeSandboxEnv(tasks_path=path, split="all", layer=ENV_LAYER)
    env.reset(options={"task_index": 0})
    submit = ToolCall("submit", {"code": "def half(n):\n    return 10 ** 400\n"}).to_text()
    obs, reward, terminated, _, info = env.step(submit)
    assert terminated and reward == 0.0 and "Submitted: 0/2 hidden tests passed" in obs
    obs, *_ = env.step(submit)
    assert "the episode is over" in obs

    def broken(*args, **kwargs):
        raise OSError(24, "Too many open files")

    env.reset(options={"task_index": 0})
    monkeypatch.setattr(env.sandbox, "run_tests", broken)
    with pytest.warns(RuntimeWarning, match="hidden tests could not be run"):
        obs, reward, terminated, _, info = env.step(submit)
    assert terminated and reward == 0.0 and "could not be run (OSError)" in obs and info["summary"].endswith("0/2")


@needs_env_layer
def test_program_output_reaches_the_observation_escaped():
    """Raw ESC, BEL, CR, BS and NUL from a program (its output, or an error name it forges) are shown escaped, so
    they cannot drive the terminal or the log that displays an observation; the summary stays one line."""
    env = CodeSandboxEnv(split="all", layer=ENV_LAYER, render_mode="ansi")
    env.reset(seed=0)
    noisy = "import sys\nprint('\\x1b[2J\\x07\\r\\x08\\x00 out')\nsys.stderr.write('\\x1b]0;title\\x07 err')"
    forged = (RESULT_FD + "import os\nos.write(result_fd, (repr({'error': '\\x1b[31mE\\nvil', 'message': "
              "'\\x1b[2J', 'line': 1}) + '\\n').encode())\nraise SystemExit(1)")  # fmt: skip
    tests = "import sys\nprint('\\x1b[2J\\x00 printed')\ndef f(x):\n    return x\n"
    observations = []
    for action in (ToolCall("run_python", {"code": noisy}), ToolCall("run_python", {"code": forged}),
                   ToolCall("run_tests", {"code": tests})):  # fmt: skip
        obs, _, _, _, info = env.step(action.to_text())
        observations.append(obs)
        assert not CONTROL.search(obs) and not CONTROL.search(info["summary"]), repr(obs)
        assert "\n" not in info["summary"] and not CONTROL.search(env.render())
    assert "\\x1b[2J\\x07\\x0d\\x08\\x00 out" in observations[0] and "\\x1b]0;title\\x07 err" in observations[0]
    assert "\\x1b[2J\\x00 printed" in observations[2]
