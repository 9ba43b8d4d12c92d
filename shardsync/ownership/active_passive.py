"""`--sharding=off`: active/passive ownership, external-dns's leader-election model. Only the elected
coordinator reconciles, and it reconciles every zone; the others stand by.

The coordinator fences its writes with FenceToken(generation = the coordinator lease's leaseTransitions,
identity): every takeover raises leaseTransitions, so a deposed leader's late write is refused by the
provider. A zone whose fence refuses us is dropped until leadership changes hands again.
"""

from __future__ import annotations

from typing import Any

import anyio

from shardsync.logs import get_logger
from shardsync.ownership import shards_view
from shardsync.ownership.metrics import GENERATION
from shardsync.ownership.port import Host
from shardsync.pacing.notify import Notifier
from shardsync.providers.base import FenceToken
from shardsync.sharding.candidate import Candidate
from shardsync.sharding.clock import wall_at
from shardsync.sharding.site import Site
from shardsync.sharding.states import MemberState, ZoneState

log = get_logger(__name__)


class ActivePassiveOwnership:
    """Implements shardsync.ownership.port's `Ownership` for `--sharding=off`."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.identity = site.identity
        self.candidate = Candidate(site)
        self.token: FenceToken | None = None  # while we lead
        self.dropped: set[str] = set()
        self._stopping = False
        self._wake = Notifier()
        self.candidate.changed.forward_to(self._wake)
        self._scope: anyio.CancelScope | None = None

    def may_write(self) -> bool:
        return not self._stopping and self.candidate.is_leader()

    def ready(self) -> tuple[bool, str]:
        if self.candidate.rounds == 0:
            return False, "coordinator lease not read yet"
        return True, ""

    def is_coordinator(self) -> bool:
        return self.candidate.is_leader()

    def on_fenced(self, zone: str, token: FenceToken | None) -> None:
        self.dropped.add(zone)
        log.warning(
            "zone dropped after a refused write",
            zone=zone,
            generation=token.generation if token else "",
        )
        self._wake.notify()

    async def run(self, host: Host) -> None:
        async with anyio.create_task_group() as tg:
            self._scope = tg.cancel_scope
            host.zones_changed.forward_to(self._wake)
            tg.start_soon(self.candidate.run)
            tg.start_soon(self._loop, host)

    async def _loop(self, host: Host) -> None:
        while True:
            ticket = self._wake.ticket()
            await self._pass(host)
            await self._wake.wait(ticket, self.site.timings.renew_interval)

    async def _pass(self, host: Host) -> None:
        worker = host.worker
        if self.may_write():
            token = FenceToken(self.candidate.transitions, self.identity)
            if token != self.token:
                self.token = token
                self.dropped.clear()
                GENERATION.set(token.generation)
                log.info("owning every zone as the coordinator", generation=token.generation)
            zones = set(host.zones) - self.dropped
            for zone in sorted(set(worker.owned()) - zones):
                await worker.release(zone)
            for zone in sorted(zones):
                worker.own(zone, token)  # a no-op for zones already held with this token
            return
        if self.token is not None or worker.owned():
            log.info("not the coordinator: releasing every zone", zones=len(worker.owned()))
            self.token = None
            await self._release_all(host)

    async def _release_all(self, host: Host) -> None:
        for zone in sorted(host.worker.owned()):
            await host.worker.release(zone)

    async def snapshot(self, host: Host) -> dict[str, Any]:
        leader = self.candidate.leader
        zones = sorted(host.zones)
        generation = self.candidate.transitions
        members = []
        if leader:
            observed_at = self.candidate.election.observed_at
            members.append(
                shards_view.member_row(
                    leader,
                    MemberState.READY,
                    self.site.weight if leader == self.identity else 1,
                    len(zones),
                    generation,
                    wall_at(self.site.clock, observed_at) if observed_at is not None else None,
                )
            )
        if leader != self.identity:
            members.append(
                shards_view.member_row(self.identity, MemberState.READY, self.site.weight, 0, None, None)
            )
        rows = []
        for zone in zones:
            status = host.worker.status(zone)
            if not leader:
                state = ZoneState.ORPHANED
            elif leader == self.identity:
                state = ZoneState.ACTIVE if status is not None and self.may_write() else ZoneState.PENDING
            else:
                state = ZoneState.ACTIVE
            rows.append(shards_view.zone_row(zone, leader or None, state, status))
        return shards_view.snapshot(
            generation,
            shards_view.coordinator(leader, self.identity, self.is_coordinator()),
            self.identity,
            members,
            rows,
        )

    async def stop(self, host: Host) -> None:
        self._stopping = True
        try:
            await self._release_all(host)
            await self.candidate.release()
        finally:
            if self._scope is not None:
                self._scope.cancel()
