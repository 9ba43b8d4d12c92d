"""The state names /shards shows, one home each (as kubernetes-controller-sharding's leases/state.go): a
member's state as its peers judge it from its Lease, and a zone's state. Every producer (the ownership
modes, the cluster reader) and every reader (`shardsync shards`, the local launcher) uses these enums; the
text is the contract. `parse` reads a name back (None for one this version does not know, so a newer
replica's answer still reads).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self


class _Named(StrEnum):
    @classmethod
    def parse(cls, text: str) -> Self | None:
        """The state named `text` (case and surrounding blanks ignored), or None when there is none."""
        try:
            return cls(text.strip().lower())
        except ValueError:
            return None


class MemberState(_Named):
    """A member as an observer judges it from its Lease (design §2 rule 1)."""

    READY = "ready"
    RESTARTING = "restarting"
    DRAINING = "draining"
    EXPIRED = "expired"


class ZoneState(_Named):
    """A zone on /shards; the order is the order summaries list them in."""

    ACTIVE = "active"  # its owner runs it
    PENDING = "pending"  # its owner waits for the previous owner to release it (or has not acknowledged)
    PARKED = "parked"  # its owner is restarting; the zone waits for it
    ORPHANED = "orphaned"  # no live owner: no members, or the owner's lease lapsed
