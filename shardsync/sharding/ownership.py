"""Active/active ownership: this replica reconciles exactly the zones the assignment gives it, handing them
over safely (design §2 rules 3-6). It implements shardsync.replica's `Ownership` protocol.

`ShardedOwnership.run(host)` runs the member lease (`MemberLoop`), the assignment watch, the coordinator
(`CoordinatorLoop`: every replica is a candidate) and the shard loop, which on every change (a new
generation, a member lease, the provider's zone list, a timer) does, in this order:
1. nothing while self-fenced (rule 5); after the lease was renewed past its write fence, a fresh GET of the
   assignment before anything else (never act on the view held while fenced);
2. switch to a newer generation only (a skipped generation puts kept zones through rule 4 again: they may
   have had another owner meanwhile);
3. release every zone not owned in that generation, awaiting in-flight writes (rule 3), then acknowledge
   the generation on the member lease;
4. start each gained zone only when `may_acquire` allows it (rule 4), retrying at its `retry_at`, and only
   once the member view is at least as fresh as the assignment (a lagging lease watch would hide a peer
   that is still writing): `worker.own(zone, FenceToken(generation, identity))`.
A write refused by a zone's fence (`on_fenced`, the worker's callback) drops the zone until a newer
generation gives it again.

`stop(host)` is rule 6: leaving for good (scale-down, not in a StatefulSet) drains — mark draining, wait
(bounded) until the coordinator moved our zones and we released them, delete the member lease; a restart
stops writing, releases its zones, marks the lease restarting and keeps it, so the zones stay parked.
Either way the coordinator lease is given back.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
from prometheus_client import Counter, Gauge, Histogram

from shardsync.backoff import Backoff
from shardsync.config import Settings
from shardsync.kube import Kube, KubeError
from shardsync.logs import get_logger
from shardsync.notify import Notifier
from shardsync.providers.base import FenceToken
from shardsync.sharding import shards_view
from shardsync.sharding.assignment import Assignment, is_successor
from shardsync.sharding.assignment_watch import AssignmentWatch
from shardsync.sharding.clock import Clock, SystemClock, wall_at
from shardsync.sharding.coordinator_loop import CoordinatorLoop
from shardsync.sharding.departure import departure
from shardsync.sharding.handoff import handoff, may_acquire, zone_state
from shardsync.sharding.host import Host
from shardsync.sharding.member_loop import MemberLoop
from shardsync.sharding.timings import Timings

log = get_logger(__name__)

GENERATION = Gauge("shardsync_assignment_generation", "The assignment generation this replica works under")
MOVED = Counter("shardsync_zones_moved_total", "Zones handed to or taken from this replica", ["direction"])
HANDOFF_WAIT = Histogram(
    "shardsync_handoff_wait_seconds",
    "From seeing a gained zone to starting it (waiting for the previous owner, rule 4)",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60),
)


class ShardedOwnership:
    """See the module docstring."""

    def __init__(
        self, settings: Settings, kube: Kube, *, timings: Timings | None = None, clock: Clock | None = None
    ) -> None:
        self.identity = settings.identity
        self.namespace = settings.lease_namespace
        self.kube = kube
        self.timings = (
            timings
            if timings is not None
            else Timings.derive(
                settings.lease_duration,
                settings.renew_interval,
                settings.settle_delay,
                settings.restart_grace,
            )
        )
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.members = MemberLoop(
            kube,
            self.namespace,
            settings.instance,
            self.identity,
            self.timings,
            weight=settings.weight,
            clock=self.clock,
        )
        self.watch = AssignmentWatch(kube, self.namespace, settings.instance, self.timings)
        self.coordinator = CoordinatorLoop(
            kube,
            self.namespace,
            settings.instance,
            self.identity,
            self.timings,
            self.members,
            self.watch,
            self.clock,
        )
        self.view: Assignment | None = None
        self.previous: Assignment | None = None
        self.active: set[str] = set()  # handed to the worker
        self.pending: dict[str, float] = {}  # gained, waiting for rule 4: zone -> since (monotonic)
        self.dropped: dict[str, int] = {}  # zone -> generation under which its fence refused our write
        self._read_epoch = -1  # the member loop's fence epoch our view was (re)read under
        self._view_read_at = math.inf  # when we got hold of the view (monotonic)
        self._fresh_view_asked_for = math.nan  # the view read for which an early renewal was asked
        self._requalify = False  # a generation was skipped: kept zones go through rule 4 again
        self._draining = False
        self._stopping = False
        self._writing = False
        self._waiting_logged: tuple[int, tuple[str, ...]] | None = None
        self._wake = Notifier()
        self._progress = Notifier()  # after every pass of the shard loop
        for source in (self.members.changed, self.watch.changed):
            source.forward_to(self._wake)
        self._scope: anyio.CancelScope | None = None

    # -- the Ownership protocol ------------------------------------------------------------------------

    def may_write(self) -> bool:
        """Our lease is fresh (rule 5), our view was read since it last lapsed, and we are not stopping."""
        return (
            not self._stopping and self.members.may_write() and self._read_epoch == self.members.fence_epoch
        )

    def ready(self) -> tuple[bool, str]:
        if not self.members.may_write():
            return False, "member lease not held"
        if self.view is None:
            return False, "no assignment seen yet"
        return True, ""

    async def run(self, host: Host) -> None:
        """Run every loop until `stop` (or until cancelled)."""
        await self._initial_read()
        async with anyio.create_task_group() as tg:
            self._scope = tg.cancel_scope
            tg.start_soon(self.members.run)
            tg.start_soon(self.watch.run)
            tg.start_soon(self.coordinator.run)
            tg.start_soon(self._follow_zones, host)
            tg.start_soon(self._shard_loop, host)

    def is_coordinator(self) -> bool:
        return self.coordinator.candidate.is_leader()

    def on_fenced(self, zone: str, token: FenceToken | None) -> None:
        """The worker's callback: the zone's fence refused our write, so someone newer holds it."""
        generation = self.view.generation if self.view is not None else 0
        self.dropped[zone] = generation
        log.warning(
            "zone dropped after a refused write",
            zone=zone,
            generation=generation,
            fence=token.to_text() if token else "",
        )
        self._wake.notify()

    # -- the shard loop --------------------------------------------------------------------------------

    async def _initial_read(self) -> None:
        """Read the assignment before the first lease write: a replica that runs nothing has released
        everything, so it acknowledges the generation in the very write that creates its lease."""
        try:
            with anyio.move_on_after(self.timings.request_timeout * 2):
                current = await self.watch.refresh()
                if current is not None:
                    self.members.acknowledge(current.generation)
        except KubeError as exc:
            log.info("assignment not readable at start-up", error=str(exc))

    async def _follow_zones(self, host: Host) -> None:
        while True:
            await host.zones_changed.wait()
            self._wake.notify()

    async def _shard_loop(self, host: Host) -> None:
        backoff = Backoff(initial=0.2, maximum=max(1.0, self.timings.renew_interval))
        while True:
            ticket = self._wake.ticket()
            try:
                delay = await self._pass(host)
                backoff.reset()
            except KubeError as exc:
                delay = backoff.next()
                log.warning("reading the assignment failed", error=str(exc), retry_in=f"{delay:.2f}s")
            self._progress.notify()
            await self._wake.wait(ticket, delay)

    async def _pass(self, host: Host) -> float:
        """One look at the world; returns the longest it may sleep before the next."""
        if self._stopping:
            return self.timings.renew_interval
        if not self.members.may_write():
            if self._writing:
                self._writing = False
                log.warning(
                    "self-fenced: member lease not renewed in time, writes stopped",
                    generation=self.view.generation if self.view else "",
                    zones=len(self.active),
                )
            return self.timings.renew_interval
        epoch = self.members.fence_epoch
        if epoch != self._read_epoch:
            await self.watch.refresh()
            self._read_epoch = epoch
            self._view_read_at = self.clock.monotonic()
            host.worker.mark_dirty(self.active)  # resume at once what backed off while fenced
            log.info(
                "assignment read afresh after (re)acquiring the member lease",
                generation=self.watch.current.generation if self.watch.current else "",
            )
        if not self._writing:
            self._writing = True
        latest = self.watch.current
        if latest is not None and is_successor(self.view, latest):
            self._switch(latest)
        if self.view is None:
            return self.timings.renew_interval
        return await self._handoff(host, self.view)

    def _switch(self, new: Assignment) -> None:
        old = self.view
        self.previous, self.view = old, new
        self._view_read_at = self.clock.monotonic()
        if old is not None and new.generation > old.generation + 1:
            self._requalify = True
        self.dropped = {zone: g for zone, g in self.dropped.items() if g >= new.generation}
        GENERATION.set(new.generation)
        log.info(
            "generation switched",
            generation=new.generation,
            previous=old.generation if old else 0,
            members=len(new.members),
            owned=len(new.zones_of(self.identity, self.active | set(self.pending))),
        )

    async def _handoff(self, host: Host, view: Assignment) -> float:
        zones = set(host.zones)
        plan = handoff(self.identity, view, zones, self.active | set(self.pending))
        release = set(plan.release) | (set(self.dropped) & self.active)
        if self._requalify:
            release |= plan.keep & self.active
            self._requalify = False
        for zone in sorted(release):
            self.pending.pop(zone, None)
            if zone in self.active:
                self.active.discard(zone)
                await host.worker.release(zone)
                MOVED.labels("out").inc()
                log.info(
                    "zone released",
                    zone=zone,
                    generation=view.generation,
                    owner=view.owner_of(zone) or "-",
                )
        # Rule 3: every zone not ours in this generation is stopped; only now say so.
        if self.members.acknowledged is None or self.members.acknowledged < view.generation:
            self.members.acknowledge(view.generation)
            log.info("generation acknowledged", generation=view.generation)
        if self._draining:
            return self.timings.renew_interval
        now = self.clock.monotonic()
        for zone in sorted(view.zones_of(self.identity, zones) - self.active - set(self.pending)):
            if self.dropped.get(zone, -1) < view.generation:
                self.pending[zone] = now
        return self._acquire(host, view)

    def _acquire(self, host: Host, view: Assignment) -> float:
        """Rule 4 for every pending zone; returns how long until the next verdict may change."""
        if not self.pending:
            return self.timings.renew_interval
        synced_at = self.members.tracker.synced_at
        if not self.may_write() or synced_at is None or synced_at < self._view_read_at:
            if self.may_write() and self._fresh_view_asked_for != self._view_read_at:
                # Waiting for the next regular renewal would leave gained zones unowned for up to a renew
                # interval (a restarted replica's parked zones, say): ask for the renewal now.
                self._fresh_view_asked_for = self._view_read_at
                self.members.renew_soon()
            log.debug(
                "acquiring waits for a fresh member view",
                zones=len(self.pending),
                synced_at=synced_at,
                view_read_at=self._view_read_at,
            )
            return self.timings.renew_interval  # woken by the echo of our next renewal
        now = self.clock.monotonic()
        statuses = self.members.statuses()
        retry_at = math.inf
        blockers: set[str] = set()
        for zone in sorted(self.pending):
            verdict = may_acquire(
                zone, self.identity, view, self.previous, statuses, self.timings.acquire_margin
            )
            if not verdict.allowed:
                blockers.update(verdict.waiting_for)
                if verdict.retry_at is not None:
                    retry_at = min(retry_at, verdict.retry_at)
                continue
            since = self.pending.pop(zone)
            self.active.add(zone)
            host.worker.own(zone, FenceToken(view.generation, self.identity))
            HANDOFF_WAIT.observe(now - since)
            MOVED.labels("in").inc()
            log.info("zone acquired", zone=zone, generation=view.generation, waited=f"{now - since:.3f}s")
        waiting = (view.generation, tuple(sorted(blockers)))
        if blockers and waiting != self._waiting_logged:
            self._waiting_logged = waiting
            log.info(
                "zones wait for their previous owners",
                generation=view.generation,
                zones=len(self.pending),
                waiting_for=",".join(waiting[1]),
            )
        return max(0.0, min(self.timings.renew_interval, retry_at - now))

    # -- /shards ---------------------------------------------------------------------------------------

    def snapshot(self, host: Host) -> dict[str, Any]:
        view = self.view
        generation = view.generation if view is not None else 0
        statuses = self.members.statuses()
        owners = {zone: (view.owner_of(zone) if view is not None else None) for zone in sorted(host.zones)}
        counts = shards_view.zone_counts(owners)
        members = []
        for identity in sorted(set(statuses) | (view.identities if view is not None else set())):
            status = statuses.get(identity)
            if status is None:  # listed in the assignment, lease gone
                weight = next((m.weight for m in view.members if m.identity == identity), 1) if view else 1
                members.append(
                    shards_view.member_row(identity, "expired", weight, counts.get(identity, 0), None, None)
                )
                continue
            members.append(
                shards_view.member_row(
                    identity,
                    str(status.state),
                    status.weight,
                    counts.get(identity, 0),
                    status.observed_generation,
                    wall_at(self.clock, status.last_change),
                )
            )
        rows = []
        for zone, owner in owners.items():
            owner_status = statuses.get(owner) if owner is not None else None
            acquired = (zone in self.active and self.may_write()) if owner == self.identity else None
            state = zone_state(owner, owner_status, generation, acquired)
            rows.append(shards_view.zone_row(zone, owner, str(state), host.worker.status.get(zone)))
        return shards_view.snapshot(
            generation, self.coordinator.candidate.leader, self.identity, members, rows
        )

    # -- stopping (rule 6) -----------------------------------------------------------------------------

    async def stop(self, host: Host) -> None:
        verdict = await departure(self.kube, self.namespace, self.identity, self.timings.request_timeout)
        log.info("stopping", leaving=verdict.leaving, reason=verdict.reason)
        try:
            if verdict.leaving:
                await self._drain(host)
            else:
                await self._restart(host)
            await self.coordinator.release()
        finally:
            self._stopping = True
            if self._scope is not None:
                self._scope.cancel()

    async def _drain(self, host: Host) -> None:
        self._draining = True
        self.members.set_draining()
        if not await self.members.flush(self.timings.request_timeout):
            log.warning("could not mark the member lease draining")
        log.info("draining: waiting for the coordinator to move our zones", zones=len(self.active))
        with anyio.move_on_after(self.timings.drain_timeout) as scope:
            while not self._drained():
                ticket = self._progress.ticket()
                if self._drained():
                    break
                await ticket.wait()
        if scope.cancelled_caught:
            log.warning("draining timed out; releasing our zones anyway", zones=len(self.active))
        self._stopping = True
        await self._release_all(host)
        await self.members.leave()

    def _drained(self) -> bool:
        view = self.view
        return view is not None and self.identity not in view.identities and not self.active

    async def _restart(self, host: Host) -> None:
        self._stopping = True  # no write from here on
        await self._release_all(host)
        self.members.set_restarting()
        if not await self.members.flush(self.timings.request_timeout):
            log.warning("could not mark the member lease restarting; its zones will move")
        await self.members.close()
        log.info(
            "restarting: member lease kept, zones parked",
            generation=self.view.generation if self.view else "",
        )

    async def _release_all(self, host: Host) -> None:
        for zone in sorted(self.active | set(host.worker.owned())):
            await host.worker.release(zone)
        self.active.clear()
        self.pending.clear()
