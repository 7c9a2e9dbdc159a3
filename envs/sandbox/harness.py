"""Run untrusted Python in a sandbox: the security boundary of agentgym's code tasks.

::

    from agentgym.envs.sandbox import Sandbox

    box = Sandbox()                                    # the best isolation layer this machine has
    result = box.run("print(sum(range(10)))")
    result.stdout, result.exit_code, result.layer      # '45\\n', 0, 'bwrap'

    report = box.run_tests("def add(a, b):\\n    return a + b", [("add(1, 2)", 3), ("add(-1, 1)", 0)])
    report.passed, report.total                        # 2, 2

## Layers (``layer=``, tried in this order by ``"auto"``)

- ``"bwrap"`` (`bubblewrap <https://github.com/containers/bubblewrap>`_, ``apt-get install bubblewrap``): new
  PID, network, IPC, UTS and cgroup namespaces, ``--die-with-parent``, ``--new-session``, and no new user
  namespaces; a read-only root holding read-only binds of only what the interpreter needs (its binary and
  standard library, ``/usr/lib``); a fresh ``/proc``; a minimal, read-only ``/dev``; a tmpfs work dir of
  ``disk_mb`` at ``/work`` (``/tmp`` points there). No ``/root``, no ``/home``, no ``/etc``. bwrap itself is
  started with the sandbox's clean environment, so ``/proc/1/environ`` shows nothing else. As root, bwrap runs
  without a user namespace, keeping only ``CAP_SETUID``/``CAP_SETGID``, with which the runner becomes the run's
  uid before it reads the code (that clears every capability); the filter refuses new user namespaces. As
  another user, bwrap adds a user namespace (``--unshare-user``, uid 65534 inside, ``--disable-userns`` on
  bwrap ≥ 0.8, ``--cap-drop ALL``).
- ``"unshare"`` (util-linux; root only): the same namespaces without a user namespace, and the same root file
  system, built by :mod:`agentgym.envs.sandbox.inside` as root inside the new namespaces before it drops
  privileges and chroots; its init also enforces the wall-clock limit itself.
- ``"unsafe"``: rlimits, the system-call filter and an unprivileged uid only, in a temporary directory: **not a
  security boundary** (the code sees the file system and the network). Used only with ``allow_unsafe=True``, with
  a loud warning.

Without bwrap and root, ``"auto"`` raises :class:`SandboxUnavailable` rather than run untrusted code unprotected.

## Warm mode (``warm=True``; root, bwrap or unshare)

Cold, each run starts bwrap (or unshare) and a fresh interpreter. Warm, a **zygote** started once per concurrent
run (:func:`agentgym.envs.sandbox.inside.serve`: bwrap as root without a user namespace, or the unshare layer's
root file system, with the runner imported) clones each run into fresh PID, mount and IPC namespaces; the run's
init unmounts the zygote's ``/proc`` and work dir, mounts a fresh ``/proc`` and an empty tmpfs work dir of its own
(``disk_mb``, ``WORK_INODES`` inodes, so warm bwrap caps inodes too), keeps only the run's file descriptors,
becomes a fresh uid, installs the system-call filter (which also refuses new user namespaces) and then runs the
job exactly as the cold layers do (rlimits, the runner, results judged outside). So:

- nothing one run writes is visible to the next: files die with its tmpfs, its processes with its PID namespace
  (and its uid is never used again), its memory, environment, modules and signal handlers with its processes
  (every run is cloned from the same pristine zygote); System V IPC and POSIX queues are refused by the filter;
- no submitted code or test input ever enters the zygote: it passes the job's file descriptor on unread, and
  only the run's limits travel in the request;
- the network namespace is the zygote's (a new one costs ~2 ms a run): it has only a loopback device, the
  filter allows only Unix sockets, and a zygote serves one run at a time, so a socket (even an abstract one)
  dies with the run that made it; concurrent runs use different zygotes.

Warm mode needs root (each run needs a uid of its own, which a zygote in bwrap's user namespace, with one mapped
uid, cannot give); without root ``Sandbox(warm=True)`` raises :class:`SandboxUnavailable`. :meth:`Sandbox.close`
(or ``with Sandbox(...) as box``) stops the idle zygotes; they also exit with the harness.

## Speed

Measured in one interleaved run by ``benchmarks/sandbox_latency.py`` (which times the floor itself: bwrap with the
same binds around ``python -I -S -c "print(1)"``; ``--profile`` splits a cold run into its phases): the
runner starts from a code object compiled once per interpreter (compiling it took ~5 ms a run) read from a sealed
memory file, imports only built-in modules and ``resource``, and the cold bwrap layer as root needs no user
namespace nor ``setpriv``; warm runs skip bwrap and the interpreter's start altogether.

## Always

- **An unprivileged uid.** Run as root, the sandbox drops to a fresh uid per run (``UID_BASE`` + random, an
  id no account uses), so ``RLIMIT_NPROC`` bites and nothing else on the machine can be signalled (``setpriv``
  starts the unsafe layer's process as that uid: ``Popen(user=...)`` cannot use ``vfork``). In the
  isolating layers the PID namespace ends every process the code started (even ``setsid()`` ones) when the
  program ends; without one (``unsafe``) they are found by uid and killed after the run. (As another user,
  the sandbox runs as that user and relies on the PID namespace alone.)
- **rlimits** (:class:`SandboxLimits`): address space, CPU time, file size, open files, processes (threads
  count), pending signals, no core dumps. Set inside the sandbox, after the uid change, so each run has a process
  budget of its own (its own uid as root, its own user namespace with bwrap otherwise).
- **A system-call filter** (seccomp, classic BPF built by :func:`seccomp_filter`; x86-64 and arm64), installed
  on every layer before the code starts. It refuses what would hold memory outside ``RLIMIT_AS`` or leave kernel
  objects behind after the run: ``memfd_create`` and ``memfd_secret``; the kernel keyring (``add_key``,
  ``request_key``, ``keyctl``: keys are charged to the uid and outlive every namespace); System V IPC and POSIX
  message queues (the IPC namespace frees those at the end, but not on ``unsafe``, and a segment holds memory
  no process maps); ``io_uring``, ``inotify``/``fanotify``, ``bpf``, ``perf_event_open`` and ``userfaultfd``
  (kernel memory or surface no program here needs); growing a pipe (``F_SETPIPE_SZ``) or a socket buffer
  (``SO_SNDBUF``/``SO_RCVBUF``). On the isolating layers, sockets other than ``AF_UNIX`` are refused too (the
  loopback device is all a network namespace has, and TCP buffers reach tens of MB each). Refused calls fail
  with ``ENOSYS`` (``EPERM`` for the buffer sizes, ``EAFNOSUPPORT`` for socket families).
- **A wall-clock limit** that kills the whole sandbox: the process group of bwrap/unshare, which takes the
  PID namespace (and everything in it) down with it.
- **stdin is /dev/null**; stdout and stderr are read as they come and the run is killed as soon as either
  passes ``output_bytes``.
- **A clean environment** (:data:`SANDBOX_ENV`), hash seed 0 (the same code prints the same output), no site
  packages (``python -S``: the standard library only), no network.

## Memory: what one run can hold

No cgroup is used (the memory controller needs a delegated cgroup v2 subtree, which this code does not set up),
so the bound is a product of per-process limits, :attr:`SandboxLimits.memory_bound_mb`: ``processes ×
memory_mb`` of address space (threads share one) + ``disk_mb`` of tmpfs (the only writable mount) + kernel
buffers, at most ≈ 0.25 MiB per open file (socket and pipe buffers cannot grow past their defaults) for
``(processes + 1) × open_files`` files (``+ 1``: files in flight over Unix sockets). With the defaults: 8 × 256 +
32 + 144 ≈ 2.2 GiB. The ``unshare`` layer also caps the work dir's inodes (``WORK_INODES``); bubblewrap 0.8 has no
option for that, so on ``bwrap`` each empty file or directory costs ~1.2 KB of kernel memory not in the bound
(measured: ~70,000 a second per core, so ~0.4 GB per core in a 5 s run).

## Test results

:meth:`Sandbox.run_tests` evaluates each test's call expression inside the sandbox and reports only the
``repr`` of its value through a separate pipe; the harness parses it with :func:`ast.literal_eval` and compares
it with the expected value, which never enters the sandbox. Code that patches ``sys.exit``, ``unittest``,
``assert`` or builtins, prints "OK", exits early or writes fake records to the pipe cannot pass a test without
producing the expected values; a test without a record is failed, so the count of executed tests is checked too.

What the harness reads is bounded: at most ``RECORD_BYTES`` per record and ``len(tests) + 3`` records (more
bytes kill the run), each record checked against the record grammar before it is parsed, and a value parsed
only if its ``repr`` is at most ``max(4096, 64 × len(repr(expected)))`` characters (no equal value is longer: a
float's rounding noise makes it ~7× longer at most, an int standing in for a huge float ~40×). A value that
cannot be parsed or compared fails its test; :meth:`Sandbox.run_tests` does not raise on anything the code sends.

The call expressions (the test inputs) do enter the sandbox, and code can read everything in its process (its
frames, :func:`gc.get_objects`, ``/proc/self/mem``): keep hidden inputs secret by not showing the agent text the
code controls after a hidden-test run (as ``CodeSandboxEnv.submit`` does), not by hiding them inside.

## Not covered

Memory beyond the product above needs a cgroup. ``call_timeout`` is best effort (an alarm inside the process,
which the code can block); the wall-clock ``timeout`` is the guarantee. On the ``unsafe`` layer the code can read
any file the uid can, including a task file's expected values, so its scores mean nothing against adversarial code.
"""

from __future__ import annotations

import ast
import fcntl
import functools
import marshal
import math
import os
import platform
import re
import secrets
import select
import selectors
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

LAYERS = ("bwrap", "unshare", "unsafe")
"""The isolation layers, strongest first."""
WORK = "/work"
"""The sandbox's working directory (a size-capped tmpfs; ``/tmp`` and ``$HOME`` point there)."""
SANDBOX_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": WORK,
    "TMPDIR": WORK,
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",
    "PYTHONIOENCODING": "utf-8",
}
"""The whole environment of sandboxed code (and of bwrap/unshare themselves)."""
UID_BASE = 2_000_000_000
UID_SPAN = 1_000_000
"""Run as root, each run gets uid ``UID_BASE + randbelow(UID_SPAN)``: beyond the ranges systems hand out."""
MAX_REPR = 100_000
"""A call's value travels as its ``repr`` cut to this many characters (``inside.MAX_REPR``)."""
RECORD_BYTES = 4 * MAX_REPR + 1024
"""Longest result record the harness parses: a ``repr`` of ``MAX_REPR`` characters, escaped (≤ 2 characters
each) and UTF-8 encoded (≤ 4 bytes each). Longer lines are dropped; more than ``len(tests) + 3`` records' worth of
bytes kills the run."""
JUDGE_CHARS, JUDGE_RATIO = 4096, 64
"""A returned value is parsed only if its ``repr`` has at most ``max(JUDGE_CHARS, JUDGE_RATIO × len(repr(expected)))``
characters, so the harness's work is set by the task, not by the code (a 100,000-character list literal costs
~0.25 s and ~45 MB to parse)."""
WORK_INODES = 8192
"""Files and directories the ``unshare`` layer's work dir can hold (each costs ~1.2 KB of kernel memory)."""
PENDING_SIGNALS = 1024
"""``RLIMIT_SIGPENDING``: queued signals and POSIX timers of the run (the host default allows ~96,000 timers)."""
FLOAT_TOLERANCE = 1e-9

_STRING = r"'[^'\\]*+(?:\\.[^'\\]*+)*+'|\"[^\"\\]*+(?:\\.[^\"\\]*+)*+\""
_FIELD = rf"'[a-z_]{{1,12}}': (?:{_STRING}|-?\d{{1,19}}|None|True|False)"
_RECORD = re.compile(rf"\{{{_FIELD}(?:, {_FIELD}){{0,7}}\}}")
"""What the runner writes on the result channel: the ``repr`` of a dict of at most 8 fields holding a string, an
int, None or a boolean. Only a line of this shape is parsed."""

_SOURCE = (Path(__file__).parent / "inside.py").read_text(encoding="utf-8")
_BOOT = "import marshal,os;c=os.pread({fd},{size},0);os.close({fd});exec(marshal.loads(c))"
"""How the sandbox's interpreter starts the runner: from its code object, compiled once per interpreter by that
interpreter (:func:`_inspect_python`) and read from a sealed memory file (:func:`_runner_file`) that every run
inherits, so no run compiles the runner (~5 ms a run) or parses it from its command line (~2 ms for 44 kB)."""
_GRACE = 0.2  # seconds to wait for output after the main process exits, while a leftover holds the pipes
_SIGNALS = {int(s): s.name for s in signal.Signals}


class SandboxUnavailable(RuntimeError):
    """No isolation layer can run here (and ``allow_unsafe`` was not given); the message says how to get one."""


class SandboxLimits(BaseModel):
    """Resource limits of one sandboxed run."""

    model_config = ConfigDict(extra="forbid")

    timeout: float = Field(5.0, gt=0, le=3600, description="Wall-clock seconds before the whole sandbox is killed.")
    cpu_seconds: int = Field(5, ge=1, description="CPU seconds per process (RLIMIT_CPU; SIGXCPU, then SIGKILL).")
    memory_mb: int = Field(256, ge=64, description="Address space per process in MiB (RLIMIT_AS).")
    disk_mb: int = Field(32, ge=1, description="Size of the tmpfs work dir in MiB (bwrap and unshare layers).")
    file_size_mb: int = Field(16, ge=1, description="Largest file a process may write, in MiB (RLIMIT_FSIZE).")
    open_files: int = Field(64, ge=16, description="Open file descriptors per process (RLIMIT_NOFILE).")
    processes: int = Field(
        8, ge=4, description="Processes and threads of the sandbox's user (RLIMIT_NPROC); bounds the run's memory."
    )
    output_bytes: int = Field(65_536, ge=1024, description="Bytes of stdout, and of stderr; more kills the run.")
    call_timeout: float = Field(1.0, gt=0, description="Seconds per test call in run_tests (best effort).")

    def rlimits(self) -> dict[str, int]:
        return {
            "RLIMIT_AS": self.memory_mb << 20,
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_FSIZE": self.file_size_mb << 20,
            "RLIMIT_NOFILE": self.open_files,
            "RLIMIT_NPROC": self.processes,
            "RLIMIT_SIGPENDING": PENDING_SIGNALS,
            "RLIMIT_CORE": 0,
        }

    @property
    def memory_bound_mb(self) -> int:
        """The most memory (MiB) one run can hold on an isolating layer: ``processes × memory_mb`` of address
        space, ``disk_mb`` of tmpfs and ≤ 0.25 MiB of kernel buffers per open file, for ``(processes + 1) ×
        open_files`` files (2,224 MiB with the defaults; see the module docstring for what it leaves out)."""
        return self.processes * self.memory_mb + self.disk_mb + (self.processes + 1) * self.open_files // 4


@dataclass
class SandboxResult:
    """What one sandboxed run did."""

    stdout: str
    stderr: str
    exit_code: int | None
    """The exit status (128 + N when signal N ended the program, as a shell reports it); None if the harness
    killed the run (see ``killed``)."""
    signal: int | None
    """The signal that ended the program, if one did (an exit status above 128 from an isolated layer is read as
    one)."""
    timed_out: bool
    killed: str | None
    """Why the harness killed the run: ``"timeout"``, ``"output limit"`` or None."""
    duration: float
    """Wall-clock seconds, start to finish."""
    layer: str
    """The isolation layer that ran the code: ``"bwrap"``, ``"unshare"`` or ``"unsafe"``."""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stray_processes: int = 0
    """Processes the harness found alive by uid and killed after the run: what the program left behind on the
    ``unsafe`` layer (orphans, ``setsid`` escapees); on the isolating layers, only after a kill, whatever the
    kernel had not finished ending."""
    error: dict[str, Any] | None = None
    """The program's uncaught exception as reported from inside: ``{"error": "IndexError", "message": ...,
    "line": 4}`` (line in the submitted code, or None). Informational: the code could forge it."""
    records: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        """The program exited with status 0 on its own."""
        return self.exit_code == 0 and self.killed is None

    def status(self) -> str:
        """How the run ended, in words: ``exit status 1``, ``killed by signal 11 (SIGSEGV)``, ``stopped: …``."""
        if self.killed == "timeout":
            return "stopped: ran past the wall-clock time limit"
        if self.killed == "output limit":
            return "stopped: printed more than the output limit"
        if self.signal is not None:
            name = _SIGNALS.get(self.signal, "?")
            hint = {"SIGXCPU": " (CPU time limit)", "SIGKILL": " (killed)", "SIGSEGV": " (segmentation fault)"}
            return f"killed by signal {self.signal} ({name}){hint.get(name, '')}"
        return f"exit status {self.exit_code}"

    def error_summary(self) -> str | None:
        """``IndexError line 4``, ``timeout``, ``SIGSEGV`` …: the program's failure in a few words, or None."""
        if self.killed == "timeout":
            return "timeout"
        if self.killed == "output limit":
            return "output limit"
        if self.error:
            line = self.error["line"]
            return f"{self.error['error']}{f' line {line}' if line else ''}"
        if self.signal is not None:
            return _SIGNALS.get(self.signal, f"signal {self.signal}")
        if self.exit_code:
            return f"exit status {self.exit_code}"
        return None


@dataclass
class TestOutcome:
    """One test of :meth:`Sandbox.run_tests`."""

    call: str
    expected: Any
    passed: bool
    got: str | None = None
    """The ``repr`` of the value the call returned (None if it raised or never ran)."""
    error: str | None = None
    """Why it failed when there is no value to compare: ``IndexError: list index out of range (line 4)``."""
    error_type: str | None = None
    line: int | None = None

    def explain(self) -> str:
        """One line for an agent, e.g. ``add(2, 2) returned 5, expected 4``."""
        if self.passed:
            return f"{self.call} == {_short(repr(self.expected))}"
        if self.got is not None:
            return f"{self.call} returned {_short(self.got)}, expected {_short(repr(self.expected))}"
        return f"{self.call}: {self.error}"


@dataclass
class TestReport:
    """The tests of one :meth:`Sandbox.run_tests` call, judged outside the sandbox."""

    outcomes: list[TestOutcome]
    result: SandboxResult
    load_error: dict[str, Any] | None = None
    """The exception raised while defining the code, before any test ran (then every test fails), as
    ``{"error": "SyntaxError", "message": ..., "line": 2}``."""

    def load_error_text(self) -> str | None:
        """``SyntaxError: expected ':' (line 1)``, or None if the code loaded."""
        return _describe(self.load_error) if self.load_error else None

    @property
    def passed(self) -> int:
        return sum(o.passed for o in self.outcomes)

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.outcomes else 0.0

    def first_error(self) -> str | None:
        """``SyntaxError line 2``, ``IndexError line 4``, ``timeout`` …: the first failure that is not a wrong
        value, or None."""
        if self.load_error:
            line = self.load_error["line"]
            return f"{self.load_error['error']}{f' line {line}' if line else ''}"
        for o in self.outcomes:
            if not o.passed and o.got is None:
                if o.error_type is None:
                    return self.result.error_summary() or "no result"
                return f"{o.error_type}{f' line {o.line}' if o.line else ''}"
        return None


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clean_error(record: dict[str, Any]) -> dict[str, Any]:
    """An error record from inside the sandbox, with known types: ``{"error": str, "message": str, "line": int or
    None}``; an error name that is not a Python identifier of at most 60 characters (the code may forge one, with
    newlines or escape codes in it) reads ``Error``."""
    line = record.get("line")
    name = str(record.get("error", "Error"))
    return {
        "error": name if name.isidentifier() and len(name) <= 60 else "Error",
        "message": _short(str(record.get("message", "")), 300),
        "line": line if type(line) is int else None,
    }


def _judge(call: str, expected: Any, record: dict[str, Any]) -> TestOutcome:
    """One test from its record: passed if the value's ``repr`` parses to a value equal to ``expected``. Anything
    unscorable (too long to parse, not a literal, not comparable) fails the test; nothing raises."""
    got = record.get("value")
    if not isinstance(got, str):
        error = _clean_error(record)
        return TestOutcome(call, expected, False, error=_describe(error), error_type=error["error"], line=error["line"])
    try:
        ok, value = parse_value(got, max(JUDGE_CHARS, JUDGE_RATIO * len(repr(expected))))
        passed = ok and values_equal(value, expected)
    except Exception:  # noqa: BLE001 (values_equal handles every literal; a surprise still only fails the test)
        passed = False
    return TestOutcome(call, expected, passed, got=got)


def _describe(error: dict[str, Any]) -> str:
    """``IndexError: list index out of range (line 4)``."""
    where = f" (line {error['line']})" if error["line"] else ""
    return f"{error['error']}: {_short(error['message'], 200)}{where}"


# ============================================================================ judging values outside the sandbox


def parse_value(text: str, max_chars: int = 100_000) -> tuple[bool, Any]:
    """``(True, value)`` for the ``repr`` of a plain Python literal (numbers, strings, bytes, None, booleans,
    lists, tuples, dicts, sets), else ``(False, None)``. Safe on hostile text: no code runs."""
    if not isinstance(text, str) or len(text) > max_chars:
        return False, None
    try:
        return True, ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def values_equal(got: Any, expected: Any) -> bool:
    """Python's ``==``, except that floats match within a relative and absolute tolerance of 1e-9 (also inside
    lists, tuples and dict values). ``1 == 1.0`` and ``True == 1`` as in Python; a list never equals a tuple."""
    if isinstance(got, float) or isinstance(expected, float):
        numbers = (int, float)
        if isinstance(got, numbers) and isinstance(expected, numbers):
            try:
                return math.isclose(got, expected, rel_tol=FLOAT_TOLERANCE, abs_tol=FLOAT_TOLERANCE)
            except OverflowError:  # an int beyond any float (10 ** 400): Python's exact == still compares it
                return got == expected
        return False
    if type(got) is type(expected) and isinstance(expected, list | tuple):
        return len(got) == len(expected) and all(values_equal(a, b) for a, b in zip(got, expected, strict=True))
    if type(got) is type(expected) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(values_equal(got[k], expected[k]) for k in expected)
    try:
        return bool(got == expected)
    except Exception:  # noqa: BLE001 (literals compare without raising; be safe anyway)
        return False


# ============================================================================ the system-call filter

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_DENIED = {  # name: (x86_64, aarch64) numbers, from <asm/unistd_64.h> and <asm-generic/unistd.h>
    # memory that RLIMIT_AS does not count
    "memfd_create": (319, 279), "memfd_secret": (447, 447),
    # kernel objects that outlive the run: keys (every namespace), System V IPC and POSIX queues (on unsafe)
    "add_key": (248, 217), "request_key": (249, 218), "keyctl": (250, 219),
    "shmget": (29, 194), "shmat": (30, 196), "shmctl": (31, 195), "shmdt": (67, 197),
    "semget": (64, 190), "semop": (65, 193), "semctl": (66, 191), "semtimedop": (220, 192),
    "msgget": (68, 186), "msgsnd": (69, 189), "msgrcv": (70, 188), "msgctl": (71, 187),
    "mq_open": (240, 180), "mq_unlink": (241, 181), "mq_timedsend": (242, 182), "mq_timedreceive": (243, 183),
    "mq_notify": (244, 184), "mq_getsetattr": (245, 185),
    # kernel memory and surface that no standard-library program needs
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "inotify_init": (253, None), "inotify_init1": (294, 26), "fanotify_init": (300, 262),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
}  # fmt: skip
_ARGUMENT_CHECKED = {"socket": (41, 198), "setsockopt": (54, 208), "fcntl": (72, 25)}
_NAMESPACE_CALLS = {"clone": (56, 220), "unshare": (272, 97), "clone3": (435, 435)}
_CLONE_NEWUSER = 0x10000000
_X32_BIT = 0x40000000  # x86-64: the x32 ABI's system calls (the same numbers with this bit set)
_AF_UNIX, _SOL_SOCKET, _F_SETPIPE_SZ = 1, 1, 1031
_BUFFER_OPTIONS = (7, 8, 32, 33)  # SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE
_ENOSYS, _EPERM, _EAFNOSUPPORT = 38, 1, 97
_LD, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JSET|K, BPF_RET|K
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | errno
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data; argument i's low 32 bits are at 16 + 8 * i (little-endian)


def _argument(i: int) -> int:
    return 16 + 8 * i


@functools.lru_cache(maxsize=8)
def seccomp_filter(machine: str | None = None, *, sockets: bool = False, user_namespaces: bool = True) -> bytes:
    """The sandbox's system-call filter as a classic BPF program (``struct sock_filter[]``), for bwrap's
    ``--seccomp`` or ``prctl(PR_SET_SECCOMP)``: the calls listed in the module docstring fail, everything else is
    allowed. ``machine`` defaults to this one (``x86_64`` or ``aarch64``); ``sockets=True`` leaves socket families
    alone (the ``unsafe`` layer, which shares the host's network). ``user_namespaces=False`` also refuses a new
    user namespace (``clone``/``unshare`` with ``CLONE_NEWUSER`` fail with ``EPERM``; ``clone3``, whose flags a
    filter cannot read, with ``ENOSYS``, so the C library falls back to ``clone``): warm runs need it, as neither
    bwrap's ``--disable-userns`` nor the ``unshare`` layer's chroot is there. A call from another ABI (x32,
    i386) fails."""
    machine = machine or platform.machine()
    if machine not in _AUDIT_ARCH:
        raise SandboxUnavailable(f"no system-call filter for {machine!r} (supported: {', '.join(_AUDIT_ARCH)})")
    column = list(_AUDIT_ARCH).index(machine)
    table = {**_DENIED, **_ARGUMENT_CHECKED, **_NAMESPACE_CALLS}
    nr = {name: numbers[column] for name, numbers in table.items()}
    # (opcode, k, jump if true, jump if false): jumps are labels, resolved to offsets below
    program: list[tuple[int, int, str | None, str | None] | str] = [
        (_LD, _ARCH, None, None),
        (_JEQ, _AUDIT_ARCH[machine], None, "nosys"),
        (_LD, _NR, None, None),
    ]
    if machine == "x86_64":
        program.append((_JSET, _X32_BIT, "nosys", None))
    program += [(_JEQ, nr[name], "nosys", None) for name in _DENIED if nr[name] is not None]
    if not user_namespaces:
        program += [(_JEQ, nr["clone3"], "nosys", None)]
        program += [(_JEQ, nr["clone"], "namespace", None), (_JEQ, nr["unshare"], "namespace", None)]
    if not sockets:
        program.append((_JEQ, nr["socket"], "socket", None))
    program += [(_JEQ, nr["setsockopt"], "setsockopt", None), (_JEQ, nr["fcntl"], "fcntl", None)]
    program += [(_RET, _ALLOW, None, None)]
    program += ["socket", (_LD, _argument(0), None, None), (_JEQ, _AF_UNIX, "allow", "afnosupport")]
    program += ["setsockopt", (_LD, _argument(1), None, None), (_JEQ, _SOL_SOCKET, None, "allow")]
    program += [(_LD, _argument(2), None, None)] + [(_JEQ, option, "perm", None) for option in _BUFFER_OPTIONS]
    program += [(_RET, _ALLOW, None, None)]
    program += ["fcntl", (_LD, _argument(1), None, None), (_JEQ, _F_SETPIPE_SZ, "perm", "allow")]
    if not user_namespaces:
        program += ["namespace", (_LD, _argument(0), None, None), (_JSET, _CLONE_NEWUSER, "perm", "allow")]
    program += ["allow", (_RET, _ALLOW, None, None), "nosys", (_RET, _ERRNO | _ENOSYS, None, None)]
    program += ["perm", (_RET, _ERRNO | _EPERM, None, None), "afnosupport", (_RET, _ERRNO | _EAFNOSUPPORT, None, None)]
    return _assemble(program)


def _assemble(program: list[tuple[int, int, str | None, str | None] | str]) -> bytes:
    """Classic BPF bytes from instructions whose jumps name labels (a string in the list marks the next
    instruction); a jump of None falls through."""
    labels: dict[str, int] = {}
    position = 0
    for item in program:
        if isinstance(item, str):
            assert item not in labels, f"BPF label {item!r} placed twice"
            labels[item] = position
        else:
            position += 1
    out, position = [], 0
    for item in program:
        if isinstance(item, str):
            continue
        code, k, true, false = item
        jt, jf = (0 if label is None else labels[label] - position - 1 for label in (true, false))
        assert 0 <= jt < 256 and 0 <= jf < 256, "a BPF jump goes forward at most 255 instructions"
        out.append(struct.pack("=HBBI", code, jt, jf, k))
        position += 1
    return b"".join(out)


# ============================================================================ the interpreter and the layers


@dataclass(frozen=True)
class _Python:
    executable: str
    binds: tuple[tuple[str, str, str], ...]  # (kind, source, target): kind "dir", "file" or "symlink"
    version: str
    runner: str = field(repr=False, default="")
    """The runner (``inside``) as a marshal-ed code object of this interpreter, in hex."""

    def command(self, *args: str) -> tuple[list[str], int]:
        """The command line that starts the runner with ``args`` (``sys.argv[1:]`` inside), and the file
        descriptor the process must inherit (it holds the runner)."""
        fd, size = _runner_file(self.runner)
        return [self.executable, "-S", "-B", "-c", _BOOT.format(fd=fd, size=size), *args], fd


@functools.lru_cache(maxsize=8)
def _runner_file(runner: str) -> tuple[int, int]:
    """A memory file holding ``runner`` (hex of a code object), sealed so that no run can change what the next
    one starts from; kept open (close-on-exec) for the life of this process."""
    data = bytes.fromhex(runner)
    fd = os.memfd_create("agentgym-runner", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, data)
    seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd, len(data)


def _usable_by_others(path: str) -> bool:
    """Whether an unprivileged uid can reach ``path`` (every parent searchable, the path itself readable)."""
    p = Path(path)
    try:
        for parent in p.parents:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        return bool(os.stat(p).st_mode & stat.S_IROTH)
    except OSError:
        return False


@functools.lru_cache(maxsize=8)
def _inspect_python(requested: str | None) -> _Python:
    """The interpreter for sandboxed code and the paths it needs. Default: this process's base interpreter if
    an unprivileged uid can use it, else ``/usr/bin/python3`` or ``/usr/local/bin/python3``."""
    if requested is not None:
        candidates = [shutil.which(requested) or requested]
    else:
        base = getattr(sys, "_base_executable", None) or sys.executable
        candidates = [base, sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"]
    problems = []
    dropping = os.geteuid() == 0
    for candidate in dict.fromkeys(c for c in candidates if c):
        executable = os.path.realpath(candidate)
        if not os.access(executable, os.X_OK):
            problems.append(f"{candidate}: not an executable file")
            continue
        try:
            out = subprocess.run(
                [
                    executable,
                    "-S",
                    "-c",
                    "import marshal, sys, sysconfig; print(sysconfig.get_paths()['stdlib']); "
                    "print('%d.%d' % sys.version_info[:2]); "
                    "print(marshal.dumps(compile(sys.stdin.read(), 'sandbox_inside.py', 'exec')).hex())",
                ],  # fmt: skip
                capture_output=True,
                text=True,
                timeout=30,
                env=SANDBOX_ENV,
                input=_SOURCE,
            )
            stdlib, version, runner = out.stdout.split()
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            problems.append(f"{candidate}: could not be run ({exc})")
            continue
        if tuple(map(int, version.split("."))) < (3, 10):
            problems.append(f"{candidate}: Python {version}; the sandbox needs 3.10 or later")
            continue
        if dropping and not (_usable_by_others(executable) and _usable_by_others(stdlib)):
            problems.append(f"{candidate}: an unprivileged uid cannot read it (a parent directory is private)")
            continue
        return _Python(executable, _binds(executable, os.path.realpath(stdlib)), version, runner)
    raise SandboxUnavailable(
        "no Python interpreter the sandbox can use: " + "; ".join(problems) + ". Pass python='/path/to/python3' "
        "(readable by all users when agentgym runs as root, since sandboxed code runs as an unprivileged uid)."
    )


def _binds(executable: str, stdlib: str) -> tuple[tuple[str, str, str], ...]:
    """Read-only binds for an interpreter: ``/usr/lib`` and friends (shared libraries), its standard library's
    parent (``…/lib``, which also holds a non-system build's ``libpython``) and the executable itself."""
    binds: list[tuple[str, str, str]] = []
    dirs = ["/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32"]
    for d in dirs:
        if os.path.islink(d):
            binds.append(("symlink", os.readlink(d), d))
        elif os.path.isdir(d):
            binds.append(("dir", d, d))
    covered = [d for kind, d, _ in binds if kind == "dir"]

    def add(kind: str, path: str) -> None:
        if not any(path == d or path.startswith(d + "/") for d in covered):
            binds.append((kind, path, path))
            covered.append(path)

    add("dir", os.path.dirname(stdlib))
    add("file", executable)
    return tuple(binds)


def _bwrap_supports(option: str) -> bool:
    return _bwrap_help().find(option) >= 0


@functools.lru_cache(maxsize=1)
def _bwrap_help() -> str:
    try:
        return subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


@functools.lru_cache(maxsize=16)
def _probe(layer: str, python: str | None) -> str | None:
    """None if ``layer`` runs code on this machine, else why not (checked once per process)."""
    if layer == "bwrap" and shutil.which("bwrap") is None:
        return "bwrap is not installed (apt-get install bubblewrap)"
    if layer == "bwrap" and not _bwrap_supports("--seccomp"):
        return "this bwrap has no --seccomp option (install bubblewrap 0.3 or later)"
    if layer == "unshare":
        if os.geteuid() != 0:
            return "the unshare layer needs root"
        if shutil.which("unshare") is None:
            return "unshare (util-linux) is not installed"
    try:
        box = Sandbox(layer, python=python, allow_unsafe=True, timeout=20, _checked=True)
        result = box.run("import os\nprint('sandbox', os.getpid())")
    except SandboxUnavailable as exc:
        return str(exc)
    if not result.ok or not result.stdout.startswith("sandbox "):
        detail = (result.stderr.strip().splitlines() or [result.status()])[-1]
        return f"{layer} failed to run Python: {detail}"
    if layer != "unsafe" and result.stdout.split()[1] not in ("1", "2"):
        return f"{layer} did not start a new PID namespace"
    return None


def layer_status(python: str | None = None) -> dict[str, str | None]:
    """Each layer → None if it works on this machine, else the reason it does not."""
    return {layer: _probe(layer, python) for layer in LAYERS}


# ============================================================================ the sandbox

_UNSAFE_WARNING = (
    "agentgym.envs.sandbox: running code with the 'unsafe' layer — rlimits and an unprivileged uid only, NOT a "
    "security boundary: the code can read files and use the network. Use it only for code you trust; install "
    "bubblewrap (apt-get install bubblewrap) for real isolation."
)


class Sandbox:
    """Runs Python source in an isolated, resource-limited process; see the module docstring.

    Args:
        layer: ``"auto"`` (bwrap, else unshare, else refuse — or ``"unsafe"`` with ``allow_unsafe=True``), or
            one of ``"bwrap"``, ``"unshare"``, ``"unsafe"``.
        allow_unsafe: permit the ``"unsafe"`` layer (rlimits only), with a warning.
        python: the interpreter that runs the code (default: see ``_inspect_python``).
        uid: the uid to run as when agentgym runs as root (default: a fresh one per run).
        limits: a :class:`SandboxLimits` or dict; keyword arguments (``timeout=2``, ``memory_mb=256`` …)
            override single fields.
        warm: run each job from a zygote instead of a fresh interpreter (see "Warm mode" in the module
            docstring); needs root and an isolating layer. :meth:`close` (or ``with``) stops the zygotes.

    Thread-safe: runs share nothing but configuration, so several threads may run code at once (in warm mode
    each concurrent run has a zygote of its own).
    """

    def __init__(
        self,
        layer: str = "auto",
        *,
        allow_unsafe: bool = False,
        python: str | None = None,
        uid: int | None = None,
        limits: SandboxLimits | dict[str, Any] | None = None,
        warm: bool = False,
        _checked: bool = False,
        **limit_overrides: Any,
    ) -> None:
        base = limits.model_dump() if isinstance(limits, SandboxLimits) else dict(limits or {})
        self.limits = SandboxLimits.model_validate({**base, **limit_overrides})
        if layer not in ("auto", *LAYERS):
            raise ValueError(f"layer must be 'auto' or one of {', '.join(LAYERS)}, got {layer!r}")
        if layer == "unsafe" and not allow_unsafe:
            raise ValueError("layer='unsafe' is not a security boundary; pass allow_unsafe=True to use it anyway")
        if uid is not None and not (0 < uid < 2**32 - 1):
            raise ValueError(f"uid must be a positive user id, got {uid!r}")
        self.python = _inspect_python(python)
        self._python_arg = python
        self.uid = uid
        if not _checked:
            layer = self._choose(layer, allow_unsafe)
        self.layer = layer
        if warm and layer == "unsafe":
            raise ValueError("warm mode needs an isolating layer (bwrap or unshare), not 'unsafe'")
        if warm and os.geteuid() != 0:
            raise SandboxUnavailable(
                "warm mode needs root: each run gets a uid of its own, which a zygote in bwrap's user namespace "
                "(one mapped uid) cannot give it; use the cold mode (warm=False)"
            )
        if warm and layer == "bwrap" and not _root_bwrap_works(self.python):
            raise SandboxUnavailable(
                "warm bwrap needs bwrap to build the sandbox as root without a user namespace, which this machine "
                "refuses (no CAP_SYS_ADMIN?); use layer='unshare' or warm=False"
            )
        self.warm = bool(warm)
        self._idle: list[_Zygote] = []
        self._pool_lock = threading.Lock()
        if layer == "unsafe" and not _checked:
            warnings.warn(_UNSAFE_WARNING, RuntimeWarning, stacklevel=2)

    def _choose(self, layer: str, allow_unsafe: bool) -> str:
        candidates = ["bwrap", "unshare"] if layer == "auto" else [layer]
        reasons = {}
        for name in candidates:
            if name == "unsafe":
                return name
            reason = _probe(name, self._python_arg)
            if reason is None:
                return name
            reasons[name] = reason
        if layer == "auto" and allow_unsafe:
            return "unsafe"
        why = "; ".join(f"{k}: {v}" for k, v in reasons.items())
        raise SandboxUnavailable(
            f"no isolation layer to run untrusted code ({why}). Install bubblewrap (apt-get install bubblewrap), "
            "or run as root for the unshare layer; Sandbox(allow_unsafe=True) runs it with rlimits only, which is "
            "not a security boundary."
        )

    def __repr__(self) -> str:
        warm = ", warm=True" if self.warm else ""
        return f"Sandbox(layer={self.layer!r}{warm}, python={self.python.executable!r}, timeout={self.limits.timeout})"

    @property
    def isolated(self) -> bool:
        """Whether the layer is a security boundary (own namespaces and file system), i.e. not ``"unsafe"``."""
        return self.layer != "unsafe"

    # ----------------------------------------------------------------- the two entry points

    def run(self, code: str, *, timeout: float | None = None) -> SandboxResult:
        """Run ``code`` as a script (``__name__ == "__main__"``) and return its output and how it ended."""
        return self._execute({"mode": "run", "code": code, "calls": []}, timeout)

    def run_tests(self, code: str, tests: Sequence[tuple[str, Any]], *, timeout: float | None = None) -> TestReport:
        """Define ``code``, then evaluate each test's call expression (e.g. ``"add(1, 2)"``) in its namespace,
        inside the sandbox; compare each value with the test's expected value outside it (:func:`values_equal`).

        ``tests`` are ``(call, expected)`` pairs; ``expected`` stays in this process. Each call has
        ``limits.call_timeout`` seconds; the whole run ``timeout`` (default ``limits.timeout``). A test that
        returns nothing — the code failed to load, exited, was killed, or ran out of time first — fails.
        """
        calls = [call for call, _ in tests]
        result = self._execute({"mode": "calls", "code": code, "calls": calls}, timeout)
        by_index: dict[int, dict[str, Any]] = {}
        load_error = None
        for record in result.records:
            i = record.get("i")
            if type(i) is int and 0 <= i < len(calls):
                by_index.setdefault(i, record)
            elif record.get("load_error") and load_error is None:
                load_error = _clean_error(record)
        outcomes = []
        for i, (call, expected) in enumerate(tests):
            record = by_index.get(i)
            if record is None:
                outcomes.append(TestOutcome(call, expected, False, error=self._missing(result, load_error)))
            else:
                outcomes.append(_judge(call, expected, record))
        return TestReport(outcomes, result, load_error)

    @staticmethod
    def _missing(result: SandboxResult, load_error: dict[str, Any] | None) -> str:
        if load_error is not None:
            return f"not run: the code failed before the tests: {_describe(load_error)}"
        return f"no result: {result.status()}"

    # ----------------------------------------------------------------- one run

    def _execute(self, job: dict[str, Any], timeout: float | None) -> SandboxResult:
        timeout = self.limits.timeout if timeout is None else float(timeout)
        job = self._job(job)
        records_wanted = len(job["calls"]) + 3  # a record per call, an error, "done", one spare
        uid = self._run_uid()
        if self.layer == "bwrap" and not self.warm and self._root_bwrap(uid):
            job["drop_to"] = uid  # the runner drops to it (see _command)
        started = time.monotonic()
        result_r, result_w = os.pipe()
        passed: list[int] = [result_w]
        cleanup: list[Any] = []
        try:
            job_fd = _memfd("agentgym-job", marshal.dumps(job, 4))
            passed.append(job_fd)
            if self.warm:
                proc: subprocess.Popen | _WarmRun = self._start_warm(uid, job_fd, result_w, timeout, cleanup)
            else:
                proc = self._start_cold(uid, job_fd, result_w, timeout, passed, cleanup)
        except BaseException:
            os.close(result_r)
            for undo in cleanup:
                undo()
            raise
        finally:
            for fd in passed:
                os.close(fd)
        killed: str | None = "interrupted"  # until _collect returns
        try:
            out, err, res, killed, truncated = self._collect(
                proc, result_r, started + timeout, records_wanted * RECORD_BYTES
            )
        finally:
            if proc.returncode is None:  # _collect was interrupted (e.g. KeyboardInterrupt): end the sandbox too
                _kill_group(proc)
                proc.wait()
            os.close(result_r)
            proc.stdout.close()  # type: ignore[union-attr]
            proc.stderr.close()  # type: ignore[union-attr]
            # Without a PID namespace, processes the code left behind (even setsid ones) are found by the run's
            # uid and killed. With one, the kernel kills everything in it when its init dies (when the program
            # ends, or when bwrap/unshare is killed); the sweep after a kill only hurries that along.
            stray = 0
            if uid is not None and (not self.isolated or killed is not None):
                stray = self._sweep(uid)
            for undo in cleanup:
                undo()
        duration = time.monotonic() - started
        records = _records(res, records_wanted)
        error = None
        if job["mode"] == "run":
            error = next((_clean_error(r) for r in records if "error" in r and "i" not in r), None)
        exit_code, sig = (None, None) if killed is not None else self._exit_status(proc.returncode)
        return SandboxResult(
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            exit_code=exit_code,
            signal=sig,
            timed_out=killed == "timeout",
            killed=killed,
            duration=duration,
            layer=self.layer,
            stdout_truncated=truncated[0],
            stderr_truncated=truncated[1],
            stray_processes=stray,
            error=error,
            records=records,
        )

    def _job(self, job: dict[str, Any]) -> dict[str, Any]:
        """The job the runner reads: ``job`` with this sandbox's limits (and, in the unsafe layer, the seccomp
        filter: bwrap and the unshare layer's init install it themselves)."""
        if not isinstance(job["code"], str):
            raise TypeError(f"code must be a str, got {type(job['code']).__name__}")
        job = {
            **job,
            "rlimits": self.limits.rlimits(),
            "call_timeout": self.limits.call_timeout,
            "unsafe": self.layer == "unsafe",
        }
        if self.layer == "unsafe":
            job["seccomp"] = seccomp_filter(sockets=True)
        return job

    def _exit_status(self, returncode: int) -> tuple[int, int | None]:
        """``(exit_code, signal)`` of a run that ended by itself: a signal as a shell reports it (128 + n); in a
        PID namespace the init passes the program's own status on that way."""
        if returncode < 0:
            return 128 - returncode, -returncode
        if self.isolated and 128 < returncode < 128 + 65:
            return returncode, returncode - 128
        return returncode, None

    def _root_bwrap(self, uid: int | None) -> bool:
        """Whether this run uses bwrap as root without a user namespace (root, and bwrap may do that here)."""
        return uid is not None and _root_bwrap_works(self.python)

    def _run_uid(self) -> int | None:
        if os.geteuid() != 0:
            return None
        return self.uid if self.uid is not None else UID_BASE + secrets.randbelow(UID_SPAN)

    def _start_cold(
        self, uid: int | None, job_fd: int, result_fd: int, timeout: float, passed: list[int], cleanup: list[Any]
    ) -> subprocess.Popen:
        """Start a fresh bwrap/unshare/interpreter process for one run (``passed``: fds to hand it and close)."""
        filter_fd = None
        if self.layer == "bwrap":  # as root, no user namespace (see _command): the filter refuses new ones
            filter_fd = _memfd("agentgym-seccomp", seccomp_filter(user_namespaces=not self._root_bwrap(uid)))
            passed.append(filter_fd)
        command, options, runner_fd = self._command(uid, job_fd, result_fd, filter_fd, timeout, cleanup)
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=[*passed, runner_fd],
            start_new_session=True,
            **options,
        )

    def _command(
        self, uid: int | None, job_fd: int, result_fd: int, filter_fd: int | None, timeout: float, cleanup: list[Any]
    ) -> tuple[list[str], dict[str, Any], int]:
        """The command line and Popen options for this run's layer, and the runner's fd it must inherit
        (``cleanup`` collects undo steps; ``filter_fd`` holds the system-call filter, for bwrap)."""
        python = self.python
        fds = [str(job_fd), str(result_fd)]
        as_user, drop = _as_user(uid)
        if self.layer == "bwrap" and self._root_bwrap(uid):
            # As root: bwrap without a user namespace (cheaper by a namespace, setpriv's exec and
            # --disable-userns), keeping only CAP_SETUID/CAP_SETGID, with which the runner drops to the run's
            # uid (job["drop_to"]) before it reads the code; the filter refuses new user namespaces.
            args = [*_ROOT_BWRAP, "--seccomp", str(filter_fd), *_bwrap_parents(python)]
            args += _bwrap_root(python, self.limits.disk_mb << 20, work_perms="0777")
            command, runner_fd = python.command(*fds)
            return [*args, *command], {"env": SANDBOX_ENV}, runner_fd
        if self.layer == "bwrap":
            args = [*as_user, "bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"]
            if _bwrap_supports("--disable-userns"):
                args.append("--disable-userns")
            args += ["--cap-drop", "ALL", "--uid", "65534", "--gid", "65534", "--hostname", "sandbox"]
            args += ["--seccomp", str(filter_fd)]
            args += _bwrap_root(python, self.limits.disk_mb << 20)
            command, runner_fd = python.command(*fds)
            return [*args, *command], {"env": SANDBOX_ENV, **drop}, runner_fd
        if self.layer == "unshare":
            root = tempfile.mkdtemp(prefix="agentgym-sandbox-root-")
            cleanup.append(lambda: _remove_dir(root))
            setup = {
                "root": root,
                "uid": uid,
                "gid": uid,
                "binds": [list(b) for b in python.binds],
                "work": WORK,
                "disk_bytes": self.limits.disk_mb << 20,
                "inodes": WORK_INODES,
                "seccomp": seccomp_filter(),
                "deadline": timeout + 1.0,
            }
            command, runner_fd = python.command(*fds, marshal.dumps(setup, 4).hex())
            return [*_UNSHARE, *command], {"env": SANDBOX_ENV}, runner_fd
        work = tempfile.mkdtemp(prefix="agentgym-sandbox-")
        cleanup.append(lambda: shutil.rmtree(work, ignore_errors=True))
        if uid is not None:
            os.chown(work, uid, uid)
        env = {**SANDBOX_ENV, "HOME": work, "TMPDIR": work}
        command, runner_fd = python.command(*fds)
        return [*as_user, *command], {"env": env, "cwd": work, **drop}, runner_fd

    # ----------------------------------------------------------------- warm mode

    def _start_warm(self, uid: int | None, job_fd: int, result_fd: int, timeout: float, cleanup: list[Any]) -> _WarmRun:
        """Hand one run to an idle zygote (starting one if none is idle); ``cleanup`` gets the step that gives it
        back."""
        assert uid is not None  # warm mode needs root (checked in __init__)
        header = {
            "uid": uid,
            "gid": uid,
            "work": WORK,
            "disk_bytes": self.limits.disk_mb << 20,
            "inodes": WORK_INODES,
            "deadline": timeout + 1.0,
        }
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            for attempt in (1, 2):  # a zygote found dead (killed from outside) is replaced once
                zygote = self._take_zygote()
                try:
                    zygote.request(marshal.dumps(header, 4), [job_fd, result_fd, out_w, err_w], max(timeout, 10.0))
                    break
                except SandboxUnavailable:
                    zygote.stop()
                    if attempt == 2 or not zygote.started:
                        raise
        except BaseException:
            os.close(out_r)
            os.close(err_r)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        cleanup.append(lambda: self._give_back(zygote))
        return _WarmRun(zygote, out_r, err_r)

    def _take_zygote(self) -> _Zygote:
        with self._pool_lock:
            if self._idle:
                return self._idle.pop()
        cleanup: list[Any] = []
        python = self.python
        setup: dict[str, Any] = {"seccomp": seccomp_filter(user_namespaces=False)}
        if self.layer == "bwrap":
            # As root, without a user namespace: the zygote keeps root (and its capabilities) in its own PID, net,
            # IPC and UTS namespaces, so that each run can get namespaces and a uid of its own.
            prefix = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
            prefix += ["--unshare-cgroup-try", "--new-session", "--cap-add", "ALL", "--hostname", "sandbox"]
            prefix += [*_bwrap_parents(python), *_bwrap_root(python, 1 << 20)]
        else:
            root = tempfile.mkdtemp(prefix="agentgym-sandbox-root-")
            cleanup.append(lambda: _remove_dir(root))
            binds = [list(b) for b in python.binds]
            setup |= {"root": root, "uid": 0, "gid": 0, "binds": binds, "work": WORK, "disk_bytes": 1 << 20}
            setup["inodes"] = 16
            prefix = list(_UNSHARE)
        command, runner_fd = python.command("zygote", "{control}", marshal.dumps(setup, 4).hex())
        return _Zygote([*prefix, *command], runner_fd, cleanup)

    def _give_back(self, zygote: _Zygote) -> None:
        if zygote.broken:
            zygote.stop()
            return
        with self._pool_lock:
            self._idle.append(zygote)

    def close(self) -> None:
        """Stop the warm mode's idle zygotes (a later run starts new ones). Cold mode holds nothing to close."""
        with self._pool_lock:
            idle, self._idle = self._idle, []
        for zygote in idle:
            zygote.stop()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _collect(
        self, proc: subprocess.Popen | _WarmRun, result_fd: int, deadline: float, result_bytes: int
    ) -> tuple[bytes, bytes, bytes, str | None, tuple[bool, bool]]:
        """Read stdout, stderr and the result pipe as they come, until the program ends; kill the sandbox at
        the deadline or as soon as an output passes its cap (``result_bytes`` for the result pipe)."""
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()  # type: ignore[union-attr]
        caps = {out_fd: self.limits.output_bytes, err_fd: self.limits.output_bytes, result_fd: result_bytes}
        buffers = {fd: bytearray() for fd in caps}
        truncated = {out_fd: False, err_fd: False}
        killed = None
        exited_at = None
        with selectors.DefaultSelector() as selector:
            for fd in caps:
                os.set_blocking(fd, False)
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map() and killed is None:
                now = time.monotonic()
                if now >= deadline:
                    killed = "timeout"
                    break
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > _GRACE:
                    break  # the program is gone; a process it left behind holds the pipes open
                for key, _ in selector.select(min(deadline - now, 0.05)):
                    try:
                        data = os.read(key.fd, 65_536)
                    except BlockingIOError:
                        continue
                    if not data:
                        selector.unregister(key.fd)
                        continue
                    buffer = buffers[key.fd]
                    room = caps[key.fd] - len(buffer)
                    buffer += data[: max(room, 0)]
                    if len(data) > room:
                        truncated[key.fd] = True
                        killed = "output limit"
                        break
        if killed is None:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                killed = "timeout"
        if killed is not None:
            _kill_group(proc)
        proc.wait()
        return bytes(buffers[out_fd]), bytes(buffers[err_fd]), bytes(buffers[result_fd]), killed, (
            truncated[out_fd], truncated[err_fd])  # fmt: skip

    @staticmethod
    def _sweep(uid: int, patience: float = 5.0) -> int:
        """Kill every live process of ``uid`` (a uid used by this run only); return how many there were."""
        killed: set[int] = set()
        deadline = time.monotonic() + patience
        while pids := processes_of(uid):
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            killed.update(pids)
            if time.monotonic() > deadline:
                message = f"agentgym.envs.sandbox: processes of uid {uid} survive SIGKILL: {pids}"
                warnings.warn(message, RuntimeWarning, stacklevel=3)
                break
            time.sleep(0.002)
        return len(killed)


_UNSHARE = ("unshare", "--fork", "--kill-child", "--pid", "--mount", "--net", "--ipc", "--uts", "--")
_ROOT_BWRAP = (
    *("bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"),
    *("--die-with-parent", "--new-session", "--cap-add", "CAP_SETUID,CAP_SETGID", "--hostname", "sandbox"),
)
"""Cold bwrap as root: no user namespace, only the capabilities the runner needs to become the run's uid."""


@functools.lru_cache(maxsize=8)
def _root_bwrap_works(python: _Python) -> bool:
    """Whether bwrap, run as root, can build the sandbox without a user namespace here (a container without
    ``CAP_SYS_ADMIN`` cannot; the cold layer then uses a user namespace, as for other users). Checked once."""
    uid = UID_BASE + UID_SPAN - 2
    code = (
        f"import os; os.setgroups([]); os.setresgid({uid}, {uid}, {uid}); os.setresuid({uid}, {uid}, {uid}); print(1)"
    )
    command = [*_ROOT_BWRAP, *_bwrap_parents(python), *_bwrap_root(python, 1 << 20, "0777"), python.executable]
    try:
        done = subprocess.run([*command, "-S", "-c", code], capture_output=True, timeout=20, env=SANDBOX_ENV)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.stdout == b"1\n"


def _bwrap_root(python: _Python, work_bytes: int, work_perms: str | None = None) -> list[str]:
    """bwrap options for the sandbox's file system: read-only binds of what ``python`` needs, a fresh ``/proc``,
    a read-only minimal ``/dev``, a tmpfs work dir of ``work_bytes`` (``work_perms``: its mode; ``/tmp`` points
    there), a read-only root."""
    args = []
    for kind, source, target in python.binds:
        args += ["--symlink", source, target] if kind == "symlink" else ["--ro-bind", source, target]
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(work_bytes)]
    args += ["--perms", work_perms, "--tmpfs", WORK] if work_perms else ["--tmpfs", WORK]
    # /dev is a tmpfs of bwrap's own, with no size limit: read-only (its device nodes are mounts of their own)
    return [*args, "--symlink", WORK, "/tmp", "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", WORK]


def _bwrap_parents(python: _Python) -> list[str]:
    """bwrap run as root makes the binds' parent directories (``/usr`` …) mode 0700; the run's uid needs 0755."""
    parents = sorted({str(p) for _, _, target in python.binds for p in Path(target).parents} - {"/"})
    return [arg for parent in parents for arg in ("--perms", "0755", "--dir", parent)]


@functools.lru_cache(maxsize=1)
def _setpriv() -> str | None:
    return shutil.which("setpriv")


def _as_user(uid: int | None) -> tuple[list[str], dict[str, Any]]:
    """A command prefix and Popen options that start a process as ``uid`` (and gid ``uid``, no other groups).
    util-linux's ``setpriv`` where there is one: ``Popen(user=...)`` cannot use ``vfork``, and forking the harness
    cost ~4 ms a run here, ``setpriv``'s exec ~1 ms (it sets the saved ids too, so root cannot be regained)."""
    if uid is None:
        return [], {}
    if _setpriv():
        return [_setpriv(), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"], {}  # type: ignore[list-item]
    return [], {"user": uid, "group": uid, "extra_groups": []}


class _Zygote:
    """One warm-mode zygote (``inside.serve``) and the harness's end of its control socket. Used by one
    run at a time; stopped when its socket is closed (it exits on EOF), at the latest when the harness exits."""

    def __init__(self, command: list[str], runner_fd: int, cleanup: list[Any]) -> None:
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [str(theirs.fileno()) if arg == "{control}" else arg for arg in command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=[theirs.fileno(), runner_fd],
                start_new_session=True,
                env=SANDBOX_ENV,
            )
        except BaseException:
            self.sock.close()
            for undo in cleanup:
                undo()
            raise
        finally:
            theirs.close()
        self.started = False  # whether it ever started a run
        self.broken = False
        self._stop = weakref.finalize(self, _Zygote._end, self.sock, self.proc, cleanup)

    def request(self, header: bytes, fds: list[int], timeout: float) -> None:
        """Start a run (``header``: its limits; ``fds``: job, result, stdout, stderr); SandboxUnavailable if the
        zygote cannot."""
        try:
            socket.send_fds(self.sock, [header], fds)
            ready, _, _ = select.select([self.sock], [], [], timeout)
            reply = self.sock.recv(1024) if ready else b"error: no answer in time"
        except OSError as exc:
            reply = f"error: {exc}".encode()
        if reply == b"started":
            self.started = True
            return
        self.broken = True
        if not reply:  # it exited: its stderr says why
            self.sock.close()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                _kill_group(self.proc)
            detail = self.proc.stderr.read(2000).decode("utf-8", "replace").strip()  # type: ignore[union-attr]
            reply = f"error: the zygote exited ({detail or self.proc.returncode})".encode()
        raise SandboxUnavailable(f"warm sandbox: {reply.decode('utf-8', 'replace')[6:]}")

    def status(self, timeout: float | None) -> int | None:
        """The run's exit code (negative: ended by that signal) once it ended, None if still running after
        ``timeout`` seconds."""
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return None
        try:
            data = self.sock.recv(64)
            return os.waitstatus_to_exitcode(int(data))
        except (OSError, ValueError):  # the zygote died: so did the run (its PID namespace went with it)
            self.broken = True
            return -signal.SIGKILL

    def kill(self) -> None:
        try:
            self.sock.send(b"kill")
        except OSError:
            self.broken = True

    def stop(self) -> None:
        self._stop()

    @staticmethod
    def _end(sock: socket.socket, proc: subprocess.Popen, cleanup: list[Any]) -> None:
        sock.close()
        try:
            proc.wait(2)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
        proc.stderr.close()  # type: ignore[union-attr]
        for undo in cleanup:
            undo()


class _WarmRun:
    """A warm run as the harness sees it, with the parts of ``subprocess.Popen`` that ``Sandbox._collect`` uses."""

    def __init__(self, zygote: _Zygote, out_fd: int, err_fd: int) -> None:
        self.zygote = zygote
        self.stdout = os.fdopen(out_fd, "rb", buffering=0)
        self.stderr = os.fdopen(err_fd, "rb", buffering=0)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.status(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.zygote.status(timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired("warm run", timeout or 0)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            self.zygote.kill()


def _memfd(name: str, data: bytes) -> int:
    """A memory file holding ``data``, at offset 0 (how a job and the filter reach the sandbox)."""
    fd = os.memfd_create(name, 0)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _records(data: bytes, most: int) -> list[dict[str, Any]]:
    """The well-formed records among the first ``most`` lines of the result channel. A line longer than
    ``RECORD_BYTES`` or not of the runner's shape (``_RECORD``) is skipped unparsed, so a hostile line costs the
    harness a regular-expression scan (~10 ms per 400 kB), not a parse (a 4 MB list literal took 12 s and 1.9 GB)."""
    records = []
    for line in data.split(b"\n", most)[:most]:
        if not line or len(line) > RECORD_BYTES:
            continue
        text = line.decode("utf-8", "replace")
        if _RECORD.fullmatch(text) is None:
            continue
        ok, record = parse_value(text, RECORD_BYTES)
        if ok and isinstance(record, dict):
            records.append(record)
    return records


def processes_of(uid: int) -> list[int]:
    """The live (not zombie) processes whose real uid is ``uid``, from ``/proc`` (~0.5 ms for 120 processes)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb", buffering=0) as f:
                status = f.read(4096)
        except OSError:
            continue
        at = status.find(b"\nUid:\t")
        if at < 0 or int(status[at + 6 : status.find(b"\t", at + 6)]) != uid:
            continue
        state = status.find(b"\nState:\t")
        if status[state + 8 : state + 9] not in (b"Z", b"X"):
            found.append(int(name))
    return found


def _kill_group(proc: subprocess.Popen | _WarmRun) -> None:
    if isinstance(proc, _WarmRun):
        proc.kill()
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass


def _remove_dir(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        shutil.rmtree(path, ignore_errors=True)
