"""This replica's member Lease (design §2 rule 5, the I/O); how the others' look is peer_view.py's.

`MemberLoop.run()` keeps `<instance>-member-<identity>` renewed every renew interval until cancelled: a
replace with the resourceVersion last read (409 or 404: read again and retry at once; absent: create),
carrying the weight, draining, restarting and observed-generation annotations the rest of the replica asks
for (`acknowledge`, `set_draining`, `set_restarting`; `flush` waits until they are written). It remembers
when it sent each renewTime it wrote (`sent_at`), so a watch that delivers one of them back proves that
watch current up to that instant.

`last_renewed` is the monotonic time our last successful write was *sent*; `may_write()` is rule 5 on it.
`fence_epoch` goes up whenever a renewal succeeds after the write fence had lapsed (and on the first one):
whoever acts on what it read from the API must read again before writing when the epoch moved, and each
of `on_regained` is called (with the time) when that happens after a lapse.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

import anyio
from prometheus_client import Counter

from shardsync.kube.client import KubeError
from shardsync.kube.objects import LEASES
from shardsync.logs import get_logger
from shardsync.pacing.backoff import Backoff
from shardsync.pacing.notify import Notifier
from shardsync.sharding.clock import Clock
from shardsync.sharding.membership import (
    MalformedLease,
    MemberLease,
    may_write,
    member_lease_name,
    write_deadline,
)
from shardsync.sharding.site import Site

log = get_logger(__name__)

RENEW_FAILURES = Counter(
    "shardsync_lease_renew_failures_total", "Failed renewals of a lease this replica holds", ["lease"]
)

# Own renewals remembered to recognise them when the watch delivers them back (a few renew intervals).
_SENT_KEPT = 16
# Immediate re-read-and-retry rounds after a 409/404, before counting the renewal as failed.
_CONFLICT_RETRIES = 3


class MemberLoop:
    """See the module docstring. Every method runs on the event loop."""

    def __init__(self, site: Site) -> None:
        self.kube = site.kube
        self.namespace = site.namespace
        self.instance = site.instance
        self.identity = site.identity
        self.timings = site.timings
        self.clock: Clock = site.clock
        self.name = member_lease_name(site.instance, site.identity)
        self.changed = Notifier()  # our own write succeeded (a renewal, an acknowledgement, a flag)
        self.on_regained: list[Callable[[float], None]] = []  # renewed again after the write fence lapsed
        self.last_renewed: float | None = None
        self.last_failure: float | None = None  # when a renewal last failed (monotonic)
        self.fence_epoch = 0
        self._weight = site.weight
        self._draining = False
        self._restarting = False
        self._acked: int | None = None
        self._lease: MemberLease | None = None  # as last read or written (with its resourceVersion)
        self._sent: OrderedDict[object, float] = OrderedDict()  # renewTime we wrote -> when it was sent
        self._version = 0  # bumped by every requested change; `_written` catches up once it is stored
        self._written = -1
        self._closed = False
        self._lock = anyio.Lock()
        self._wake = Notifier()

    # -- what the rest of the replica reads ---------------------------------------------------------

    def may_write(self) -> bool:
        """Rule 5: our lease is fresh enough that nobody can deem it expired yet."""
        return may_write(
            self.last_renewed, self.clock.monotonic(), self.timings.lease_duration, self.timings.fence_margin
        )

    def write_deadline(self) -> float | None:
        """When `may_write` turns false unless a renewal succeeds first."""
        if self.last_renewed is None:
            return None
        return write_deadline(self.last_renewed, self.timings.lease_duration, self.timings.fence_margin)

    def sent_at(self, renew_time: str | None) -> float | None:
        """When the write that stamped `renew_time` on our Lease was sent (None: not one we remember)."""
        return self._sent.get(_instant(renew_time)) if renew_time is not None else None

    @property
    def acknowledged(self) -> int | None:
        """The generation we asked to acknowledge (written or about to be)."""
        return self._acked

    @property
    def acknowledged_written(self) -> bool:
        return self._written >= self._version

    # -- what the rest of the replica asks for ---------------------------------------------------------

    def acknowledge(self, generation: int) -> None:
        """Write `observed-generation: generation` soon (never lowering it). Call only once every zone not
        owned in that generation is released (rule 3)."""
        if self._acked is None or generation > self._acked:
            self._acked = generation
            self._request()

    def set_draining(self) -> None:
        self._draining = True
        self._request()

    def set_restarting(self) -> None:
        self._restarting = True
        self._request()

    def renew_soon(self) -> None:
        """Renew now rather than at the next tick (its echo through a watch of every member Lease proves
        that watch current)."""
        self._wake.notify()

    def _request(self) -> None:
        self._version += 1
        self._wake.notify()

    async def flush(self, within: float) -> bool:
        """Wait until every change asked for so far is written (False when `within` seconds ran out first)."""
        target = self._version
        self._wake.notify()
        with anyio.move_on_after(within):
            while self._written < target and not self._closed:
                ticket = self.changed.ticket()
                if self._written >= target:
                    break
                await ticket.wait()
        return self._written >= target

    # -- the loops ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Renew our lease until cancelled or closed."""
        backoff = Backoff(
            initial=min(0.2, self.timings.renew_interval / 2), maximum=self.timings.renew_interval
        )
        while not self._closed:
            ticket = self._wake.ticket()
            if await self._write():
                backoff.reset()
                # A fixed schedule from when the renewal was sent: a slow answer must not push every
                # later renewal back (with a 3 s lease, a second of drift is a third of the margin).
                sent = self.last_renewed if self.last_renewed is not None else self.clock.monotonic()
                delay = max(0.0, sent + self.timings.renew_interval - self.clock.monotonic())
            else:
                delay = backoff.next()
            await self._wake.wait(ticket, delay)

    async def _write(self) -> bool:
        """One renewal (with whatever changes are pending); True when the lease is stored."""
        async with self._lock:
            if self._closed:
                return True
            error, status = "conflict", 409
            for _ in range(_CONFLICT_RETRIES):
                version = self._version
                try:
                    if self._lease is None:
                        self._lease = await self._read()
                    record = self._next_record(self._lease)
                    sent = self.clock.monotonic()
                    # Remembered before sending: the watch may deliver the write before its response.
                    self._remember_sent(record.renew_time, sent)
                    timeout = self.timings.request_timeout
                    if record.resource_version is None:
                        body = await self.kube.create(
                            LEASES, record.to_object(), namespace=self.namespace, request_timeout=timeout
                        )
                    else:
                        body = await self.kube.replace(
                            LEASES,
                            self.name,
                            record.to_object(),
                            namespace=self.namespace,
                            request_timeout=timeout,
                        )
                    stored = MemberLease.from_object(body, self.instance)
                except KubeError as exc:
                    if exc.conflict or exc.not_found:
                        self._lease = None  # changed or deleted under us: read it again and retry now
                        continue
                    error, status = str(exc), exc.status
                    break
                except MalformedLease as exc:
                    self._lease = None
                    error = f"unreadable lease returned: {exc}"
                    break
                self._stored(stored, sent, version)
                return True
        self.last_failure = self.clock.monotonic()
        RENEW_FAILURES.labels("member").inc()
        # An unreachable API fails every renewal: one warning per step of the outage, not per renewal.
        emit = log.debug if self.kube.health.quiet(status) else log.warning
        emit(
            "member lease renewal failed",
            lease=self.name,
            error=error,
            may_write=self.may_write(),
        )
        return False

    async def _read(self) -> MemberLease | None:
        body = await self.kube.get(
            LEASES, self.name, namespace=self.namespace, request_timeout=self.timings.request_timeout
        )
        return None if body is None else MemberLease.from_object(body, self.instance)

    def _next_record(self, current: MemberLease | None) -> MemberLease:
        wall = self.clock.now()
        base = current or MemberLease.new(self.instance, self.identity, wall, self.timings.lease_duration)
        return replace(
            base.renewed(wall),
            lease_duration=self.timings.lease_duration,
            weight=self._weight,
            draining=self._draining,
            restarting=self._restarting,
            # An earlier incarnation's acknowledgement stays true for a process that runs nothing yet.
            observed_generation=self._acked if self._acked is not None else base.observed_generation,
        )

    def _stored(self, lease: MemberLease, sent: float, version: int) -> None:
        now = self.clock.monotonic()
        previous = self.last_renewed
        lapsed = previous is None or now >= write_deadline(
            previous, self.timings.lease_duration, self.timings.fence_margin
        )
        if lapsed:
            # Observers may have deemed us gone meanwhile: whatever we read before is suspect now.
            self.fence_epoch += 1
            if previous is not None:
                for regained in self.on_regained:
                    regained(now)
            log.info(
                "member lease acquired" if previous is None else "member lease renewed after the write fence",
                lease=self.name,
                observed_generation=lease.observed_generation,
            )
        self.last_renewed = sent
        self._lease = lease
        self._written = max(self._written, version)
        self.changed.notify()

    def _remember_sent(self, renew_time: str | None, sent: float) -> None:
        if renew_time is not None:
            self._sent[_instant(renew_time)] = sent
            while len(self._sent) > _SENT_KEPT:
                self._sent.popitem(last=False)

    # -- leaving ---------------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop renewing, keep the lease (a restart: the coordinator parks our zones meanwhile). Returns
        once no write of ours is in flight."""
        async with self._lock:
            self._closed = True
        self.changed.notify()

    async def leave(self) -> bool:
        """Stop renewing and delete the lease (only after releasing every zone). True when it is gone."""
        async with self._lock:
            self._closed = True
            try:
                await self.kube.delete(
                    LEASES, self.name, namespace=self.namespace, request_timeout=self.timings.request_timeout
                )
            except KubeError as exc:
                if not exc.not_found:
                    log.warning("deleting the member lease failed", lease=self.name, error=str(exc))
                    return False
        self.changed.notify()
        log.info("member lease deleted", lease=self.name)
        return True


def _instant(stamp: str) -> object:
    """A renewTime as an instant, so `...123456Z` and `...123456+00:00` (servers differ) compare equal."""
    try:
        return datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
