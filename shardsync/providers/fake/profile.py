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

`--profile google` (`GOOGLE`) enforces what Google documents for Cloud DNS's `changes.create` (the v1
reference, "Quotas and limits"): a change all-or-nothing, its deletions applied before its additions, and
a deletion — a delete, or an update's old side, since Cloud DNS has no update but a deletion and an
addition — must match the current record set exactly (Cloud DNS: 412 conditionNotMet), so
`[delete fence "<old>", add fence "<new>", …]` is a compare-and-swap; at most 1,000 additions and 1,000
deletions of record sets, 100,000 bytes of record data and 100 values per added record set in a change
(Cloud DNS: 403 quotaExceeded; here the batch is refused whole, BatchTooLargeError); no refusal of a
change while another to the zone is under way (Cloud DNS documents none). And its per-minute request
quota, counted over every request of the project as a window of 60 s refused until the oldest request
leaves it (no block): ASSUMED, not documented — Google's quotas page names the quota (the requests one
IAM user may make to the Cloud DNS API in a minute) but not its default, which only each project's
console shows; `GOOGLE_MINUTE_REQUESTS` is chosen low (300). Listing pages are left to the server, as
Google documents no page size.

The default profile (`NONE`) enforces none of it: the store behaves as before. `PROFILES` holds one entry
per API.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from shardsync.providers.base import BatchRejectedError
from shardsync.providers.fake.limits import FakeThrottledError
from shardsync.records.endpoint import Changes, Endpoint

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
# Cloud DNS's documented limits of one change (cloud.google.com/dns/quotas, "Resource limits").
GOOGLE_CHANGE_ADDITIONS = 1000
GOOGLE_CHANGE_DELETIONS = 1000
GOOGLE_CHANGE_DATA_BYTES = 100_000
GOOGLE_SET_VALUES = 100
# ASSUMED, not documented: the default of Cloud DNS's per-minute request quota (the module docstring). Low
# on purpose, so that a run that stays under it here would stay under a real project's larger default.
GOOGLE_MINUTE_REQUESTS = 300
GOOGLE_MINUTE_SECONDS = 60.0


class BatchTooLargeError(BatchRejectedError):
    """The batch is over the profile's record or value-character limit; nothing was applied."""


class PriorRequestNotCompleteError(FakeThrottledError):
    """Route53's PriorRequestNotComplete: the zone is still processing an earlier change."""


class AccountThrottledError(FakeThrottledError):
    """Route53's Throttling: the account's token bucket is empty (or Cloudflare's 429: its window is
    spent and the account blocked; or Azure's and Google's: their window is spent)."""


@dataclass(frozen=True, slots=True)
class Profile:
    """Which documented rules the store enforces (module docstring). None or False: not enforced."""

    name: str = "none"
    batch_records: int | None = None  # records per apply, an update counting twice
    batch_value_chars: int | None = None  # characters of targets per apply, an update counting twice
    page_size: int | None = None  # RRsets per listing page
    exact_deletes: bool = False  # a delete must name the current TTL and targets
    exact_updates: bool = False  # so must an update's old side (Cloud DNS: it is a deletion)
    account_rate: float | None = None  # requests/s of the account, all clients together
    account_burst: int | None = None
    processing: float = 0.0  # seconds a zone stays "processing" after a change committed
    serial_changes: bool = True  # a change to a zone still processing one is refused (Route53)
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
    # Cloud DNS counts record sets: at most change_additions added (creates, updates' new sides) and
    # change_deletions deleted (deletes, updates' old sides) per apply, change_data_bytes of values (UTF-8)
    # in both, set_values values in one added record set
    change_additions: int | None = None
    change_deletions: int | None = None
    change_data_bytes: int | None = None
    set_values: int | None = None

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
        limits = (self.change_additions, self.change_deletions, self.change_data_bytes, self.set_values)
        if any(limit is not None and limit < 1 for limit in limits):
            raise ValueError("a change's limits must be >= 1 (None for no limit)")

    def to_json(self) -> dict[str, Any]:
        """Every setting, named in camelCase (the admin API's and the bench's form)."""
        return {_camel(f.name): getattr(self, f.name) for f in fields(self)}

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
GOOGLE = Profile(
    name="google",
    exact_deletes=True,
    exact_updates=True,
    serial_changes=False,
    window_requests=GOOGLE_MINUTE_REQUESTS,
    window_seconds=GOOGLE_MINUTE_SECONDS,
    change_additions=GOOGLE_CHANGE_ADDITIONS,
    change_deletions=GOOGLE_CHANGE_DELETIONS,
    change_data_bytes=GOOGLE_CHANGE_DATA_BYTES,
    set_values=GOOGLE_SET_VALUES,
)
# One entry per API the fake provider can play (`--profile`).
PROFILES = {p.name: p for p in (NONE, ROUTE53, CLOUDFLARE, AZURE, GOOGLE)}


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


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


def change_size(changes: Changes) -> tuple[int, int, int, int]:
    """(additions, deletions, bytes of record data, most values of one added set) of a batch as Cloud DNS
    counts a change: in record sets, an update being the deletion of its old side and the addition of its
    new one."""
    additions = [*changes.create, *changes.update_new]
    deletions = [*changes.delete, *changes.update_old]
    data = sum(len(t.encode()) for e in (*additions, *deletions) for t in e.targets)
    return len(additions), len(deletions), data, max((len(e.targets) for e in additions), default=0)


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
