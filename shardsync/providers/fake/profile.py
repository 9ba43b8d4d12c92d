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

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from shardsync.endpoint import Changes, Endpoint
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
