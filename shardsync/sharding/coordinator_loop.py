"""The coordinator, as I/O: election rounds on `<instance>-coordinator`, and the elected replica publishing
the assignment ConfigMap `<instance>-assignment` (design §2 rules 2 and 7).

`Candidate` runs client-go's rounds with election.py's decisions: read the lease, decide, write with the
read resourceVersion (create when absent), so of two replicas deciding to take over only one write
succeeds; the holder renews every renew interval; `release()` gives the lease up on a graceful stop
(ReleaseOnCancel). `CoordinatorLoop` adds publishing: while `Candidate.is_leader()`, it feeds the member
statuses to a `Publisher` and writes each proposal with a resourceVersion precondition (create when the
ConfigMap is absent; 409: reset to what is stored and go on from there). A new leader starts from the stored
generation (failover changes nothing by itself) and repairs a corrupt ConfigMap with the next generation.

Pins are carried over from the stored assignment; they are set by editing the ConfigMap (with a higher
generation), which the coordinator then continues from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import anyio
from prometheus_client import Counter, Gauge

from shardsync.backoff import Backoff
from shardsync.kube import KubeError
from shardsync.logs import get_logger
from shardsync.notify import Notifier
from shardsync.objects import CONFIGMAPS, LEASES, resource_version
from shardsync.sharding.assignment import Assignment, CorruptAssignment, configmap_name
from shardsync.sharding.assignment_watch import AssignmentWatch
from shardsync.sharding.clock import Clock
from shardsync.sharding.election import Action, CoordinatorLease, Election, coordinator_lease_name
from shardsync.sharding.member_loop import RENEW_FAILURES, MemberLoop
from shardsync.sharding.membership import MalformedLease
from shardsync.sharding.publisher import Publisher
from shardsync.sharding.site import Site

log = get_logger(__name__)

IS_COORDINATOR = Gauge("shardsync_is_coordinator", "1 while this replica is the elected coordinator")
REBALANCES = Counter(
    "shardsync_rebalances_total", "Assignment generations this replica published as the coordinator"
)


class Candidate:
    """One replica's part in the coordinator election. `changed` is notified when the holder or our
    leadership changes."""

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
        self.wake = Notifier()  # raise to run a round now (the coordinator Lease's holder changed)
        self.rounds = 0  # completed rounds (a read succeeded)
        self._was_leader = False
        self._holder = ""
        self._closed = False
        self._lock = anyio.Lock()

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
        """Election rounds until cancelled or released."""
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

    def watched(self, obj: dict[str, Any]) -> None:
        """The member watch delivered a version of the coordinator Lease. A candidate times the holder's
        renewals from these too, not only from its own rounds a renew interval apart, so it sees the lease
        lapse when it does (the holder times its own lease from its writes)."""
        if self._closed or self.election.is_leader(self.clock.monotonic()):
            return
        try:
            lease = CoordinatorLease.from_object(obj, self.election.instance)
        except MalformedLease:
            return
        if lease.holder != self.identity:
            self.election.observe(lease, self.clock.monotonic())

    async def _round(self) -> float | None:
        """Read, decide, write. Returns the delay before the next round, None after a failure."""
        async with self._lock:
            if self._closed:
                return 0.0
            was_leader = self.election.is_leader(self.clock.monotonic())
            try:
                lease = await self._read()
            except (KubeError, MalformedLease) as exc:
                self._failed(was_leader, exc)
                return None
            now = self.clock.monotonic()
            self.election.observe(lease, now)
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
                if exc.conflict:
                    return 0.0  # someone else wrote first: read again at once
                self._failed(was_leader, exc)
                return None
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


class CoordinatorLoop:
    """Election plus publishing; every replica runs one, only the leader publishes."""

    def __init__(self, site: Site, members: MemberLoop, watch: AssignmentWatch) -> None:
        self.site = site
        self.timings = site.timings
        self.members = members
        self.watch = watch
        self.candidate = Candidate(site)
        members.coordinator_changed.forward_to(self.candidate.wake)
        members.on_coordinator_lease = self.candidate.watched
        self.name = configmap_name(site.instance)
        self._wake = Notifier()
        # Raised by the owner when its zone set changes: zones that appear may call for an even table now.
        self.zones_changed = Notifier()
        for source in (self.candidate.changed, members.changed, watch.changed, self.zones_changed):
            source.forward_to(self._wake)
        self._publisher: Publisher | None = None
        self._rv: str | None = None  # resourceVersion of the ConfigMap as we last read or wrote it
        self._watch_rv: str | None = None  # the watch's resourceVersion we last reacted to
        self._problems: list[str] = []
        # The zones this replica knows (its provider's), for the slot table's balance; set by the owner.
        self.zones: Callable[[], Iterable[str]] = tuple

    def is_leader(self) -> bool:
        return self.candidate.is_leader()

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.candidate.run)
            await self._publish_loop()

    async def release(self) -> None:
        await self.candidate.release()

    async def _publish_loop(self) -> None:
        backoff = Backoff(initial=0.2, maximum=max(1.0, self.timings.renew_interval))
        while True:
            ticket = self._wake.ticket()
            delay = self.timings.renew_interval
            try:
                delay = await self._publish_round()
                backoff.reset()
            except KubeError as exc:
                delay = backoff.next()
                emit = log.debug if self.site.kube.health.quiet(exc.status) else log.warning
                emit("reading the stored assignment failed", configmap=self.name, error=str(exc))
            await self._wake.wait(ticket, delay)

    async def _publish_round(self) -> float:
        """One look at the members; returns how long to sleep at most before the next."""
        if not self.candidate.is_leader():
            if self._publisher is not None:
                log.info("stopped publishing assignments")
                self._publisher = None
            return self.timings.renew_interval
        if self._publisher is None or self._stored_changed():
            await self._load()
        publisher = self._publisher
        if publisher is None or not self.members.synced.is_set():
            return self.timings.renew_interval
        now = self.site.clock.monotonic()
        pins = dict(publisher.current.pins) if publisher.current is not None else {}
        statuses = self.members.statuses()
        proposal = publisher.observe(statuses, pins, now, self.site.clock.now())
        if publisher.problems != self._problems:
            self._problems = list(publisher.problems)
            for problem in self._problems:
                log.warning("pin problem", problem=problem)
        if proposal is not None and self.candidate.is_leader():
            await self._write(publisher, proposal)
        # Act on an expiry when it happens, not at the next round: wake when the first live member's
        # lease runs out unless it renews first (a renewal raises `members.changed` anyway).
        # An expiry already past on our clock waits for the view to catch up (a member event wakes us).
        now = self.site.clock.monotonic()
        wakes = [s.expires_at() for s in statuses.values() if s.live and s.expires_at() > now]
        wake = publisher.next_wakeup()
        if wake is not None:
            wakes.append(wake)
        if not wakes:
            return self.timings.renew_interval
        return max(0.0, min(self.timings.renew_interval, min(wakes) - now))

    def _stored_changed(self) -> bool:
        """Someone else wrote the ConfigMap (an operator, a deposed coordinator, a corruption): re-read."""
        seen = self.watch.resource_version
        if seen is None or seen == self._watch_rv:
            return False
        self._watch_rv = seen
        return seen != self._rv

    async def _load(self) -> None:
        """Read the stored assignment and continue from it (rule 7)."""
        body = await self.site.kube.get(
            CONFIGMAPS, self.name, namespace=self.site.namespace, request_timeout=self.timings.request_timeout
        )
        if body is None:
            stored, self._rv = None, None
        else:
            self._rv = resource_version(body) or None
            data = body.get("data")
            try:
                stored = Assignment.from_configmap_data(data if isinstance(data, dict) else None)
            except CorruptAssignment as exc:
                stored = self._repair_base(str(exc))
        if self._publisher is None:
            self._publisher = Publisher(
                self.site.identity, self.timings.publisher_config(), stored, lambda: self.zones()
            )
            log.info(
                "publishing assignments",
                generation=stored.generation if stored else 0,
                configmap=self.name,
            )
        elif stored != self._publisher.current:
            self._publisher.reset(stored)

    def _repair_base(self, error: str) -> Assignment | None:
        """What to continue from when the stored ConfigMap is unreadable: the last good generation this
        replica saw, with no members, so that the next proposal differs from it, outnumbers it, and is
        written over the corrupt object."""
        last_good = self.watch.current
        log.error(
            "stored assignment is corrupt; publishing a new generation over it",
            configmap=self.name,
            error=error,
            last_good=last_good.generation if last_good else "",
        )
        return last_good.with_members(()) if last_good is not None else None

    async def _write(self, publisher: Publisher, proposal: Assignment) -> None:
        previous = publisher.current
        body = proposal.to_configmap(self.site.instance, self._rv)
        try:
            timeout = self.timings.request_timeout
            if self._rv is None:
                stored = await self.site.kube.create(
                    CONFIGMAPS, body, namespace=self.site.namespace, request_timeout=timeout
                )
            else:
                stored = await self.site.kube.replace(
                    CONFIGMAPS, self.name, body, namespace=self.site.namespace, request_timeout=timeout
                )
        except KubeError as exc:
            if exc.conflict or exc.not_found:
                log.warning(
                    "assignment write lost a race; continuing from what is stored",
                    generation=proposal.generation,
                    status=exc.status,
                )
                await self._load()
                return
            log.warning("assignment write failed", generation=proposal.generation, error=str(exc))
            return
        self._rv = resource_version(stored) or None
        publisher.committed(proposal)
        REBALANCES.inc()
        log.info(
            "assignment published",
            generation=proposal.generation,
            previous=previous.generation if previous else 0,
            members=",".join(m.identity for m in proposal.members) or "-",
        )
