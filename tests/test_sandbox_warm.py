"""Warm mode (``Sandbox(warm=True)``): runs forked from a zygote cannot affect each other, and the zygote never
holds what a run was given.

Consecutive runs on one zygote: files, environment, modules and builtins, signal handlers and processes, shared
memory and Unix sockets, the work dir's space. Concurrent runs get zygotes of their own. The zygote's memory never
holds a run's code. Through CodeSandbox, class by class (files, environment, builtins and modules, a daemon serving
a stash, a daemon forging result records, leftover processes and a full disk): a wrong submission after the planting
scores 0, and a correct one still scores 1. The hostile-program suites run in warm mode too
(``tests/test_sandbox.py`` and ``tests/test_hostile_sandbox.py``, ids ``[bwrap-warm]`` and ``[unshare-warm]``).
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time

import pytest

from agentgym.envs.sandbox import SANDBOX_ENV, Sandbox, SandboxUnavailable, layer_status

STATUS = layer_status()
ROOT = os.geteuid() == 0


def warm_param(layer: str):
    reason = STATUS[layer] or (None if ROOT else "warm mode needs root")
    return pytest.param(layer, id=f"{layer}-warm", marks=pytest.mark.skipif(reason is not None, reason=str(reason)))


WARM = [warm_param("bwrap"), warm_param("unshare")]
FS_REFUSALS = ("Read-only file system", "No such file or directory")  # bwrap's /dev has a read-only shm dir


@pytest.fixture
def box(request):
    with Sandbox(request.param, warm=True, timeout=5.0) as box:
        yield box


def ok(result):
    assert result.ok, (result.status(), result.stdout[-500:], result.stderr[-800:])
    return result.stdout


def one_zygote(box: Sandbox) -> None:
    """Consecutive runs of one thread reuse one zygote (so the checks below compare runs of the same zygote)."""
    assert len(box._idle) == 1


@pytest.mark.parametrize("box", WARM, indirect=True)
def test_files_written_by_one_run_are_gone_in_the_next(box):
    fill = "for name in 'ab':\n    open(f'/tmp/{name}', 'w').write('y' * (15 << 20))"
    ok(box.run("open('/work/left', 'w').write('x')\n" + fill))
    one_zygote(box)
    out = ok(box.run("import os, shutil\nprint(sorted(os.listdir('/work')), shutil.disk_usage('/work').used >> 20)"))
    assert out == "[] 0\n"
    out = ok(box.run("for name in 'cd':\n    open(f'/work/{name}', 'w').write('z' * (15 << 20))\nprint('room')"))
    # (A's 30 MiB of the 32 MiB tmpfs are not held)
    assert out == "room\n"


@pytest.mark.parametrize("box", WARM, indirect=True)
def test_environment_changes_do_not_reach_the_next_run(box):
    code = "import os\nprint(dict(os.environ))\nprint(open('/proc/self/environ').read())\nprint(os.getcwd())"
    before = ok(box.run(code))
    ok(
        box.run(
            "import os\nos.environ['LEAK'] = '1'\nos.putenv('LEAK2', '1')\nos.environ['PATH'] = '/w'\nos.chdir('/')"
        )
    )
    after = ok(box.run(code))
    assert after == before
    environ, initial, cwd = after.splitlines()
    assert {k: v for k, v in eval(environ).items() if k != "PWD"} == SANDBOX_ENV  # bwrap adds PWD
    assert "LEAK" not in initial and cwd == "/work"


@pytest.mark.parametrize("box", WARM, indirect=True)
def test_modules_and_builtins_patched_by_one_run_are_pristine_in_the_next(box):
    fresh = ok(box.run("import sys\nprint(sorted(sys.modules))"))
    patch = """
import builtins, sys, os
builtins.len = lambda x: 42
builtins.LEAKED = True
sys.path.insert(0, '/work')
open('/work/json.py', 'w').write('PATCHED = True')
import json
sys.modules['os'].getpid = lambda: 0
sys.setrecursionlimit(50)
"""
    ok(box.run(patch))
    check = """
import builtins, sys, os
print(len([1, 2]), hasattr(builtins, 'LEAKED'), '/work' in sys.path, os.getpid() > 0, sys.getrecursionlimit())
import json
print(hasattr(json, 'PATCHED'), hasattr(json, 'dumps'))
"""
    assert ok(box.run(check)) == "2 False False True 1000\nFalse True\n"
    assert ok(box.run("import sys\nprint(sorted(sys.modules))")) == fresh


@pytest.mark.parametrize("box", WARM, indirect=True)
def test_signals_and_processes_of_one_run_cannot_reach_the_next(box):
    """Run A leaves handlers, a blocked signal mask and a setsid daemon that signals every pid it can see; none
    of it survives into run B, which sees only its own processes and default handlers."""
    attack = """
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(0.3)  # until run A is over
        end = time.time() + 3
        while time.time() < end:
            for pid in range(1, 4000):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        os._exit(0)
    os._exit(0)
print('left a daemon')
"""
    assert ok(box.run(attack)) == "left a daemon\n"
    check = """
import os, signal, time
time.sleep(0.5)  # the daemon, were it alive, would have killed this process by now
print(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, signal.pthread_sigmask(signal.SIG_BLOCK, set()) == set())
print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))
"""
    out = ok(box.run(check)).splitlines()
    assert out[0] == "True True"
    assert eval(out[1]) == [1, 2]  # the run's init and the program: nothing else, the zygote least of all


@pytest.mark.parametrize("box", WARM, indirect=True)
def test_shared_memory_and_sockets_do_not_outlive_a_run(box):
    """Run A tries every way to leave memory or a rendezvous behind: System V segments (refused), POSIX shared
    memory (no /dev/shm), a shared mapping of a file, and an abstract Unix socket held open by a daemon (the
    net namespace is the zygote's, so it must be gone with A's processes)."""
    name = "agentgym-" + secrets.token_hex(4)
    attack = f"""
import ctypes, mmap, os, socket, time
libc = ctypes.CDLL(None, use_errno=True)
print('shmget', libc.shmget(0, 1 << 20, 0o1666), ctypes.get_errno())
try:
    open('/dev/shm/x', 'w')
except OSError as e:
    print('dev/shm', e.strerror)
with open('/work/shared', 'w+b') as f:
    f.truncate(4096)
    mmap.mmap(f.fileno(), 4096)[:6] = b'secret'
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind('\\0{name}')
server.listen()
if os.fork() == 0:
    os.setsid()
    time.sleep(5)
    os._exit(0)
print('listening')
"""
    assert ok(box.run(attack)) in (f"shmget -1 38\ndev/shm {why}\nlistening\n" for why in FS_REFUSALS)
    check = f"""
import os, socket
print(os.listdir('/work'), open('/proc/sysvipc/shm').read().count(chr(10)))
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect('\\0{name}')
    print('connected')
except OSError as e:
    print('refused', e.errno)
"""
    out = ok(box.run(check)).splitlines()
    assert out[0] == "[] 1"  # only /proc/sysvipc/shm's header line
    assert out[1] == "refused 111"  # ECONNREFUSED: no one listens under that name any more


@pytest.mark.parametrize("box", WARM, indirect=True)
def test_concurrent_runs_get_zygotes_and_namespaces_of_their_own(box):
    name = "agentgym-" + secrets.token_hex(4)
    results = {}

    def server():
        code = f"""
import socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind('\\0{name}')
s.listen()
open('/work/mine', 'w').write('a')
print('up', flush=True)
time.sleep(1.5)
"""
        results["server"] = box.run(code)

    ok(box.run("pass"))  # one idle zygote, which the server takes
    thread = threading.Thread(target=server)
    thread.start()
    try:
        while box._idle and thread.is_alive():
            time.sleep(0.01)
        time.sleep(0.3)  # the server binds; the probe then needs a zygote of its own, started from nothing
        probe = f"""
import os, socket
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect('\\0{name}')
    print('connected', os.listdir('/work'))
except OSError as e:
    print('refused', e.errno, os.listdir('/work'))
"""
        results["probe"] = box.run(probe)
    finally:
        thread.join()
    assert ok(results["server"]) == "up\n"
    assert ok(results["probe"]) == "refused 111 []\n"
    assert len(box._idle) == 2  # one zygote each


@pytest.mark.parametrize("box", WARM, indirect=True)
def test_runs_get_their_own_uid_and_process_budget(box):
    fork_all = """
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
except OSError:
    pass
print(os.getuid(), n)
"""
    first, second = ok(box.run(fork_all)).split(), ok(box.run(fork_all)).split()
    assert first[0] != second[0]  # a fresh uid each run
    assert first[1] == second[1] and 1 <= int(first[1]) <= box.limits.processes  # the same budget each run


@pytest.mark.parametrize("box", WARM, indirect=True)
def test_a_killed_run_leaves_the_zygote_serving(box):
    result = box.run("while True:\n    pass", timeout=0.5)
    assert result.killed == "timeout"
    result = box.run("import os\nos.kill(1, 9)\nos.kill(os.getpid(), 9)")
    assert result.signal == 9 or result.exit_code is not None
    assert ok(box.run("print('next')")) == "next\n"
    one_zygote(box)


@pytest.mark.parametrize("box", WARM, indirect=True)
def test_the_zygote_never_holds_a_runs_code(box):
    """No submitted code (nor test input) enters the zygote: it passes the job's file descriptor on unread. The
    zygote's whole memory is searched for a secret that two runs carried, one of them in a test call."""
    secret = "agentgym-zygote-canary-" + secrets.token_hex(8)
    ok(box.run(f"print({secret!r}[:3])"))
    box.run_tests("def f(x):\n    return x", [(f"f({secret!r})", secret)])
    zygote = box._idle[0]
    pids = [pid for pid in descendants(zygote.proc.pid) if exe(pid) == box.python.executable]
    assert len(pids) == 1
    assert secret.encode() not in memory(pids[0])
    assert b"agentgym-zygote-canary-" not in memory(pids[0])


@pytest.mark.parametrize("box", WARM, indirect=True)
def test_the_run_holds_no_descriptor_of_the_zygote(box):
    out = ok(box.run("import os\nprint(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))"))
    assert eval(out) == [0, 1, 2, 3, 4]  # stdin, stdout, stderr, listdir's own, the result channel


# ----------------------------------------------------------------------------- plantings and the scored run

SOLUTION = "def mystery(n):\n    return (n * 7919 + 13) % 1009\n"
EXPECTED = {n: (n * 7919 + 13) % 1009 for n in (2, 3, 5, 7, 11, 13)}
TASK = {
    "id": "mystery",
    "prompt": "Return (n * 7919 + 13) % 1009.",
    "signature": "def mystery(n: int) -> int",
    "visible_tests": [f"mystery(1) == {(7919 + 13) % 1009}"],
    "hidden_tests": [f"mystery({n}) == {v}" for n, v in EXPECTED.items()],
    "solution": SOLUTION,
}
STASH = f"SRC = {SOLUTION!r}\n"
FORGED = "".join(repr({"i": i, "value": repr(v)}) + "\n" for i, v in enumerate(EXPECTED.values()))
# Each planting stashes the answer (the attacker is granted it) where a later run might find it; the wrong
# submission below looks there first. (System V and POSIX shared memory, keyrings, message queues and sockets other
# than AF_UNIX are refused outright: tests/test_hostile_sandbox.py.)
PLANTS = {
    "files": STASH
    + """
for d in ('/work', '/tmp', '/dev/shm', '/'):
    try:
        open(d + '/plant.py', 'w').write(SRC)
    except OSError:
        pass
""",
    "environment": STASH
    + """
import os
os.environ['PLANT'] = SRC
os.putenv('PLANT', SRC)
""",
    "builtins-and-modules": STASH
    + """
import builtins, sys, types
builtins.PLANT = SRC
sys.modules['plant'] = types.SimpleNamespace(SRC=SRC)
""",
    "socket-daemon": STASH
    + """
import os, socket, time
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind('\\0agentgym-plant')
server.listen()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        end = time.time() + 10
        while time.time() < end:
            conn, _ = server.accept()
            conn.sendall(SRC.encode())
            conn.close()
    os._exit(0)
server.close()
""",
    "forging-daemon": f"FORGED = {FORGED!r}\n"
    + """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        end = time.time() + 10
        while time.time() < end:
            for n in range(3, 64):  # the descriptors it holds, then those of every process it can see
                try:
                    os.write(n, FORGED.encode())
                except OSError:
                    pass
            for p in [p for p in os.listdir('/proc') if p.isdigit()]:
                for n in range(3, 16):
                    try:
                        fd = os.open(f'/proc/{p}/fd/{n}', os.O_WRONLY)
                        os.write(fd, FORGED.encode())
                        os.close(fd)
                    except OSError:
                        pass
            time.sleep(0.01)
    os._exit(0)
time.sleep(0.3)
""",
    "processes-and-disk": """
import os, time
open('/work/fill', 'wb').write(b'x' * (15 << 20))
for _ in range(6):
    if os.fork() == 0:
        os.setsid()
        time.sleep(30)
        os._exit(0)
""",
}
FETCH = {
    "files": "src = next(open(d + '/plant.py').read() for d in ('/work', '/tmp', '/dev/shm', '/')"
    " if os.path.exists(d + '/plant.py'))",
    "environment": "src = os.environ['PLANT']",
    "builtins-and-modules": "src = getattr(builtins, 'PLANT', None) or sys.modules['plant'].SRC",
    "socket-daemon": "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n    s.connect('\\0agentgym-plant')\n"
    "    src = s.recv(65536).decode()",
}
WRONG = """import builtins, os, socket, sys
try:
    {fetch}
    exec(src)
except Exception:
    def mystery(n):
        return -1
"""


def wrong_submission(plant: str) -> str:
    """A submission that answers -1, unless the planting reached it (then it runs the stashed answer)."""
    return WRONG.format(fetch=FETCH.get(plant, "raise LookupError('nothing to fetch: a daemon forges records')"))


@pytest.fixture(scope="module", params=WARM)
def warm_env(request, tmp_path_factory):
    from agentgym.envs.code.env import CodeSandboxEnv

    path = tmp_path_factory.mktemp("tasks") / "mystery.jsonl"
    path.write_text(json.dumps(TASK) + "\n", encoding="utf-8")
    env = CodeSandboxEnv(tasks_path=path, split="all", layer=request.param, warm=True, timeout=5.0)
    yield env
    env.close()


def act(env, name: str, code: str) -> tuple[str, float, bool]:
    from agentgym.core.tools import ToolCall

    observation, reward, terminated, _, _ = env.step(ToolCall(name, {"code": code}).to_text())
    return observation, reward, terminated


@pytest.mark.parametrize("plant", list(PLANTS))
def test_a_wrong_submission_after_any_planting_scores_zero(warm_env, plant):
    """A run_python stashes the answer (files, environment, builtins and modules, a daemon serving it on a Unix
    socket, a daemon forging result records into every descriptor it can open, or it leaves processes and a full
    disk behind); the submit that follows on the same zygote looks for it and finds nothing: reward 0. The control,
    planting and looking within one run, passes every hidden test; and a correct submission after the planting, in
    the next episode, still scores 1 (nothing left behind takes its processes or disk)."""
    hidden = warm_env.task.hidden()
    if plant != "processes-and-disk":
        control = warm_env.sandbox.run_tests(PLANTS[plant] + "\n" + wrong_submission(plant), hidden)
        assert control.passed == control.total, [o.explain() for o in control.outcomes]  # the stash works in a run
    warm_env.reset(options={"task_index": 0})
    act(warm_env, "run_python", PLANTS[plant])
    observation, reward, terminated = act(warm_env, "submit", wrong_submission(plant))
    assert terminated and reward == 0.0, observation
    one_zygote(warm_env.sandbox)  # the planting and the submission ran on the same zygote
    warm_env.reset(options={"task_index": 0})
    act(warm_env, "run_python", PLANTS[plant])
    observation, reward, terminated = act(warm_env, "submit", SOLUTION)
    assert terminated and reward == 1.0, observation


def test_warm_mode_is_refused_where_it_cannot_isolate(monkeypatch):
    with pytest.raises(ValueError, match="isolating layer"):
        Sandbox("unsafe", allow_unsafe=True, warm=True, _checked=True)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SandboxUnavailable, match="needs root"):
        Sandbox("unsafe" if STATUS["bwrap"] else "bwrap", allow_unsafe=True, warm=True, _checked=True)


def read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def exe(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = read(f"/proc/{name}/stat")
            if stat:
                children.setdefault(int(stat.rsplit(b")", 1)[1].split()[1]), []).append(int(name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def memory(pid: int) -> bytes:
    """Every readable mapping of ``pid`` (as root)."""
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if "r" not in perms:
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                chunks.append(mem.read(end - start))
            except (OSError, ValueError, OverflowError):
                continue
    return b"".join(chunks)
