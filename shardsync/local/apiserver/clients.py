"""What each client asked of the API server and what its watches were sent, counted per client (its
User-Agent: a replica's is `shardsync/<version> (<identity>)`), so a test or the bench measures the real
API cost of a replica rather than a model's.

Requests are counted by `<verb> <resource>` (verbs as the real API server's audit names them: get, list,
watch, create, update, patch, delete, deletecollection), and a request naming one object also by
`<verb> <resource>/<name>` for the first NAMED_KEPT names of each client (then under `<verb>
<resource>/(others)`), so "nobody GETs the coordinator Lease" is one lookup. Watch events are the ADDED,
MODIFIED, DELETED and ERROR events written to a client's watch streams (BOOKMARKs are left out), by
resource. Counts only grow; a reader takes differences.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from shardsync.local.apiserver import routing

NAMED_KEPT = 256  # per client: names counted one by one before they share one key

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def verb_of(method: str, route: routing.ResourceRoute, watch: bool) -> str:
    """The audit verb of one request to a resource."""
    if method in ("GET", "HEAD"):
        if watch or route.watch_prefix:
            return "watch"
        return "list" if route.name is None else "get"
    if method == "DELETE":
        return "deletecollection" if route.name is None else "delete"
    return _VERBS.get(method, method.lower())


@dataclass(slots=True)
class _Client:
    requests: Counter[str] = field(default_factory=Counter)
    watch_events: Counter[str] = field(default_factory=Counter)
    names: set[str] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        by_request = {k: v for k, v in self.requests.items() if "/" not in k}
        return {
            "requests": sum(by_request.values()),
            "watchEvents": sum(self.watch_events.values()),
            "byRequest": dict(sorted(self.requests.items())),
            "byWatch": dict(sorted(self.watch_events.items())),
        }


class ClientCounts:
    """Thread-safe: every connection thread of the server counts here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[str, _Client] = {}

    def _client(self, user_agent: str) -> _Client:
        client = self._clients.get(user_agent)
        if client is None:
            client = self._clients[user_agent] = _Client()
        return client

    def request(self, user_agent: str, verb: str, resource: str, name: str | None = None) -> None:
        with self._lock:
            client = self._client(user_agent)
            client.requests[f"{verb} {resource}"] += 1
            if name is not None:
                key = f"{resource}/{name}"
                if key not in client.names and len(client.names) >= NAMED_KEPT:
                    key = f"{resource}/(others)"
                else:
                    client.names.add(key)
                client.requests[f"{verb} {key}"] += 1

    def watch_event(self, user_agent: str, resource: str) -> None:
        with self._lock:
            self._client(user_agent).watch_events[resource] += 1

    def state(self) -> dict[str, Any]:
        """{"clients": {user agent: {"requests", "watchEvents", "byRequest", "byWatch"}}}"""
        with self._lock:
            return {"clients": {ua: c.to_json() for ua, c in sorted(self._clients.items())}}


def client_of(doc: dict[str, Any], fragment: str) -> dict[str, Any]:
    """The counts of the one client whose User-Agent contains `fragment` (a replica: `(<identity>)`), from
    `ClientCounts.state()`; zeros when it made no request. Two clients matching is a mistake: ValueError."""
    found = [c for ua, c in (doc.get("clients") or {}).items() if fragment in ua]
    if len(found) > 1:
        raise ValueError(f"{len(found)} clients match {fragment!r}")
    return found[0] if found else {"requests": 0, "watchEvents": 0, "byRequest": {}, "byWatch": {}}
