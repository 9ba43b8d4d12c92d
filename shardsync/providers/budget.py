"""One provider budget for the whole deployment: `--provider-rate-limit` calls/s and `--provider-burst` for
the account, each replica pacing itself to its share with a token bucket.

A cloud DNS API limits the account, not the client (Route53: a bucket of 50 requests refilled at 10/s for
the whole account), so N replicas must together stay under one limit. Each replica takes the share

    (zones it owns + 1) / (zones + members)

of the rate and of the burst: every zone costs calls to its owner, and every member, owning zones or not,
lists the provider's zones once an interval (the +1). The shares are computed by every replica from the
published assignment (`share`), not published by the coordinator: every replica already computes each
zone's owner from the assignment, so the shares need no field of their own in it, no new generation when a
zone appears, and no coordinator round trip; replicas that list different zones for a moment, or work under
two generations during a handoff, can overshoot slightly, which the start below and the throttling answer
absorb.

`Budget` is one replica's pacing. It starts conservatively: its bucket holds one token (not its share of the
burst, so replicas starting together do not spend the account's burst several times over) and its rate is
half its share, rising linearly to the share over RECOVERY_SECONDS. A throttling answer (Route53 `Throttling`
or `PriorRequestNotComplete`, HTTP 429 with Retry-After, the fake provider's throttle: every ThrottledError)
halves the current rate (never below MIN_FRACTION of the share), hands out no token until the Retry-After the
provider named has passed, and the rate recovers linearly again. Nothing here ever stops the process.

`BudgetedProvider` wraps any provider: every API request waits for a token and is counted by kind (a call
that takes several requests, such as a listing of several pages, paces each through the provider's
`pacer`: base.MultiRequest), and a throttled call is retried up to RETRIES times through the bucket before
the worker's backoff takes over. Without a rate limit it only counts.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

import anyio
from prometheus_client import Counter, Gauge

from shardsync.logs import get_logger
from shardsync.pacing.token_bucket import TokenBucket
from shardsync.providers.base import (
    FenceToken,
    MultiRequest,
    Provider,
    ThrottledError,
    list_zones,
    read_if_changed,
)
from shardsync.records.endpoint import Changes, Endpoint

log = get_logger(__name__)

T = TypeVar("T")

DEFAULT_RATE_LIMIT = 0.0  # --provider-rate-limit: 0 means no budget (calls are only counted)
DEFAULT_BURST = 0  # --provider-burst: 0 means one second's worth of --provider-rate-limit
RETRIES = 2  # a throttled call is tried again this often, through the bucket, before the worker backs off
RECOVERY_SECONDS = 10.0  # from no rate to the full share, linearly (from half of it: 5 s)
START_FRACTION = 0.5  # of the share, at start
MIN_FRACTION = 1 / 16  # halving never goes below this fraction of the share
FALLBACK_PAUSE = 1.0  # seconds to pause when a throttling answer names no Retry-After
MAX_NAP = 0.25  # a call waiting for a token asks again at least this often

CALLS = Counter("shardsync_provider_calls_total", "Provider API calls made, by kind", ["kind"])
THROTTLED = Counter(
    "shardsync_provider_throttled_total", "Provider calls answered with throttling, by kind", ["kind"]
)
SHARE = Gauge("shardsync_provider_budget_share", "This replica's share of the provider budget (0-1)")
RATE = Gauge(
    "shardsync_provider_budget_rate",
    "Provider calls a second this replica allows itself now (its share, lower after throttling)",
)


@functools.cache
def _calls(kind: str) -> Counter:
    """CALLS' child for `kind`, looked up once (labels() takes a lock and builds a key on every call)."""
    return CALLS.labels(kind)


def share(identity: str, zones: Iterable[str], owner_of: Callable[[str], str | None], members: int) -> float:
    """This replica's share of the budget: (zones it owns + 1) / (zones + members), as every replica
    computes it from the same assignment (see the module docstring)."""
    listed = list(zones)
    mine = sum(1 for zone in listed if owner_of(zone) == identity)
    return (mine + 1) / (len(listed) + max(members, 1))


class Budget:
    """One replica's share of the account's rate (see the module docstring). Thread-safe enough for the
    event loop: every method is called from it."""

    def __init__(
        self,
        rate_limit: float,
        burst: int = DEFAULT_BURST,
        *,
        share: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate_limit <= 0:
            raise ValueError("a provider budget needs a rate limit > 0")
        self.rate_limit = float(rate_limit)
        self.burst = burst if burst > 0 else max(1, math.ceil(rate_limit))
        self._clock = clock
        self.share = _clamp(share)
        self._fraction, self._since = START_FRACTION, clock()  # of the share, and since when it rises
        # No token before this (a throttling answer's Retry-After): the bucket's debt alone would be repaid
        # early as the rate recovers, and a Cloudflare block refuses every call for its five minutes.
        self._hold_until = -math.inf
        self.bucket = TokenBucket(self.rate(), self._bucket_size(), clock, tokens=1.0, what="provider budget")
        self._update()

    def _bucket_size(self) -> int:
        return max(1, math.floor(self.burst * self.share))

    def _current_fraction(self, now: float) -> float:
        return min(1.0, self._fraction + (now - self._since) / RECOVERY_SECONDS)

    def rate(self) -> float:
        """The calls a second allowed now."""
        return self.rate_limit * self.share * self._current_fraction(self._clock())

    def _update(self) -> None:
        rate = self.rate()
        if rate != self.bucket.qps or self._bucket_size() != self.bucket.burst:
            self.bucket.set_rate(rate, self._bucket_size())
        SHARE.set(self.share)
        RATE.set(rate)

    def set_share(self, share: float) -> None:
        """Take a new share (the assignment or the zone list changed)."""
        share = _clamp(share)
        if share != self.share:
            log.info("provider budget share", share=f"{share:.4f}", rate=f"{self.rate_limit * share:.3f}")
            self.share = share
        self._update()

    def try_take(self) -> float:
        """Take a token (0.0), or the seconds until one is due at the current rate (nothing taken): a
        caller naps at most MAX_NAP and asks again, so a rate raised meanwhile (a new share, the recovery)
        applies to it at once."""
        self._update()
        hold = self._hold_until - self._clock()
        if hold > 0:  # the rest of a Retry-After, then a token's worth
            return hold + 1.0 / self.bucket.qps
        return self.bucket.try_take()

    def throttled(self, retry_after: float | None) -> float:
        """The provider answered "slow down": halve the rate and pause the bucket for `retry_after`
        (FALLBACK_PAUSE when None). Returns the new rate."""
        now = self._clock()
        self._fraction = max(MIN_FRACTION, self._current_fraction(now) / 2)
        self._since = now
        self._update()
        pause = FALLBACK_PAUSE if retry_after is None else retry_after
        self.bucket.pause(pause)
        self._hold_until = max(self._hold_until, now + pause)
        return self.bucket.qps


def _clamp(share: float) -> float:
    return min(1.0, max(share, 1e-6))


class BudgetedProvider:
    """A provider whose calls are paced by a Budget and counted (see the module docstring)."""

    def __init__(
        self,
        inner: Provider,
        budget: Budget | None,
        *,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.budget = budget
        self._sleep = sleep
        if isinstance(inner, MultiRequest):
            inner.pacer = self._pace

    async def _pace(self, kind: str) -> None:
        """One API request: wait for its token, count it."""
        if self.budget is not None:
            while (wait := self.budget.try_take()) > 0:
                await self._sleep(min(wait, MAX_NAP))
        _calls(kind).inc()

    async def _call(self, kind: str, call: Callable[[], Awaitable[T]]) -> T:
        attempt = 0
        while True:
            await self._pace(kind)
            try:
                return await call()
            except ThrottledError as exc:
                THROTTLED.labels(kind).inc()
                if self.budget is None:
                    raise
                rate = self.budget.throttled(exc.retry_after)
                if attempt >= RETRIES:
                    raise
                attempt += 1
                log.warning(
                    "provider throttled: slowing down",
                    kind=kind,
                    retry_after=f"{exc.retry_after:g}s" if exc.retry_after is not None else "-",
                    rate=f"{rate:.3f}/s",
                    error=str(exc),
                )

    async def zones(self) -> list[str]:
        return await self._call("zones", self.inner.zones)

    async def records(self, zone: str) -> list[Endpoint]:
        return await self._call("records", lambda: self.inner.records(zone))

    async def zones_and_versions(self) -> tuple[list[str], dict[str, str] | None]:
        """The inner provider's zone list with versions (base.ListsVersions), paced and counted as a zone
        listing; its plain zone list when it has none."""
        return await self._call("zones", lambda: list_zones(self.inner))

    async def records_if_changed(
        self, zone: str, version: str | None
    ) -> tuple[str | None, list[Endpoint] | None]:
        """The inner provider's conditional read, paced and counted as a read (base.ReadsIfChanged); a
        plain read when it has none."""
        return await self._call("records", lambda: read_if_changed(self.inner, zone, version))

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        await self._call("apply", lambda: self.inner.apply(zone, changes, fence))

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        await self._call("fence", lambda: self.inner.acquire_fence(zone, token))

    async def close(self) -> None:
        await self.inner.close()
