"""Each zone's records cached between full listings: `--provider-cache-time` (external-dns's flag and meaning:
how long a listing of the provider's records is used before the provider is listed again; 0 lists on
every reconcile, external-dns's default).

A listing is a provider's most expensive call (Route53: pages of 300 records, each a call against the
account's budget), and a replica is the only writer of the zones it owns: so after one listing it keeps the
zone's records up to date from its own successful writes, and a steady-state change costs one write call.
The zone is listed again when
- the listing is older than `--provider-cache-time`;
- the zone is (re)acquired: `acquire_fence` forgets it, so a new owner never trusts what an earlier
  ownership saw;
- a write failed on the fence (someone else writes the zone now) or failed in any way that may have
  changed the zone or says the cache was wrong (a batch refused for its content, some records refused,
  no answer); only a throttled write, refused before it did anything, keeps the cache.
A batch refused for its content after a reconcile that used the cache is reported as a plain ProviderError
(StaleCacheError), not as BatchRejectedError: the worker then re-lists and plans again after its backoff
instead of splitting the batch to blame records that were never at fault. Refused after a fresh listing,
the batch's error passes through unchanged.

Records are served as a provider that keeps no labels (RFC 2136, Route53) lists them, whether listed or
cached: without labels; the registry reads ownership from the TXT records.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import Counter

from shardsync.providers.base import (
    BatchRejectedError,
    FenceToken,
    Provider,
    ProviderError,
    ThrottledError,
)
from shardsync.records.endpoint import Changes, Endpoint

DEFAULT_CACHE_TIME = 0.0  # external-dns's --provider-cache-time default: no cache

Key = tuple[str, str, str]

READS = Counter(
    "shardsync_provider_cache_reads_total", "Zone record reads, by source: cached or listed", ["source"]
)


class StaleCacheError(ProviderError):
    """A write planned from cached records was refused for its content: the zone is listed again."""


@dataclass(slots=True)
class _Zone:
    listed_at: float
    records: dict[Key, Endpoint] = field(default_factory=dict)
    used: bool = False  # served from the cache since the listing (a refused write may be the cache's fault)


class CachedProvider:
    """A provider with per-zone record caching (see the module docstring)."""

    def __init__(
        self, inner: Provider, cache_time: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if cache_time <= 0:
            raise ValueError("a record cache needs --provider-cache-time > 0")
        self.inner = inner
        self.name = inner.name
        self.cache_time = cache_time
        self._clock = clock
        self._zones: dict[str, _Zone] = {}

    def forget(self, zone: str) -> None:
        self._zones.pop(zone, None)

    async def zones(self) -> list[str]:
        return await self.inner.zones()

    async def records(self, zone: str) -> list[Endpoint]:
        now = self._clock()
        cached = self._zones.get(zone)
        if cached is not None and now - cached.listed_at < self.cache_time:
            cached.used = True
            READS.labels("cached").inc()
            return list(cached.records.values())
        listed = {ep.key: ep.without_labels() for ep in await self.inner.records(zone)}
        READS.labels("listed").inc()
        self._zones[zone] = _Zone(now, listed)
        return list(listed.values())

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        try:
            await self.inner.apply(zone, changes, fence)
        except ThrottledError:
            raise  # refused before it did anything: the cache still holds
        except BatchRejectedError as exc:
            cached = self._zones.pop(zone, None)
            if cached is not None and cached.used:
                raise StaleCacheError(f"{exc} (planned from cached records: listing the zone again)") from exc
            raise
        except BaseException:
            self.forget(zone)  # fenced, partly applied, or no answer: what the zone holds is unknown
            raise
        cached = self._zones.get(zone)
        if cached is not None:
            _apply(cached.records, changes)

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        self.forget(zone)  # (re)acquired: list it again before planning
        await self.inner.acquire_fence(zone, token)

    async def close(self) -> None:
        await self.inner.close()


def _apply(records: dict[Key, Endpoint], changes: Changes) -> None:
    """What a successful write did to the zone, as a provider applies it: deletes, updates, then creates."""
    for ep in changes.delete:
        records.pop(ep.key, None)
    for old, new in zip(changes.update_old, changes.update_new, strict=True):
        records.pop(old.key, None)
        records[new.key] = new.without_labels()
    for ep in changes.create:
        records[ep.key] = ep.without_labels()
