"""The state that puts a fake provider's profile (profile.py) in force on the store's calls: the account's
token buckets, its request windows and the zones still processing a change. The store asks it to admit each
call, to check each batch against the profile's limits and to page each listing."""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable

from shardsync.pacing.token_bucket import Throttled, TokenBucket
from shardsync.providers.azure.writes import BATCH_WRITES as AZURE_BATCH_WRITES
from shardsync.providers.fake.profile import (
    NONE,
    AccountThrottledError,
    BatchTooLargeError,
    PriorRequestNotCompleteError,
    Profile,
    batch_size,
    change_size,
)
from shardsync.records.endpoint import Changes, Endpoint


class RequestWindow:
    """At most `limit` requests in any `seconds`. With a `block`, the request past it starts a block of
    `block` seconds in which every request is refused (Cloudflare's 1,200 per five minutes); without one,
    a request is refused until enough of the oldest have left the window (Azure's Microsoft.Network
    writes, Google's requests per minute). `what` names the requests in the refusal. Not thread-safe: the
    Enforcer's lock guards it."""

    def __init__(
        self, limit: int, seconds: float, block: float, clock: Callable[[], float], what: str = "requests"
    ) -> None:
        self.limit, self.seconds, self.block, self.what = limit, seconds, block, what
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
                    f"429: more than {self.limit} {self.what} in {self.seconds:g}s",
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
            write_window = RequestWindow(
                profile.write_window, profile.window_seconds, 0.0, self._clock, what="writes"
            )
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
        counted = zip(
            ("additions", "deletions", "total rrdata size", "resource records per rrset"),
            change_size(changes),
            (p.change_additions, p.change_deletions, p.change_data_bytes, p.set_values),
            strict=True,
        )
        for what, size, limit in counted:
            if limit is not None and size > limit:
                # Cloud DNS's words (403 quotaExceeded)
                raise BatchTooLargeError(
                    f"quotaExceeded: the change would exceed quota for {what} per change: {size}, "
                    f"limit {limit}"
                )

    def begin_change(self, zone: str) -> None:
        """Mark `zone` processing a change; PriorRequestNotCompleteError when it already is."""
        if self._profile.name == NONE.name or not self._profile.serial_changes:
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
        if self._profile.name == NONE.name or not self._profile.serial_changes:
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
