"""The admin endpoint under `/_shardsync/` (a path the real API never uses), and its HTTP client.

GET  /_shardsync/faults                          current faults
GET  /_shardsync/state                           {"resourceVersion": N}
GET  /_shardsync/clients                         requests and watch events per client (clients.py)
POST /_shardsync/pause?seconds=S&mode=503|hang   pause every API request (until resumed if no seconds)
POST /_shardsync/resume
POST /_shardsync/refuse?userAgent=U|header=Name:Value|path=P&mode=503|hang|drop&seconds=S
POST /_shardsync/allow?userAgent=U|header=Name:Value|path=P   (none: lift every refusal)
POST /_shardsync/clear                           lift every fault
POST /_shardsync/snapshot                        write the --data-dir snapshot now
"""

from __future__ import annotations

import inspect
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Concatenate, ParamSpec

from shardsync.local.apiserver.clients import ClientCounts
from shardsync.local.apiserver.faults import Faults, check_mode

PREFIX = "/_shardsync/"
_WIRE_NAMES = {"user_agent": "userAgent"}  # a Faults argument → its query parameter (the rest are the same)
P = ParamSpec("P")


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
    clients: ClientCounts | None = None,
) -> tuple[int, dict[str, Any]]:
    """Serves one admin request; returns (HTTP code, JSON body)."""
    try:
        if method == "GET" and action == "faults":
            return 200, faults.state()
        if method == "GET" and action == "state":
            return 200, {"resourceVersion": resource_version}
        if method == "GET" and action == "clients":
            return 200, (clients or ClientCounts()).state()
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
                query.get("path"),
            )
        elif action == "allow":
            faults.allow(query.get("userAgent"), _header(query.get("header")), query.get("path"))
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


def _posted(method: Callable[Concatenate[Faults, P], None]) -> Callable[Concatenate[RemoteFaults, P], None]:
    """`method` of Faults as a method of RemoteFaults: a POST of its arguments to the action of its name."""
    signature = inspect.signature(method)

    def call(self: RemoteFaults, /, *args: P.args, **kwargs: P.kwargs) -> None:
        bound = signature.bind(None, *args, **kwargs)
        bound.apply_defaults()
        params = {_WIRE_NAMES.get(k, k): v for k, v in bound.arguments.items() if k != "self"}
        if params.get("header") is not None:
            params["header"] = "{}: {}".format(*params["header"])
        self._call("POST", method.__name__, **params)

    call.__name__, call.__qualname__ = method.__name__, f"RemoteFaults.{method.__name__}"
    call.__doc__ = method.__doc__
    return call


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

    pause = _posted(Faults.pause)
    resume = _posted(Faults.resume)
    refuse = _posted(Faults.refuse)
    allow = _posted(Faults.allow)
    clear = _posted(Faults.clear)

    def state(self) -> dict[str, Any]:
        return self._call("GET", "faults")

    def snapshot(self) -> str:
        return str(self._call("POST", "snapshot")["path"])

    def resource_version(self) -> int:
        return int(self._call("GET", "state")["resourceVersion"])

    def clients(self) -> dict[str, Any]:
        """Requests and watch events per client so far (`ClientCounts.state()`)."""
        return self._call("GET", "clients")
