"""The HTTP server agentgym's services share: run it in the foreground, or in a background thread.

``agentgym serve weather`` (:class:`agentgym.envs.weather_server.WeatherServer`) and ``agentgym serve
model`` (:class:`agentgym.model_server.ModelServer`) subclass :class:`HTTPService`; tests start them
on 127.0.0.1 with port 0 inside ``with`` blocks.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

__all__ = ["HTTPService"]


class HTTPService:
    """A threaded HTTP server for ``handler``; :meth:`serve_forever` blocks, ``with service:`` serves in a
    background thread until the block ends. :attr:`url` ends with the class's ``url_path``."""

    url_path = ""

    def __init__(
        self, handler: type[BaseHTTPRequestHandler], host: str, port: int, *, request_queue_size: int = 5
    ) -> None:
        settings = {"daemon_threads": True, "request_queue_size": request_queue_size}
        self.httpd = type("Server", (ThreadingHTTPServer,), settings)((host, port), handler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}{self.url_path}"

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
