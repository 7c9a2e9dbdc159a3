"""agentgym.core.deadline: an HTTP call ends by its deadline however the server trickles its reply."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from agentgym.core.deadline import client, deadline, remaining
from tests.test_step_budget import RawServer


class HeadTrickle(RawServer):
    """Sends a complete 200 reply one byte every 20 ms (~0.8 s in all), its head included."""

    def answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}":
                    time.sleep(0.02)
                    conn.sendall(bytes([byte]))
            except OSError:
                pass


@pytest.fixture
def server():
    server = HeadTrickle()
    yield server
    server.close()


def test_a_trickled_head_is_cut_at_the_deadline(server):
    http = client(timeout=1.0)  # no single read waits 1 s: httpx alone would wait for all of it
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout), deadline(started + 0.2):
        http.get(server.url)
    assert time.monotonic() - started < 0.5


def test_outside_a_deadline_the_client_is_plain_httpx(server):
    assert client(timeout=1.0).get(server.url).json() == {}


def test_nested_deadlines_keep_the_earlier_one():
    now = time.monotonic()
    assert remaining(3.0) == 3.0
    with deadline(now + 10):
        with deadline(now + 1):
            assert remaining() <= 1
        with deadline(now + 100):
            assert 9 < remaining() <= 10
        with deadline(None):
            assert 9 < remaining() <= 10
        assert remaining(0.5) == 0.5
    assert remaining() is None
