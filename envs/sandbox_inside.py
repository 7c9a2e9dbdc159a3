"""The code that runs *inside* a :class:`~agentgym.envs.sandbox.Sandbox`: the job runner and, for the ``unshare``
layer, the setup of the sandbox's root file system that comes before it.

Standard library only, for Python ≥ 3.10: :mod:`agentgym.envs.sandbox` passes this file's source to the sandbox's
interpreter with ``python -S -B -c``, so nothing here imports agentgym (whose files are not visible inside the
sandbox). Before the submitted code runs it imports only built-in modules (``json``, ``signal`` and
``traceback`` would add ~10 ms to every run); ``traceback`` is imported only to show one.

The harness never trusts what this code reports about *success*: in ``calls`` mode it only reports the ``repr``
of each value, and the harness compares it with the expected value, which never enters the sandbox.

Protocol: ``python -c SOURCE JOB_FD RESULT_FD [SETUP]``.

- ``JOB_FD`` holds one :mod:`marshal`-ed dict: ``mode`` (``"run"`` or ``"calls"``), ``code``, ``calls``
  (expressions to evaluate after the code, in ``calls`` mode), ``rlimits`` (name → value), ``call_timeout``
  (seconds per call) and ``unsafe`` (no namespaces around this process: ask the kernel to kill it if the harness
  dies, to refuse it new privileges, and install the system-call filter ``seccomp``, which bwrap and the
  ``unshare`` layer's init install themselves).
- ``RESULT_FD`` receives one ``repr`` of a dict per line (the harness reads them with ``ast.literal_eval``):
  ``{"error": ...}`` for an exception in the program (``run``) or in the code before the calls
  (``load_error``), ``{"i": k, "value": repr}`` or ``{"i": k, "error": ...}`` per call, and ``{"done": n}``.
- ``SETUP`` (``unshare`` layer only, a marshal-ed dict as hex) describes the root file system to build while
  still root in the new namespaces; then privileges are dropped, the system-call filter ``seccomp`` is installed
  and the job runs in a child process, with this process as the PID namespace's init.
"""

import _signal
import builtins
import marshal
import os
import resource
import sys

SOLUTION = "<solution>"
MAX_REPR = 100_000
"""A call's value is reported as ``repr`` cut to this many characters (a longer one cannot match)."""

_repr = repr  # bound before any untrusted code runs, so patching builtins later changes nothing here
_write = os.write


class CallTimeout(BaseException):
    """A call ran past its time limit (a BaseException, so ``except Exception`` in the solution won't catch it)."""


def _emit(fd, record):
    data = (_repr(record) + "\n").encode("utf-8", "replace")
    while data:
        try:
            data = data[_write(fd, data) :]
        except OSError:  # the harness closed the channel or the code closed the fd: nothing more to report
            return


def _error(exc):
    """An exception as a record: type, message and the line of ``<solution>`` it came from."""
    line = None
    if isinstance(exc, SyntaxError) and exc.filename == SOLUTION:
        line = exc.lineno
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == SOLUTION:
            line = tb.tb_lineno
        tb = tb.tb_next
    try:
        message = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    except BaseException:  # a hostile __str__
        message = "?"
    return {"error": type(exc).__name__[:100], "message": str(message)[:300], "line": line}


def _print_traceback(exc, code):
    """The traceback as Python prints it, with the submitted code's lines and without the runner's frames."""
    try:
        import linecache
        import traceback

        linecache.cache[SOLUTION] = (len(code), None, code.splitlines(True), SOLUTION)
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
        keep = [f for f in te.stack if f.filename == SOLUTION or f.filename.startswith("<test ")]
        te.stack = traceback.StackSummary.from_list(keep)
        sys.stderr.write("".join(te.format()))
        sys.stderr.flush()
    except BaseException:
        pass


class _Quitter:
    """``exit()`` and ``quit()`` (``site`` is not imported, and it is what usually defines them)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Use {self.name}() to exit"

    def __call__(self, code=None):
        raise SystemExit(code)


def _prepare(job):
    for name, value in job["rlimits"].items():
        soft = hard = value
        if name == "RLIMIT_CPU":
            hard = value + 1  # SIGXCPU at the soft limit, SIGKILL a second later
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if job.get("unsafe"):  # no namespaces: die with the harness, never gain privileges (setuid binaries)
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
        no_new_privileges(libc)
        install_filter(libc, job["seccomp"])
    builtins.exit = _Quitter("exit")
    builtins.quit = _Quitter("quit")


def run_program(job, result_fd):
    """``run`` mode: the code as a script (``__name__ == "__main__"``); exit status 1 on an exception."""
    try:
        exec(compile(job["code"], SOLUTION, "exec"), {"__name__": "__main__", "__builtins__": builtins})
    except SystemExit:
        raise
    except BaseException as exc:
        _emit(result_fd, _error(exc))
        _print_traceback(exc, job["code"])
        sys.exit(1)


def run_calls(job, result_fd):
    """``calls`` mode: define the code (``__name__ == "__solution__"``), then evaluate each call in its namespace."""
    namespace = {"__name__": "__solution__", "__builtins__": builtins}
    try:
        exec(compile(job["code"], SOLUTION, "exec"), namespace)
    except BaseException as exc:  # SystemExit too: the calls cannot run
        record = _error(exc)
        record["load_error"] = True
        _emit(result_fd, record)
        _print_traceback(exc, job["code"])
        return

    def on_alarm(signum, frame):
        raise CallTimeout()

    limit = float(job["call_timeout"])
    for i, call in enumerate(job["calls"]):
        _signal.signal(_signal.SIGALRM, on_alarm)
        try:
            _signal.setitimer(_signal.ITIMER_REAL, limit)
            value = eval(compile(call, f"<test {i + 1}>", "eval"), namespace)
            text = repr(value)
            _signal.setitimer(_signal.ITIMER_REAL, 0)
            record = {"i": i, "value": text[:MAX_REPR]}
        except CallTimeout:
            record = {"i": i, "error": "Timeout", "message": f"the call took longer than {limit:g} s", "line": None}
        except BaseException as exc:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
            record = _error(exc)
            record["i"] = i
        _emit(result_fd, record)
    _emit(result_fd, {"done": len(job["calls"])})


def main(job_fd, result_fd):
    with os.fdopen(job_fd, "rb") as f:
        job = marshal.loads(f.read())
    _prepare(job)
    if job["mode"] == "run":
        run_program(job, result_fd)
    else:
        run_calls(job, result_fd)
    try:
        sys.stdout.flush()
    except BaseException:
        pass


def no_new_privileges(libc):
    """``PR_SET_NO_NEW_PRIVS``: no setuid binary gives this process or its children privileges (and an
    unprivileged process may install a seccomp filter)."""
    import ctypes

    if libc.prctl(38, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def install_filter(libc, program):
    """Install the classic BPF system-call filter ``program`` (bytes of ``struct sock_filter``) on this process
    and everything it starts (``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)``; needs ``no_new_privileges`` first)."""
    import ctypes

    instructions = ctypes.create_string_buffer(program, len(program))
    order = sys.byteorder  # struct sock_fprog on a 64-bit machine: u16 length, 6 bytes of padding, a pointer
    fprog = (len(program) // 8).to_bytes(2, order) + bytes(6) + ctypes.addressof(instructions).to_bytes(8, order)
    if libc.prctl(22, 2, fprog, 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


# ============================================================================ the unshare layer's root file system

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
DEVICES = ("null", "zero", "full", "random", "urandom")


def build_root(setup):
    """As root in fresh mount/PID/net/IPC/UTS namespaces: a read-only tmpfs root holding read-only binds of
    what Python needs, ``/dev`` nodes, a fresh ``/proc`` and a size- and inode-capped tmpfs work dir; chroot into
    it, drop privileges and install the system-call filter."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def mount(source, target, fstype, flags, data=None):
        args = [None if v is None else v.encode() for v in (source, target, fstype, data)]
        if libc.mount(args[0], args[1], args[2], flags, args[3]) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")

    root = setup["root"]
    uid, gid = setup["uid"], setup["gid"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates back to the host
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    for kind, source, target in setup["binds"]:
        path = root + target
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if kind == "symlink":
            os.symlink(source, path)
            continue
        if kind == "dir":
            os.makedirs(path, exist_ok=True)
        else:
            open(path, "w").close()
        mount(source, path, None, MS_BIND)
        mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.mkdir(root + "/dev")
    for name in DEVICES:
        open(root + "/dev/" + name, "w").close()
        mount("/dev/" + name, root + "/dev/" + name, None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        os.symlink(target, root + "/dev/" + name)
    os.symlink("/proc/self/fd/2", root + "/dev/stderr")
    os.mkdir(root + "/proc")
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.mkdir(root + setup["work"])
    work_options = f"size={setup['disk_bytes']},nr_inodes={setup['inodes']},mode=700,uid={uid},gid={gid}"
    mount("tmpfs", root + setup["work"], "tmpfs", MS_NOSUID | MS_NODEV, work_options)
    os.symlink(setup["work"], root + "/tmp")
    mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    libc.sethostname(b"sandbox", 7)
    os.chroot(root)
    os.chdir(setup["work"])
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    no_new_privileges(libc)
    install_filter(libc, setup["seccomp"])


def init(setup, job_fd, result_fd):
    """PID 1 of the ``unshare`` layer: build the root, then run the job in a child and exit with its status
    (128 + N for signal N, as a shell and bwrap report it). When this process exits, the kernel kills
    everything left in the PID namespace. It also enforces the wall-clock limit itself, in case the harness
    that would have killed it is gone."""
    try:
        build_root(setup)
    except OSError as exc:
        sys.stderr.write(f"sandbox setup failed: {exc}\n")
        os._exit(125)
    child = os.fork()
    if child == 0:
        try:
            main(job_fd, result_fd)
        except SystemExit as exc:
            code = exc.code
            if code is None:
                code = 0
            elif not isinstance(code, int):
                sys.stderr.write(str(code) + "\n")
                code = 1
            _flush_and_exit(code)
        except BaseException:
            _flush_and_exit(1)
        _flush_and_exit(0)
    os.close(job_fd)
    os.close(result_fd)
    _signal.signal(_signal.SIGALRM, lambda signum, frame: os._exit(124))
    _signal.setitimer(_signal.ITIMER_REAL, setup["deadline"])
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            if os.WIFSIGNALED(status):
                os._exit(128 + os.WTERMSIG(status))
            os._exit(os.WEXITSTATUS(status) & 0xFF)


def _flush_and_exit(code):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code & 0xFF)


if __name__ == "__main__":
    if len(sys.argv) > 3:
        init(marshal.loads(bytes.fromhex(sys.argv[3])), int(sys.argv[1]), int(sys.argv[2]))
    else:
        main(int(sys.argv[1]), int(sys.argv[2]))
