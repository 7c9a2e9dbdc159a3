"""The code that runs *inside* a :class:`~agentgym.envs.sandbox.Sandbox`: the job runner and, for the ``unshare``
layer, the setup of the sandbox's root file system that comes before it.

Standard library only, for Python ≥ 3.10: :mod:`agentgym.envs.sandbox` compiles this file once with the sandbox's
interpreter and starts each run with ``python -S -B -c BOOT``, where ``BOOT`` executes that code object from a
sealed memory file the run inherits, so nothing here imports agentgym (whose files are not visible inside the
sandbox). Before the submitted code runs it imports only built-in modules and ``resource`` (``json``, ``signal``
and ``traceback`` would add ~10 ms to every run); ``traceback`` is imported only to show one.

The harness never trusts what this code reports about *success*: in ``calls`` mode it only reports the ``repr``
of each value, and the harness compares it with the expected value, which never enters the sandbox.

Protocol: ``python -c BOOT JOB_FD RESULT_FD [SETUP]``, or ``python -c BOOT zygote CONTROL_FD SETUP`` for warm
mode (:func:`serve`).

- ``JOB_FD`` holds one :mod:`marshal`-ed dict: ``mode`` (``"run"`` or ``"calls"``), ``code``, ``calls``
  (expressions to evaluate after the code, in ``calls`` mode), ``rlimits`` (name → value), ``call_timeout``
  (seconds per call), ``drop_to`` (bwrap as root: the uid to become first) and ``unsafe`` (no namespaces around
  this process: ask the kernel to kill it if the harness dies, to refuse it new privileges, and install the
  system-call filter ``seccomp``, which bwrap and the ``unshare`` layer's init install themselves).
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
    uid = job.get("drop_to")
    if uid is not None:  # bwrap as root: become the run's uid, which clears every capability (no user code yet)
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
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
MNT_DETACH = 2
DEVICES = ("null", "zero", "full", "random", "urandom")


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _mount(libc, source, target, fstype, flags, data=None):
    import ctypes

    args = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    if libc.mount(args[0], args[1], args[2], flags, args[3]) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


def build_root(setup):
    """As root in fresh mount/PID/net/IPC/UTS namespaces: a read-only tmpfs root holding read-only binds of
    what Python needs, ``/dev`` nodes, a fresh ``/proc`` and a size- and inode-capped tmpfs work dir; chroot into
    it, drop privileges and install the system-call filter."""
    libc = _libc()

    def mount(*args):
        _mount(libc, *args)

    root = setup["root"]
    uid, gid = setup["uid"], setup["gid"]  # the work dir's owner (root for a zygote: each run mounts its own)
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
    return libc


def drop_privileges(libc, uid, gid, program):
    """Become ``uid``/``gid`` with no supplementary groups (which clears every capability), never regain
    privileges, and install the system-call filter ``program``."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    no_new_privileges(libc)
    install_filter(libc, program)


def init(setup, job_fd, result_fd):
    """PID 1 of the ``unshare`` layer: build the root, then run the job in a child and exit with its status
    (128 + N for signal N, as a shell and bwrap report it). When this process exits, the kernel kills
    everything left in the PID namespace. It also enforces the wall-clock limit itself, in case the harness
    that would have killed it is gone."""
    try:
        libc = build_root(setup)
        drop_privileges(libc, setup["uid"], setup["gid"], setup["seccomp"])
    except OSError as exc:
        sys.stderr.write(f"sandbox setup failed: {exc}\n")
        os._exit(125)
    run_as_init(job_fd, result_fd, setup["deadline"])


def run_as_init(job_fd, result_fd, deadline):
    """As PID 1 of the run's namespace: run the job in a child, enforce the wall-clock ``deadline`` (seconds),
    exit with the child's status."""
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
    _signal.setitimer(_signal.ITIMER_REAL, deadline)
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


# ============================================================================ warm mode: the zygote

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x08000000, 0x20000000, 0x40000000
RUN_NAMESPACES = CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC
"""What each warm run gets fresh: PID, mount and IPC namespaces. The network namespace is the zygote's, which
has only a loopback device and serves one run at a time (only Unix sockets can be made, and they close with the
run's processes)."""
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}
_SIGCHLD = 17
MAX_FDS = 4


def serve(control_fd, setup):
    """The zygote: root in its own PID/mount/net/IPC/UTS namespaces, with the runner imported, waiting for jobs
    on the ``SOCK_SEQPACKET`` socket ``control_fd``. It never reads a job, so no submitted code or test input
    ever enters its memory; each request carries only the run's limits (a marshal-ed dict: ``uid``, ``gid``,
    ``disk_bytes``, ``inodes``, ``deadline``) and its file descriptors (job, result, stdout, stderr).

    For each request it clones a process into fresh PID, mount and IPC namespaces (:func:`start_run`), answers
    ``b"started"``, then the run's wait status as decimal text when that process ends; ``b"kill"`` from the
    harness kills the run (its whole PID namespace). It serves one run at a time and exits when the harness
    closes the socket."""
    import select
    import socket

    libc = _libc()
    pylibc = __import__("ctypes").PyDLL(None, use_errno=True)  # holds the GIL across clone(): one thread only
    sys_clone = _SYS_CLONE[os.uname().machine]
    control = socket.socket(fileno=control_fd)
    program = setup["seccomp"]
    while True:
        try:
            header, fds, _, _ = socket.recv_fds(control, 4096, MAX_FDS)
        except OSError:
            return
        if not header:
            return  # the harness is gone
        if header == b"kill":  # meant for a run that had already ended
            for fd in fds:
                os.close(fd)
            continue
        try:
            limits = marshal.loads(header)
            if len(fds) != MAX_FDS:
                raise ValueError("a run needs 4 file descriptors")
            pid = pylibc.syscall(sys_clone, RUN_NAMESPACES | _SIGCHLD, 0, 0, 0, 0)
            if pid == 0:
                control.detach()
                start_run(libc, limits, fds, program)  # never returns
            if pid < 0:
                raise OSError(__import__("ctypes").get_errno(), "clone failed")
        except Exception as exc:  # noqa: BLE001 (a bad request fails that run only)
            control.send(("error " + str(exc)).encode()[:1000])
            continue
        finally:
            for fd in fds:
                os.close(fd)
        pidfd = os.pidfd_open(pid)
        control.send(b"started")
        while True:
            ready, _, _ = select.select([control, pidfd], [], [])
            if pidfd in ready:
                break
            if control.recv(16) != b"kill":  # b"" (the harness is gone) ends the run too
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                return
            os.kill(pid, 9)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        control.send(str(status).encode())


def start_run(libc, limits, fds, program):
    """PID 1 of a warm run, just cloned from the zygote into fresh PID, mount and IPC namespaces: mount a fresh
    ``/proc`` and an empty, size- and inode-capped tmpfs work dir of its own, keep only the run's file descriptors
    (stdin ``/dev/null``), drop to the run's uid, install the system-call filter, then run the job as the cold
    layers do (:func:`run_as_init`)."""
    try:
        null = os.open("/dev/null", os.O_RDONLY)
        high = [os.dup(fd) for fd in (null, *fds)]  # fd numbers above every target, so dup2 clobbers none
        for target, fd in zip((0, 3, 4, 1, 2), high, strict=True):  # stdin, job, result, stdout, stderr
            os.dup2(fd, target)
        os.closerange(5, 1 << 20)  # the zygote's control socket above all
        _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
        for point in (b"/proc", limits["work"].encode()):  # the zygote's, replaced below (not hidden under)
            if libc.umount2(point, MNT_DETACH) != 0:
                raise OSError(__import__("ctypes").get_errno(), f"umount {point.decode()}")
        _mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        uid, gid = limits["uid"], limits["gid"]
        options = f"size={limits['disk_bytes']},nr_inodes={limits['inodes']},mode=700,uid={uid},gid={gid}"
        _mount(libc, "tmpfs", limits["work"], "tmpfs", MS_NOSUID | MS_NODEV, options)
        os.chdir(limits["work"])
        drop_privileges(libc, uid, gid, program)
        libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: /proc/self is the run's own (its uid is the run's alone)
    except BaseException as exc:  # noqa: BLE001 (reported on the run's stderr, as the cold layers do)
        try:
            os.write(2, f"sandbox setup failed: {exc}\n".encode())
        finally:
            os._exit(125)
    run_as_init(3, 4, limits["deadline"])


def zygote(control_fd, setup):
    """The zygote's entry: build the root file system (``unshare`` layer; bwrap built it already), then serve."""
    if setup.get("root"):
        try:
            build_root(setup)
        except OSError as exc:
            sys.stderr.write(f"sandbox setup failed: {exc}\n")
            os._exit(125)
    serve(control_fd, setup)


if __name__ == "__main__":
    if sys.argv[1] == "zygote":
        zygote(int(sys.argv[2]), marshal.loads(bytes.fromhex(sys.argv[3])))
    elif len(sys.argv) > 3:
        init(marshal.loads(bytes.fromhex(sys.argv[3])), int(sys.argv[1]), int(sys.argv[2]))
    else:
        main(int(sys.argv[1]), int(sys.argv[2]))
