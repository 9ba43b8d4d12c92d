"""A plan's changes as Cloud DNS changes (`changes.create` bodies): the split within the limits and the
fence compare-and-swap at the head of each.

Pure. `items_of(changes, deletion_of)` turns a plan into additions and deletions as external-dns's
ApplyChanges does: creates and updates' new sides are additions, deletes and updates' old sides are
deletions (`deletion_of` gives the record set a deletion names: as listed when the provider kept it).
`split(items, limits, reserved)` packs them into changes of at most `--google-batch-change-size`
additions plus deletions and Cloud DNS's 100,000 bytes of record data, keeping a record and its TXT
ownership record (and an update's two sides) in one change.

The fence (design §2 rule 8) is the TXT record set `_shardsync-fence.<zone>.` holding one `FenceToken`,
and every change carries `deletions: [fence "<token>"]` and `additions: [fence "<token>"]`: Cloud DNS
applies a change whole or not at all, deletions first, and a deletion must match the current set exactly
(else 412 conditionNotMet, or 404 when the set is gone), so a change written under a stale token fails
whole. Room for those two is kept in every change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from shardsync.providers.base import FenceToken, fence_record_name
from shardsync.providers.fence_record import FENCE_TTL, fence_value, token_in
from shardsync.providers.google.records import RRset, absolute, rrdata_size, rrset_of
from shardsync.providers.packing import by_group, pack
from shardsync.records.endpoint import OWNED_RECORD_LABEL, Changes, Endpoint

MAX_RRDATA_BYTES = 100_000  # Cloud DNS: "resource record data size per change"


@dataclass(frozen=True, slots=True)
class Limits:
    """`--google-batch-change-size` (additions plus deletions, external-dns's count) and the data limit."""

    changes: int = 1000
    rrdata_bytes: int = MAX_RRDATA_BYTES


@dataclass(frozen=True, slots=True)
class Item:
    """One addition or deletion, with what the batching needs to know about it."""

    deletion: bool
    rrset: RRset
    endpoint: Endpoint
    group: str  # the record a TXT ownership record belongs to, else its own name: kept in one change


@dataclass(slots=True)
class Change:
    """One `changes.create` body: its deletions are applied first, then its additions."""

    additions: list[RRset] = field(default_factory=list)
    deletions: list[RRset] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)  # the plan's part of it (the fence is not an item)


def items_of(changes: Changes, deletion_of: Callable[[Endpoint], RRset]) -> list[Item]:
    """The plan as additions and deletions (module docstring)."""

    def make(deletion: bool, eps: list[Endpoint]) -> list[Item]:
        return [
            Item(
                deletion,
                deletion_of(ep) if deletion else rrset_of(ep),
                ep,
                ep.labels.get(OWNED_RECORD_LABEL) or ep.dns_name,
            )
            for ep in eps
        ]

    return [
        *make(False, changes.create),
        *make(False, changes.update_new),
        *make(True, changes.update_old),
        *make(True, changes.delete),
    ]


def split(items: list[Item], limits: Limits, reserved: tuple[int, int] = (0, 0)) -> list[list[Item]]:
    """Changes within `limits` less `reserved` (changes, bytes kept for the fence), groups whole, in the
    order of their names."""
    groups = by_group(items)
    cap = (limits.changes - reserved[0], limits.rrdata_bytes - reserved[1])
    return pack((groups[name] for name in sorted(groups)), _size, cap)


def _size(group: Sequence[Item]) -> tuple[int, ...]:
    return len(group), sum(rrdata_size(i.rrset) for i in group)


def change_of(batch: list[Item], zone: str, fence: FenceToken | None) -> Change:
    """The change a batch is sent as, headed by the fence's compare-and-swap when fenced."""
    change = Change(items=batch)
    if fence is not None:
        change.deletions.append(fence_rrset(zone, fence))
        change.additions.append(fence_rrset(zone, fence))
    for item in sorted(batch, key=lambda i: (i.rrset["name"], i.rrset["type"])):
        (change.deletions if item.deletion else change.additions).append(item.rrset)
    return change


# ---- the fence ----


def fence_rrset(zone: str, token: FenceToken) -> RRset:
    return {
        "name": absolute(fence_record_name(zone)),
        "type": "TXT",
        "ttl": FENCE_TTL,
        "rrdatas": [fence_value(token)],
    }


def fence_reserve(token: FenceToken) -> tuple[int, int]:
    """What the fence takes of a change: a deletion and an addition, and their bytes."""
    return 2, 2 * len(fence_value(token).encode())


def token_of(rrset: dict[str, Any] | None) -> FenceToken | None:
    """The token a listed fence record set holds (None when absent or unreadable)."""
    if not rrset:
        return None
    return token_in(str(v) for v in rrset.get("rrdatas") or ())
