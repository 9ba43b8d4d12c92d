"""Active/active ownership: this replica reconciles exactly the zones the assignment gives it, handing them
over safely (design §2 rules 3-6). It implements shardsync.ownership.port's `Ownership`.

`ShardedOwnership` is the I/O shell around the pure `ShardState` (shard_state.py, where each rule's step
is explained). `run(host)` runs the member lease (`MemberLoop`), the member Leases it follows
(`PeerView`: every one while it leads or must hear from everyone, else the coordinator's and those of the
peers rule 4 names), the assignment watch, the coordinator (`Candidate` and `CoordinatorLoop`: every
replica is a candidate) and the shard loop, which on every change (a new generation, a followed member
lease, the provider's zone list, a timer) does, in this order:
1. nothing while self-fenced (rule 5); after the lease was renewed past its write fence, a fresh GET of the
   assignment before anything else (never act on the view held while fenced);
2. switch to a newer generation only (a skipped generation puts kept zones through rule 4 again: they may
   have had another owner meanwhile);
3. release every zone not owned in that generation, awaiting in-flight writes (rule 3), then acknowledge
   the generation on the member lease;
4. follow the Leases of the peers the gained zones must hear from, and start each gained zone only when
   `may_acquire` allows it (rule 4), retrying at its `retry_at`, and only once the view of those Leases is
   at least as fresh as the assignment (a lagging view would hide a peer that is still writing):
   `worker.own(zone, FenceToken(generation, identity))`.
A write refused by a zone's fence (`on_fenced`, the worker's callback) drops the zone until a newer
generation gives it again. Its failures (self-fenced, the assignment unreadable, zones dropped) are logged
through a `LogDigest`: the first at once, repeats as one line a minute, however often the lease flaps.

`stop(host)` is rule 6: leaving for good (scale-down, not in a StatefulSet) drains — mark draining, wait
(bounded) until the coordinator moved our zones and we released them, delete the member lease; a restart
stops writing, releases its zones, marks the lease restarting and keeps it, so the zones stay parked.
Either way (even when draining fails) the coordinator lease is given back, and from then on /shards names
no coordinator rather than this replica: a lease last observed as ours is claimed only while we lead.
"""

from __future__ import annotations

from typing import Any

import anyio

from shardsync.kube.client import KubeError
from shardsync.logs import get_logger
from shardsync.ownership import shards_view
from shardsync.ownership.metrics import GENERATION, HANDOFF_WAIT, MOVED
from shardsync.ownership.port import Host
from shardsync.ownership.shard_state import ShardState
from shardsync.pacing.backoff import Backoff
from shardsync.pacing.log_digest import LogDigest
from shardsync.pacing.notify import Notifier
from shardsync.providers.base import FenceToken
from shardsync.sharding.assignment import Assignment
from shardsync.sharding.assignment_watch import AssignmentWatch
from shardsync.sharding.candidate import Candidate
from shardsync.sharding.clock import wall_at
from shardsync.sharding.coordinator_loop import CoordinatorLoop
from shardsync.sharding.departure import departure
from shardsync.sharding.handoff import zone_state
from shardsync.sharding.member_loop import MemberLoop
from shardsync.sharding.peer_view import PeerView
from shardsync.sharding.roster import Roster
from shardsync.sharding.site import Site
from shardsync.sharding.states import MemberState

log = get_logger(__name__)


class ShardedOwnership:
    """See the module docstring."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.identity = site.identity
        self.timings = site.timings
        self.clock = site.clock
        self.members = MemberLoop(site)
        self.watch = AssignmentWatch(site)
        self.candidate = Candidate(site)
        self.peers = PeerView(site, self.members, self.candidate)
        self.coordinator = CoordinatorLoop(site, self.peers, self.watch, self.candidate)
        self.roster = Roster(site)  # every member Lease, read for /shards when we do not follow them all
        self.state = ShardState(site.identity, site.timings)
        self._wake = Notifier()
        self._progress = Notifier()  # after every pass of the shard loop
        for source in (self.members.changed, self.watch.changed, self.peers.changed):
            source.forward_to(self._wake)
        self._scope: anyio.CancelScope | None = None
        self.digest = LogDigest(clock=self.clock.monotonic)

    @property
    def view(self) -> Assignment | None:
        """The generation this replica works under."""
        return self.state.view

    # -- the Ownership port ----------------------------------------------------------------------------

    def may_write(self) -> bool:
        """Our lease is fresh (rule 5), our view was read since it last lapsed, and we are not stopping."""
        return self.state.may_write(self.members.may_write(), self.members.fence_epoch)

    def ready(self) -> tuple[bool, str]:
        if not self.members.may_write():
            return False, "member lease not held"
        if self.state.view is None:
            return False, "no assignment seen yet"
        return True, ""

    async def run(self, host: Host) -> None:
        """Run every loop until `stop` (or until cancelled)."""
        await self._initial_read()
        async with anyio.create_task_group() as tg:
            self._scope = tg.cancel_scope
            host.zones_changed.forward_to(self._wake)
            host.zones_changed.forward_to(self.coordinator.zones_changed)
            self.coordinator.zones = lambda: host.zones  # what the slot table is balanced on
            tg.start_soon(self.members.run)
            tg.start_soon(self.peers.run)
            tg.start_soon(self.watch.run)
            tg.start_soon(self.coordinator.run)
            tg.start_soon(self._shard_loop, host)
            tg.start_soon(self.digest.run)

    def is_coordinator(self) -> bool:
        return self.candidate.is_leader()

    def on_fenced(self, zone: str, token: FenceToken | None) -> None:
        """The worker's callback: the zone's fence refused our write, so someone newer holds it."""
        generation = self.state.fenced(zone)
        self.digest.warning(
            log,
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

    async def _shard_loop(self, host: Host) -> None:
        backoff = Backoff(initial=0.2, maximum=max(1.0, self.timings.renew_interval))
        while True:
            ticket = self._wake.ticket()
            try:
                delay = await self._pass(host)
                backoff.reset()
            except KubeError as exc:
                delay = backoff.next()
                self.digest.warning(
                    log, "reading the assignment failed", error=str(exc), retry_in=f"{delay:.2f}s"
                )
            self._progress.notify()
            await self._wake.wait(ticket, delay)

    async def _pass(self, host: Host) -> float:
        """One look at the world; returns the longest it may sleep before the next."""
        state = self.state
        if state.stopping:
            return self.timings.renew_interval
        if not self.members.may_write():
            if state.self_fenced():
                self.digest.warning(
                    log,
                    "self-fenced: member lease not renewed in time, writes stopped",
                    generation=state.view.generation if state.view else "",
                    zones=len(state.active),
                )
            return self.timings.renew_interval
        epoch = self.members.fence_epoch
        if state.needs_read(epoch):
            await self.watch.refresh()
            state.view_read(epoch, self.clock.monotonic())
            host.worker.mark_dirty(state.active)  # resume at once what backed off while fenced
            log.info(
                "assignment read afresh after (re)acquiring the member lease",
                generation=self.watch.current.generation if self.watch.current else "",
            )
        state.writing = True
        switch = state.switch(self.watch.current, self.clock.monotonic())
        if switch is not None:
            GENERATION.set(switch.new.generation)
            log.info(
                "generation switched",
                generation=switch.new.generation,
                previous=switch.old.generation if switch.old else 0,
                members=len(switch.new.members),
                owned=state.owned(),
            )
        if state.view is None:
            return self.timings.renew_interval
        return await self._handoff(host, state.view)

    async def _handoff(self, host: Host, view: Assignment) -> float:
        state = self.state
        zones = set(host.zones)
        for zone in state.release_plan(zones):
            state.releasing(zone)
            await host.worker.release(zone)
            MOVED.labels("out").inc()
            log.info("zone released", zone=zone, generation=view.generation, owner=view.owner_of(zone) or "-")
        # Rule 3: every zone not ours in this generation is stopped; only now say so.
        generation = state.acknowledgement(self.members.acknowledged, zones)
        if generation is not None:
            self.members.acknowledge(generation)
            log.info("generation acknowledged", generation=generation)
        gaining = state.gain(zones, self.clock.monotonic())
        hearing = state.hearing()
        self.peers.follow(hearing)
        if not gaining:
            return self.timings.renew_interval  # draining: nothing is gained
        return self._acquire(host, view, hearing)

    def _acquire(self, host: Host, view: Assignment, hearing: frozenset[str] | None) -> float:
        """Rule 4 for every pending zone; returns how long until the next verdict may change."""
        state = self.state
        if not state.pending:
            return self.timings.renew_interval
        if not self.may_write():
            return self.timings.renew_interval
        synced_at = self.peers.synced_for(hearing)
        fresh = state.view_confirmed(synced_at)
        if not fresh:
            self.peers.confirm()  # at most one early renewal, or one read of each Lease read too long ago
            log.debug(
                "silent peers wait for a fresh member view",
                zones=len(state.pending),
                synced_at=synced_at,
                view_read_at=state.view_read_at,
            )
        result = state.acquire(self.clock.monotonic(), self.peers.statuses(), fresh)
        if result.refresh_now:
            self.peers.confirm()
        for zone, waited in result.acquired:
            host.worker.own(zone, FenceToken(view.generation, self.identity))
            HANDOFF_WAIT.observe(waited)
            MOVED.labels("in").inc()
            log.info("zone acquired", zone=zone, generation=view.generation, waited=f"{waited:.3f}s")
        if result.waiting_for is not None:
            log.info(
                "zones wait for their previous owners",
                generation=view.generation,
                zones=len(state.pending),
                waiting_for=",".join(result.waiting_for),
            )
        return result.delay

    # -- /shards ---------------------------------------------------------------------------------------

    async def snapshot(self, host: Host) -> dict[str, Any]:
        view = self.state.view
        generation = view.generation if view is not None else 0
        if self.peers.everyone:
            statuses = self.peers.statuses()
        else:
            busy = self.state.view is None or bool(self.state.pending)
            # Until the roster has been listed (it is not while we start or wait for zones), what our
            # own watches know.
            statuses = await self.roster.statuses(busy) or self.peers.statuses()
        owners = {zone: (view.owner_of(zone) if view is not None else None) for zone in sorted(host.zones)}
        counts = shards_view.zone_counts(owners)
        members = []
        for identity in sorted(set(statuses) | (view.identities if view is not None else set())):
            status = statuses.get(identity)
            if status is None:  # listed in the assignment, lease gone
                weight = next((m.weight for m in view.members if m.identity == identity), 1) if view else 1
                row = shards_view.member_row(
                    identity, MemberState.EXPIRED, weight, counts.get(identity, 0), None, None
                )
            else:
                row = shards_view.member_row(
                    identity,
                    status.state,
                    status.weight,
                    counts.get(identity, 0),
                    status.observed_generation,
                    wall_at(self.clock, status.last_change),
                )
            members.append(row)
        rows = []
        for zone, owner in owners.items():
            owner_status = statuses.get(owner) if owner is not None else None
            acquired = (zone in self.state.active and self.may_write()) if owner == self.identity else None
            state = zone_state(owner, owner_status, generation, acquired)
            rows.append(shards_view.zone_row(zone, owner, state, host.worker.status(zone)))
        return shards_view.snapshot(
            generation,
            shards_view.coordinator(self.candidate.leader, self.identity, self.is_coordinator()),
            self.identity,
            members,
            rows,
            view.to_document() if view is not None else None,
        )

    # -- stopping (rule 6) -----------------------------------------------------------------------------

    async def stop(self, host: Host) -> None:
        site = self.site
        verdict = await departure(site.kube, site.namespace, self.identity, self.timings.request_timeout)
        log.info("stopping", leaving=verdict.leaving, reason=verdict.reason)
        try:
            if verdict.leaving:
                await self._drain(host)
            else:
                await self._restart(host)
        finally:
            try:
                # Given back whatever happened above, so a successor need not wait for the lease to lapse.
                await self.coordinator.release()
            finally:
                self.state.stop()
                if self._scope is not None:
                    self._scope.cancel()

    async def _drain(self, host: Host) -> None:
        state = self.state
        state.start_draining()
        self.members.set_draining()
        if not await self.members.flush(self.timings.request_timeout):
            log.warning("could not mark the member lease draining")
        log.info("draining: waiting for the coordinator to move our zones", zones=len(state.active))
        with anyio.move_on_after(self.timings.drain_timeout) as scope:
            while not state.drained():
                ticket = self._progress.ticket()
                if state.drained():
                    break
                await ticket.wait()
        if scope.cancelled_caught:
            log.warning("draining timed out; releasing our zones anyway", zones=len(state.active))
        state.stop()
        await self._release_all(host)
        await self.members.leave()

    async def _restart(self, host: Host) -> None:
        self.state.stop()  # no write from here on
        await self._release_all(host)
        self.members.set_restarting()
        if not await self.members.flush(self.timings.request_timeout):
            log.warning("could not mark the member lease restarting; its zones will move")
        await self.members.close()
        log.info(
            "restarting: member lease kept, zones parked",
            generation=self.state.view.generation if self.state.view else "",
        )

    async def _release_all(self, host: Host) -> None:
        for zone in sorted(self.state.active | set(host.worker.owned())):
            await host.worker.release(zone)
        self.state.forget_all()
