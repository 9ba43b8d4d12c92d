"""`--registry=noop`: external-dns's noop registry (registry/noop.go). No ownership records: the zone's
records are read as they are, the changes are written as planned, and nothing is written beside them.

Its owner id is "" (external-dns's `NoopRegistry.OwnerID()`), which the planner reads as "no ownership":
every managed record in a zone this replica owns is ours to update or delete, and no create is held back
for another owner's record (shardsync.records.plan). Use it only where this deployment is the one writer of
its zones' managed record types.

Sharding is unaffected: which replica writes a zone is decided by the assignment and enforced by the zone
fence at the DNS server, not by ownership records, so a zone still has one writer at a time.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from shardsync.records.endpoint import DEFAULT_MANAGED_TYPES, Changes, Endpoint
from shardsync.records.registry import OwnershipResult, ZoneView

NO_OWNER = ""


class NoopRegistry:
    """Implements shardsync.records.registry's `Registry` without ownership records."""

    __slots__ = ("managed_types",)

    def __init__(self, managed_types: Collection[str] = DEFAULT_MANAGED_TYPES) -> None:
        self.managed_types = frozenset(t.upper() for t in managed_types)

    @property
    def owner_id(self) -> str:
        return NO_OWNER

    def read(self, records: Iterable[Endpoint]) -> ZoneView:
        """Every record as the provider listed it, TXT records included; none is an ownership record."""
        return ZoneView(
            current=list(records),
            ownership_txts={},
            foreign_rows={},
            owner_by_key={},
            upgrades=[],
            legacy_users={},
        )

    def with_ownership(self, changes: Changes, view: ZoneView | None = None) -> OwnershipResult:
        """The changes as planned: nothing added, nothing refused."""
        return OwnershipResult(changes)
