"""HTTP calls that end by a deadline, however slowly the server answers.

``httpx`` timeouts are per socket operation: a server that sends its response (head or body) one byte at a time,
each within the read timeout, holds a call open for ever. :func:`client` makes an ``httpx.Client`` whose every
connect, read and write is cut to what is left before the deadline of the current :func:`deadline` block, so
that a whole call, head, body, TLS handshake and retries included, ends by then::

    http = client(timeout=5.0)                      # still at most 5 s per read
    with deadline(time.monotonic() + 2.0):          # and 2 s for everything in this block
        http.get(url)                               # httpx.ReadTimeout (ConnectTimeout, WriteTimeout) at the deadline

The deadline is per thread; nested blocks keep the earlier one. Outside a block the client is a plain ``httpx``
client.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore
import httpx

__all__ = ["client", "deadline", "remaining"]

_local = threading.local()


@contextlib.contextmanager
def deadline(end: float | None) -> Iterator[None]:
    """Within this block, HTTP calls of a :func:`client` end by ``end`` (a ``time.monotonic()`` time; None: none)."""
    outer = getattr(_local, "end", None)
    _local.end = end if outer is None else outer if end is None else min(outer, end)
    try:
        yield
    finally:
        _local.end = outer


def remaining(timeout: float | None = None) -> float | None:
    """Seconds left before this thread's deadline (at most ``timeout``), or ``timeout`` outside a block."""
    end = getattr(_local, "end", None)
    if end is None:
        return timeout
    left = end - time.monotonic()
    return left if timeout is None else min(timeout, left)


def _cut(timeout: float | None, error: type[Exception]) -> float | None:
    left = remaining(timeout)
    if left is not None and left <= 0:
        raise error("the call's deadline has passed")
    return left


class _Stream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _cut(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _cut(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> _Stream:
        return _Stream(self._stream.start_tls(ssl_context, server_hostname, _cut(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> _Stream:
        timeout = _cut(timeout, httpcore.ConnectTimeout)
        return _Stream(self._backend.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> _Stream:
        timeout = _cut(timeout, httpcore.ConnectTimeout)
        return _Stream(self._backend.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def client(*, socket_options: Iterable[Any] | None = None, **kwargs: Any) -> httpx.Client:
    """An ``httpx.Client`` (``kwargs`` as for it) whose calls end by the current :func:`deadline`."""
    transport = httpx.HTTPTransport(socket_options=socket_options)
    pool = transport._pool  # httpx builds its httpcore pool here; the backend is what opens and reads sockets
    if not isinstance(getattr(pool, "_network_backend", None), httpcore.NetworkBackend):
        raise RuntimeError(f"httpx {httpx.__version__} keeps its connection pool elsewhere: agentgym.core.deadline "
                           "needs an update")  # fmt: skip
    pool._network_backend = _Backend(pool._network_backend)
    return httpx.Client(transport=transport, **kwargs)
