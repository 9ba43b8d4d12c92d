"""The slot table: which member owns a zone, balanced by the coordinator, computed alike by every replica.

A zone hashes (md5 of its canonical name) into one of `count` slots, a power of two; the assignment maps
every slot to a member. Every replica computes `owner_of(zone)` from the table (and the few per-zone
overrides of sharding/balance.py), also for a zone it has never seen, and the table is O(slots) whatever
the number of zones (no zone is listed): at 1,000 members and 1M zones it is 65,536 slots, a few hundred
KiB of JSON. The slot count grows with the members (64 per member, at least 1,024) so one slot stays a
small part of a member's share; growing doubles it, splitting each slot in two halves that keep its owner,
so growth moves nothing.

This module holds the table itself (hashing, growth, the encoding) and `balance_slots`, which shares out
slots on a per-slot cost (the coordinator uses it for the slots no known zone hashes to, so zones that
appear later land in proportion to the weights). Balancing on the zones, with minimal movement, is
sharding/balance.py's.

Why not the consistent-hash ring (the first design, sharding/ring.py, still read from version-1
documents): with tens of zones per member its arcs are uneven (max/mean 1.2 at 40 zones per member) and
nothing can fix that without listing zones in the assignment.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
from collections.abc import Iterable, Mapping, Sequence

from shardsync.records.endpoint import normalize_name

MIN_SLOTS = 1024
SLOTS_PER_MEMBER = 64
MAX_SLOTS = 1 << 20


def slot_count_for(members: int, current: int = 0) -> int:
    """The slot count for `members` members: at least `current` (never shrinks), a power of two."""
    wanted = max(MIN_SLOTS, SLOTS_PER_MEMBER * members, current)
    count = 1
    while count < wanted:
        count *= 2
    return min(count, MAX_SLOTS)


def is_valid_count(count: object) -> bool:
    return (
        isinstance(count, int)
        and not isinstance(count, bool)
        and 1 <= count <= MAX_SLOTS
        and count & (count - 1) == 0
    )


def slot_of(zone: str, count: int) -> int:
    """The slot of `zone` among `count` slots (a power of two): the low bits of md5(canonical name), so a
    zone's slot among 2n slots is its slot among n, or that plus n."""
    return slot_of_name(normalize_name(zone), count)


def slot_of_name(name: str, count: int) -> int:
    """`slot_of` for a name already in canonical form (`normalize_name`)."""
    return _digest(name) & (count - 1)


@functools.lru_cache(maxsize=1 << 16)
def _digest(name: str) -> int:
    # Every shard pass asks the owner of every zone the replica lists (Assignment.zones_of): an md5 each
    # time was a tenth of a replica's CPU while it synced 2,000 zones. Bounded: past 65,536 zones the
    # least recently asked are hashed again.
    return int.from_bytes(hashlib.md5(name.encode(), usedforsecurity=False).digest()[-8:], "big")


def slot_counts(zones: Iterable[str], count: int) -> list[int]:
    """How many of `zones` fall into each slot."""
    counts = [0] * count
    for zone in {normalize_name(z) for z in zones}:
        counts[slot_of(zone, count)] += 1
    return counts


def grow(owners: Sequence[str | None], count: int) -> list[str | None]:
    """The table over `count` slots (a multiple of the current count): each slot's halves keep its owner."""
    if not owners:
        return [None] * count
    return [owners[i % len(owners)] for i in range(count)]


def balance_slots(
    owners: list[str | None], members: Mapping[str, int], cost: list[int], new: set[str]
) -> None:
    """One pass over the slots with a positive `cost`: orphans to the least loaded, then fill the new
    members from the most loaded. Greedy, exact for unit costs, within one slot's cost otherwise."""
    total_weight = sum(members.values())
    total = sum(cost)
    target = {m: total * w / total_weight for m, w in members.items()}
    load = dict.fromkeys(members, 0)
    held: dict[str, set[int]] = {m: set() for m in members}
    orphans = []
    for slot, owner in enumerate(owners):
        if not cost[slot]:
            continue
        if owner is not None and owner in load:
            load[owner] += cost[slot]
            held[owner].add(slot)
        else:
            orphans.append(slot)
    if not total:
        return
    # Orphans, largest first, each to the member furthest below its share.
    ratio = [(load[m] / target[m], m) for m in sorted(members)]
    heapq.heapify(ratio)
    for slot in sorted(orphans, key=lambda s: (-cost[s], s)):
        _, to = heapq.heappop(ratio)
        owners[slot] = to
        load[to] += cost[slot]
        held[to].add(slot)
        heapq.heappush(ratio, (load[to] / target[to], to))
    # New members, each filled from the member furthest above its share (a max-heap of surplus, lazily
    # refreshed: an entry whose surplus changed is pushed again with its current value).
    receivers = sorted(new, key=lambda m: (load[m] - target[m], m))
    surplus = [(target[m] - load[m], m) for m in sorted(members) if m not in new and load[m] > target[m]]
    heapq.heapify(surplus)
    for receiver in receivers:
        skipped: list[tuple[float, str]] = []
        while surplus:
            negative, donor = heapq.heappop(surplus)
            if -negative != load[donor] - target[donor]:
                if load[donor] > target[donor]:
                    heapq.heappush(surplus, (target[donor] - load[donor], donor))
                continue
            slot = _fitting(held[donor], cost, target[receiver] - load[receiver], load[donor] - target[donor])
            if slot < 0:
                skipped.append((negative, donor))
                if target[receiver] - load[receiver] < 1:
                    break
                continue
            held[donor].discard(slot)
            load[donor] -= cost[slot]
            owners[slot] = receiver
            held[receiver].add(slot)
            load[receiver] += cost[slot]
            if load[donor] > target[donor]:
                heapq.heappush(surplus, (target[donor] - load[donor], donor))
        for entry in skipped:
            heapq.heappush(surplus, entry)


def _fitting(slots: set[int], cost: list[int], deficit: float, surplus: float) -> int:
    """The donor's slot whose move brings receiver and donor closest to their targets (the largest cost
    not above both gaps, or a smaller overshoot than the gap it closes); -1 when no move helps."""
    best, best_cost = -1, 0
    for slot in slots:
        c = cost[slot]
        if c <= min(deficit, surplus) and c > best_cost:
            best, best_cost = slot, c
    if best >= 0:
        return best
    # Every slot overshoots: move the smallest if that still narrows the receiver's gap by more than it
    # opens the donor's (cost < deficit + surplus keeps the sum of squared gaps falling: it terminates).
    smallest = min(slots, key=lambda s: (cost[s], s), default=-1)
    if smallest >= 0 and cost[smallest] < deficit and cost[smallest] < deficit + surplus - cost[smallest]:
        return smallest
    return -1


def encode(owners: Sequence[str], members: Sequence[str]) -> list[int]:
    """The table as member indexes into `members` (sorted identities): the assignment's `slots` field."""
    index = {m: i for i, m in enumerate(members)}
    return [index[o] for o in owners]


def decode(slots: object, members: Sequence[str]) -> tuple[str, ...] | str:
    """The table from the assignment's `slots` field, or why it cannot be used."""
    if not isinstance(slots, list) or not is_valid_count(len(slots)):
        return "slots must be a list whose length is a power of two"
    out = []
    for i, value in enumerate(slots):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < len(members):
            return f"slots[{i}] = {value!r} names no member"
        out.append(members[value])
    return tuple(out)
