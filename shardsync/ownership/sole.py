"""One replica alone, or `--once`: this replica owns every known zone, unfenced (external-dns's model).

It follows the provider's zone list: a zone that appears is owned, one that goes is released. Its writes
carry no fence token, so none can be refused; it is always ready, always the coordinator, and its /shards
document lists itself as the one ready member at generation 0.
"""

from __future__ import annotations

from typing import Any

from shardsync.ownership import shards_view
from shardsync.ownership.port import Host
from shardsync.providers.base import FenceToken
from shardsync.sharding.states import MemberState, ZoneState


class SoleOwner:
    """Implements shardsync.ownership.port's `Ownership` for one replica alone."""

    def __init__(self, identity: str, weight: int = 1) -> None:
        self.identity = identity
        self.weight = weight

    async def run(self, host: Host) -> None:
        worker = host.worker
        while True:
            ticket = host.zones_changed.ticket()
            zones = set(host.zones)
            for zone in zones - set(worker.owned()):
                worker.own(zone)
            for zone in set(worker.owned()) - zones:
                await worker.release(zone)
            await host.zones_changed.wait(ticket)

    def may_write(self) -> bool:
        return True

    def ready(self) -> tuple[bool, str]:
        return True, ""

    def is_coordinator(self) -> bool:
        return True

    def on_fenced(self, zone: str, token: FenceToken | None) -> None:
        return None  # unfenced: its writes carry no token to be refused

    async def snapshot(self, host: Host) -> dict[str, Any]:
        me = self.identity
        owned = len(host.worker.owned())
        member = shards_view.member_row(me, MemberState.READY, self.weight, owned, 0, None)
        rows = []
        for zone in sorted(host.zones):
            status = host.worker.status(zone)
            if status is None:
                rows.append(shards_view.zone_row(zone, None, ZoneState.ORPHANED, None))
            else:
                rows.append(shards_view.zone_row(zone, me, ZoneState.ACTIVE, status))
        return shards_view.snapshot(0, me, me, [member], rows)

    async def stop(self, host: Host) -> None:
        for zone in host.worker.owned():
            await host.worker.release(zone)
