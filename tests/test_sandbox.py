"""The sandbox (agentgym.envs.sandbox): every available layer, the hostile-program suite, and results that code inside
cannot forge.

Each test's id names the layer it ran on (``[bwrap-...]``, ``[unshare-...]``, ``[unsafe]``; ``[bwrap-warm-...]``
and ``[unshare-warm-...]`` for warm mode, root only), and the layer is also recorded as the test's ``layer``
property (``--junitxml``). A layer this machine lacks is skipped with the
reason. Hostile programs run only on the isolating layers, and the ones that signal other processes only after
the layer has been shown to give the code its own PID namespace (and they check that again themselves).
"""

from __future__ import annotations

import hashlib
import os
import socket
import textwrap
import threading
import time
from pathlib import Path

import pytest

from agentgym.envs.sandbox import harness as sandbox_module
from agentgym.envs.sandbox.harness import (
    SANDBOX_ENV,
    UID_BASE,
    UID_SPAN,
    Sandbox,
    SandboxLimits,
    SandboxUnavailable,
    layer_status,
    parse_value,
    processes_of,
    values_equal,
)

STATUS = layer_status()
ROOT = os.geteuid() == 0
HOST_PID_NS = os.readlink("/proc/self/ns/pid")
REPO = Path(__file__).resolve().parent.parent
SECRET = "agentgym-canary-7f3a91"


def layer_param(layer: str, warm: bool = False):
    """A layer as a test parameter (``"bwrap"``, or ``"bwrap-warm"`` for warm mode), skipped where it cannot run."""
    reason = STATUS[layer]
    if reason is None and warm and not ROOT:
        reason = "warm mode needs root"
    name = f"{layer}-warm" if warm else layer
    return pytest.param(name, id=name, marks=pytest.mark.skipif(reason is not None, reason=f"{name}: {reason}"))


ISOLATING = [layer_param("bwrap"), layer_param("unshare"), layer_param("bwrap", True), layer_param("unshare", True)]


@pytest.fixture
def box(request, record_property):
    """A sandbox on the test's layer (cold, or warm for ``"<layer>-warm"``), with short limits; records which
    layer ran."""
    record_property("layer", request.param)
    layer, _, warm = request.param.partition("-")
    with Sandbox(layer, timeout=2.0, allow_unsafe=layer == "unsafe", warm=bool(warm)) as box:
        yield box


def sandbox_processes(patience: float = 2.0) -> list[int]:
    """Live processes of any uid the sandbox hands out (as root every run gets one of them), after waiting up to
    ``patience`` seconds for the kernel to finish tearing down PID namespaces."""
    deadline = time.monotonic() + patience
    while (found := _sandbox_processes()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return found


def _sandbox_processes() -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            status = Path(f"/proc/{name}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uid = int(fields["Uid"].split()[0])
        if UID_BASE <= uid < UID_BASE + UID_SPAN and fields["State"].split()[0] not in ("Z", "X"):
            found.append(int(name))
    return found


def repo_digest() -> dict[str, str]:
    """SHA-256 of every file of the package, the envs and the tests (what hostile code must not change)."""
    digest = {}
    for folder in ("agentgym", "envs", "tests"):
        for path in sorted((REPO / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


# ----------------------------------------------------------------------------- judging values


@pytest.mark.parametrize(
    "got, expected, equal",
    [
        (3, 3, True),
        (0.1 + 0.2, 0.3, True),
        (1, 1.0, True),
        (True, 1, True),  # Python's ==
        ([1, 2], (1, 2), False),  # a list is not a tuple
        ({"a": [0.30000000000000004]}, {"a": [0.3]}, True),
        ({1, 2}, {2, 1}, True),
        ("3", 3, False),
        (None, 0, False),
        (1.0001, 1.0, False),
    ],
)
def test_values_equal(got, expected, equal):
    assert values_equal(got, expected) is equal


def test_parse_value_accepts_literals_only():
    assert parse_value("[1, (2, 3), {'a': None}, {4}, set(), b'x', -1.5]") == (
        True,
        [1, (2, 3), {"a": None}, {4}, set(), b"x", -1.5],
    )
    for text in ("Yes()", "__import__('os').system('id')", "<object at 0x1>", "nan", "[" * 100_000, "9" * 5000):
        assert parse_value(text) == (False, None), text[:40]


def test_limits_are_validated_and_explained():
    with pytest.raises(ValueError, match="timeout"):
        SandboxLimits(timeout=0)
    with pytest.raises(ValueError, match="memory_mb"):
        Sandbox("bwrap", memory_mb=1)
    with pytest.raises(ValueError, match="layer must be"):
        Sandbox("docker")
    with pytest.raises(ValueError, match="allow_unsafe=True"):
        Sandbox("unsafe")


def test_no_isolation_layer_refuses_unless_unsafe_is_allowed(monkeypatch):
    monkeypatch.setattr(sandbox_module, "_probe", lambda layer, python: f"{layer} is not here")
    with pytest.raises(SandboxUnavailable, match=r"apt-get install bubblewrap.*allow_unsafe=True"):
        Sandbox()
    with pytest.warns(RuntimeWarning, match="NOT a security boundary"):
        assert Sandbox(allow_unsafe=True).layer == "unsafe"


def test_auto_picks_the_strongest_available_layer(record_property):
    available = [layer for layer in ("bwrap", "unshare") if STATUS[layer] is None]
    if not available:
        pytest.skip(f"no isolating layer here: {STATUS}")
    chosen = Sandbox().layer
    record_property("layer", chosen)
    assert chosen == available[0]


# ----------------------------------------------------------------------------- every layer, benign code


@pytest.mark.parametrize("box", [*ISOLATING, layer_param("unsafe")], indirect=True)
@pytest.mark.filterwarnings("ignore:.*NOT a security boundary")
def test_benign_code_on_every_layer(box):
    result = box.run("import sys\nprint('hello', 6 * 7)\nprint('to stderr', file=sys.stderr)")
    assert result.ok and result.stdout == "hello 42\n" and result.stderr == "to stderr\n", result
    assert result.layer == box.layer and result.duration < 2.0 and result.status() == "exit status 0"

    result = box.run("def f(xs):\n    return xs[3]\n\nf([1])\n")
    assert result.exit_code == 1 and result.error_summary() == "IndexError line 2"
    assert 'File "<solution>", line 2, in f' in result.stderr and "<string>" not in result.stderr
    assert result.stderr.rstrip().endswith("IndexError: list index out of range")

    result = box.run("import os\nprint(sorted(os.environ))\nexit(3)")
    assert result.exit_code == 3 and set(eval(result.stdout)) <= {*SANDBOX_ENV, "PWD"}

    report = box.run_tests(
        "def add(a, b):\n    return a + b if a != 2 else 5\n",
        [("add(1, 2)", 3), ("add(2, 2)", 4), ("add([1], 2)", 0), ("add(0.1, 0.2)", 0.3)],
    )
    assert [o.passed for o in report.outcomes] == [True, False, False, True]
    assert report.outcomes[1].explain() == "add(2, 2) returned 5, expected 4"
    assert report.outcomes[2].error.startswith("TypeError: can only concatenate list") and report.outcomes[2].line == 2


def test_unsafe_layer_warns_and_still_ends_what_the_code_leaves_behind(record_property):
    """The unsafe layer (rlimits only) is for trusted code; a benign child left running is still found (by the
    run's uid) and killed."""
    record_property("layer", "unsafe")
    with pytest.warns(RuntimeWarning, match="NOT a security boundary"):
        box = Sandbox("unsafe", allow_unsafe=True, timeout=2.0, uid=UID_BASE + UID_SPAN - 1 if ROOT else None)
    result = box.run("import os, time\nif os.fork() == 0:\n    time.sleep(30)\n    os._exit(0)\nprint('parent done')")
    assert result.ok and result.stdout == "parent done\n" and result.duration < 1.5
    no_new_privs = box.run("print([l for l in open('/proc/self/status') if l.startswith('NoNewPrivs')])")
    assert "NoNewPrivs:\\t1" in no_new_privs.stdout
    if ROOT:
        assert result.stray_processes >= 1 and processes_of(UID_BASE + UID_SPAN - 1) == []


@pytest.mark.parametrize("box", ISOLATING, indirect=True)
def test_isolation_properties(box):
    code = f"""
import os, socket, sys
print('pid', os.getpid(), len([p for p in os.listdir('/proc') if p.isdigit()]))
print('pidns', os.readlink('/proc/self/ns/pid') != {HOST_PID_NS!r})
print('uid', os.getuid(), os.geteuid())
print('host', socket.gethostname())
print('root', sorted(os.listdir('/')))
print('net', sorted(os.listdir('/sys/class/net')) if os.path.exists('/sys/class/net') else 'none')
print('cwd', os.getcwd(), os.access('.', os.W_OK), os.access('/', os.W_OK))
for module in ('agentgym', 'numpy', 'pytest'):
    try:
        __import__(module)
        print('import', module, 'ok')
    except ImportError:
        print('import', module, 'missing')
"""
    result = box.run(code)
    assert result.ok, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines() if not line.startswith("import"))
    pid, count = map(int, lines["pid"].split())
    assert pid <= 2 and count <= 3 and lines["pidns"] == "True"
    uid = int(lines["uid"].split()[0])
    bwrap_user = box.layer == "bwrap" and not ROOT  # the one uid of bwrap's user namespace (as root: none)
    assert uid != 0 and (uid == 65534 if bwrap_user else (not ROOT or UID_BASE <= uid < UID_BASE + UID_SPAN))
    assert lines["host"] == "sandbox"
    assert set(eval(lines["root"])) <= {"usr", "lib", "lib64", "lib32", "proc", "dev", "work", "tmp", "bin"}
    assert lines["cwd"] == "/work True False"
    assert "import agentgym missing" in result.stdout and "import numpy missing" in result.stdout


@pytest.mark.skipif(not ROOT or STATUS["bwrap"] is not None, reason="bwrap as root only")
def test_bwrap_as_root_falls_back_to_a_user_namespace(monkeypatch):
    """Where bwrap may not build the sandbox as root without a user namespace (a container without
    CAP_SYS_ADMIN), the cold layer uses one, as for other users, and warm bwrap is refused."""
    assert sandbox_module._root_bwrap_works(Sandbox("bwrap").python)  # this machine: the cheaper path
    monkeypatch.setattr(sandbox_module, "_root_bwrap_works", lambda python: False)
    result = Sandbox("bwrap", timeout=2.0).run("import os\nprint(os.getuid())")
    assert result.ok and result.stdout == "65534\n", result
    with pytest.raises(SandboxUnavailable, match="warm bwrap needs"):
        Sandbox("bwrap", warm=True)


@pytest.mark.parametrize("box", ISOLATING, indirect=True)
def test_same_code_same_output(box):
    code = "print({'alpha', 'beta', 'gamma', 'delta'}, hash('agentgym'))"
    assert box.run(code).stdout == box.run(code).stdout


@pytest.mark.parametrize("box", ISOLATING, indirect=True)
def test_two_threads_run_at_once_without_mixing(box):
    results = {}

    def work(tag):
        results[tag] = box.run(f"import time\nfor i in range(3):\n    print('{tag}', i)\n    time.sleep(0.05)")

    threads = [threading.Thread(target=work, args=(tag,)) for tag in ("left", "right")]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.monotonic() - started < 1.5
    for tag in ("left", "right"):
        assert results[tag].stdout == "".join(f"{tag} {i}\n" for i in range(3))


# ----------------------------------------------------------------------------- results the code cannot forge

SECRET_TESTS = [("secret_fn(1)", "sentinel-one-4b1d"), ("secret_fn(2)", "sentinel-two-93aa"), ("secret_fn(3)", [3])]
HONEST = "def secret_fn(n):\n    return {1: 'sentinel-one-4b1d', 2: 'sentinel-two-93aa'}.get(n, [n])\n"
FORGERIES = {
    "sys-exit-0": "import sys\nsys.exit(0)",
    "os-exit-0": "import os\nos._exit(0)",
    "patched-exit-prints-ok": """
        import builtins, sys
        sys.exit = builtins.exit = lambda *a: None
        print('OK: 3/3 tests passed')
        def secret_fn(n):
            return None
    """,
    "always-equal-object": """
        class Yes:
            def __eq__(self, other):
                return True
            __hash__ = object.__hash__
        def secret_fn(n):
            return Yes()
    """,
    "patched-unittest-and-assert": """
        import builtins, unittest
        unittest.TestCase.assertEqual = lambda *a, **k: None
        builtins.AssertionError = type('Never', (Exception,), {})
        def secret_fn(n):
            return None
    """,
    "forged-records-on-every-fd": """
        import os
        for fd in range(3, 64):
            for i in range(3):
                try:
                    os.write(fd, repr({'i': i, 'value': "'PASS'"}).encode() + b'\\n')
                except OSError:
                    pass
        def secret_fn(n):
            return 'PASS'
    """,
    "patched-eval-and-repr": """
        import builtins
        builtins.eval = lambda *a, **k: 'PASS'
        builtins.repr = lambda v: 'True'
        def secret_fn(n):
            return None
    """,
    "steals-the-job-from-the-runner": """
        import sys
        frame, found = sys._getframe(), []
        while frame:
            found += [v for k, v in frame.f_locals.items() if k == 'job']
            frame = frame.f_back
        print(found)
        def secret_fn(n):
            return found
    """,
    "raises-systemexit-in-each-call": "def secret_fn(n):\n    raise SystemExit(0)\n",
    "kills-itself-mid-tests": "import os, signal\ndef secret_fn(n):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
}


@pytest.mark.parametrize("box", ISOLATING, indirect=True)
@pytest.mark.parametrize("name", list(FORGERIES))
def test_fake_success_cannot_pass(box, name):
    """Patching sys.exit, unittest, assert or builtins, printing OK, exiting, dying or writing fake records to the
    result pipe passes no test: the expected values never enter the sandbox, and a test without a result fails."""
    assert box.run_tests(HONEST, SECRET_TESTS).passed == 3  # the control
    report = box.run_tests(textwrap.dedent(FORGERIES[name]), SECRET_TESTS)
    assert report.passed == 0 and report.total == 3, [o.explain() for o in report.outcomes]
    seen = report.result.stdout + report.result.stderr + repr(report.result.records)
    assert "sentinel" not in seen


# ----------------------------------------------------------------------------- the hostile-program suite


def guarded(code: str) -> str:
    """``code`` that first proves it is in a PID namespace of its own (else it stops before doing anything)."""
    check = f"""
        import os
        if os.readlink('/proc/self/ns/pid') == {HOST_PID_NS!r} or os.getpid() > 3:
            raise SystemExit('refusing: not in a PID namespace of its own')
    """
    return textwrap.dedent(check) + textwrap.dedent(code)


def hostile_suite(canary: Path, port: int) -> dict[str, tuple[str, float, object]]:
    """name → (code, timeout, check(result)); each check asserts (or returns) the observation that shows the
    program was contained."""
    limits = SandboxLimits()
    test_file, package_file = str(REPO / "tests" / "test_sandbox.py"), str(REPO / "agentgym" / "sandbox.py")

    def stopped(r):
        assert r.timed_out and r.killed == "timeout" and r.exit_code is None and r.duration < 2.0

    def memory_error(r):
        assert r.exit_code == 1 and "MemoryError" in r.stderr

    def prints(text):
        def check(r):
            assert text in r.stdout, (r.stdout[-300:], r.stderr[-300:])

        return check

    def quick_exit(r):
        assert r.ok and r.stdout == "parent done\n" and r.duration < 1.0

    def fork_limit(r):
        assert "Resource temporarily unavailable" in r.stdout and int(r.stdout.split()[3]) < limits.processes

    def output_capped(r):
        assert r.killed == "output limit" and r.stdout_truncated and len(r.stdout) == limits.output_bytes
        assert r.duration < 1.0  # killed while reading, not after 1 GB

    def disk_full(r):
        assert "No space left on device" in r.stdout and int(r.stdout.split()[2]) <= limits.disk_mb

    def no_writes(r):
        assert r.ok and r.stdout.count("refused") == 8 and "CHANGED" not in r.stdout, r.stdout
        assert canary.read_text() == "canary"

    def no_secrets(r):
        assert r.ok and SECRET not in r.stdout and "root:" not in r.stdout, r.stdout
        assert "/etc/shadow unreadable" in r.stdout and "/root/.ssh/id_rsa unreadable" in r.stdout
        assert "\nFalse False\n" in r.stdout  # no ~/.ssh, no /root at all
        assert set(eval(r.stdout.splitlines()[0])) <= {*SANDBOX_ENV, "PWD"}
        # PID 1 is bwrap (started with the sandbox's clean environment), the unshare layer's init (which has
        # dropped privileges and is not dumpable) or a warm run's init (cloned from the zygote, which bwrap or
        # unshare started with the clean environment; bwrap adds PWD=/work): nothing of the host's shows
        if "/proc/1/environ unreadable" not in r.stdout:
            environ = r.stdout.split("/proc/1/environ ", 1)[1].split("\n/proc/", 1)[0]
            assert {part.split("=")[0] for part in environ.split("\x00") if part} <= {*SANDBOX_ENV, "PWD"}
            assert "PWD=" not in environ or "PWD=/work\x00" in environ

    def no_network(r):
        assert r.ok and r.stdout.count("no network") == 3, r.stdout

    def segfault(r):
        assert r.signal == 11 and r.error_summary() == "SIGSEGV" and "SIGSEGV" in r.status()

    suite = {
        "busy-loop": ("while True:\n    pass", 0.5, stopped),
        "sleep-forever": ("import time\ntime.sleep(10 ** 6)", 0.5, stopped),
        "memory-bomb": ("x = bytearray(8 * 1024 ** 3)", 2.0, memory_error),
        "memory-creep": (
            """
            chunks = []
            while True:
                chunks.append(bytearray(64 * 1024 ** 2))
            """,
            3.0,
            memory_error,
        ),
        "fork-bomb": (
            """
            import os
            while True:
                try:
                    os.fork()
                except OSError:
                    pass
            """,
            0.5,
            stopped,
        ),
        "fork-until-refused": (
            """
            import os, time
            n = 0
            try:
                while True:
                    if os.fork() == 0:
                        time.sleep(30)
                        os._exit(0)
                    n += 1
            except OSError as e:
                print('fork refused after', n, 'children:', e)
            """,
            2.0,
            fork_limit,
        ),
        "fork-and-orphan": (
            """
            import os, time
            if os.fork() == 0:
                time.sleep(30)
            print('parent done')
            """,
            2.0,
            quick_exit,
        ),
        "setsid-double-fork-escapee": (
            """
            import os, time
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(30)
                os._exit(0)
            print('parent done')
            """,
            2.0,
            quick_exit,
        ),
        "close-stdout-then-loop": ("import os\nos.close(1)\nos.close(2)\nwhile True:\n    pass", 0.5, stopped),
        "print-1-gb": (
            """
            import sys
            chunk = 'x' * 65536
            for _ in range(16384):
                sys.stdout.write(chunk)
            """,
            2.0,
            output_capped,
        ),
        "read-stdin": ("print(input())", 2.0, lambda r: r.exit_code == 1 and "EOFError" in r.stderr),
        "fill-the-disk": (
            """
            n = 0
            try:
                for i in range(1000):
                    with open(f'f{i}', 'wb') as f:
                        for _ in range(8):
                            f.write(b'x' * (1 << 20))
                            n += 1
            except OSError as e:
                print('stopped after', n, 'MiB:', e)
            """,
            3.0,
            disk_full,
        ),
        "one-huge-file": (
            """
            try:
                with open('/tmp/big', 'wb') as f:
                    for _ in range(64):
                        f.write(b'x' * (1 << 20))
            except OSError as e:
                print(e)
            """,
            3.0,
            prints("File too large"),
        ),
        "write-and-delete-outside-the-work-dir": (
            f"""
            import os, shutil
            def attempt(what, fn):
                try:
                    fn()
                    print(what, 'CHANGED')
                except OSError as e:
                    print(what, 'refused:', type(e).__name__)
            attempt('test file', lambda: open({test_file!r}, 'w').write('x'))
            attempt('remove package file', lambda: os.remove({package_file!r}))
            attempt('remove repo', lambda: shutil.rmtree({str(REPO)!r}))
            attempt('canary', lambda: open({str(canary)!r}, 'w').write('gone'))
            attempt('passwd', lambda: open('/etc/passwd', 'a').write('evil::0:0::/:/bin/sh'))
            attempt('stdlib', lambda: open(os.__file__, 'a').write('import evil'))
            attempt('root dir', lambda: open('/evil', 'w'))
            attempt('proc sys', lambda: open('/proc/sys/kernel/hostname', 'w').write('pwned'))
            """,
            2.0,
            no_writes,
        ),
        "read-secrets": (
            """
            import os
            print(dict(os.environ))
            def show(path):
                try:
                    with open(path) as f:
                        print(path, f.read()[:300])
                except OSError as e:
                    print(path, 'unreadable', e)
            show('/proc/1/environ')
            show(f'/proc/{os.getppid()}/environ')
            show('/etc/shadow')
            print(os.listdir(os.path.expanduser('~')))
            print(os.path.exists('/root/.ssh'), os.path.exists('/root'))
            show('/root/.ssh/id_rsa')
            """,
            2.0,
            no_secrets,
        ),
        "open-a-network-connection": (
            f"""
            import socket
            for target in [('1.1.1.1', 53), ('127.0.0.1', {port})]:
                try:
                    socket.create_connection(target, timeout=0.5)
                    print('connected', target)
                except OSError as e:
                    print('no network:', e)
            try:
                socket.getaddrinfo('example.com', 80)
                print('resolved')
            except OSError as e:
                print('no network:', e)
            """,
            3.0,
            no_network,
        ),
        "kill-the-parent": (
            guarded(
                """
                import signal
                os.kill(os.getppid(), signal.SIGKILL)
                print('still here')
                """
            ),
            2.0,
            # the parent is PID 1 of the run's namespace, which ignores the signal, or (bwrap as root) a root
            # process the run's uid may not signal at all
            lambda r: (r.ok and "still here" in r.stdout) or (r.exit_code == 1 and "PermissionError" in r.stderr),
        ),
        "kill-every-process": (
            guarded(
                """
                import signal, time
                kids = []
                for _ in range(3):
                    pid = os.fork()
                    if pid == 0:
                        time.sleep(30)
                        os._exit(0)
                    kids.append(pid)
                os.kill(-1, signal.SIGKILL)
                print('children killed:', [os.WTERMSIG(os.waitpid(k, 0)[1]) for k in kids])
                """
            ),
            2.0,
            lambda r: r.ok and "children killed: [9, 9, 9]" in r.stdout,
        ),
        "deep-recursion": (
            "def f(n):\n    return f(n + 1)\nf(0)",
            2.0,
            lambda r: r.error_summary() == "RecursionError line 2",
        ),
        "segfault-via-ctypes": ("import ctypes\nctypes.string_at(0)", 2.0, segfault),
        "zip-bomb": (
            """
            import gzip
            member = gzip.compress(bytes(32 << 20), 1)
            bomb = member * 32
            print(len(bomb), 'bytes inflate to 1 GiB')
            gzip.decompress(bomb)
            """,
            3.0,
            memory_error,
        ),
        "thread-storm": (
            """
            import threading, time
            n = 0
            try:
                while True:
                    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
                    n += 1
            except RuntimeError as e:
                print('stopped after', n, 'threads:', e)
            """,
            2.0,
            prints("can't start new thread"),
        ),
        "run-a-shell": (
            "import os\nos.execv('/bin/sh', ['sh', '-c', 'id'])",
            2.0,
            lambda r: "FileNotFoundError" in r.stderr,
        ),
        "become-root": ("import os\nos.setuid(0)", 2.0, lambda r: r.exit_code == 1 and "Error" in r.stderr),
        "new-user-namespace": (
            "import ctypes\nprint('unshare returned', ctypes.CDLL(None).unshare(0x10000000))",
            2.0,
            prints("unshare returned -1"),
        ),
    }
    return {name: (textwrap.dedent(code), timeout, check) for name, (code, timeout, check) in suite.items()}


@pytest.fixture(scope="module")
def suite_context(tmp_path_factory):
    """What the suite must leave alone, captured before it: the repo's files, a canary file, the environment
    (with a secret in it), a listening socket on the host; checked after every layer's suite."""
    canary = tmp_path_factory.mktemp("outside") / "canary.txt"
    canary.write_text("canary")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    os.environ["AGENTGYM_SECRET_CANARY"] = SECRET
    try:
        yield {"canary": canary, "listener": listener, "digest": repo_digest(), "pid": os.getpid()}
    finally:
        del os.environ["AGENTGYM_SECRET_CANARY"]
        listener.close()


SUITE_NAMES = list(hostile_suite(Path("/nonexistent"), 1))


@pytest.mark.parametrize("box", ISOLATING, indirect=True)
@pytest.mark.parametrize("name", SUITE_NAMES)
def test_hostile_program_is_contained(box, name, suite_context):
    if name.startswith("kill-"):  # as root outside a PID namespace these would hit every process on the machine
        probe = box.run("import os\nprint(os.readlink('/proc/self/ns/pid'), os.getpid())")
        ns, pid = probe.stdout.split()
        if ns == HOST_PID_NS or int(pid) > 3:
            pytest.skip(f"{box.layer} did not give the code its own PID namespace")
    suite = hostile_suite(suite_context["canary"], suite_context["listener"].getsockname()[1])
    code, timeout, check = suite[name]
    result = box.run(code, timeout=timeout)
    verdict = check(result)
    assert verdict is not False, (result.status(), result.stdout[-500:], result.stderr[-500:])
    assert os.getpid() == suite_context["pid"]  # the harness is alive and is still itself
    if ROOT:
        assert sandbox_processes() == []
    with pytest.raises(BlockingIOError):
        suite_context["listener"].accept()  # nothing inside reached the host's loopback


@pytest.mark.parametrize("box", ISOLATING, indirect=True)
def test_after_the_hostile_suite_nothing_is_left_and_the_next_task_scores(box, suite_context):
    """Runs after the suite (pytest keeps file order): no leftover processes, no changed files, and the sandbox
    still runs and scores ordinary code."""
    if ROOT:
        assert sandbox_processes() == []
    assert repo_digest() == suite_context["digest"]
    assert suite_context["canary"].read_text() == "canary"
    report = box.run_tests("def add(a, b):\n    return a + b\n", [("add(1, 2)", 3), ("add(-1, 1)", 0)])
    assert report.passed == 2 and report.result.ok
