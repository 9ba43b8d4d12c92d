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
The default profile (`NONE`) enforces none of it: the store behaves as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from shardsync.endpoint import Changes, Endpoint
from shardsync.kube_limits import Throttled, TokenBucket
from shardsync.providers.base import BatchRejectedError
from shardsync.providers.fake.limits import FakeThrottledError

# Route53's documented numbers (API reference, ChangeResourceRecordSets / ListResourceRecordSets; the
# account bucket as announced for 2026-07).
ROUTE53_BATCH_RECORDS = 1000
ROUTE53_BATCH_VALUE_CHARS = 32_000
ROUTE53_PAGE_SIZE = 300
ROUTE53_ACCOUNT_RATE = 10.0
ROUTE53_ACCOUNT_BURST = 50


class BatchTooLargeError(BatchRejectedError):
    """The batch is over the profile's record or value-character limit; nothing was applied."""


class PriorRequestNotCompleteError(FakeThrottledError):
    """Route53's PriorRequestNotComplete: the zone is still processing an earlier change."""


class AccountThrottledError(FakeThrottledError):
    """Route53's Throttling: the account's token bucket is empty."""


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

    def __post_init__(self) -> None:
        if self.account_rate is not None and self.account_rate <= 0:
            raise ValueError("account_rate must be > 0 (None for no limit)")
        if self.account_burst is not None and self.account_burst < 1:
            raise ValueError("account_burst must be >= 1")
        if self.page_size is not None and self.page_size < 1:
            raise ValueError("page_size must be >= 1")
        if self.processing < 0:
            raise ValueError("processing must be >= 0")

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
PROFILES = {p.name: p for p in (NONE, ROUTE53)}


def batch_size(changes: Changes) -> tuple[int, int]:
    """(records, value characters) of a batch as Route53 counts them: an update is an UPSERT of the new
    RRset, counted twice."""

    def size(items: list[Endpoint], weight: int) -> tuple[int, int]:
        return (
            weight * sum(len(e.targets) for e in items),
            weight * sum(len(t) for e in items for t in e.targets),
        )

    parts = (size(changes.create, 1), size(changes.delete, 1), size(changes.update_new, 2))
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


class Enforcer:
    """A profile's state: the account bucket and the zones still processing a change. Thread-safe."""

    def __init__(self, profile: Profile = NONE, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._busy: dict[str, float] = {}  # zone -> processing until (inf while a change is in flight)
        self._profile = NONE
        self._bucket: TokenBucket | None = None
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
        with self._lock:
            self._profile, self._bucket = profile, bucket

    def admit(self) -> None:
        """Take one request from the account bucket, or AccountThrottledError (nothing taken)."""
        bucket = self._bucket
        if bucket is None:
            return
        try:
            bucket.reserve(max_wait=0.0)
        except Throttled:
            raise AccountThrottledError(
                f"Throttling: rate exceeded (account limit {bucket.qps:g} requests/s, burst {bucket.burst})",
                retry_after=1.0 / bucket.qps,
            ) from None

    def check_batch(self, changes: Changes) -> None:
        """BatchTooLargeError when the batch is over the profile's limits."""
        p = self._profile
        records, chars = batch_size(changes)
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
