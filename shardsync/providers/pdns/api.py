"""The PowerDNS Authoritative HTTP API calls the pdns provider makes, over httpx: list the zones, read one
zone, PATCH one zone's rrsets. Imported only when `--provider=pdns` is built.

Every call is bounded by `timeout` as a whole (connecting, sending, the answer's last byte), not only per
read as httpx's own timeouts are: a server that accepts and never answers, or answers a byte at a time,
costs one timeout and an UnreachableError, never a stalled loop (external-dns #6670: a pdns call without a
timeout hung the controller while /healthz said ok). Nothing is retried here: the worker retries a failed
zone with backoff, as for every provider.

Answers: 2xx is success; 429 ThrottledError (with its Retry-After); a PATCH refused for its content (400,
422: PowerDNS names the rrset at fault) BatchRejectedError, so the worker splits the batch to find the
record; 401/403 a ProviderError about the API key; anything else a ProviderError quoting PowerDNS's answer.
The API key is sent in `X-API-Key` and never logged.
"""

from __future__ import annotations

import ssl
import time
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import orjson

from shardsync.providers.base import BatchRejectedError, ProviderError, ThrottledError, UnreachableError
from shardsync.providers.httpclient import CLIENT_HEADER, retry_after, transport_errors
from shardsync.providers.request_metrics import request_metrics

REQUESTS, REQUEST_SECONDS = request_metrics(
    "pdns",
    "Requests to the PowerDNS HTTP API, by operation (zones, zone, patch) and result",
    "Duration of one request to the PowerDNS HTTP API",
)
_CONTENT_REFUSED = frozenset({400, 422})


class PdnsApi:
    """`<server>/api/v1/servers/<server_id>` (a path prefix in `server` is kept, as external-dns does)."""

    def __init__(
        self,
        server: str,
        server_id: str,
        api_key: str,
        *,
        timeout: float = 10.0,
        tls: ssl.SSLContext | None = None,
        identity: str = "shardsync",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.base = f"{server.rstrip('/')}/api/v1/servers/{quote(server_id, safe='')}"
        self.timeout = timeout
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            headers={"X-API-Key": api_key, "Accept": "application/json", CLIENT_HEADER: identity},
            verify=tls if tls is not None else True,
            transport=transport,
        )

    async def zones(self) -> Any:
        """`GET .../zones`: the server's zones (their rrsets not included)."""
        return _json(await self._request("zones", "GET", "/zones"))

    async def zone(self, zone_id: str) -> Any:
        """`GET .../zones/<id>`: the zone with its rrsets."""
        return _json(await self._request("zone", "GET", f"/zones/{quote(zone_id, safe='')}"))

    async def patch(self, zone_id: str, rrsets: list[dict[str, Any]]) -> None:
        """`PATCH .../zones/<id>` with `{"rrsets": ...}`: applied by PowerDNS in one transaction."""
        body = orjson.dumps({"rrsets": rrsets})
        await self._request("patch", "PATCH", f"/zones/{quote(zone_id, safe='')}", body)

    async def close(self) -> None:
        await self._http.aclose()

    async def _request(
        self, operation: str, method: str, path: str, body: bytes | None = None
    ) -> httpx.Response:
        url = self.base + path
        what = f"pdns {method} {url}"
        headers = {"Content-Type": "application/json"} if body is not None else None
        started = time.monotonic()
        try:
            with transport_errors(what, self.timeout), anyio.fail_after(self.timeout):
                resp = await self._http.request(method, url, content=body, headers=headers)
        except TimeoutError as exc:  # the whole call's bound (anyio.fail_after)
            REQUESTS.labels(operation, "unreachable").inc()
            raise UnreachableError(f"{what}: no complete answer within {self.timeout:g}s") from exc
        except UnreachableError:
            REQUESTS.labels(operation, "unreachable").inc()
            raise
        finally:
            REQUEST_SECONDS.labels(operation).observe(time.monotonic() - started)
        status = resp.status_code
        if 200 <= status < 300:
            REQUESTS.labels(operation, "ok").inc()
            return resp
        text = f"{what}: {status} {_error_text(resp)}"
        if status == 429:
            REQUESTS.labels(operation, "throttled").inc()
            raise ThrottledError(text, retry_after(resp))
        if operation == "patch" and status in _CONTENT_REFUSED:
            REQUESTS.labels(operation, "refused").inc()
            raise BatchRejectedError(text)
        REQUESTS.labels(operation, "error").inc()
        if status in (401, 403):
            raise ProviderError(f"{text}: the API refused the key; check --pdns-api-key")
        if status == 404 and operation == "zones":
            raise ProviderError(f"{text}: no such server; check --pdns-server and --pdns-server-id")
        raise ProviderError(text)


def _error_text(resp: httpx.Response) -> str:
    """PowerDNS's `{"error": "..."}` when it sent one, else the start of the body."""
    try:
        data = orjson.loads(resp.content)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return str(data["error"])[:300]
    return resp.text[:300]


def _json(resp: httpx.Response) -> Any:
    try:
        return orjson.loads(resp.content)
    except orjson.JSONDecodeError as exc:
        raise ProviderError(f"pdns {resp.request.url}: the answer is not JSON: {exc}") from exc
