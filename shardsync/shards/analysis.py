"""Questions about an assignment, answered without touching anything: why a zone sits where it sits
(`explain_zone`), and how many zones would move if the StatefulSet were scaled (`what_if_replicas`).

Pure: both take an `Assignment` and zone names. A what-if keeps the current members' weights and pins and
gives new members weight 1, as a freshly started replica has. With no zone list the moved fraction is
estimated on `SAMPLE_SIZE` synthetic zone names (the ring does not care where names come from), and says so.

The ideal to compare with is what a perfect balancer would have to move: the total-variation distance
between the members' weight shares before and after (for equal weights, |N - M| / max(N, M)). Consistent
hashing moves about that many; the rest of the difference is the ring's unevenness.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shardsync.sharding.assignment import Assignment, Member

SAMPLE_SIZE = 10_000
_ORDINAL = re.compile(r"^(?P<set>.+)-(?P<ordinal>0|[1-9][0-9]*)$")


class WhatIfError(ValueError):
    """A what-if question that cannot be answered as asked; the message says why."""


def explain_zone(assignment: Assignment, zone: str) -> dict[str, Any]:
    """Why `zone` has its owner in `assignment`: its slot and the slot's member, the coordinator's
    override if it has one (a version-1 ring: ring point, weight, share of the ring), and its pin."""
    e = assignment.explain(zone)
    p = e.placement
    slots = len(assignment.slots)
    return {
        "slot": e.slot,
        "slots": slots or None,
        "slotsOfOwner": sum(1 for o in assignment.slots if o == e.slot_owner) if slots else None,
        "slotOwner": e.slot_owner,
        "overriddenTo": e.overridden_to,
        "overrides": len(assignment.overrides),
        "zone": e.zone,
        "generation": assignment.generation,
        "owner": e.owner,
        "pinnedTo": e.pinned_to,
        "pinEffective": e.pin_effective,
        "zonePoint": f"{p.zone_point:x}" if p else None,
        "ringPoint": f"{p.ring_point:x}" if p else None,
        "ringOwner": p.owner if p else None,
        "weight": p.weight if p else None,
        "points": p.points if p else None,
        "share": round(p.share, 6) if p else None,
        "members": len(assignment.members),
        "ring": {"hash": assignment.ring.hash, "vnodes": assignment.ring.vnodes},
        "reason": e.reason,
    }


def statefulset_of(identities: Iterable[str]) -> str:
    """The StatefulSet name shared by member identities `<name>-<ordinal>`; WhatIfError when they do not
    share one (then name it explicitly)."""
    names = set()
    for identity in identities:
        match = _ORDINAL.match(identity)
        if match is None:
            raise WhatIfError(f"member {identity!r} is not named <statefulset>-<ordinal>; use --statefulset")
        names.add(match["set"])
    if not names:
        raise WhatIfError("no members to derive the StatefulSet name from; use --statefulset")
    if len(names) > 1:
        raise WhatIfError(
            f"members belong to several StatefulSets ({', '.join(sorted(names))}); use --statefulset"
        )
    return names.pop()


def ideal_fraction(before: Mapping[str, int], after: Mapping[str, int]) -> float:
    """The least fraction of zones any assignment must move to go from weights `before` to `after`."""
    total_before, total_after = sum(before.values()), sum(after.values())
    if total_before == 0 or total_after == 0:
        return 0.0 if total_before == total_after else 1.0
    identities = set(before) | set(after)
    return 0.5 * sum(abs(before.get(i, 0) / total_before - after.get(i, 0) / total_after) for i in identities)


def sample_zones(count: int = SAMPLE_SIZE) -> list[str]:
    return [f"sample-{i:05d}.what-if.invalid" for i in range(count)]


@dataclass(frozen=True, slots=True)
class WhatIf:
    statefulset: str
    replicas_before: int
    replicas_after: int
    members_after: tuple[str, ...]
    zones: int
    moved: int
    fraction: float
    ideal: float
    estimated: bool  # zones were synthetic samples
    flows: tuple[tuple[str | None, str | None, int], ...]  # (from, to, zones), most first

    def between_survivors(self, survivors: Iterable[str]) -> int:
        """Zones that would move from one surviving member to another (ideally none)."""
        keep = set(survivors)
        return sum(n for src, dst, n in self.flows if src in keep and dst in keep)

    def to_json(self) -> dict[str, Any]:
        return {
            "statefulset": self.statefulset,
            "replicasBefore": self.replicas_before,
            "replicasAfter": self.replicas_after,
            "membersAfter": list(self.members_after),
            "zones": self.zones,
            "estimated": self.estimated,
            "moved": self.moved,
            "fraction": round(self.fraction, 6),
            "idealFraction": round(self.ideal, 6),
            "moves": [{"from": src, "to": dst, "zones": n} for src, dst, n in self.flows],
        }


def what_if_replicas(
    assignment: Assignment, replicas: int, zones: Sequence[str] | None = None, statefulset: str | None = None
) -> WhatIf:
    """How many zones would change owner if the StatefulSet ran `replicas` pods `<set>-0 .. <set>-(N-1)`.

    Members of the current assignment that are not in the StatefulSet's range are left out, as a scale
    would end them too; `zones` None → estimated on samples."""
    if replicas < 0:
        raise WhatIfError(f"replicas must not be negative, got {replicas}")
    current = {m.identity: m.weight for m in assignment.members}
    name = statefulset or statefulset_of(current)
    after_ids = [f"{name}-{i}" for i in range(replicas)]
    after = {identity: current.get(identity, 1) for identity in after_ids}
    names = list(zones) if zones is not None else sample_zones()
    # The coordinator balances the slot table on the zones it lists: the same zones here.
    proposed = assignment.with_members((Member(i, w) for i, w in after.items()), names)
    moves = assignment.moved(proposed, names)
    flows = Counter((m.before, m.after) for m in moves)
    return WhatIf(
        statefulset=name,
        replicas_before=len(current),
        replicas_after=replicas,
        members_after=tuple(after_ids),
        zones=len(names),
        moved=len(moves),
        fraction=len(moves) / len(names) if names else 0.0,
        ideal=ideal_fraction(current, after),
        estimated=zones is None,
        flows=tuple(
            (src, dst, n) for (src, dst), n in sorted(flows.items(), key=lambda kv: (-kv[1], str(kv[0])))
        ),
    )
