"""The admin endpoint under `/_shardsync/` (a path the real API never uses), and its HTTP client.

GET  /_shardsync/faults                          current faults
GET  /_shardsync/state                           {"resourceVersion": N}
POST /_shardsync/pause?seconds=S&mode=503|hang   pause every API request (until resumed if no seconds)
POST /_shardsync/resume
POST /_shardsync/refuse?userAgent=U|header=Name:Value&mode=503|hang|drop&seconds=S
POST /_shardsync/allow?userAgent=U|header=Name:Value   (neither: lift every refusal)
POST /_shardsync/clear                           lift every fault
POST /_shardsync/snapshot                        write the --data-dir snapshot now
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from shardsync.local.apiserver.faults import Faults, Mode, check_mode

PREFIX = "/_shardsync/"


def _header(raw: str | None) -> tuple[str, str] | None:
    if not raw:
        return None
    name, sep, value = raw.partition(":")
    if not sep or not name.strip():
        raise ValueError(f"header must be 'Name: value', got {raw!r}")
    return name.strip(), value.strip()


def _seconds(raw: str | None) -> float | None:
    return None if raw in (None, "") else float(raw)


def handle(
    method: str,
    action: str,
    query: Mapping[str, str],
    faults: Faults,
    resource_version: int,
    snapshot: Callable[[], str | None],
) -> tuple[int, dict[str, Any]]:
    """Serves one admin request; returns (HTTP code, JSON body)."""
    try:
        if method == "GET" and action == "faults":
            return 200, faults.state()
        if method == "GET" and action == "state":
            return 200, {"resourceVersion": resource_version}
        if method != "POST":
            return 405, {"error": f"{method} not allowed on {PREFIX}{action}"}
        if action == "pause":
            faults.pause(_seconds(query.get("seconds")), check_mode(query.get("mode", "503")))
        elif action == "resume":
            faults.resume()
        elif action == "refuse":
            faults.refuse(
                query.get("userAgent"),
                _header(query.get("header")),
                check_mode(query.get("mode", "503")),
                _seconds(query.get("seconds")),
            )
        elif action == "allow":
            faults.allow(query.get("userAgent"), _header(query.get("header")))
        elif action == "clear":
            faults.clear()
        elif action == "snapshot":
            path = snapshot()
            if path is None:
                return 409, {"error": "no --data-dir configured"}
            return 200, {"path": path}
        else:
            return 404, {"error": f"unknown admin action {action!r}"}
    except ValueError as exc:
        return 400, {"error": str(exc)}
    return 200, faults.state()


class RemoteFaults:
    """Faults of a server in another process, driven over its admin endpoint."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self._url = url.rstrip("/")
        self._timeout = timeout

    def _call(self, method: str, action: str, **params: str | float | None) -> dict[str, Any]:
        query = urllib.parse.urlencode({k: str(v) for k, v in params.items() if v is not None})
        url = f"{self._url}{PREFIX}{action}" + (f"?{query}" if query else "")
        req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
        try:
            with urllib.request.urlopen(req, timeout=self._timeout) as resp:
                body: dict[str, Any] = json.loads(resp.read() or b"{}")
                return body
        except urllib.error.HTTPError as exc:
            raise RuntimeError(
                f"admin {action} failed: {exc.code} {exc.read().decode(errors='replace')}"
            ) from exc

    @staticmethod
    def _fmt(header: tuple[str, str] | None) -> str | None:
        return None if header is None else f"{header[0]}: {header[1]}"

    def pause(self, seconds: float | None = None, mode: Mode = "503") -> None:
        self._call("POST", "pause", seconds=seconds, mode=mode)

    def resume(self) -> None:
        self._call("POST", "resume")

    def refuse(
        self,
        user_agent: str | None = None,
        header: tuple[str, str] | None = None,
        mode: Mode = "503",
        seconds: float | None = None,
    ) -> None:
        self._call(
            "POST", "refuse", userAgent=user_agent, header=self._fmt(header), mode=mode, seconds=seconds
        )

    def allow(self, user_agent: str | None = None, header: tuple[str, str] | None = None) -> None:
        self._call("POST", "allow", userAgent=user_agent, header=self._fmt(header))

    def clear(self) -> None:
        self._call("POST", "clear")

    def state(self) -> dict[str, Any]:
        return self._call("GET", "faults")

    def snapshot(self) -> str:
        return str(self._call("POST", "snapshot")["path"])

    def resource_version(self) -> int:
        return int(self._call("GET", "state")["resourceVersion"])
