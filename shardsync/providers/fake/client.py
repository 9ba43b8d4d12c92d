"""Clients of the shared fake provider server: the Provider a replica uses, and an admin client.

`FakeHTTPProvider` is what `--provider=fake --fake-provider-url=URL` gives a replica: the Provider protocol
over the server's native API (server.py), identified as the replica (`identity`), so the server's
per-client limits and its write audit see each replica apart. It does not retry: the worker does, with
backoff. Answers map to base.py's errors: 429 → ThrottledError, 409 → FencedError, 422 →
BatchRejectedError (the batch was refused for its content, nothing applied); a 429's Retry-After becomes
the error's `retry_after`; listings follow the server's pages, connection failure or
timeout → UnreachableError, anything else → ProviderError carrying the server's message.

`FakeAdmin` is a small synchronous client for tests, `shardsync local` and the bench: seed zones, set
latency, limits and faults at run time, read fences and the audit.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import httpx
import orjson

from shardsync.providers.base import (
    BatchRejectedError,
    FencedError,
    FenceToken,
    Pacer,
    ProviderError,
    UnreachableError,
    unpaced,
)
from shardsync.providers.fake.audit import AuditEntry
from shardsync.providers.fake.faults import Faults
from shardsync.providers.fake.limits import FakeThrottledError, Limits
from shardsync.providers.fake.profile import Profile, profile_from_json
from shardsync.providers.httpclient import CLIENT_HEADER, transport_errors
from shardsync.records.endpoint import Changes, Endpoint, InvalidEndpoint

DEFAULT_TIMEOUT = 10.0
_JSON_HEADERS = {"Content-Type": "application/json"}


def _message_of(content: bytes) -> str:
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError:
        return content[:500].decode(errors="replace")
    if isinstance(body, dict) and "message" in body:
        return str(body["message"])
    return content[:500].decode(errors="replace")


def _raise_status(status: int, text: str, retry_after: float) -> None:
    if status == 429:
        raise FakeThrottledError(text, retry_after=retry_after)
    if status == 409:
        raise FencedError(text)
    if status == 422:
        raise BatchRejectedError(text)
    raise ProviderError(text)


def _raise_for(resp: httpx.Response, what: str) -> None:
    if resp.status_code >= 400:
        text = f"{what}: {resp.status_code} {_message_of(resp.content)}"
        _raise_status(resp.status_code, text, _seconds(resp.headers.get("Retry-After", "1")))


def _seconds(retry_after: str) -> float:
    try:
        return max(0.0, float(retry_after))
    except ValueError:
        return 1.0


def _zone_path(zone: str, tail: str) -> str:
    return f"/v1/zones/{quote(zone, safe='')}/{tail}"


def _endpoints(items: Any, what: str) -> list[Endpoint]:
    try:
        return [Endpoint.from_json(item) for item in items]
    except (InvalidEndpoint, TypeError) as exc:
        raise ProviderError(f"{what}: bad record in answer: {exc}") from exc


def _profile_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("name", "accountRate", "accountBurst", "processing")
    return {k: data[k] for k in keys if data.get(k) is not None}


class FakeHTTPProvider:
    """The Provider protocol over HTTP to a shared fake provider server.

    It speaks through aiohttp, not httpx as the admin client does: every replica's steady state is one
    call per zone and interval, and on loopback httpx's async client costs about 0.9 ms of CPU per
    request against aiohttp's 0.13 ms (measured here; the fake provider shares its 2 cores with the
    replicas in every bench). The session is opened on the first call, inside the event loop.
    """

    name = "fake"

    def __init__(
        self, url: str, identity: str, *, timeout: float = DEFAULT_TIMEOUT, max_connections: int = 100
    ) -> None:
        self.url = url.rstrip("/")
        self.identity = identity
        self.pacer: Pacer = unpaced  # awaited before each listing page after the first (base.MultiRequest)
        self._timeout = timeout
        self._max_connections = max_connections
        self._http: aiohttp.ClientSession | None = None

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = aiohttp.ClientSession(
                headers={CLIENT_HEADER: self.identity},
                timeout=aiohttp.ClientTimeout(total=self._timeout),
                connector=aiohttp.TCPConnector(limit=self._max_connections, use_dns_cache=False),
                cookie_jar=aiohttp.DummyCookieJar(),
                skip_auto_headers=("User-Agent",),
            )
        return self._http

    async def _request(
        self, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> tuple[Any, str | None]:
        """The answer's JSON body (None when it has none, as a 304) and its ETag; errors as the module
        docstring maps them."""
        what = f"fake provider {method} {path}"
        data = None if body is None else orjson.dumps(body)
        if body is not None:
            headers = {**_JSON_HEADERS, **(headers or {})}
        try:
            async with self._session().request(method, self.url + path, data=data, headers=headers) as resp:
                content = await resp.read()
                status = resp.status
                retry = resp.headers.get("Retry-After", "1")
                etag = resp.headers.get("ETag")
        except TimeoutError as exc:
            raise UnreachableError(f"{what}: no answer within {self._timeout:g}s") from exc
        except aiohttp.ClientError as exc:
            raise UnreachableError(f"{what}: {type(exc).__name__}: {exc}") from exc
        if status >= 400:
            _raise_status(status, f"{what}: {status} {_message_of(content)}", _seconds(retry))
        return (orjson.loads(content) if content else None), etag

    async def zones(self) -> list[str]:
        return [str(z) for z in (await self._request("GET", "/v1/zones"))[0]["zones"]]

    async def zones_and_versions(self) -> tuple[list[str], dict[str, str] | None]:
        """base.ListsVersions: the zones and, per zone, the version its records' ETag names."""
        data = (await self._request("GET", "/v1/zones?versions=1"))[0]
        versions = data.get("versions")
        if not isinstance(versions, dict):  # a server without them: the zones alone
            return [str(z) for z in data["zones"]], None
        return [str(z) for z in data["zones"]], {str(z): str(v) for z, v in versions.items()}

    async def records(self, zone: str) -> list[Endpoint]:
        """Every record of the zone, page by page when the server's profile pages listings."""
        return (await self.records_if_changed(zone, None))[1] or []

    async def records_if_changed(
        self, zone: str, version: str | None
    ) -> tuple[str | None, list[Endpoint] | None]:
        """base.ReadsIfChanged over the server's ETag: with `version`, the first page is asked for with
        `If-None-Match`, and a 304 (the zone unchanged) reads nothing."""
        path = _zone_path(zone, "records")
        condition = None if version is None else {"If-None-Match": f'"{version}"'}
        data, etag = await self._request("GET", path, headers=condition)
        current = etag.strip('"') if etag else None
        if data is None:  # 304: still at `version`
            return current or version, None
        out = _endpoints(data["records"], f"fake provider GET {path}")
        while (after := data.get("next")) is not None:
            await self.pacer("records")
            query = "?" + urlencode({"after": orjson.dumps(after).decode()})
            data, _ = await self._request("GET", path + query)
            out.extend(_endpoints(data["records"], f"fake provider GET {path}"))
        return current, out

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        body = {
            "changes": changes.to_json(),
            "fence": fence.to_text() if fence else None,
            "writer": self.identity,
            "generation": fence.generation if fence else None,
        }
        await self._request("POST", _zone_path(zone, "changes"), body)

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        body = {"token": token.to_text(), "writer": self.identity}
        await self._request("POST", _zone_path(zone, "fence"), body)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None


class FakeAdmin:
    """Synchronous admin client of a fake provider server (tests, launcher, bench). Not for the event loop."""

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT, identity: str = "admin") -> None:
        self.url = url.rstrip("/")
        self._timeout = timeout
        self._http = httpx.Client(base_url=self.url, timeout=timeout, headers={CLIENT_HEADER: identity})

    def __enter__(self) -> FakeAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, path: str, body: Any = None, **params: Any) -> httpx.Response:
        what = f"fake provider {method} {path}"
        content = None if body is None else orjson.dumps(body)
        with transport_errors(what, self._timeout):
            resp = self._http.request(method, path, content=content, params=params or None)
        _raise_for(resp, what)
        return resp

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Poll until the server answers (it may still be starting); UnreachableError after `timeout`."""
        deadline = time.monotonic() + timeout
        delay = 0.02
        while True:
            try:
                self._request("GET", "/healthz")
                return
            except UnreachableError:
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def seed(self, zones: int, records_per_zone: int) -> list[str]:
        resp = self._request("POST", "/v1/admin/seed", {"zones": zones, "recordsPerZone": records_per_zone})
        return [str(z) for z in resp.json()["zones"]]

    def add_zone(self, zone: str, records: Iterable[Endpoint] = ()) -> None:
        self._request("POST", "/v1/admin/zones", {"zone": zone, "records": [r.to_json() for r in records]})

    def records(self, zone: str) -> list[Endpoint]:
        path = _zone_path(zone, "records")
        out: list[Endpoint] = []
        params: dict[str, Any] = {}
        while True:
            data = self._request("GET", path, **params).json()
            out.extend(_endpoints(data["records"], path))
            if data.get("next") is None:
                return out
            params = {"after": orjson.dumps(data["next"]).decode()}

    def profile(self) -> Profile:
        return profile_from_json(_profile_fields(self._request("GET", "/v1/admin/profile").json()))

    def profile_blocks(self) -> int:
        """The blocks the profile's request window started so far (Cloudflare's five minutes of 429)."""
        return int(self._request("GET", "/v1/admin/profile").json().get("blocks") or 0)

    def set_profile(self, name: str, **fields: Any) -> Profile:
        """Put the named profile in force, with accountRate, accountBurst or processing replaced."""
        body = {"name": name, **fields}
        return profile_from_json(_profile_fields(self._request("POST", "/v1/admin/profile", body).json()))

    def fence(self, zone: str) -> FenceToken | None:
        text = self._request("GET", _zone_path(zone, "fence")).json()["fence"]
        return None if text is None else FenceToken.from_text(text)

    def limits(self) -> Limits:
        return Limits().merged(self._request("GET", "/v1/admin/limits").json())

    def set_limits(self, fields: Mapping[str, Any]) -> Limits:
        """Change the limits named in `fields` (JSON names: latency, rateLimit, burst, concurrency,
        queueTimeout; null lifts a limit); the others stay."""
        return Limits().merged(self._request("POST", "/v1/admin/limits", dict(fields)).json())

    def faults(self) -> Faults:
        return Faults.from_json(self._request("GET", "/v1/admin/faults").json())

    def set_faults(self, faults: Faults) -> None:
        self._request("POST", "/v1/admin/faults", faults.to_json())

    def audit(self, since: int = 0, zone: str | None = None) -> list[AuditEntry]:
        params: dict[str, Any] = {"since": since}
        if zone is not None:
            params["zone"] = zone
        data = self._request("GET", "/v1/audit", **params).json()
        return [AuditEntry.from_json(e) for e in data["audit"]]

    def clear_audit(self) -> None:
        self._request("DELETE", "/v1/audit")
