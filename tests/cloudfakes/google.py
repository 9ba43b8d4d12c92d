"""A contract fake of the Cloud DNS API (JSON REST v1) on loopback, for the google provider's tests.

No emulator of Cloud DNS exists, so this serves the few calls the provider makes, with the semantics the
provider relies on as Google documents them (the v1 reference of `changes`, `managedZones` and
`resourceRecordSets`, the Cloud DNS error messages page, the quotas page), and as Google's own Java test
helper of Cloud DNS (LocalDnsHelper) encoded them. It is driven through the official client library over
HTTP, so the library's request building, paging and error mapping are exercised, not mocked.

What it encodes:
- `managedZones.list` and `resourceRecordSets.list` in pages (`maxResults`, `pageToken`,
  `nextPageToken`); rrsets filtered by `name` (+ `type`). A new zone holds its SOA and NS record sets.
- `changes.create` is atomic (its rules: google_rules.py): validated whole, then its deletions applied, then
  its additions, or nothing.
  A deletion must match the current record set exactly (TTL and values), else 412 conditionNotMet
  ("Precondition not met for 'entity.change.deletions[i]'"); 404 notFound when no set of that name and type
  exists. An addition of a set that exists once the deletions are applied is 409 alreadyExists.
- The limits of one change: 1,000 additions, 1,000 deletions, 100,000 bytes of record data, 100 records
  per set — over them, 403 quotaExceeded ("The change would exceed quota for ...", as Cloud DNS answers,
  external-dns #1028). Names must lie in the zone and be absolute; A/AAAA values must be addresses and
  CNAME/NS/PTR/MX/SRV hosts absolute, else 400 invalid.
- Per-project rate limits: a token bucket over every request (`rate`/s, `burst`), and `throttle_next(n)`;
  a refused request gets 429 with reason rateLimitExceeded (or 403, `throttle_status=403`, which Google
  APIs also use for rate limits), with a Retry-After header only when `retry_after` is set (Cloud DNS
  documents none).
- Authentication: with `token` set, every API request must carry `Authorization: Bearer <token>` (else
  401); `POST /token` is an OAuth token endpoint handing out that token (it checks no assertion), so a
  service account key file whose `token_uri` points here exercises the real application-default-credentials
  chain (`environment()`).
- An audit of every `changes.create`: the writer (the identity in parentheses in the User-Agent), what it
  asked, and its outcome; `rrsets(zone)` reads a zone as stored.

What it cannot prove: Google's actual quota numbers for requests (the console shows them, the docs do not),
the order in which Cloud DNS checks a change that breaks several rules at once, its canonicalisation of
values (it stores them as given), TXT string splitting past 255 bytes, CNAME coexistence rules, DNSSEC,
routing policies, and that a change reported `done` is served by Google's name servers.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.cloudfakes.google_rules import ApiError, Key, RRset, applied, key_of
from tests.cloudfakes.serve import ServedApp

_AGENT_IDENTITY = re.compile(r"\(([^()]+)\)")


@dataclass
class Zone:
    name: str
    dns_name: str  # absolute
    id: int
    visibility: str = "public"
    peering: bool = False
    rrsets: dict[Key, RRset] = field(default_factory=dict)

    def resource(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "dns#managedZone",
            "name": self.name,
            "dnsName": self.dns_name,
            "id": str(self.id),
            "visibility": self.visibility,
            "description": "",
        }
        if self.peering:
            out["peeringConfig"] = {"targetNetwork": {"networkUrl": "projects/other/global/networks/x"}}
        return out


@dataclass(frozen=True)
class AuditEntry:
    seq: int
    zone: str  # the managed zone's name
    writer: str
    started: float
    ended: float
    outcome: str  # "ok", or "<status> <reason>"
    additions: tuple[tuple[str, str, tuple[str, ...]], ...]  # (name, type, values)
    deletions: tuple[tuple[str, str, tuple[str, ...]], ...]


class GoogleCloudDnsFake:
    """Cloud DNS of one project (module docstring). Its state is read and seeded from the test's thread."""

    def __init__(
        self,
        project: str = "test-project",
        *,
        zones_page_size: int = 50,
        rrsets_page_size: int = 100,
        rate: float = math.inf,
        burst: int = 100,
        throttle_status: int = 429,
        retry_after: float | None = None,
        token: str | None = None,
    ) -> None:
        self.project = project
        self.zones_page_size, self.rrsets_page_size = zones_page_size, rrsets_page_size
        self.rate, self.burst, self.throttle_status, self.retry_after = (
            rate,
            burst,
            throttle_status,
            retry_after,
        )
        self.token = token
        self._zones: dict[str, Zone] = {}
        self._audit: list[AuditEntry] = []
        self._ids = itertools.count(1000)
        self._lock = threading.Lock()
        self._tokens, self._refilled = float(burst), time.monotonic()
        self._throttle_next = 0
        self.requests: dict[str, int] = {}
        self.throttled = 0
        self._served: ServedApp | None = None

    # -- the test's side ------------------------------------------------------------------------------------

    def start(self) -> GoogleCloudDnsFake:
        app = web.Application()
        base = "/dns/v1/projects/{project}/managedZones"
        app.router.add_get(base, self._list_zones)
        app.router.add_get(base + "/{zone}/rrsets", self._list_rrsets)
        app.router.add_post(base + "/{zone}/changes", self._create_change)
        app.router.add_post("/token", self._issue_token)
        self._served = ServedApp(app).start()
        return self

    def stop(self) -> None:
        if self._served is not None:
            self._served.stop()

    @property
    def url(self) -> str:
        assert self._served is not None
        return self._served.url

    def add_zone(
        self, dns_name: str, name: str = "", *, visibility: str = "public", peering: bool = False
    ) -> str:
        """A managed zone with its SOA and NS record sets; its name (`dns_name` with dashes by default)."""
        absolute = dns_name.rstrip(".") + "."
        name = name or absolute.rstrip(".").replace(".", "-")
        zone = Zone(name, absolute, next(self._ids), visibility, peering)
        soa = "ns-cloud-a1.googledomains.com. cloud-dns-hostmaster.google.com. 1 21600 3600 259200 300"
        ns = [f"ns-cloud-a{i}.googledomains.com." for i in range(1, 5)]
        for rrset in (
            {"name": absolute, "type": "SOA", "ttl": 21600, "rrdatas": [soa]},
            {"name": absolute, "type": "NS", "ttl": 21600, "rrdatas": ns},
        ):
            zone.rrsets[key_of(rrset)] = rrset
        with self._lock:
            self._zones[name] = zone
        return name

    def put(self, zone: str, name: str, rtype: str, rrdatas: list[str], ttl: int = 300, **extra: Any) -> None:
        """Seed a record set as another writer would (not audited); `extra` fields as the API lists them
        (`routingPolicy`: a set without rrdatas)."""
        with self._lock:
            rrset = {"name": name, "type": rtype, "ttl": ttl, "rrdatas": list(rrdatas), **extra}
            self._zones[zone].rrsets[key_of(rrset)] = rrset

    def remove(self, zone: str, name: str, rtype: str) -> None:
        """Delete a record set as another writer would (not audited)."""
        with self._lock:
            self._zones[zone].rrsets.pop(key_of({"name": name, "type": rtype}))

    def zone_resources(self) -> list[dict[str, Any]]:
        """The managed zones as managedZones.list answers them."""
        with self._lock:
            return [z.resource() for _, z in sorted(self._zones.items())]

    def environment(self, folder: Path) -> dict[str, str]:
        """What the library needs to reach this fake through the standard credentials chain, for this process
        or a replica process: a service account key file (`GOOGLE_APPLICATION_CREDENTIALS`, a fresh RSA key)
        whose token endpoint is this fake and whose project is this fake's, no metadata server probe, no
        gcloud configuration."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        info = {
            "type": "service_account",
            "project_id": self.project,
            "private_key_id": "test-key",
            "private_key": pem.decode(),
            "client_email": f"shardsync@{self.project}.iam.gserviceaccount.com",
            "client_id": "1",
            "token_uri": f"{self.url}/token",
        }
        path = folder / "google-credentials.json"
        path.write_text(json.dumps(info), encoding="utf-8")
        return {
            "GOOGLE_APPLICATION_CREDENTIALS": str(path),
            "NO_GCE_CHECK": "true",
            "CLOUDSDK_CONFIG": str(folder / "gcloud"),
        }

    def rrsets(self, zone: str) -> list[RRset]:
        with self._lock:
            return [dict(r, rrdatas=list(r["rrdatas"])) for _, r in sorted(self._zones[zone].rrsets.items())]

    def audit(self, zone: str | None = None) -> list[AuditEntry]:
        with self._lock:
            return [e for e in self._audit if zone is None or e.zone == zone]

    def throttle_next(self, count: int) -> None:
        with self._lock:
            self._throttle_next = count

    # -- the API's side -------------------------------------------------------------------------------------

    async def _list_zones(self, request: web.Request) -> web.Response:
        def answer() -> dict[str, Any]:
            zones = self.zone_resources()
            dns_name = request.query.get("dnsName")
            zones = [z for z in zones if dns_name is None or z["dnsName"] == dns_name]
            return self._page(request, zones, "managedZones", self.zones_page_size)

        return self._serve(request, "managedZones.list", answer)

    async def _list_rrsets(self, request: web.Request) -> web.Response:
        def answer() -> dict[str, Any]:
            name, rtype = request.query.get("name"), request.query.get("type")
            if rtype is not None and name is None:
                raise ApiError(400, "invalid", "Invalid value for 'parameters.name': ''")
            with self._lock:
                zone = self._zone(request)
                items = [dict(r, kind="dns#resourceRecordSet") for _, r in sorted(zone.rrsets.items())]
            if name is not None:
                items = [r for r in items if r["name"].lower() == name.lower()]
            if rtype is not None:
                items = [r for r in items if r["type"] == rtype]
            return self._page(request, items, "rrsets", self.rrsets_page_size)

        return self._serve(request, "resourceRecordSets.list", answer)

    async def _create_change(self, request: web.Request) -> web.Response:
        body = await request.json()

        def answer() -> dict[str, Any]:
            started = time.monotonic()
            additions = [self._rrset(r) for r in body.get("additions") or ()]
            deletions = [self._rrset(r) for r in body.get("deletions") or ()]
            with self._lock:
                zone = self._zone(request)
                try:
                    zone.rrsets = applied(zone.dns_name, zone.rrsets, additions, deletions)
                    outcome = "ok"
                except ApiError as exc:
                    outcome = f"{exc.status} {exc.reason}"
                    raise
                finally:
                    self._audit.append(
                        AuditEntry(
                            len(self._audit),
                            zone.name,
                            _writer(request),
                            started,
                            time.monotonic(),
                            outcome,
                            tuple((r["name"], r["type"], tuple(r["rrdatas"])) for r in additions),
                            tuple((r["name"], r["type"], tuple(r["rrdatas"])) for r in deletions),
                        )
                    )
            return {
                "kind": "dns#change",
                "id": str(len(self._audit)),
                "status": "done",
                "startTime": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
                "additions": additions,
                "deletions": deletions,
            }

        return self._serve(request, "changes.create", answer)

    async def _issue_token(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"access_token": self.token or "anonymous", "expires_in": 3600, "token_type": "Bearer"}
        )

    # -- the rules ------------------------------------------------------------------------------------------

    def _serve(self, request: web.Request, operation: str, answer: Any) -> web.Response:
        try:
            self._admit(request, operation)
            return web.json_response(answer())
        except ApiError as exc:
            headers = {}
            if (
                exc.status in (403, 429)
                and exc.reason == "rateLimitExceeded"
                and self.retry_after is not None
            ):
                headers["Retry-After"] = f"{self.retry_after:g}"
            error = {"domain": "global", "reason": exc.reason, "message": exc.message}
            payload = {"error": {"code": exc.status, "message": exc.message, "errors": [error]}}
            return web.json_response(payload, status=exc.status, headers=headers)

    def _admit(self, request: web.Request, operation: str) -> None:
        if request.match_info["project"] != self.project:
            raise ApiError(
                404,
                "notFound",
                f"The 'parameters.project' resource named '{request.match_info['project']}' does not exist.",
            )
        if self.token is not None and request.headers.get("Authorization") != f"Bearer {self.token}":
            raise ApiError(401, "required", "Request is missing required authentication credential.")
        with self._lock:
            self.requests[operation] = self.requests.get(operation, 0) + 1
            now = time.monotonic()
            self._tokens = min(float(self.burst), self._tokens + (now - self._refilled) * self.rate)
            self._refilled = now
            refused = self._throttle_next > 0 or self._tokens < 1
            if self._throttle_next > 0:
                self._throttle_next -= 1
            elif not refused:
                self._tokens -= 1
            if refused:
                self.throttled += 1
        if refused:
            raise ApiError(self.throttle_status, "rateLimitExceeded", "Rate Limit Exceeded")

    def _zone(self, request: web.Request) -> Zone:
        name = request.match_info["zone"]
        if name not in self._zones:
            raise ApiError(
                404, "notFound", f"The 'parameters.managedZone' resource named '{name}' does not exist."
            )
        return self._zones[name]

    @staticmethod
    def _rrset(data: Any) -> RRset:
        try:
            return {
                "name": str(data["name"]),
                "type": str(data["type"]),
                "ttl": int(data.get("ttl") or 0),
                "rrdatas": [str(v) for v in data.get("rrdatas") or ()],
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(400, "invalid", f"Invalid value for 'entity.change': {exc}") from None

    @staticmethod
    def _page(request: web.Request, items: list[Any], key: str, default_size: int) -> dict[str, Any]:
        try:
            start = int(request.query.get("pageToken") or 0)
            size = int(request.query.get("maxResults") or default_size)
        except ValueError:
            raise ApiError(400, "invalid", "Invalid value for 'parameters.pageToken'") from None
        size = max(1, min(size, default_size))
        out: dict[str, Any] = {key: items[start : start + size]}
        if start + size < len(items):
            out["nextPageToken"] = str(start + size)
        return out


def _writer(request: web.Request) -> str:
    found = _AGENT_IDENTITY.search(request.headers.get("User-Agent", ""))
    return found.group(1) if found else "-"
