"""Zone names, and every zone's owner under a published assignment, computed once per assignment.

Every replica computes `owner_of(zone)` from the same slot table of the same assignment, so they all get the
same answer; computing it for 1M zones once per generation instead of once per replica is the honest
shortcut that makes 1,000 replicas x 1M zones fit in minutes. The simulated replicas share the parsed
`Assignment` and look their own zones up in `Parsed.by_owner`; the protocol functions (`handoff`,
`may_acquire`) are still called with real zone names and that Assignment.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from shardsync.sharding.assignment import CONFIGMAP_KEY, Assignment


def zone_name(index: int) -> str:
    return f"zone-{index:06d}.example"


@dataclass(frozen=True, slots=True)
class Parsed:
    """A published assignment as the replicas read it back from the ConfigMap, with its owner index."""

    assignment: Assignment
    by_owner: dict[str, list[str]]  # every member, with the zones it owns (possibly none)
    bytes: int  # the ConfigMap data as written (`to_configmap_data()`), UTF-8

    def zones_of(self, identity: str) -> list[str]:
        return self.by_owner.get(identity, [])

    def load(self) -> dict[str, int]:
        return {identity: len(zones) for identity, zones in self.by_owner.items()}

    def max_over_mean(self) -> float | None:
        load = self.load()
        if not load:
            return None
        mean = sum(load.values()) / len(load)
        return max(load.values()) / mean if mean else None


class ZoneBook:
    """Zone names (shared by every run) and a small cache of parsed assignments keyed by their bytes: the
    warm-up of one size is the same for every event (same seed), so its generation is parsed and indexed
    once, not once per event."""

    def __init__(self, keep: int = 3) -> None:
        self.keep = keep
        self._names: list[str] = []
        self._parsed: OrderedDict[tuple[str, int], Parsed] = OrderedDict()

    def names(self, count: int) -> list[str]:
        if len(self._names) < count:
            self._names.extend(zone_name(i) for i in range(len(self._names), count))
        return self._names if len(self._names) == count else self._names[:count]

    def parse(self, data: dict[str, str], zones: list[str]) -> Parsed:
        """What a replica reads from the ConfigMap `data` (`Assignment.from_configmap_data`), indexed."""
        key = (data[CONFIGMAP_KEY], len(zones))
        hit = self._parsed.get(key)
        if hit is not None:
            self._parsed.move_to_end(key)
            return hit
        assignment = Assignment.from_configmap_data(data)
        by_owner: dict[str, list[str]] = {member.identity: [] for member in assignment.members}
        owner_of = assignment.owner_of
        for zone in zones:
            owner = owner_of(zone)
            if owner is not None:
                by_owner[owner].append(zone)
        parsed = Parsed(assignment, by_owner, len(data[CONFIGMAP_KEY].encode()))
        self._parsed[key] = parsed
        while len(self._parsed) > self.keep:
            self._parsed.popitem(last=False)
        return parsed
