"""The fake provider's profiles: the documented rules of a real DNS API that the store enforces on top of
its gate, so semantic tests and the bench meet them without the real service.

`--profile route53` (`ROUTE53`) enforces what the Route53 API reference documents for
ChangeResourceRecordSets and ListResourceRecordSets:
- a change batch is all-or-nothing (the store's apply already is);
- a DELETE must name the RRset's current values exactly (TTL and targets), else the batch fails whole;
  this is what makes `[DELETE fence "<old>", CREATE fence "<new>", …]` a compare-and-swap;
- a CREATE over an existing RRset fails the batch (the store already refuses it);
- at most 1,000 records and 32,000 characters of values per batch, an UPSERT (an update) counting twice;
- listing pages of at most 300 RRsets;
- PriorRequestNotComplete: a change to a zone while a previous change to it is still processing (in
  flight, or within `processing` seconds after it committed) is refused as throttling;
- an account-wide token bucket (default 50 requests of burst, refilled at 10/s) shared by every client,
  beside the gate's per-client limits.

`--profile cloudflare` (`CLOUDFLARE`) enforces what Cloudflare documents for its API and its
`dns_records/batch` endpoint: a batch all-or-nothing, at most 200 operations (a free plan's limit; an
update counts once, as one put), listing pages of at most 5,000 records, and 1,200 requests per five
minutes per user, after which every request is refused for five minutes (a `RequestWindow`; the store
counts these blocks).

`--profile azure` (`AZURE`) enforces Azure Resource Manager's documented limits for one principal of a
subscription ("Throttling Resource Manager requests"): the read bucket (250 requests, refilled at 25/s)
for every request, the write bucket (200, refilled at 10/s) and Microsoft.Network's 1,000 writes per five
minutes (past it a write is refused until the oldest leaves the window: no block) for the writes; Azure
writes one record set per request, so an apply costs one write per record set it changes plus the fence
bump of each batch of them (providers/azure/writes.py), and a listing is pages of 100 record sets.

The default profile (`NONE`) enforces none of it: the store behaves as before. `PROFILES` holds one entry
per API (google adds its own there).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from shardsync.endpoint import Changes, Endpoint
from shardsync.kube_limits import Throttled, TokenBucket
from shardsync.providers.azure.writes import BATCH_WRITES as AZURE_BATCH_WRITES
from shardsync.providers.base import BatchRejectedError
from shardsync.providers.fake.limits import FakeThrottledError

# Route53's documented numbers (API reference, ChangeResourceRecordSets / ListResourceRecordSets; the
# account bucket as announced for 2026-07).
ROUTE53_BATCH_RECORDS = 1000
ROUTE53_BATCH_VALUE_CHARS = 32_000
ROUTE53_PAGE_SIZE = 300
ROUTE53_ACCOUNT_RATE = 10.0
ROUTE53_ACCOUNT_BURST = 50
# Cloudflare's documented numbers (developers.cloudflare.com: API rate limits; DNS records, batch).
CLOUDFLARE_BATCH_RECORDS = 200  # a free plan's; 3,500 on a paid one
CLOUDFLARE_PAGE_SIZE = 5000
CLOUDFLARE_WINDOW_REQUESTS = 1200
CLOUDFLARE_WINDOW_SECONDS = 300.0
CLOUDFLARE_BLOCK_SECONDS = 300.0
# Azure Resource Manager's documented numbers (per subscription and principal; Microsoft.Network's writes).
AZURE_READ_RATE = 25.0
AZURE_READ_BURST = 250
AZURE_WRITE_RATE = 10.0
AZURE_WRITE_BURST = 200
AZURE_NETWORK_WRITES = 1000
AZURE_NETWORK_SECONDS = 300.0
AZURE_PAGE_SIZE = 100


class BatchTooLargeError(BatchRejectedError):
    """The batch is over the profile's record or value-character limit; nothing was applied."""


class PriorRequestNotCompleteError(FakeThrottledError):
    """Route53's PriorRequestNotComplete: the zone is still processing an earlier change."""


class AccountThrottledError(FakeThrottledError):
    """Route53's Throttling: the account's token bucket is empty (or Cloudflare's 429: its window is
    spent and the account blocked)."""


@dataclass(frozen=True, slots=True)
class Profile:
    """Which documented rules the store enforces (module docstring). None or False: not enforced."""

    name: str = "none"
    batch_records: int | None = None  # records per apply, an update counting twice
    batch_value_chars: int | None = None  # characters of targets per apply, an update counting twice
    page_size: int | None = None  # RRsets per listing page
    exact_deletes: bool = False  # a delete must name the current TTL and targets
    account_rate: float | None = None  # requests/s of the account, all clients together
    account_burst: int | None = None
    processing: float = 0.0  # seconds a zone stays "processing" after a change committed
    update_weight: int = 2  # what an update counts toward batch_records (Route53: an UPSERT, twice)
    # at most window_requests requests in any window_seconds, all clients together; past that every request
    # is refused for block_seconds (Cloudflare)
    window_requests: int | None = None
    window_seconds: float = 0.0
    block_seconds: float = 0.0
    # writes (calls that change a zone) also take write tokens: a bucket of their own and a window of
    # write_window per window_seconds, refused until the oldest leaves (Azure); with record_writes an apply
    # takes one per record set it changes plus the fence bump of each batch of them
    write_rate: float | None = None
    write_burst: int | None = None
    write_window: int | None = None
    record_writes: bool = False

    def __post_init__(self) -> None:
        if self.account_rate is not None and self.account_rate <= 0:
            raise ValueError("account_rate must be > 0 (None for no limit)")
        if self.account_burst is not None and self.account_burst < 1:
            raise ValueError("account_burst must be >= 1")
        if self.page_size is not None and self.page_size < 1:
            raise ValueError("page_size must be >= 1")
        if self.processing < 0:
            raise ValueError("processing must be >= 0")
        for count in (self.window_requests, self.write_window):
            if count is not None and (count < 1 or self.window_seconds <= 0):
                raise ValueError("a request window needs >= 1 request in a window_seconds > 0")
        if self.write_rate is not None and (self.write_rate <= 0 or (self.write_burst or 1) < 1):
            raise ValueError("write_rate must be > 0 and write_burst >= 1")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "batchRecords": self.batch_records,
            "batchValueChars": self.batch_value_chars,
            "pageSize": self.page_size,
            "exactDeletes": self.exact_deletes,
            "accountRate": self.account_rate,
            "accountBurst": self.account_burst,
            "processing": self.processing,
            "windowRequests": self.window_requests,
            "windowSeconds": self.window_seconds,
            "blockSeconds": self.block_seconds,
            "writeRate": self.write_rate,
            "writeBurst": self.write_burst,
            "writeWindow": self.write_window,
            "recordWrites": self.record_writes,
        }

    def with_account(self, rate: float | None = None, burst: int | None = None) -> Profile:
        """This profile with the account bucket's rate and/or burst replaced (None: keep)."""
        return replace(
            self,
            account_rate=self.account_rate if rate is None else rate,
            account_burst=self.account_burst if burst is None else burst,
        )


NONE = Profile()
ROUTE53 = Profile(
    name="route53",
    batch_records=ROUTE53_BATCH_RECORDS,
    batch_value_chars=ROUTE53_BATCH_VALUE_CHARS,
    page_size=ROUTE53_PAGE_SIZE,
    exact_deletes=True,
    account_rate=ROUTE53_ACCOUNT_RATE,
    account_burst=ROUTE53_ACCOUNT_BURST,
)
CLOUDFLARE = Profile(
    name="cloudflare",
    batch_records=CLOUDFLARE_BATCH_RECORDS,
    page_size=CLOUDFLARE_PAGE_SIZE,
    update_weight=1,
    window_requests=CLOUDFLARE_WINDOW_REQUESTS,
    window_seconds=CLOUDFLARE_WINDOW_SECONDS,
    block_seconds=CLOUDFLARE_BLOCK_SECONDS,
)
AZURE = Profile(
    name="azure",
    page_size=AZURE_PAGE_SIZE,
    account_rate=AZURE_READ_RATE,
    account_burst=AZURE_READ_BURST,
    window_seconds=AZURE_NETWORK_SECONDS,
    write_rate=AZURE_WRITE_RATE,
    write_burst=AZURE_WRITE_BURST,
    write_window=AZURE_NETWORK_WRITES,
    record_writes=True,
)
# One entry per API the fake provider can play (`--profile`).
PROFILES = {p.name: p for p in (NONE, ROUTE53, CLOUDFLARE, AZURE)}


def batch_size(changes: Changes, update_weight: int = 2) -> tuple[int, int]:
    """(records, value characters) of a batch: an update counts `update_weight` times (Route53: an UPSERT
    of the new RRset, counted twice)."""

    def size(items: list[Endpoint], weight: int) -> tuple[int, int]:
        return (
            weight * sum(len(e.targets) for e in items),
            weight * sum(len(t) for e in items for t in e.targets),
        )

    parts = (size(changes.create, 1), size(changes.delete, 1), size(changes.update_new, update_weight))
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


class RequestWindow:
    """At most `limit` requests in any `seconds`. With a `block`, the request past it starts a block of
    `block` seconds in which every request is refused (Cloudflare's 1,200 per five minutes); without one,
    a request is refused until enough of the oldest have left the window (Azure's Microsoft.Network
    writes). Not thread-safe: the Enforcer's lock guards it."""

    def __init__(self, limit: int, seconds: float, block: float, clock: Callable[[], float]) -> None:
        self.limit, self.seconds, self.block = limit, seconds, block
        self._clock = clock
        self._seen: deque[float] = deque()
        self._blocked_until = -math.inf
        self.blocks = 0

    def admit(self, cost: int = 1) -> None:
        """Count `cost` requests, or refuse them all (AccountThrottledError)."""
        now = self._clock()
        if now >= self._blocked_until:
            while self._seen and self._seen[0] <= now - self.seconds:
                self._seen.popleft()
            if len(self._seen) + cost <= self.limit:
                self._seen.extend([now] * cost)
                return
            if self.block <= 0:
                oldest = self._seen[min(len(self._seen), cost) - 1] if self._seen else now
                raise AccountThrottledError(
                    f"429: more than {self.limit} writes in {self.seconds:g}s",
                    retry_after=max(1, math.ceil(oldest + self.seconds - now)),
                )
            self._blocked_until = now + self.block
            self.blocks += 1
        raise AccountThrottledError(
            f"429: more than {self.limit} requests in {self.seconds:g}s; blocked for {self.block:g}s",
            retry_after=math.ceil(self._blocked_until - now),
        )


class Enforcer:
    """A profile's state: the account bucket and the zones still processing a change. Thread-safe."""

    def __init__(self, profile: Profile = NONE, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._busy: dict[str, float] = {}  # zone -> processing until (inf while a change is in flight)
        self._profile = NONE
        self._bucket: TokenBucket | None = None
        self._window: RequestWindow | None = None
        self._write_bucket: TokenBucket | None = None
        self._write_window: RequestWindow | None = None
        self.set(profile)

    @property
    def profile(self) -> Profile:
        return self._profile

    def set(self, profile: Profile) -> None:
        """Put `profile` in force; its account bucket starts full."""
        bucket = None
        if profile.account_rate is not None:
            burst = profile.account_burst or max(1, int(profile.account_rate))
            bucket = TokenBucket(profile.account_rate, burst, clock=self._clock)
        window = None
        if profile.window_requests is not None:
            window = RequestWindow(
                profile.window_requests, profile.window_seconds, profile.block_seconds, self._clock
            )
        write_bucket = write_window = None
        if profile.write_rate is not None:
            burst = profile.write_burst or max(1, int(profile.write_rate))
            write_bucket = TokenBucket(profile.write_rate, burst, clock=self._clock, what="writes")
        if profile.write_window is not None:
            write_window = RequestWindow(profile.write_window, profile.window_seconds, 0.0, self._clock)
        with self._lock:
            self._profile, self._bucket, self._window = profile, bucket, window
            self._write_bucket, self._write_window = write_bucket, write_window

    @property
    def blocks(self) -> int:
        """The blocks the profile's request window started so far."""
        window = self._window
        return 0 if window is None else window.blocks

    def admit(self, writes: int = 0) -> None:
        """Take one request from the account bucket and the request window, and `writes` write tokens (a
        call that changes a zone: `writes_of`), or AccountThrottledError."""
        window = self._window
        if window is not None:
            with self._lock:
                window.admit()
        bucket = self._bucket
        if bucket is not None:
            _take(bucket, 1, "account limit")
        write_bucket = self._write_bucket
        if writes and write_bucket is not None:
            _take(write_bucket, writes, "write limit")
        write_window = self._write_window
        if writes and write_window is not None:
            with self._lock:
                write_window.admit(writes)

    def writes_of(self, changes: Changes) -> int:
        """The write tokens an apply of `changes` takes: one, or under `record_writes` one per record set
        it changes plus the fence bump of each batch of them."""
        if not self._profile.record_writes:
            return 1
        sets = len(changes.create) + len(changes.delete) + len(changes.update_new)
        return sets + max(1, math.ceil(sets / AZURE_BATCH_WRITES))

    def check_batch(self, changes: Changes) -> None:
        """BatchTooLargeError when the batch is over the profile's limits."""
        p = self._profile
        records, chars = batch_size(changes, p.update_weight)
        if p.batch_records is not None and records > p.batch_records:
            raise BatchTooLargeError(
                f"InvalidChangeBatch: {records} records in the batch (an UPSERT counts twice), "
                f"limit {p.batch_records}"
            )
        if p.batch_value_chars is not None and chars > p.batch_value_chars:
            raise BatchTooLargeError(
                f"InvalidChangeBatch: {chars} characters of values in the batch (an UPSERT counts twice), "
                f"limit {p.batch_value_chars}"
            )

    def begin_change(self, zone: str) -> None:
        """Mark `zone` processing a change; PriorRequestNotCompleteError when it already is."""
        if self._profile.name == NONE.name:
            return
        with self._lock:
            now = self._clock()
            until = self._busy.get(zone)
            if until is not None and until > now:
                left = 1.0 if until == float("inf") else until - now
                raise PriorRequestNotCompleteError(
                    f"PriorRequestNotComplete: zone {zone} is still processing a previous change",
                    retry_after=max(left, 0.1),
                )
            self._busy[zone] = float("inf")

    def end_change(self, zone: str) -> None:
        """The change to `zone` committed or failed: it stays processing for `processing` more seconds."""
        if self._profile.name == NONE.name:
            return
        with self._lock:
            processing = self._profile.processing
            if processing > 0:
                self._busy[zone] = self._clock() + processing
            else:
                self._busy.pop(zone, None)

    def page(
        self, records: list[Endpoint], start: int, limit: int | None
    ) -> tuple[list[Endpoint], int | None]:
        """Records[start:] cut to the smaller of `limit` and the profile's page size; the next start or
        None at the end."""
        sizes = [n for n in (limit, self._profile.page_size) if n is not None and n > 0]
        if not sizes:
            return records[start:], None
        end = start + min(sizes)
        return records[start:end], (end if end < len(records) else None)


def _take(bucket: TokenBucket, tokens: int, what: str) -> None:
    """Take `tokens` from `bucket`: the first must be there (else AccountThrottledError); the rest are
    owed (the later requests of the same call)."""
    try:
        bucket.reserve(max_wait=0.0)
    except Throttled:
        raise AccountThrottledError(
            f"Throttling: rate exceeded ({what} {bucket.qps:g} requests/s, burst {bucket.burst})",
            retry_after=1.0 / bucket.qps,
        ) from None
    for _ in range(tokens - 1):
        bucket.reserve()


def profile_from_json(data: Mapping[str, Any]) -> Profile:
    """The admin API's form: the named profile (default none) with accountRate, accountBurst and processing
    replaced where given. Raises ValueError."""
    unknown = set(data) - {"name", "accountRate", "accountBurst", "processing"}
    if unknown:
        raise ValueError(f"unknown profile fields: {sorted(unknown)}")
    name = str(data.get("name") or NONE.name)
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; one of {sorted(PROFILES)}")
    try:
        rate, burst = data.get("accountRate"), data.get("accountBurst")
        profile = PROFILES[name].with_account(
            None if rate is None else float(rate), None if burst is None else int(burst)
        )
        if "processing" in data:
            profile = replace(profile, processing=float(data["processing"]))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"bad profile: {exc}") from exc
    return profile
