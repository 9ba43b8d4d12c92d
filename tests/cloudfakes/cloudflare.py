"""A contract fake of the Cloudflare API (v4) on loopback, for the cloudflare provider's tests.

No emulator of Cloudflare's API exists, so this aiohttp app implements the behaviour the provider relies on
and the tests drive it through the official SDK over HTTP: the SDK's own request building, query encoding,
paging and error mapping run as they would against api.cloudflare.com.

Documented behaviour it encodes (developers.cloudflare.com, API reference and "Rate limits"):
- authentication by `Authorization: Bearer <token>` or `X-Auth-Key` with `X-Auth-Email`, else 401;
- `GET /zones` (pages of at most 50, `name` filter) and `GET /zones/{id}`;
- `GET /zones/{id}/dns_records`, paged (`page`, `per_page` up to 5,000; `result_info` with `page`,
  `per_page`, `count`, `total_count`, `total_pages`), filtered by `name` / `name.exact` and `type`;
- `POST /zones/{id}/dns_records` (one record);
- `POST /zones/{id}/dns_records/batch`: its deletes, then patches, then puts, then posts, in one
  transaction: "if any of the individual actions fails, no changes are applied"; at most `batch_limit`
  operations (200 on a free plan, 3,500 on a paid one);
- a record type that cannot be proxied (LOC, MX, NS, SPF, TXT, SRV) refuses `proxied: true`; TTL 1 is
  "automatic", else 60 to 86,400; a comment of at most 100 characters on a free zone;
- 1,200 requests per five minutes per user, then every request of that user is refused with 429 for five
  minutes (`Retry-After`: the seconds left, rounded up); `Ratelimit` / `Ratelimit-Policy` headers. The
  clock is injectable, so a test can pass five minutes in no time.

Inferred, not documented (pinned by tests/providers/test_cloudflare_contract.py and stated in the README):
- a delete naming an id the zone does not hold fails the batch (code 81044, "Record does not exist.");
- a post identical to a record the zone holds (name, type, content) fails (81058, "An identical record
  already exists.").

What it cannot prove: that Cloudflare really does the two inferred ones; how it validates content beyond
the checks above; its propagation (a batch is one database transaction there, not an atomic change of
what resolvers see); per-plan limits other than the batch size and comment length.

Every batch, applied or refused, is kept in `audit` (the user, the zone, the operations, the outcome);
`requests` counts every request by user, `blocks` the five-minute blocks.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.cloudfakes.serve import ServedApp

RATE_LIMIT = 1200
RATE_WINDOW = 300.0
BLOCK_SECONDS = 300.0
FREE_BATCH_LIMIT = 200
MAX_PER_PAGE = 5000
ZONES_MAX_PER_PAGE = 50
NOT_PROXIABLE = frozenset({"LOC", "MX", "NS", "SPF", "TXT", "SRV"})


class ApiFailure(Exception):
    """An API error: the status and Cloudflare's error code and message."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class Entry:
    """One batch as the fake saw it."""

    user: str
    zone: str
    ok: bool
    error: str
    deletes: list[str]
    puts: list[dict[str, Any]]
    posts: list[dict[str, Any]]
    patches: list[dict[str, Any]] = field(default_factory=list)


class CloudflareFake:
    """The fake's state and its aiohttp app (module docstring); `serve()` runs it on a loopback port."""

    def __init__(
        self,
        *,
        tokens: tuple[str, ...] = ("test-token",),
        keys: dict[str, str] | None = None,
        batch_limit: int = FREE_BATCH_LIMIT,
        rate_limit: int = RATE_LIMIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tokens = set(tokens)
        self.keys = dict(keys or {})  # API key -> email
        self.batch_limit = batch_limit
        self.rate_limit = rate_limit
        self.clock = clock
        self.zones: dict[str, dict[str, Any]] = {}  # id -> zone object
        self.records: dict[str, dict[str, dict[str, Any]]] = {}  # zone id -> record id -> record
        self.audit: list[Entry] = []
        self.requests: Counter[str] = Counter()
        self.blocks = 0
        self._seen: dict[str, deque[float]] = {}
        self._blocked: dict[str, float] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.url = ""

    # ---- seeding and reading, outside the API (never counted) ----

    def add_zone(self, name: str, *, paid: bool = False) -> str:
        zone_id = f"{next(self._ids):032x}"
        plan = (
            {"legacy_id": "pro", "is_subscribed": True}
            if paid
            else {"legacy_id": "free", "is_subscribed": False}
        )
        self.zones[zone_id] = {"id": zone_id, "name": name, "status": "active", "plan": plan}
        self.records[zone_id] = {}
        return zone_id

    def add_record(self, zone_id: str, body: dict[str, Any]) -> str:
        with self._lock:
            record = self._checked(zone_id, body, self.records[zone_id])
            self.records[zone_id][record["id"]] = record
            return str(record["id"])

    def listed(self, zone_id: str) -> list[dict[str, Any]]:
        """The zone's records as the API lists them."""
        with self._lock:
            return [dict(r) for r in self.records[zone_id].values()]

    # ---- the app ----

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        prefix = "/client/v4"
        app.router.add_get(prefix + "/zones", self._zones)
        app.router.add_get(prefix + "/zones/{zone}", self._zone)
        app.router.add_get(prefix + "/zones/{zone}/dns_records", self._list)
        app.router.add_post(prefix + "/zones/{zone}/dns_records", self._create)
        app.router.add_post(prefix + "/zones/{zone}/dns_records/batch", self._batch)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            user = self._user(request)
            headers = self._admit(user)
            response: web.StreamResponse = await handler(request)
            response.headers.update(headers)
            return response
        except ApiFailure as exc:
            body = {"success": False, "errors": [{"code": exc.code, "message": exc.message}], "messages": []}
            headers = getattr(exc, "headers", {})
            return web.json_response(body, status=exc.status, headers=headers)

    def _user(self, request: web.Request) -> str:
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Bearer ") and auth[len("Bearer ") :] in self.tokens:
            return "token:" + auth[len("Bearer ") :]
        key, email = request.headers.get("X-Auth-Key", ""), request.headers.get("X-Auth-Email", "")
        if key and self.keys.get(key) == email:
            return "key:" + email
        raise ApiFailure(401, 10000, "Authentication error")

    def _admit(self, user: str) -> dict[str, str]:
        """Count the request toward the user's limit; 429 while blocked (module docstring)."""
        now = self.clock()
        with self._lock:
            self.requests[user] += 1
            until = self._blocked.get(user, 0.0)
            if until <= now:
                seen = self._seen.setdefault(user, deque())
                while seen and seen[0] <= now - RATE_WINDOW:
                    seen.popleft()
                if len(seen) < self.rate_limit:
                    seen.append(now)
                    reset = math.ceil(seen[0] + RATE_WINDOW - now)
                    return {
                        "Ratelimit": f'"default";r={self.rate_limit - len(seen)};t={reset}',
                        "Ratelimit-Policy": f'"default";q={self.rate_limit};w={int(RATE_WINDOW)}',
                    }
                until = self._blocked[user] = now + BLOCK_SECONDS
                self.blocks += 1
        failure = ApiFailure(429, 971, "Please wait and consider throttling your request speed")
        failure.headers = {"Retry-After": str(math.ceil(until - now))}  # type: ignore[attr-defined]
        raise failure

    def _zone_of(self, request: web.Request) -> str:
        zone_id = request.match_info["zone"]
        if zone_id not in self.zones:
            raise ApiFailure(404, 7003, "Could not route to /zones/{zone_id}: not found")
        return zone_id

    @staticmethod
    def _paged(request: web.Request, items: list[dict[str, Any]], most: int) -> web.Response:
        try:
            page = max(1, int(request.query.get("page", "1")))
            per_page = min(most, max(1, int(request.query.get("per_page", "20" if most == 50 else "100"))))
        except ValueError:
            raise ApiFailure(400, 1004, "DNS Validation Error: bad page") from None
        chunk = items[(page - 1) * per_page : page * per_page]
        info = {
            "page": page,
            "per_page": per_page,
            "count": len(chunk),
            "total_count": len(items),
            "total_pages": max(1, math.ceil(len(items) / per_page)),
        }
        return web.json_response(
            {"success": True, "errors": [], "messages": [], "result": chunk, "result_info": info}
        )

    async def _zones(self, request: web.Request) -> web.Response:
        name = request.query.get("name", "")
        zones = [z for z in self.zones.values() if not name or z["name"] == name]
        return self._paged(request, zones, ZONES_MAX_PER_PAGE)

    async def _zone(self, request: web.Request) -> web.Response:
        return _ok(self.zones[self._zone_of(request)])

    async def _list(self, request: web.Request) -> web.Response:
        zone_id = self._zone_of(request)
        name = (
            request.query.get("name.exact") or request.query.get("name[exact]") or request.query.get("name")
        )
        rtype = request.query.get("type")
        with self._lock:
            items = [
                dict(r)
                for r in self.records[zone_id].values()
                if (not name or r["name"] == name) and (not rtype or r["type"] == rtype)
            ]
        return self._paged(request, items, MAX_PER_PAGE)

    async def _create(self, request: web.Request) -> web.Response:
        zone_id = self._zone_of(request)
        return _ok(self.add_record(zone_id, await request.json()))

    async def _batch(self, request: web.Request) -> web.Response:
        zone_id = self._zone_of(request)
        body = await request.json()
        deletes = [str(d.get("id")) for d in body.get("deletes") or ()]
        patches, puts, posts = (list(body.get(k) or ()) for k in ("patches", "puts", "posts"))
        entry = Entry(
            self._user(request), self.zones[zone_id]["name"], False, "", deletes, puts, posts, patches
        )
        try:
            with self._lock:
                result = self._transaction(zone_id, deletes, patches, puts, posts)
        except ApiFailure as exc:
            entry.error = f"{exc.code}: {exc.message}"
            self.audit.append(entry)
            raise
        entry.ok = True
        self.audit.append(entry)
        return _ok(result)

    def _transaction(
        self,
        zone_id: str,
        deletes: list[str],
        patches: list[dict[str, Any]],
        puts: list[dict[str, Any]],
        posts: list[dict[str, Any]],
    ) -> dict[str, list[dict[str, Any]]]:
        """Every operation on a copy of the zone, committed only when all passed."""
        total = len(deletes) + len(patches) + len(puts) + len(posts)
        if total > self.batch_limit:
            raise ApiFailure(
                400, 81061, f"batch of {total} operations exceeds the limit of {self.batch_limit}"
            )
        staged = dict(self.records[zone_id])
        out: dict[str, list[dict[str, Any]]] = {"deletes": [], "patches": [], "puts": [], "posts": []}
        for record_id in deletes:
            if record_id not in staged:
                raise ApiFailure(400, 81044, "Record does not exist.")
            out["deletes"].append(staged.pop(record_id))
        for action, items in (("patches", patches), ("puts", puts)):
            for item in items:
                record_id = str(item.get("id"))
                if record_id not in staged:
                    raise ApiFailure(400, 81044, "Record does not exist.")
                fields = {k: v for k, v in item.items() if k != "id"}
                merged = {**staged[record_id], **fields} if action == "patches" else fields
                rest = {k: v for k, v in staged.items() if k != record_id}
                staged[record_id] = self._checked(zone_id, merged, rest, record_id)
                out[action].append(staged[record_id])
        for item in posts:
            record = self._checked(zone_id, item, staged)
            staged[record["id"]] = record
            out["posts"].append(record)
        self.records[zone_id] = staged
        return out

    def _checked(
        self, zone_id: str, body: dict[str, Any], others: dict[str, dict[str, Any]], record_id: str = ""
    ) -> dict[str, Any]:
        """A record as stored, or ApiFailure for what Cloudflare refuses (module docstring)."""
        zone = self.zones[zone_id]
        name, rtype = str(body.get("name") or "").rstrip(".").lower(), str(body.get("type") or "")
        if not (name == zone["name"] or name.endswith("." + zone["name"])):
            raise ApiFailure(400, 81032, f"Record name {name!r} is not in zone {zone['name']}")
        content = body.get("content")
        data = body.get("data")
        if rtype == "SRV" and isinstance(data, dict):
            content = f"{data.get('weight')} {data.get('port')} {data.get('target')}"
        if not rtype or not content:
            raise ApiFailure(400, 9005, "DNS Validation Error: content and type are required")
        ttl = int(body.get("ttl") or 1)
        if ttl != 1 and not 60 <= ttl <= 86400:
            raise ApiFailure(
                400, 9021, "Invalid TTL. Must be between 60 and 86400 seconds, or 1 for Automatic."
            )
        proxied = bool(body.get("proxied"))
        if proxied and rtype in NOT_PROXIABLE:
            raise ApiFailure(400, 9004, "This record type cannot be proxied.")
        comment = body.get("comment") or None
        limit = 500 if zone["plan"]["is_subscribed"] else 100
        if comment and len(comment) > limit:
            raise ApiFailure(400, 9102, f"DNS record comment exceeds {limit} characters")
        for other in others.values():
            if (other["name"], other["type"], other["content"]) == (name, rtype, content):
                raise ApiFailure(400, 81058, "An identical record already exists.")
        now = "2026-01-01T00:00:00Z"
        record: dict[str, Any] = {
            "id": record_id or f"{next(self._ids):032x}",
            "zone_id": zone_id,
            "zone_name": zone["name"],
            "name": name,
            "type": rtype,
            "content": content,
            "proxiable": rtype not in NOT_PROXIABLE,
            "proxied": proxied,
            "ttl": ttl,
            "comment": comment,
            "tags": list(body.get("tags") or []),
            "meta": {},
            "created_on": now,
            "modified_on": now,
        }
        if rtype == "MX":
            record["priority"] = body.get("priority")
        if rtype == "SRV":
            record["data"] = data
        return record

    # ---- serving ----

    @contextmanager
    def serve(self) -> Iterator[CloudflareFake]:
        """Run the app on a free loopback port in a thread of its own (serve.py); `url` is the SDK's base
        URL."""
        with ServedApp(self.app()) as served:
            self.url = f"{served.url}/client/v4"
            yield self


def _ok(result: Any) -> web.Response:
    return web.json_response({"success": True, "errors": [], "messages": [], "result": result})
