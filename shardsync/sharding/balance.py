"""The coordinator's balancer: the slot table, plus a bounded set of per-zone overrides where slots are too
coarse, rebalanced with the least movement when members or zones change.

Owners. A zone's owner is its pin (operator's, when its member is present), else its override (the
coordinator's, when its member is present), else its slot's member (sharding/slots.py). Every replica reads
all three from the assignment, so every replica computes the same owner, also for a zone it has never seen
(no override names it: it follows its slot).

Targets. Each member's quota is its whole share of the zones the coordinator knows: the floor of its
weighted share, plus one for the members already holding the most over their share until the quotas add up
to the zones (so the odd zones stay where they are). Its band is [lo, hi]: hi = max(quota, floor(1.05 x
share)), lo = min(quota, ceil(0.95 x share)). Within the band max/mean is at most 1.05, or the integer
optimum ceil(mean)/mean where 1.05 cannot be reached (10.1 zones a member: 11 is the best anyone can do).

Two candidates, the first that qualifies wins:
1. *exact*: every member ends at its quota (equal weights: max - min <= 1 zone). Whole slots move while
   they fit, single zones (overrides) for the rest. After a membership change it may only move zones of
   members gone and to members new; it is refused when it needs moves between members that stayed (the
   previous generation was not exact), growing the overrides by more than one per member (at least 16),
   or more than `budget` bytes of overrides in all.
2. *banded*: slots move from members gone (to the members with the most room) and to members new (from the
   most loaded, down to their band's floor), then single zones only where a member is still outside its
   band. At a thousand zones a member a slot holds about 15 zones, well inside a band of +-50, so this
   needs no override at all; exactness there costs about one override per member and event, and at
   10,000 zones a member (10 members, 1M zones) tens of thousands: the band is worth more than the bytes.
Both move nothing between members that stayed unless a member is left outside its band (weights changed,
or zones appeared unevenly: `even`).

Size. The overrides of a generation are those of the previous one still in use, plus those it adds; their
JSON stays under `budget` (128 KiB: the ConfigMap's 1 MiB holds them, the members and 65,536 slots). Slots
that hold mostly overridden zones are given to the member holding most of them, which drops those
overrides without moving a known zone (only zones the coordinator does not know follow the slot).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from shardsync.records.endpoint import normalize_name
from shardsync.sharding.slots import balance_slots, grow, slot_count_for, slot_of_name

PERCENT = 5  # the band's half-width, in percent of a member's share
OVERRIDE_BYTES = 128 * 1024  # most JSON bytes of overrides one assignment carries
# Exactness may grow the overrides by one per member per generation (at least this many); beyond, the band.
MIN_NEW_OVERRIDES = 16


@dataclass(frozen=True, slots=True)
class Balanced:
    owners: tuple[str, ...]  # per slot
    overrides: Mapping[str, str]  # zone (canonical) -> member, only where it is not the slot's member
    moved_slots: int
    exact: bool  # every member holds its quota


@dataclass(frozen=True, slots=True)
class Targets:
    quota: dict[str, int]
    lo: dict[str, int]
    hi: dict[str, int]


def targets(load: Mapping[str, int], members: Mapping[str, int], total: int | None = None) -> Targets:
    """Quotas and bands for `members` (identity -> weight) over `total` zones (default: those in `load`,
    what each member holds now)."""
    if total is None:
        total = sum(load.values())
    weights = sum(members.values())
    quota = {m: total * w // weights for m, w in members.items()}
    extra = total - sum(quota.values())
    # The odd zones go to the members holding most over their share: they keep them, nothing moves.
    for m in sorted(members, key=lambda m: (-(load.get(m, 0) * weights - total * members[m]), m))[:extra]:
        quota[m] += 1
    hi = {m: max(quota[m], total * w * (100 + PERCENT) // (100 * weights)) for m, w in members.items()}
    lo = {m: min(quota[m], -(-total * w * (100 - PERCENT) // (100 * weights))) for m, w in members.items()}
    return Targets(quota, lo, hi)


def override_bytes(overrides: Mapping[str, str], members: int) -> int:
    """The JSON size of `overrides` as the assignment writes them ("zone":index,)."""
    digits = len(str(max(members - 1, 0)))
    return sum(len(zone.encode()) + 4 + digits for zone in overrides)


def over_band(
    owner_of: Callable[[str], str | None], members: Mapping[str, int], zones: Iterable[str]
) -> bool:
    """Whether some member holds more zones (owners by `owner_of`) than its band's top: the guarantee
    (max/mean) is broken. A member under its band's floor alone breaks nothing; zones that appear later
    fill it, and evening it would move zones for no gain at the top."""
    load = dict.fromkeys(members, 0)
    for zone in {normalize_name(z) for z in zones}:
        owner = owner_of(zone)
        if owner in load:
            load[owner] += 1
    t = targets(load, members)
    return any(load[m] > t.hi[m] for m in members)


class _TooManyOverrides(Exception):
    """The exact candidate would need more overrides than it may add."""


@dataclass(slots=True)
class _Table:
    """The working state of one candidate: slot owners, overrides, and the loads they make."""

    members: Mapping[str, int]
    by_slot: dict[int, list[str]]  # known, unpinned zones per slot (sorted)
    owners: list[str | None]
    overrides: dict[str, str]
    cost: dict[int, int]  # zones of the slot that follow it (not overridden)
    load: dict[str, int]
    held: dict[str, set[int]] = field(default_factory=dict)  # slots with a positive cost, per member
    by_member: dict[str, dict[str, int]] = field(default_factory=dict)  # overridden zone -> its slot
    limit: int | None = None  # most overrides in all (the exact candidate gives up beyond)

    @classmethod
    def build(
        cls,
        owners: list[str | None],
        members: Mapping[str, int],
        by_slot: dict[int, list[str]],
        overrides: Mapping[str, str],
        pinned: Mapping[str, int],
    ) -> _Table:
        t = cls(members, by_slot, list(owners), {}, {}, {m: pinned.get(m, 0) for m in members})
        t.held = {m: set() for m in members}
        t.by_member = {m: {} for m in members}
        for slot, zones in by_slot.items():
            follow = 0
            for zone in zones:
                to = overrides.get(zone)
                if to is not None and to in members and to != owners[slot]:
                    t.overrides[zone] = to
                    t.by_member[to][zone] = slot
                    t.load[to] += 1
                else:
                    follow += 1
            t.cost[slot] = follow
            owner = owners[slot]
            if follow and owner is not None and owner in members:
                t.load[owner] += follow
                t.held[owner].add(slot)
        return t

    def copy(self) -> _Table:
        return _Table(
            self.members,
            self.by_slot,
            list(self.owners),
            dict(self.overrides),
            dict(self.cost),
            dict(self.load),
            {m: set(s) for m, s in self.held.items()},
            {m: dict(z) for m, z in self.by_member.items()},
        )

    def check_limit(self) -> None:
        if self.limit is not None and len(self.overrides) > self.limit:
            raise _TooManyOverrides

    def give_slot(self, slot: int, to: str) -> None:
        was, c = self.owners[slot], self.cost[slot]
        if was is not None and was in self.held:
            self.held[was].discard(slot)
            self.load[was] -= c
        self.owners[slot] = to
        self.held[to].add(slot)
        self.load[to] += c

    def override(self, zone: str, slot: int, to: str) -> None:
        """`zone` (following its slot, or overridden) goes to `to`."""
        was = self.overrides.pop(zone, None)
        owner = self.owners[slot]
        if was is not None:
            del self.by_member[was][zone]
            self.load[was] -= 1
        else:
            self.cost[slot] -= 1
            if owner is not None and owner in self.load:
                self.load[owner] -= 1
                if not self.cost[slot]:
                    self.held[owner].discard(slot)
        if to == owner:
            self.cost[slot] += 1
            self.held[to].add(slot)
        else:
            self.overrides[zone] = to
            self.check_limit()
            self.by_member[to][zone] = slot
        self.load[to] += 1

    def move_one(self, donor: str, to: str) -> str | None:
        """Move one zone from `donor` to `to`, preferring one whose override that removes, then one already
        overridden, then one of the donor's biggest slot (its other zones stay: the slot stays the
        donor's). The zone moved; None when the donor has nothing movable (only pinned zones)."""
        overridden = self.by_member[donor]
        if overridden:
            home = [z for z, slot in overridden.items() if self.owners[slot] == to]
            zone = min(home) if home else min(overridden)
            self.override(zone, overridden[zone], to)
            return zone
        if not self.held[donor]:
            return None
        slot = max(self.held[donor], key=lambda s: (self.cost[s], -s))
        zone = next(z for z in self.by_slot[slot] if z not in self.overrides)
        self.override(zone, slot, to)
        return zone


def rebalance(
    previous: Sequence[str | None],
    members: Mapping[str, int],
    zones: Iterable[str] = (),
    *,
    overrides: Mapping[str, str] | None = None,
    pins: Mapping[str, str] | None = None,
    count: int | None = None,
    even: bool = False,
    budget: int = OVERRIDE_BYTES,
) -> Balanced:
    """The new slot table and overrides for `members` (identity -> weight) from `previous` (per slot, None:
    nobody) and its `overrides`, balanced on `zones` (those the coordinator knows; `pins` zone -> member
    count for their member and are left alone). `even`: no member changed, zones did: members outside their
    band are evened with whoever has room."""
    if not members:
        raise ValueError("a slot table needs at least one member")
    count = count or slot_count_for(len(members), len(previous))
    owners = grow(previous, count)
    pinned: dict[str, int] = {}
    by_slot: dict[int, list[str]] = {}
    pin_of = {normalize_name(z): m for z, m in (pins or {}).items() if m in members}
    for zone in {normalize_name(z) for z in zones}:
        member = pin_of.get(zone)
        if member is not None:
            pinned[member] = pinned.get(member, 0) + 1
        else:
            by_slot.setdefault(slot_of_name(zone, count), []).append(zone)
    for listed in by_slot.values():
        listed.sort()
    base = _Table.build(
        owners, members, by_slot, {normalize_name(z): m for z, m in (overrides or {}).items()}, pinned
    )
    present = set(owners)
    new = {m for m in members if m not in present}

    exact = base.copy()
    exact.limit = len(base.overrides) + max(MIN_NEW_OVERRIDES, len(members))
    try:
        _place(exact, new, even, tight=True, budget=None)
        t = targets(exact.load, members)
        is_exact = all(exact.load[m] == t.quota[m] for m in members)
    except _TooManyOverrides:
        is_exact = False
    chosen = exact
    if not is_exact or override_bytes(exact.overrides, len(members)) > budget:
        chosen = base
        _place(chosen, new, even, tight=False, budget=budget)
        t = targets(chosen.load, members)
        is_exact = all(chosen.load[m] == t.quota[m] for m in members)
    _reencode(chosen)
    # Slots no known zone hashes to, for the zones that appear later: shared as the members' weights.
    if not even:
        empty = [0 if slot in by_slot else 1 for slot in range(count)]
        balance_slots(chosen.owners, members, empty, new)
    final = tuple(o for o in chosen.owners if o is not None)
    moved = sum(1 for a, b in zip(owners, chosen.owners, strict=True) if a != b)
    return Balanced(final, dict(sorted(chosen.overrides.items())), moved, is_exact)


def _place(t: _Table, new: set[str], even: bool, tight: bool, budget: int | None) -> None:
    """Move slots, then single zones, towards the targets: `tight`, every member to its quota, with moves
    only from members gone and to members new (unless `even`); else into the bands."""
    members = t.members
    orphans = sorted(
        (s for s, c in t.cost.items() if c and t.owners[s] not in members), key=lambda s: (-t.cost[s], s)
    )
    goal = targets(t.load, members, sum(t.load.values()) + sum(t.cost[s] for s in orphans))
    quota = goal.quota
    lo, hi = (quota, quota) if tight else (goal.lo, goal.hi)
    _place_orphans(t, orphans, quota, hi, budget)
    if even:
        receivers = [m for m in members if t.load[m] < lo[m]]
    elif tight:
        receivers = [m for m in new if t.load[m] < quota[m]]
    else:
        receivers = [m for m in members if (m in new and t.load[m] < quota[m]) or t.load[m] < lo[m]]
    for r in sorted(receivers, key=lambda m: (t.load[m] - quota[m], m)):
        _fill_with_slots(t, r, quota, lo)
    # Single zones: to every quota (tight), or only out of the band (banded); within the budget.
    if tight and not even:
        giving: set[str] = set()
        wanting = {m for m in new if t.load[m] < quota[m]}
    else:
        giving = {m for m in members if t.load[m] > hi[m]}
        wanting = {m for m in members if t.load[m] < lo[m]}
    _fill_with_zones(t, wanting, giving, quota, budget)


def _place_orphans(
    t: _Table, orphans: list[int], quota: dict[str, int], hi: dict[str, int], budget: int | None
) -> None:
    """Largest first, each whole slot to the member with the most room under its quota, if it fits there
    (within its quota, or its band's top); the slots that fit nowhere whole are split zone by zone among
    the members with the most room while the overrides stay within `budget`, else placed whole."""
    heap = [(t.load[m] - quota[m], m) for m in sorted(t.members)]
    heapq.heapify(heap)
    split = []
    spent = override_bytes(t.overrides, len(t.members))
    for slot in orphans:
        c = t.cost[slot]
        _, m = heapq.heappop(heap)
        cost = sum(len(z) + 8 for z in t.by_slot[slot] if z not in t.overrides)
        if t.load[m] + c <= max(quota[m], hi[m]) or (budget is not None and spent + cost > budget):
            t.give_slot(slot, m)
        else:
            split.append(slot)
            spent += cost
        heapq.heappush(heap, (t.load[m] - quota[m], m))
    for slot in split:
        t.owners[slot] = None
        t.cost[slot] = 0
        for zone in t.by_slot[slot]:
            if zone not in t.overrides:
                _, m = heapq.heappop(heap)
                t.overrides[zone] = m
                t.check_limit()
                t.by_member[m][zone] = slot
                t.load[m] += 1
                heapq.heappush(heap, (t.load[m] - quota[m], m))


def _fill_with_slots(t: _Table, receiver: str, quota: dict[str, int], lo: dict[str, int]) -> None:
    """Whole slots to `receiver` up to its quota, from the members furthest above theirs, each keeping at
    least its band's floor."""
    donors = [(quota[m] - t.load[m], m) for m in sorted(t.members) if m != receiver and t.load[m] > lo[m]]
    heapq.heapify(donors)
    while donors and t.load[receiver] < quota[receiver]:
        _, donor = heapq.heappop(donors)
        room = quota[receiver] - t.load[receiver]
        spare = t.load[donor] - lo[donor]
        best, best_cost = -1, 0
        for slot in t.held[donor]:
            c = t.cost[slot]
            if best_cost < c <= min(room, spare) or (c == best_cost and c and slot < best):
                best, best_cost = slot, c
        if best < 0:
            continue  # nothing of this donor fits: try the next one
        t.give_slot(best, receiver)
        if t.load[donor] > lo[donor]:
            heapq.heappush(donors, (quota[donor] - t.load[donor], donor))


def _fill_with_zones(
    t: _Table, wanting: set[str], giving: set[str], quota: dict[str, int], budget: int | None
) -> None:
    """Single zones (overrides): each member of `giving` down to its quota, to the members with the most
    room; each of `wanting` up to its quota, from the members furthest above theirs; while the overrides
    stay within `budget` bytes."""
    members = t.members
    digits = len(str(len(members)))
    spent = override_bytes(t.overrides, len(members))

    def move(donor: str, to: str) -> bool:
        nonlocal spent
        zone = t.move_one(donor, to)
        if zone is not None and zone in t.overrides:
            spent += len(zone.encode()) + 4 + digits
        return zone is not None

    def affordable() -> bool:
        return budget is None or spent < budget

    for donor in sorted(giving, key=lambda m: (quota[m] - t.load[m], m)):
        while t.load[donor] > quota[donor] and affordable():
            to = min(members, key=lambda m: (t.load[m] - quota[m], m))
            if t.load[to] >= quota[to] or not move(donor, to):
                break
    for receiver in sorted(wanting, key=lambda m: (t.load[m] - quota[m], m)):
        exhausted: set[str] = set()
        while t.load[receiver] < quota[receiver] and affordable():
            giver = max(
                (m for m in members if m not in exhausted),
                key=lambda m: (t.load[m] - quota[m], m),
                default=None,
            )
            if giver is None or t.load[giver] <= quota[giver]:
                break
            if not move(giver, receiver):
                exhausted.add(giver)


def _reencode(t: _Table) -> None:
    """Give each slot with overridden zones to the member holding most of its known zones (the slot's
    member on a tie): overrides go, no known zone changes owner."""
    touched = {slot for zones in t.by_member.values() for slot in zones.values()}
    for slot in sorted(touched):
        zones = t.by_slot[slot]
        current = t.owners[slot]
        holders: dict[str, int] = {}
        for zone in zones:
            owner = t.overrides.get(zone, current)
            if owner is not None:
                holders[owner] = holders.get(owner, 0) + 1
        best = max(sorted(holders), key=lambda m: holders[m])
        if current is not None and holders.get(current, 0) >= holders[best]:
            continue
        for zone in zones:
            if t.overrides.get(zone) == best:
                del t.overrides[zone]
            elif zone not in t.overrides and current is not None:
                t.overrides[zone] = current
        t.owners[slot] = best
