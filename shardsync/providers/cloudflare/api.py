"""The Cloudflare API through its official SDK (`cloudflare`, AsyncCloudflare on httpx): the few calls the
provider makes, with errors mapped to base.py's. Imported only when `--provider=cloudflare` is built.

Credentials as external-dns reads them: `CF_API_TOKEN` (or `file:<path>` naming a file that holds it,
blanks trimmed), else `CF_API_KEY` with `CF_API_EMAIL`. The endpoint is the SDK's own:
`CLOUDFLARE_BASE_URL` points it elsewhere (the tests' contract fake). The SDK's own retries are off: the
account's limit counts every request, so each one goes through the provider budget
(shardsync.providers.budget), which counts it and backs off after a 429 for the Retry-After Cloudflare
names (`CloudflareThrottledError`). Listings are paged with the SDK's pages and stop at the last page
Cloudflare names (`total_pages`), not at an empty page after it: one request fewer per listing. Every
request is counted in `shardsync_cloudflare_api_calls_total{operation,result}`.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import cloudflare
import httpx
from prometheus_client import Counter

from shardsync.flags import ConfigError
from shardsync.providers.base import Pacer, ProviderError, UnreachableError
from shardsync.providers.cloudflare.errors import BatchFailedError, CloudflareThrottledError
from shardsync.providers.httpclient import retry_after
from shardsync.records.endpoint import normalize_name

CALLS = Counter(
    "shardsync_cloudflare_api_calls_total",
    "Cloudflare API requests by operation and result (ok, throttled, error)",
    ["operation", "result"],
)
ZONES_PER_PAGE = 50  # the zones list's largest page
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Zone:
    id: str
    name: str  # canonical
    paid: bool  # a paid plan: longer record comments


def credentials(env: dict[str, str] | None = None) -> dict[str, Any]:
    """The SDK's credential arguments from external-dns's variables (module docstring); ConfigError when
    none are set."""
    env = dict(os.environ) if env is None else env
    token = env.get("CF_API_TOKEN", "")
    if token:
        if token.startswith("file:"):
            try:
                token = Path(token[len("file:") :]).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"CF_API_TOKEN: cannot read {token[len('file:') :]}: {exc}") from None
        return {"api_token": token.strip()}
    key, email = env.get("CF_API_KEY", ""), env.get("CF_API_EMAIL", "")
    if not (key and email):
        raise ConfigError(
            "--provider=cloudflare: no credentials; set CF_API_TOKEN, or both CF_API_KEY and CF_API_EMAIL"
        )
    return {"api_key": key, "api_email": email}


class CloudflareApi:
    """The calls the provider makes (module docstring); each awaits `pacer` before every request after its
    first."""

    def __init__(self, *, timeout: float = 30.0, env: dict[str, str] | None = None) -> None:
        limit = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self._client = cloudflare.AsyncCloudflare(
            **credentials(env),
            max_retries=0,
            timeout=limit,
            # Our own httpx client: the SDK's default one schedules its own close on whatever event loop
            # runs when it is garbage-collected, which fails ("Event loop is closed") if its loop has ended.
            http_client=httpx.AsyncClient(timeout=limit, follow_redirects=True),
        )
        self.timeout = timeout

    async def zones(self, pacer: Pacer) -> list[Zone]:
        page = await self._call("ZonesList", lambda: self._client.zones.list(per_page=ZONES_PER_PAGE))
        return [_zone(z) for z in await self._pages(page, "ZonesList", pacer)]

    async def zone(self, zone_id: str) -> Zone:
        return _zone(await self._call("ZoneGet", lambda: self._client.zones.get(zone_id=zone_id)))

    async def records(
        self, zone_id: str, per_page: int, pacer: Pacer, *, name: str = "", type: str = ""
    ) -> list[dict[str, Any]]:
        """Every record of the zone (with `name`, `type`: only those), as the API's JSON objects."""
        filters: dict[str, Any] = {}
        if name:
            filters["name"] = {"exact": name}
        if type:
            filters["type"] = type
        page = await self._call(
            "RecordsList",
            lambda: self._client.dns.records.list(zone_id=zone_id, per_page=per_page, **filters),
        )
        return [r.to_dict() for r in await self._pages(page, "RecordsList", pacer)]

    async def batch(self, zone_id: str, body: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        """One `dns_records/batch` request: applied whole or not at all. Returns the API's result (the
        records written, by action, in the order sent)."""
        actions: dict[str, Any] = {k: v for k, v in body.items() if v}  # plain JSON for the SDK's params
        answer = await self._call(
            "RecordsBatch", lambda: self._client.dns.records.batch(zone_id=zone_id, **actions)
        )
        return answer.to_dict() if answer is not None else {}

    async def close(self) -> None:
        await self._client.close()

    async def _pages(self, page: Any, operation: str, pacer: Pacer) -> list[Any]:
        items = list(page.result or ())
        while _more(page, len(page.result or ())):
            await pacer("records" if operation == "RecordsList" else "zones")
            page = await self._call(operation, page.get_next_page)
            items.extend(page.result or ())
        return items

    async def _call(self, operation: str, fn: Callable[[], Awaitable[T]]) -> T:
        what = f"Cloudflare {operation}"
        try:
            answer = await fn()
        except cloudflare.RateLimitError as exc:
            CALLS.labels(operation, "throttled").inc()
            raise CloudflareThrottledError(
                f"{what}: 429: {_errors(exc)}", retry_after(exc.response)
            ) from None
        except cloudflare.APITimeoutError:
            CALLS.labels(operation, "error").inc()
            raise UnreachableError(f"{what}: no answer within {self.timeout:g}s") from None
        except cloudflare.APIConnectionError as exc:
            CALLS.labels(operation, "error").inc()
            raise UnreachableError(f"{what}: {exc}") from None
        except cloudflare.APIStatusError as exc:
            CALLS.labels(operation, "error").inc()
            text = f"{what}: {exc.status_code}: {_errors(exc)}"
            if exc.status_code in (401, 403):
                text += " (check CF_API_TOKEN or CF_API_KEY/CF_API_EMAIL and the token's permissions)"
            if operation == "RecordsBatch" and 400 <= exc.status_code < 500:
                raise BatchFailedError(text) from None
            raise ProviderError(text) from None
        except cloudflare.APIError as exc:
            CALLS.labels(operation, "error").inc()
            raise ProviderError(f"{what}: {type(exc).__name__}: {exc}") from None
        CALLS.labels(operation, "ok").inc()
        return answer


def _more(page: Any, count: int) -> bool:
    """Whether a listing has a page after `page`: Cloudflare names its pages (result_info.total_pages);
    without that, a full page may have one more."""
    info = page.result_info
    number = getattr(info, "page", None) or 1
    total = getattr(info, "total_pages", None)
    if total is not None:
        return int(number) < int(total)
    per_page = getattr(info, "per_page", None)
    return bool(count) and per_page is not None and count >= int(per_page)


def _zone(zone: Any) -> Zone:
    plan = getattr(zone, "plan", None)
    paid = bool(getattr(plan, "is_subscribed", False)) and getattr(plan, "legacy_id", "free") != "free"
    return Zone(str(zone.id), normalize_name(str(zone.name)), paid)


def _errors(exc: cloudflare.APIError) -> str:
    """Cloudflare's error codes and messages, else the SDK's message."""
    found = [f"{e.code}: {e.message}" for e in exc.errors or ()]
    return "; ".join(found) or exc.message
