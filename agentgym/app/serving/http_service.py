"""The HTTP server agentgym's services share: run it in the foreground, or in a background thread.

``agentgym serve weather`` (:class:`agentgym.app.serving.weather_server.WeatherServer`) and ``agentgym serve
model`` (:class:`agentgym.app.serving.model_server.ModelServer`) subclass :class:`HTTPService`; tests start them
on 127.0.0.1 with port 0 inside ``with`` blocks. Handlers are ordinary
:class:`http.server.BaseHTTPRequestHandler` subclasses (``do_GET``, ``do_POST``, ``self.rfile``, ``self.wfile``);
each request gets a fresh instance, run as ``setup()``, ``handle_one_request()``, ``finish()`` (``handle`` is not
called: the server owns the connection between requests), and ``self.rfile`` holds exactly the checked request.

How a request travels. One thread, the *reader*, owns every open connection: it waits on all of them at once,
buffers each request's head and body as their bytes arrive, and checks them. Only a complete request that passed
the checks goes to one of ``workers`` threads, which runs the handler and writes the response. A slow, idle or
half-sent connection therefore costs a socket and the bytes it has sent so far, never a thread, and a handler
never waits on a client's upload.

Limits (:class:`Limits`; every service takes ``limits=Limits(...)``, e.g.
``ModelServer(responder, limits=Limits(max_body_bytes=16 << 20, request_timeout_s=60))``):

======================  ========  =======================================================================
field                   default   past it
======================  ========  =======================================================================
``max_connections``     512       a new connection closes the one that has waited longest for a request
``workers``             32        requests wait in a queue, in arrival order
``max_head_bytes``      16 KiB    431 (request line and headers together)
``max_headers``         100       431
``max_body_bytes``      1 MiB     413, sent before the body is read (each service sets its own)
``max_buffered_bytes``  64 MiB    503 + ``Retry-After``: bodies in the server at once (by Content-Length,
                                  from the head's arrival until the response is sent)
``request_timeout_s``   20        408: from a request's first byte to its last
``idle_timeout_s``      60        a kept-alive connection that sends no new request is closed
``write_timeout_s``     10        a client that does not read its response is dropped (it held a worker)
``linger_s``            2         after a refusal, the rest of an upload is read and dropped this long, so
                                  the client reads the answer instead of a reset connection
======================  ========  =======================================================================

An open connection costs a file descriptor and a few kB, so 512 of them are cheap (this machine allows 20 000
descriptors); 32 workers let 32 requests wait on a model or a ``latency_ms`` at once (the endpoint benchmark
runs 8). 20 s lets a 1 MiB body arrive at 50 kB/s.

Headers are checked before any body is read: an ``HTTP/1.0`` or ``HTTP/1.1`` request line, header names that
are tokens, no folded lines, no control characters, at most one Content-Length value (repeats must agree), made
of digits. ``Transfer-Encoding`` (chunked uploads) is refused with 411: send Content-Length. ``Expect:
100-continue`` is answered by the reader, so a client that waits for it is told 413 before it uploads. Every
refusal is a JSON body with a one-line reason (:meth:`HTTPService.error_body`), and closes the connection.

Why: measured on a 2-core machine with :class:`http.server.ThreadingHTTPServer` (a thread per connection,
blocking reads, no limits), 300 half-sent requests held 300 threads for as long as the client liked, and
``Content-Length: -1`` or a length past the body held a thread forever. Here 300 half-sent requests hold no
thread, and a well-behaved client is served in milliseconds while they are open (tests/test_hostile_http.py).
The reader's memory is bounded by ``max_buffered_bytes``, plus ``max_head_bytes`` and a 64 KiB read per open
connection; what a handler builds from a body is its service's to bound (see :mod:`agentgym.app.serving.model_server`).
A worker is held by one request at a time, at most ``write_timeout_s`` by a client that stops reading.
"""

from __future__ import annotations

import io
import json
import queue
import re
import selectors
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any, Self

__all__ = ["HTTPService", "Limits"]

_READ_SIZE = 64 * 1024
_SWEEP_S = 0.05  # how often the reader looks for connections past their deadline
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Limits:
    """How much a client may ask of an :class:`HTTPService`; see the module docstring for what each one does."""

    max_connections: int = 512
    workers: int = 32
    max_head_bytes: int = 16 * 1024
    max_headers: int = 100
    max_body_bytes: int = 1 << 20
    max_buffered_bytes: int = 64 << 20
    request_timeout_s: float = 20.0
    idle_timeout_s: float = 60.0
    write_timeout_s: float = 10.0
    linger_s: float = 2.0  # after a refusal, how long the rest of the upload is read and dropped, so it is seen

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value < 0 or (value == 0 and name != "max_body_bytes"):
                raise ValueError(f"Limits.{name} must be positive, got {value}")


class Refusal(Exception):
    """A request the server answers with ``status`` and ``message`` without running the handler."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(frozen=True)
class RequestHead:
    """What the reader needs from a request's head: its size, the body's length and whether 100 is awaited."""

    size: int  # bytes up to and including the blank line
    content_length: int
    expect_continue: bool


def parse_head(data: bytes | bytearray, limits: Limits, start: int = 0) -> RequestHead | None:
    """The head at the start of ``data``, or None while it is incomplete; :class:`Refusal` if it breaks a rule.

    ``start``: where to look for the blank line that ends the head (the bytes before it were searched already,
    so a head sent a byte at a time costs linear time). Lines end with ``\\n`` or ``\\r\\n``, as
    :mod:`http.client` reads them, so the handler sees the same headers.
    """
    end = _HEAD_END.search(data, max(0, start - 3), limits.max_head_bytes + 4)
    if end is None:
        if len(data) > limits.max_head_bytes:
            raise Refusal(431, f"the request line and headers exceed {limits.max_head_bytes} bytes")
        return None
    lines = [line.removesuffix("\r") for line in bytes(data[: end.start()]).decode("latin-1").split("\n")]
    _check_request_line(lines[0])
    if len(lines) - 1 > limits.max_headers:
        raise Refusal(431, f"{len(lines) - 1} header lines; at most {limits.max_headers} are accepted")
    lengths, expect_continue = set(), False
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not _TOKEN.fullmatch(name):
            raise Refusal(400, f"malformed header line {line[:80]!r} (want 'Name: value', no folding)")
        if _CONTROL.search(value):
            raise Refusal(400, f"control character in the {name} header")
        name, value = name.lower(), value.strip(" \t")
        if name == "transfer-encoding":
            raise Refusal(411, "Transfer-Encoding (chunked upload) is not accepted; send the body with Content-Length")
        if name == "content-length":
            lengths.add(value)
        expect_continue |= name == "expect" and value.lower() == "100-continue"
    return RequestHead(end.end(), _content_length(lengths, limits), expect_continue)


def _check_request_line(line: str) -> None:
    parts = line.split(" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not parts[1] or _CONTROL.search(parts[1]):
        raise Refusal(400, f"malformed request line {line[:80]!r} (want 'METHOD /path HTTP/1.1')")
    if parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        raise Refusal(505, f"unsupported protocol {parts[2][:20]!r}; use HTTP/1.1")


def _content_length(values: set[str], limits: Limits) -> int:
    if len(values) > 1:
        raise Refusal(400, f"conflicting Content-Length headers {sorted(values)}")
    value = next(iter(values), "0")
    if not _DIGITS.fullmatch(value):
        raise Refusal(400, f"Content-Length must be a whole number of bytes, got {value[:40]!r}")
    if len(value) > 18 or int(value) > limits.max_body_bytes:
        raise Refusal(413, f"the body is {value[:40]} bytes; this service accepts at most {limits.max_body_bytes}")
    return int(value)


@dataclass(eq=False)
class _Connection:
    sock: socket.socket
    address: Any
    deadline: float
    buffer: bytearray = field(default_factory=bytearray)
    since: float = field(default_factory=time.monotonic)  # when it began waiting for its current request
    head: RequestHead | None = None
    scanned: int = 0  # how much of the buffer was searched for the end of the head
    reserved: int = 0  # bytes of max_buffered_bytes held for this request's body
    busy: bool = False  # a worker has it
    closing: bool = False  # refused: dropping what the client still sends until EOF or the deadline


class _BufferedSocket:
    """The socket a handler sees: reads come from the buffered request, everything else goes to the socket."""

    def __init__(self, sock: socket.socket, request: bytes) -> None:
        self._sock, self._request, self.sent = sock, request, 0

    def makefile(self, mode: str = "r", buffering: int | None = None, **kwargs: Any) -> Any:
        if "r" in mode:
            return io.BytesIO(self._request)
        return self._sock.makefile(mode, buffering, **kwargs)

    def sendall(self, data: Any) -> None:
        self._sock.sendall(data)
        self.sent += memoryview(data).nbytes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _run_handler(cls: type[BaseHTTPRequestHandler], sock: _BufferedSocket, address: Any, server: Any) -> bool:
    """What ``cls(sock, address, server)`` does, for one request (the reader owns the connection between
    requests); True if the handler keeps the connection open."""
    handler = cls.__new__(cls)
    handler.request, handler.client_address, handler.server = sock, address, server
    handler.handle_expect_100 = lambda: True  # type: ignore[method-assign]  # the reader answered it already
    handler.setup()
    try:
        handler.handle_one_request()
    finally:
        handler.finish()
    return not handler.close_connection


class HTTPService:
    """A bounded HTTP server for ``handler``; :meth:`serve_forever` blocks, ``with service:`` serves in a
    background thread until the block ends. :attr:`url` ends with the class's ``url_path``."""

    url_path = ""

    def __init__(
        self, handler: type[BaseHTTPRequestHandler], host: str, port: int, *, limits: Limits | None = None
    ) -> None:
        self.limits = limits or Limits()
        self._handler = handler
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.create_server((host, port), family=family, backlog=128)
        self._listener.setblocking(False)
        self.server_address = self._listener.getsockname()
        self._connections: dict[socket.socket, _Connection] = {}
        self._buffered = 0
        self._ready: queue.SimpleQueue[tuple[_Connection, bytes] | None] = queue.SimpleQueue()
        self._finished: queue.SimpleQueue[tuple[_Connection, bool]] = queue.SimpleQueue()
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._wake_write.setblocking(False)
        self._stop, self._running, self._stopped = threading.Event(), threading.Event(), threading.Event()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}{self.url_path}"

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The JSON body of a refusal; services override it to match their API's error shape."""
        return {"error": message}

    # ------------------------------------------------------------------ lifecycle

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (or Ctrl-C) in this thread."""
        workers = [threading.Thread(target=self._work, daemon=True) for _ in range(self.limits.workers)]
        for worker in workers:
            worker.start()
        self._running.set()
        try:
            self._read_loop()
        finally:
            for _ in workers:
                self._ready.put(None)
            self._take_back()  # (closes them: the server is stopping)
            for conn in [c for c in self._connections.values() if not c.busy]:
                self._close(conn)  # a busy one is closed by its worker
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` and wait until it has returned."""
        self._stop.set()
        self._wake()
        if self._running.is_set():
            self._stopped.wait(timeout=10)

    def server_close(self) -> None:
        for sock in (self._listener, self._wake_read, self._wake_write):
            sock.close()

    def __enter__(self) -> Self:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        self._running.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()

    # ------------------------------------------------------------------ the reader

    def _read_loop(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ)
        selector.register(self._wake_read, selectors.EVENT_READ)
        self._selector, last_sweep = selector, time.monotonic()
        try:
            while not self._stop.is_set():
                for key, _ in selector.select(timeout=_SWEEP_S):
                    if key.fileobj is self._listener:
                        self._accept()
                    elif key.fileobj is self._wake_read:
                        self._drain_wake()
                    elif conn := self._connections.get(key.fileobj):  # type: ignore[arg-type]
                        self._receive_guarded(conn)  # (None: closed by an accept earlier in this batch)
                self._take_back()
                if (now := time.monotonic()) - last_sweep >= _SWEEP_S:
                    self._expire(now)
                    last_sweep = now
        finally:
            selector.close()

    def _accept(self) -> None:
        while True:
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. out of file descriptors: retry on the next wake-up
                return
            if len(self._connections) >= self.limits.max_connections and not self._evict_one():
                _send_now(sock, self._response(503, "too many connections; retry shortly"))
                sock.close()
                continue
            sock.setblocking(False)
            conn = _Connection(sock, address, time.monotonic() + self.limits.idle_timeout_s)
            self._connections[sock] = conn
            self._selector.register(sock, selectors.EVENT_READ)

    def _evict_one(self) -> bool:
        """Close the waiting connection that has waited longest (a flood of idle connections cannot lock
        clients out: each new one pushes out the oldest)."""
        waiting = [c for c in self._connections.values() if not c.busy]
        if not waiting:
            return False
        self._close(min(waiting, key=lambda c: (not c.closing, c.since)))
        return True

    def _receive_guarded(self, conn: _Connection) -> None:
        try:
            self._receive(conn)
        except Exception as exc:  # a bug must not stop the server: drop this connection and say why
            print(f"agentgym http: {type(exc).__name__}: {exc} (reading from {conn.address})", file=sys.stderr)
            self._close(conn)

    def _receive(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(_READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self._close(conn)
        if not data:
            return self._close(conn)
        if conn.closing:
            return  # dropped: the client is finishing an upload that was refused
        if not conn.buffer:
            conn.deadline = time.monotonic() + self.limits.request_timeout_s
        conn.buffer += data
        self._advance(conn)

    def _advance(self, conn: _Connection) -> None:
        """Parse what ``conn`` has buffered; hand a complete request to a worker, or refuse a bad one."""
        try:
            if conn.head is None:
                conn.head = parse_head(conn.buffer, self.limits, conn.scanned)
                if conn.head is None:
                    conn.scanned = len(conn.buffer)
                    return
                self._reserve(conn, conn.head.content_length)
                if conn.head.expect_continue and len(conn.buffer) < conn.head.size + conn.head.content_length:
                    _send_now(conn.sock, b"HTTP/1.1 100 Continue\r\n\r\n")
        except Refusal as refusal:
            return self._refuse(conn, refusal.status, refusal.message)
        total = conn.head.size + conn.head.content_length
        if len(conn.buffer) < total:
            return
        request, conn.buffer, conn.head, conn.scanned = bytes(conn.buffer[:total]), conn.buffer[total:], None, 0
        conn.busy = True
        self._selector.unregister(conn.sock)
        self._ready.put((conn, request))

    def _reserve(self, conn: _Connection, length: int) -> None:
        if self._buffered + length > self.limits.max_buffered_bytes:
            raise Refusal(503, "the server is receiving too many request bodies at once; retry shortly")
        self._buffered += length
        conn.reserved = length

    def _release(self, conn: _Connection) -> None:
        self._buffered -= conn.reserved
        conn.reserved = 0

    def _refuse(self, conn: _Connection, status: int, message: str) -> None:
        """Answer ``status`` now, then read and drop the rest of the request for ``linger_s`` before closing,
        so a client still uploading gets to read the answer instead of a reset connection."""
        _send_now(conn.sock, self._response(status, message))
        self._release(conn)
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            return self._close(conn)
        conn.closing, conn.buffer, conn.head, conn.scanned = True, bytearray(), None, 0
        conn.deadline = time.monotonic() + self.limits.linger_s

    def _expire(self, now: float) -> None:
        for conn in [c for c in self._connections.values() if not c.busy and c.deadline <= now]:
            if conn.buffer and not conn.closing:
                seconds = self.limits.request_timeout_s
                self._refuse(conn, 408, f"the request did not arrive within {seconds:g} s")
            else:
                self._close(conn)

    def _take_back(self) -> None:
        """Connections workers have answered on: keep them open for the next request, or close them."""
        while True:
            try:
                conn, keep = self._finished.get_nowait()
            except queue.Empty:
                return
            conn.busy = False
            self._release(conn)
            if not keep or self._stop.is_set():
                self._connections.pop(conn.sock, None)
                conn.sock.close()
                continue
            conn.sock.setblocking(False)
            conn.since = now = time.monotonic()
            conn.deadline = now + (self.limits.request_timeout_s if conn.buffer else self.limits.idle_timeout_s)
            self._selector.register(conn.sock, selectors.EVENT_READ)
            if conn.buffer:  # the client sent its next request already (pipelining)
                self._advance(conn)

    def _close(self, conn: _Connection) -> None:
        self._release(conn)
        if self._connections.pop(conn.sock, None) is not None and not conn.busy:
            try:
                self._selector.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
        conn.sock.close()

    def _wake(self) -> None:
        try:
            self._wake_write.send(b"\0")
        except OSError:
            pass  # the pipe is full (a wake-up is already pending) or closed

    def _drain_wake(self) -> None:
        try:
            while self._wake_read.recv(4096):
                pass
        except OSError:
            pass

    def _response(self, status: int, message: str) -> bytes:
        body = json.dumps(self.error_body(status, message), ensure_ascii=False).encode("utf-8")
        retry = "Retry-After: 1\r\n" if status == 503 else ""
        head = (
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{retry}Connection: close\r\n\r\n"
        )
        return head.encode("ascii") + body

    # ------------------------------------------------------------------ the workers

    def _work(self) -> None:
        while (item := self._ready.get()) is not None:
            conn, request = item
            keep = self._handle(conn, request)
            if self._stop.is_set():
                conn.sock.close()
            else:
                self._finished.put((conn, keep))
                self._wake()

    def _handle(self, conn: _Connection, request: bytes) -> bool:
        """Run the handler on one buffered request; True if the connection stays open for another."""
        sock = _BufferedSocket(conn.sock, request)
        try:
            conn.sock.settimeout(self.limits.write_timeout_s)
            return _run_handler(self._handler, sock, conn.address, self)
        except (TimeoutError, ConnectionError):
            return False  # the client stopped reading, or went away
        except Exception as exc:  # a bug in a handler: say so on stderr and to the client, keep serving
            line = request.split(b"\n", 1)[0].decode("latin-1").strip()
            print(f"agentgym http: {type(exc).__name__}: {exc} (while answering {line[:120]!r})", file=sys.stderr)
            if sock.sent == 0:
                _send_now(conn.sock, self._response(500, f"internal error: {type(exc).__name__}"))
            return False


def _send_now(sock: socket.socket, data: bytes) -> None:
    """Send what the socket takes without waiting (refusals are small; a client that reads nothing loses them)."""
    try:
        sock.setblocking(False)
        sock.send(data)
    except OSError:
        pass
