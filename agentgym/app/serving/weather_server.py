"""A small HTTP server that serves a weather snapshot over WeatherRun's HTTP schema.

``agentgym serve weather --snapshot PATH --port 8000`` runs it; tests start it on 127.0.0.1 with
port 0 and drive the ``http`` backend against it. The schema is documented in
:mod:`agentgym.envs.weather.backends`.

The API is GET-only, so the server takes no request body (a Content-Length above 0 is answered 413 before
anything is read); everything else a client may send is bounded by :class:`agentgym.app.serving.http_service.Limits`
(defaults: 512 open connections, 32 requests answered at once, 16 KiB of request line and headers, 20 s for a
request to arrive, 60 s idle keep-alive). ``WeatherServer(limits=Limits(...))`` changes them.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from agentgym.app.serving.http_service import HTTPService, Limits
from agentgym.envs.weather.dataset import SNAPSHOT_V0, WeatherRecord, city_key, load_snapshot

__all__ = ["WeatherServer"]


def _payload(path: str, record: WeatherRecord) -> dict[str, Any]:
    head = {"city": record.city, "date": record.date}
    if path == "/v1/weather":
        return {
            **head,
            "current": {
                "temperature_2m": record.temperature_c,
                "relative_humidity_2m": record.humidity_pct,
                "wind_speed_10m": record.wind_kph,
                "conditions": record.conditions,
            },
            "current_units": {"temperature_2m": "°C", "relative_humidity_2m": "%", "wind_speed_10m": "km/h"},
        }
    return {
        **head,
        "current": {"us_aqi": record.aqi, "pm2_5": record.pm2_5},
        "current_units": {"us_aqi": "USAQI", "pm2_5": "µg/m³"},
    }


class WeatherServer(HTTPService):
    """Serve ``snapshot`` at ``http://host:port`` (port 0 picks a free one; see :attr:`url`).

    Use as a context manager to run it in a background thread, or call :meth:`serve_forever`.
    ``limits`` bounds what a client may send (default: the :class:`Limits` defaults with no request body).
    """

    def __init__(
        self,
        snapshot: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        limits: Limits | None = None,
    ) -> None:
        self.snapshot = Path(snapshot or SNAPSHOT_V0)
        """The snapshot file served (the shipped ``-v0`` table by default)."""
        records = {(city_key(r.city), r.date): r for r in load_snapshot(self.snapshot)}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path not in ("/v1/weather", "/v1/air-quality"):
                    return self._send(
                        404, {"error": f"no such endpoint {url.path}; use /v1/weather or /v1/air-quality"}
                    )
                city, date = query.get("city", ""), query.get("date", "")
                if not city or not date:
                    return self._send(400, {"error": "query parameters 'city' and 'date' (YYYY-MM-DD) are required"})
                record = records.get((city_key(city), date))
                if record is None:
                    return self._send(404, {"error": f"no data for {city!r} on {date}"})
                self._send(200, _payload(url.path, record))

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body, ensure_ascii=False).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json; charset=utf-8")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (its timeout) or stopped reading (ours)
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:  # quiet by default
                pass

        super().__init__(Handler, host, port, limits=limits or Limits(max_body_bytes=0))
