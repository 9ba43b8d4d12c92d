"""A contract fake of Azure DNS (Resource Manager, Microsoft.Network/dnszones, api-version 2018-05-01) and of
Entra ID's token endpoints, on loopback over HTTPS, for the azure provider's tests.

No emulator of Azure DNS exists, so this aiohttp app implements the behaviour the provider relies on and
the tests drive it through the official SDK (`azure-mgmt-dns`, `azure-identity`) over HTTPS: the SDK's own
request building, paging, conditional headers, error mapping and token acquisition run as against
management.azure.com. It serves HTTPS (tls.py) because azure-core sends a bearer token only over TLS.

Documented behaviour it encodes (learn.microsoft.com: DNS REST API 2018-05-01, "Throttling Resource Manager
requests", "Azure DNS limits"):
- tokens: `POST /{tenant}/oauth2/v2.0/token` for a known client (a secret, or a client assertion for
  workload identity) and the managed identity endpoint `GET /metadata/identity/oauth2/token`; every ARM
  request needs `Authorization: Bearer <a token it issued>`, else 401; paths match without regard to case;
- zones of the subscription and of a resource group, and a zone's record sets (`/all`, `/recordsets`), in
  pages of `$top` (default 100) linked by `nextLink`; a new zone holds its apex SOA and NS sets;
- a record set's GET, PUT and DELETE: every write gives the set a new etag; `If-Match: <etag>` fails with
  412 when the set has another etag or is absent, `If-None-Match: *` with 412 when it exists; a PUT answers
  201 when it created the set, 200 when it replaced it; a DELETE 200, or 204 when there was no set (also
  with If-Match: inferred); the apex SOA and NS sets cannot be deleted;
- what azure_rules.py checks of a record set, and the limits there: 429 with Retry-After.

What it cannot prove: how Azure validates beyond those checks (names, TXT string lengths); the status and
code of a CNAME conflict; that an etag changes on a PUT that changes nothing (the fake always gives a new
one; the provider's fence needs it only when the content changes, which a peer's token does); its
consistency across regions and its propagation to the name servers; the limits of Private DNS.

Every write, applied or refused, is kept in `audit` (client, method, zone, type, name, conditions,
status); `requests` counts every ARM request by client and method.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from aiohttp import web

from tests.cloudfakes.azure_rules import ApiFailure, ArmLimits, bad, check_record_set
from tests.cloudfakes.serve import STOP_TIMEOUT, ServedApp
from tests.cloudfakes.tls import LoopbackCert

SUBSCRIPTION = "00000000-0000-0000-0000-0000000000aa"
TENANT = "tenant-1"
PAGE = 100
PROVIDER = "providers/Microsoft.Network/dnszones"
APEX_NS = [
    "ns1-01.azure-dns.com.",
    "ns2-01.azure-dns.net.",
    "ns3-01.azure-dns.org.",
    "ns4-01.azure-dns.info.",
]


@dataclass(frozen=True, slots=True)
class Entry:
    """One write as the fake saw it."""

    client: str
    method: str
    zone: str
    rtype: str
    name: str
    if_match: str
    if_none_match: str
    status: int

    @property
    def ok(self) -> bool:
        return self.status < 300


class AzureFake:
    """The fake's state and its aiohttp app (module docstring); `serve(cert)` runs it on a loopback port."""

    def __init__(
        self,
        *,
        clients: dict[str, str] | None = None,
        assertions: dict[str, str] | None = None,
        limits_scale: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clients = dict(clients or {"client-1": "secret-1"})  # client id -> secret
        self.assertions = dict(assertions or {})  # client id -> the federated token it presents
        self.managed = "managed-identity"  # the client the managed identity endpoint issues tokens to
        self.clock = clock
        self.limits: dict[str, ArmLimits] = {}  # per client: ARM limits are per principal
        self._scale = limits_scale
        self.zones: dict[str, dict[str, Any]] = {}  # canonical zone name -> zone (and "records")
        self.audit: list[Entry] = []
        self.requests: Counter[tuple[str, str]] = Counter()
        self._tokens: dict[str, str] = {}  # token -> client
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.url = ""

    # ---- seeding and reading, outside the API (never counted) ----

    def add_zone(self, name: str, group: str = "rg-dns") -> str:
        zone_id = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{group}/{PROVIDER}/{name}"
        self.zones[name] = {"id": zone_id, "name": name, "group": group, "records": {}}
        soa = {"email": "azuredns-hostmaster.microsoft.com", "host": APEX_NS[0], "serialNumber": 1}
        self._store(name, "SOA", "@", {"TTL": 3600, "SOARecord": soa})
        self._store(name, "NS", "@", {"TTL": 172800, "NSRecords": [{"nsdname": ns} for ns in APEX_NS]})
        return zone_id

    def add_record_set(self, zone: str, rtype: str, name: str, properties: dict[str, Any]) -> str:
        """Store a record set as a PUT would (checked); returns its etag."""
        with self._lock:
            props = check_record_set(rtype, {"properties": properties}, self._others(zone, rtype, name))
            return str(self._store(zone, rtype, name, props)["etag"])

    def record_sets(self, zone: str) -> dict[tuple[str, str], dict[str, Any]]:
        """The zone's record sets as the API answers them, by (type, name)."""
        with self._lock:
            return {k: json.loads(json.dumps(v)) for k, v in self.zones[zone]["records"].items()}

    def writes(self, *, ok: bool | None = None) -> list[Entry]:
        return [e for e in self.audit if ok is None or e.ok == ok]

    # ---- the app ----

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors])
        app.router.add_route("*", "/{path:.*}", self._route)
        return app

    @web.middleware
    async def _errors(self, request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(request)
            return response
        except ApiFailure as exc:
            body = {"error": {"code": exc.code, "message": exc.message}}
            return web.json_response(body, status=exc.status, headers=exc.headers)

    async def _route(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        low = [p.lower() for p in parts]
        if low[-3:] == ["oauth2", "v2.0", "token"] and request.method == "POST":
            return await self._token(await request.post())
        if low[-3:] == ["identity", "oauth2", "token"]:
            return self._managed_token(request)
        if low[-2:] == ["v2.0", "openid-configuration"] or low[-1:] == ["openid-configuration"]:
            return self._discovery(request, parts[0])
        client = self._client(request)
        with self._lock:
            self.requests[(client, request.method)] += 1
            self.limits.setdefault(client, ArmLimits(self.clock, scale=self._scale)).admit(request.method)
        if low[:1] != ["subscriptions"] or len(low) < 2 or low[1] != SUBSCRIPTION:
            raise ApiFailure(404, "SubscriptionNotFound", f"subscription {parts[1:2]} not found")
        if "dnszones" not in low:
            raise ApiFailure(404, "InvalidResourceType", request.path)
        at = low.index("dnszones")
        group = parts[3] if low[2:3] == ["resourcegroups"] else ""
        rest = parts[at + 1 :]
        if not rest:
            return self._list(
                request, [z for z in self.zones.values() if not group or z["group"].lower() == group.lower()]
            )
        zone = self._zone(rest[0], group)
        if len(rest) == 2 and rest[1].lower() in ("all", "recordsets"):
            with self._lock:
                items = [dict(r) for _, r in sorted(zone["records"].items())]
            return self._list(request, items)
        if len(rest) != 3:
            raise ApiFailure(404, "NotFound", request.path)
        rtype, name = rest[1].upper(), rest[2].lower()
        if request.method == "GET":
            found = zone["records"].get((rtype, name))
            if found is None:
                raise ApiFailure(404, "NotFound", f"The resource record '{name}' does not exist")
            return web.json_response(found)
        return await self._write(request, client, zone["name"], rtype, name)

    # ---- tokens ----

    def _issue(self, client: str, **extra: Any) -> web.Response:
        token = f"token-{next(self._ids)}-{uuid.uuid4().hex}"
        self._tokens[token] = client
        body = {"token_type": "Bearer", "expires_in": 3600, "ext_expires_in": 3600, "access_token": token}
        return web.json_response({**body, **extra})

    async def _token(self, form: Any) -> web.Response:
        client = str(form.get("client_id") or "")
        secret, assertion = form.get("client_secret"), form.get("client_assertion")
        if secret is not None and self.clients.get(client) == secret:
            return self._issue(client)
        if assertion is not None and self.assertions.get(client) == assertion:
            return self._issue(client)
        body = {
            "error": "invalid_client",
            "error_description": f"AADSTS7000215: bad credentials for {client}",
        }
        return web.json_response(body, status=401)

    def _managed_token(self, request: web.Request) -> web.Response:
        """The instance metadata service's answer (its own form: the resource and expires_on)."""
        if request.headers.get("Metadata", "").lower() != "true":
            return web.json_response({"error": "invalid_request"}, status=400)
        client = request.query.get("client_id") or self.managed
        expires = str(int(time.time()) + 3600)
        return self._issue(client, resource=request.query.get("resource", ""), expires_on=expires)

    def _discovery(self, request: web.Request, tenant: str) -> web.Response:
        base = f"{self.url}/{tenant}"
        return web.json_response(
            {
                "token_endpoint": f"{base}/oauth2/v2.0/token",
                "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                "issuer": f"{base}/v2.0",
            }
        )

    def _client(self, request: web.Request) -> str:
        auth = request.headers.get("Authorization", "")
        client = self._tokens.get(auth.removeprefix("Bearer "))
        if not auth.startswith("Bearer ") or client is None:
            raise ApiFailure(401, "AuthenticationFailed", "Authentication failed.")
        return client

    # ---- zones and record sets ----

    def _zone(self, name: str, group: str) -> dict[str, Any]:
        zone = self.zones.get(name.lower().rstrip("."))
        if zone is None or (group and zone["group"].lower() != group.lower()):
            raise ApiFailure(
                404, "ResourceNotFound", f"The Resource 'Microsoft.Network/dnszones/{name}' was not found"
            )
        return zone

    def _list(self, request: web.Request, items: list[dict[str, Any]]) -> web.Response:
        query = parse_qs(request.query_string)
        try:
            top = int(query.get("$top", [str(PAGE)])[0])
            start = int(query.get("$skipToken", ["0"])[0])
        except ValueError:
            raise bad("bad $top or $skipToken") from None
        page = [self._zone_json(i) if "records" in i else i for i in items[start : start + top]]
        body: dict[str, Any] = {"value": page}
        if start + top < len(items):
            version = query.get("api-version", ["2018-05-01"])[0]
            body["nextLink"] = (
                f"{self.url}{request.path}?api-version={version}&$top={top}&$skipToken={start + top}"
            )
        return web.json_response(body)

    @staticmethod
    def _zone_json(zone: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": zone["id"],
            "name": zone["name"],
            "type": "Microsoft.Network/dnszones",
            "location": "global",
            "etag": "00000000-0000-0000-0000-000000000000",
            "properties": {
                "maxNumberOfRecordSets": 10000,
                "maxNumberOfRecordsPerRecordSet": 20,
                "numberOfRecordSets": len(zone["records"]),
                "nameServers": list(APEX_NS),
                "zoneType": "Public",
            },
        }

    def _others(self, zone: str, rtype: str, name: str) -> dict[str, str]:
        records = self.zones[zone]["records"]
        return {t: t for (t, n) in records if n == name and t != rtype}

    def _store(self, zone: str, rtype: str, name: str, props: dict[str, Any]) -> dict[str, Any]:
        info = self.zones[zone]
        fqdn = f"{info['name']}." if name == "@" else f"{name}.{info['name']}."
        stored = {
            "id": f"{info['id']}/{rtype}/{name}",
            "name": name,
            "type": f"Microsoft.Network/dnszones/{rtype}",
            "etag": str(uuid.uuid4()),
            "properties": {**props, "fqdn": fqdn, "provisioningState": "Succeeded"},
        }
        info["records"][(rtype, name)] = stored
        return stored

    async def _write(
        self, request: web.Request, client: str, zone: str, rtype: str, name: str
    ) -> web.Response:
        if_match = request.headers.get("If-Match", "")
        if_none_match = request.headers.get("If-None-Match", "")
        body = await request.read() if request.method == "PUT" else b""
        status = 500
        try:
            with self._lock:
                status, answer = self._apply(request.method, zone, rtype, name, if_match, if_none_match, body)
        except ApiFailure as exc:
            status = exc.status
            raise
        finally:
            self.audit.append(
                Entry(client, request.method, zone, rtype, name, if_match, if_none_match, status)
            )
        if answer is None:
            return web.Response(status=status)
        return web.json_response(answer, status=status)

    def _apply(
        self, method: str, zone: str, rtype: str, name: str, if_match: str, if_none_match: str, body: bytes
    ) -> tuple[int, dict[str, Any] | None]:
        """One write under the lock: its conditions, then the write (module docstring)."""
        records = self.zones[zone]["records"]
        current = records.get((rtype, name))
        if method == "DELETE":
            if current is None:
                return 204, None
            if if_match and current["etag"] != if_match:
                raise ApiFailure(412, "PreconditionFailed", "The etag does not match the record set's")
            if name == "@" and rtype in ("SOA", "NS"):
                raise bad(f"the apex {rtype} record set cannot be deleted")
            del records[(rtype, name)]
            return 200, None
        if method != "PUT":
            raise ApiFailure(405, "MethodNotAllowed", method)
        if if_match and (current is None or current["etag"] != if_match):
            raise ApiFailure(412, "PreconditionFailed", "The etag does not match the record set's")
        if if_none_match == "*" and current is not None:
            raise ApiFailure(
                412, "PreconditionFailed", f"The record set {name} of type {rtype} already exists"
            )
        try:
            parsed = json.loads(body)
        except ValueError:
            raise bad("the request body is not JSON") from None
        props = check_record_set(rtype, parsed, self._others(zone, rtype, name))
        return (201 if current is None else 200), self._store(zone, rtype, name, props)

    # ---- serving ----

    @contextmanager
    def serve(self, cert: LoopbackCert) -> Iterator[AzureFake]:
        """Run the app over HTTPS on a free loopback port in a thread of its own (serve.py); `url` is its
        base URL (the SDK's endpoint and the identity authority)."""
        with _ServedTls(self.app(), cert) as served:
            self.url = served.url
            yield self


class _ServedTls(ServedApp):
    """serve.py's ServedApp over TLS, with the fake's certificate."""

    def __init__(self, app: web.Application, cert: LoopbackCert) -> None:
        super().__init__(app)
        self._context = cert.server_context()

    @property
    def url(self) -> str:
        return "https" + super().url.removeprefix("http")

    async def _serve(self) -> int:
        self._runner = runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=STOP_TIMEOUT)
        await runner.setup()
        await web.TCPSite(runner, self.host, 0, ssl_context=self._context).start()
        return int(runner.addresses[0][1])
