"""Azure DNS through its official SDK (`azure-mgmt-dns`'s asynchronous DnsManagementClient, on
azure-core's aiohttp pipeline): the few calls the provider makes, with errors mapped to base.py's.
Imported only when `--provider=azure` is built.

Record sets travel as the API's own JSON (records.py reads and builds that form): a listing's models are
serialized back to it, and a PUT's body is sent as JSON bytes, so what is written is exactly what
records.py built. The SDK retries a request that failed in transit or with a 5xx at most
`--azure-maxretries-count` times (external-dns's flag), but never a 429: the subscription's limits count
every request, so each throttling answer goes to the provider budget (shardsync.providers.budget), which
backs off for its Retry-After (`AzureThrottledError`). Every request is counted in
`shardsync_azure_api_calls_total{operation,result}`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from azure.core.credentials_async import AsyncTokenCredential
from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.core.pipeline import PipelineResponse
from azure.core.pipeline.policies import AsyncRetryPolicy
from azure.mgmt.dns.aio import DnsManagementClient
from prometheus_client import Counter

from shardsync.providers.azure.config import Cloud
from shardsync.providers.azure.errors import (
    AzureThrottledError,
    PreconditionFailedError,
    WriteRefusedError,
)
from shardsync.providers.azure.zones import Zone, resource_group_of
from shardsync.providers.base import Pacer, ProviderError, UnreachableError
from shardsync.providers.httpclient import Answer, retry_after
from shardsync.records.endpoint import normalize_name

CALLS = Counter(
    "shardsync_azure_api_calls_total",
    "Azure DNS API requests by operation and result (ok, throttled, error)",
    ["operation", "result"],
)
T = TypeVar("T")
AUTH_HINT = " (check --azure-config-file's credential and its role: DNS Zone Contributor on the zones)"
RecordSet = dict[str, Any]  # the API's JSON form of a record set


class _NoThrottleRetry(AsyncRetryPolicy[Any, Any]):
    """azure-core's retries, but never of a 429: the provider budget answers those (module docstring)."""

    def is_retry(self, settings: dict[str, Any], response: PipelineResponse[Any, Any]) -> bool:
        if response.http_response.status_code == 429:
            return False
        return bool(super().is_retry(settings, response))


class AzureApi:
    """The calls the provider makes (module docstring); the listings await `pacer` before every page after
    their first."""

    def __init__(
        self,
        credential: AsyncTokenCredential,
        subscription_id: str,
        cloud: Cloud,
        *,
        retries: int = 3,
        timeout: float = 30.0,
        transport: dict[str, Any] | None = None,
    ) -> None:
        self.timeout = timeout
        self._credential = credential
        self._client = DnsManagementClient(
            credential,
            subscription_id,
            base_url=cloud.resource_manager,
            credential_scopes=[cloud.scope],
            retry_policy=_NoThrottleRetry(
                retry_total=max(retries, 0), retry_backoff_max=8, timeout=int(4 * timeout)
            ),
            connection_timeout=min(timeout, 10.0),
            read_timeout=timeout,
            **(transport or {}),
        )

    async def zones(self, resource_group: str, pacer: Pacer) -> list[Zone]:
        """The subscription's DNS zones, or those of `resource_group` (external-dns lists one group)."""
        zones = self._client.zones
        pager = zones.list_by_resource_group(resource_group) if resource_group else zones.list()
        found = await self._pages("ZonesList", pager, pacer, "zones")
        return [
            Zone(str(z.id), normalize_name(str(z.name)), resource_group or resource_group_of(str(z.id)))
            for z in found
            if z.id and z.name
        ]

    async def record_sets(self, zone: Zone, pacer: Pacer) -> list[RecordSet]:
        """Every record set of the zone, as the API's JSON (pages of 100)."""
        pager = self._client.record_sets.list_all_by_dns_zone(zone.resource_group, zone.name)
        found = await self._pages("RecordSetsList", pager, pacer, "records")
        return [_json(r) for r in found]

    async def get(self, zone: Zone, name: str, rtype: str) -> RecordSet | None:
        """One record set (None when there is none)."""
        try:
            found = await self._call(
                "RecordSetGet",
                lambda: self._client.record_sets.get(zone.resource_group, zone.name, name, rtype),
            )
        except _NotFound:
            return None
        return _json(found)

    async def put(
        self, zone: Zone, name: str, rtype: str, body: RecordSet, *, if_match: str = "", create: bool = False
    ) -> RecordSet:
        """Create or replace one record set: only where none exists (`create`: If-None-Match: *), only the
        one with etag `if_match`, or unconditionally. Returns it as stored (its new etag)."""
        data = json.dumps(body, separators=(",", ":")).encode()
        stored = await self._call(
            "RecordSetPut",
            lambda: self._client.record_sets.create_or_update(
                zone.resource_group,
                zone.name,
                name,
                rtype,
                io.BytesIO(data),
                if_match=if_match or None,
                if_none_match="*" if create else None,
            ),
        )
        return _json(stored)

    async def delete(self, zone: Zone, name: str, rtype: str, *, if_match: str = "") -> None:
        """Delete one record set (only the one with etag `if_match` when given); none there is no error."""
        await self._call(
            "RecordSetDelete",
            lambda: self._client.record_sets.delete(
                zone.resource_group, zone.name, name, rtype, if_match=if_match or None
            ),
        )

    async def close(self) -> None:
        await self._client.close()
        await self._credential.close()

    async def _pages(self, operation: str, pager: Any, pacer: Pacer, kind: str) -> list[Any]:
        """Every item of a listing, page by page: the next page is asked for only when the last one named
        it (its nextLink), and paced."""
        pages: Any = pager.by_page()
        items: list[Any] = []
        while True:
            page = await self._call(operation, pages.__anext__)
            items.extend([item async for item in page])
            if not pages.continuation_token:
                return items
            await pacer(kind)

    async def _call(self, operation: str, fn: Callable[[], Awaitable[T]]) -> T:
        what = f"Azure {operation}"
        try:
            answer = await fn()
        except ClientAuthenticationError as exc:  # no token to be had, or the token refused (401)
            CALLS.labels(operation, "error").inc()
            raise ProviderError(f"{what}: credential: {exc.message}{AUTH_HINT}".replace("\n", " ")) from None
        except HttpResponseError as exc:
            raise _mapped(what, operation, exc) from None
        except ServiceRequestError as exc:  # sent nothing: no connection
            CALLS.labels(operation, "error").inc()
            raise UnreachableError(f"{what}: {exc.message}") from None
        except ServiceResponseError as exc:
            CALLS.labels(operation, "error").inc()
            raise UnreachableError(f"{what}: no answer within {self.timeout:g}s: {exc.message}") from None
        except AzureError as exc:
            CALLS.labels(operation, "error").inc()
            raise ProviderError(f"{what}: {type(exc).__name__}: {exc.message}") from None
        CALLS.labels(operation, "ok").inc()
        return answer


class _NotFound(ProviderError):
    """404: no such zone or record set."""


def _mapped(what: str, operation: str, exc: HttpResponseError) -> ProviderError:
    """An HTTP error answer as the provider's error (the metric counted)."""
    status = exc.status_code or 0
    code = exc.error.code if exc.error is not None else ""
    text = f"{what}: {status} {code}: {exc.message}".replace("\n", " ")
    if status == 429:
        CALLS.labels(operation, "throttled").inc()
        # the exception types its response by a protocol without headers; the response has them
        wait = retry_after(cast(Answer, exc.response)) if exc.response is not None else None
        return AzureThrottledError(text, wait)
    if isinstance(exc, ResourceNotFoundError) and operation == "RecordSetGet":
        CALLS.labels(operation, "ok").inc()
        return _NotFound(text)
    CALLS.labels(operation, "error").inc()
    if status == 412:
        return PreconditionFailedError(text)
    if status == 403:
        return ProviderError(text + AUTH_HINT)
    if status in (400, 409) and operation in ("RecordSetPut", "RecordSetDelete"):
        return WriteRefusedError(text)
    return ProviderError(text)


def _json(model: Any) -> RecordSet:
    """An SDK model as the API's JSON."""
    data: RecordSet = model.serialize(keep_readonly=True)
    return data
