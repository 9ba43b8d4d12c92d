"""One replica's part in the coordinator election on `<instance>-coordinator` (design §2 rules 6 and 7, the
I/O around election.py's decisions).

The Lease is followed by a watch of that one object (a fieldSelector on its name), not read every round:
a candidate times the holder's renewals from the watch, as client-go times them from its reads, and its
rounds decide from what the watch delivered, so a replica that does not lead makes no request at all
while the holder renews. A round writes only when the decision is to create, take over or renew, with
the resourceVersion last seen, so of two replicas deciding to take over only one write succeeds (409 for
the other). The holder renews every renew interval from the object its last write returned, without a
read. A read (GET) happens only when the watch cannot be trusted yet: before it first listed, after a
renewal of ours was refused (409: someone else wrote), and after a takeover lost a race if the watch has
not delivered the winner's write by the next round. `release()` gives the Lease back on a graceful stop
(client-go's ReleaseOnCancel); the other candidates see the holder cleared through their watch and the
first to try takes it at once.
"""

from __future__ import annotations

from typing import Any

import anyio
from prometheus_client import Gauge

from shardsync.kube.client import KubeError
from shardsync.kube.informer import Informer
from shardsync.kube.objects import LEASES
from shardsync.logs import get_logger
from shardsync.pacing.backoff import Backoff
from shardsync.pacing.notify import Notifier
from shardsync.sharding.clock import Clock
from shardsync.sharding.election import Action, CoordinatorLease, Election, coordinator_lease_name
from shardsync.sharding.member_loop import RENEW_FAILURES
from shardsync.sharding.membership import MalformedLease
from shardsync.sharding.site import Site

log = get_logger(__name__)

IS_COORDINATOR = Gauge("shardsync_is_coordinator", "1 while this replica is the elected coordinator")


class Candidate:
    """See the module docstring. `changed` is notified when the holder or our leadership changes."""

    def __init__(self, site: Site) -> None:
        self.kube = site.kube
        self.namespace = site.namespace
        self.identity = site.identity
        self.timings = site.timings
        self.clock: Clock = site.clock
        self.name = coordinator_lease_name(site.instance)
        self.election = Election(
            site.instance, site.identity, site.timings.lease_duration, site.timings.renew_deadline
        )
        self.changed = Notifier()
        self.wake = Notifier()  # raise to run a round now (the Lease's holder changed)
        self.rounds = 0  # completed rounds (the Lease was known, from the watch or a read)
        self._was_leader = False
        self._holder = ""
        self._closed = False
        self._lock = anyio.Lock()
        self._read_next = False  # the next round reads the Lease (our renewal was refused)
        self._lost_at: str | None = None  # the resourceVersion a lost takeover was written against
        self._informer = Informer(
            site.kube,
            LEASES,
            namespace=site.namespace,
            field_selector=f"metadata.name={self.name}",
            on_change=self._watched,
            name="coordinator-lease",
        )

    def is_leader(self) -> bool:
        return not self._closed and self.election.is_leader(self.clock.monotonic())

    @property
    def leader(self) -> str:
        """The holder as last observed ("" when none)."""
        return self.election.leader

    @property
    def transitions(self) -> int:
        observed = self.election.observed
        return observed.transitions if observed is not None else 0

    async def run(self) -> None:
        """Election rounds (and the watch they decide from) until cancelled or released."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._informer.run)
            await self._rounds()
            tg.cancel_scope.cancel()

    async def _rounds(self) -> None:
        with anyio.move_on_after(self.timings.request_timeout):
            await self._informer.synced.wait()  # the watch's first list spares a read of our own
        backoff = Backoff(
            initial=min(0.2, self.timings.renew_interval / 2), maximum=self.timings.renew_interval
        )
        while not self._closed:
            ticket = self.wake.ticket()
            delay = await self._round()
            if delay is None:
                delay = backoff.next()
            else:
                backoff.reset()
            self._note_leadership()
            await self.wake.wait(ticket, delay)

    def _watched(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """The watch delivered a version of the Lease (or its deletion). A candidate times the holder's
        renewals from these; the holder times its own Lease from its writes and ignores them."""
        if self._closed or self.election.is_leader(self.clock.monotonic()):
            return
        lease: CoordinatorLease | None = None
        if new is not None:
            try:
                lease = CoordinatorLease.from_object(new, self.election.instance)
            except MalformedLease:
                return
        previous = self.leader
        self.election.observe(lease, self.clock.monotonic())
        if self.leader != previous:
            self.wake.notify()

    def _must_read(self) -> bool:
        if self._read_next or not self._informer.synced.is_set():
            return True
        # A takeover we lost: the watch should have delivered the winner's write by now.
        observed = self.election.observed
        seen = observed.resource_version or "" if observed is not None else ""
        return self._lost_at is not None and seen == self._lost_at

    async def _round(self) -> float | None:
        """Decide, and write when the decision says so. Returns the delay before the next round, None after
        a failure."""
        async with self._lock:
            if self._closed:
                return 0.0
            was_leader = self.election.is_leader(self.clock.monotonic())
            if self._must_read():
                try:
                    lease = await self._read()
                except (KubeError, MalformedLease) as exc:
                    self._failed(was_leader, exc)
                    return None
                self.election.observe(lease, self.clock.monotonic())
                self._read_next, self._lost_at = False, None
            now = self.clock.monotonic()
            self.rounds += 1
            decision = self.election.decide(now, self.clock.now())
            if decision.action is Action.WAIT or decision.write is None:
                left = (decision.expires_at or now) - now
                return max(0.01, min(self.timings.renew_interval, left))
            if decision.action is Action.ACQUIRE:
                log.info("taking the coordinator lease", previous=decision.holder or "-", lease=self.name)
            sent = self.clock.monotonic()
            try:
                body = await self._write(decision.write, create=decision.action is Action.CREATE)
                stored = CoordinatorLease.from_object(body, self.election.instance)
            except KubeError as exc:
                if not exc.conflict:
                    self._failed(was_leader, exc)
                    return None
                if decision.action is Action.RENEW:
                    self._read_next = True  # someone else wrote our Lease: read it at once
                    return 0.0
                # Another candidate was quicker: its write reaches us through the watch (and wakes us).
                self._lost_at = decision.write.resource_version or ""
                return self.timings.renew_interval
            except MalformedLease as exc:
                self._failed(was_leader, exc)
                return None
            self.election.written(stored, sent, self.clock.monotonic())
            return self.timings.renew_interval

    def _failed(self, was_leader: bool, exc: Exception) -> None:
        if was_leader:
            RENEW_FAILURES.labels("coordinator").inc()
        # An unreachable API fails every round: one warning per step of the outage, not per round.
        status = exc.status if isinstance(exc, KubeError) else -1
        emit = log.debug if self.kube.health.quiet(status) else log.warning
        emit("coordinator election round failed", lease=self.name, error=str(exc), leader=was_leader)

    def _note_leadership(self) -> None:
        leader = self.is_leader()
        holder = self.leader
        if leader != self._was_leader:
            IS_COORDINATOR.set(1 if leader else 0)
            if leader:
                log.info("became the coordinator", transitions=self.transitions)
            else:
                log.warning("no longer the coordinator", holder=holder or "-")
        elif holder != self._holder and not leader:
            log.info("coordinator seen", holder=holder or "-", transitions=self.transitions)
        if leader != self._was_leader or holder != self._holder:
            self._was_leader, self._holder = leader, holder
            self.changed.notify()

    async def _read(self) -> CoordinatorLease | None:
        body = await self.kube.get(
            LEASES, self.name, namespace=self.namespace, request_timeout=self.timings.request_timeout
        )
        return None if body is None else CoordinatorLease.from_object(body, self.election.instance)

    async def _write(self, record: CoordinatorLease, create: bool) -> dict[str, Any]:
        timeout = self.timings.request_timeout
        if create:
            return await self.kube.create(
                LEASES, record.to_object(), namespace=self.namespace, request_timeout=timeout
            )
        return await self.kube.replace(
            LEASES, self.name, record.to_object(), namespace=self.namespace, request_timeout=timeout
        )

    async def release(self) -> None:
        """Stop taking part; if we hold the lease, hand it back (holder cleared, as ReleaseOnCancel)."""
        async with self._lock:
            self._closed = True
            record = self.election.release(self.clock.now())
            if record is not None:
                try:
                    await self._write(record, create=False)
                    log.info("coordinator lease released", lease=self.name, transitions=record.transitions)
                except KubeError as exc:
                    log.warning("releasing the coordinator lease failed", lease=self.name, error=str(exc))
        if self._was_leader:
            IS_COORDINATOR.set(0)
        self._was_leader = False
        self.changed.notify()
        self.wake.notify()
