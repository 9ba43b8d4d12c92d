"""The desired state: every source object's endpoints, indexed by the zone they fall in.

Sources call `set_object(key, endpoints)` whenever an object's endpoints may have changed; the index
answers which zones that touched (so only those are marked dirty) and `desired(zone)` returns the zone's
endpoints in one dict walk. A replica with 100,000 zones never relists every zone per event.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from shardsync.endpoint import Endpoint, ZoneIndex


class DesiredIndex:
    """Endpoints by source object and by zone. Endpoints outside every known zone are kept aside."""

    def __init__(self, zones: Iterable[str] = ()) -> None:
        self._zones = ZoneIndex(zones)
        self._by_object: dict[str, tuple[Endpoint, ...]] = {}
        self._by_zone: defaultdict[str, dict[str, tuple[Endpoint, ...]]] = defaultdict(dict)
        self._unplaced: dict[str, tuple[Endpoint, ...]] = {}

    def set_zones(self, zones: Iterable[str]) -> set[str]:
        """Change the known zones; returns the zones whose desired endpoints changed by it."""
        self._zones = ZoneIndex(zones)
        objects = dict(self._by_object)
        before = {zone: dict(objs) for zone, objs in self._by_zone.items()}
        self._by_object.clear()
        self._by_zone.clear()
        self._unplaced.clear()
        for key, endpoints in objects.items():
            self.set_object(key, endpoints)
        after = self._by_zone
        return {z for z in set(before) | set(after) if before.get(z) != after.get(z)}

    def set_object(self, key: str, endpoints: Sequence[Endpoint]) -> set[str]:
        """Record `key`'s endpoints (empty: the object is gone); returns the zones this changed."""
        old = self._slices(self._by_object.pop(key, ()))
        new_endpoints = tuple(endpoints)
        new = self._slices(new_endpoints)
        for zone in old:
            if zone is not None:
                self._by_zone[zone].pop(key, None)
        self._unplaced.pop(key, None)
        if new_endpoints:
            self._by_object[key] = new_endpoints
        for zone, eps in new.items():
            if zone is None:
                self._unplaced[key] = eps
            else:
                self._by_zone[zone][key] = eps
        return {z for z in old.keys() | new.keys() if z is not None and old.get(z) != new.get(z)}

    def _slices(self, endpoints: Iterable[Endpoint]) -> dict[str | None, tuple[Endpoint, ...]]:
        """The endpoints grouped by zone (None: in no known zone)."""
        out: defaultdict[str | None, list[Endpoint]] = defaultdict(list)
        for ep in endpoints:
            out[self._zones.zone_of(ep.dns_name)].append(ep)
        return {zone: tuple(eps) for zone, eps in out.items()}

    def desired(self, zone: str) -> list[Endpoint]:
        return [ep for eps in self._by_zone.get(zone, {}).values() for ep in eps]

    def unplaced(self) -> dict[str, tuple[Endpoint, ...]]:
        """Endpoints whose name is in no known zone, by object (reported, never written)."""
        return dict(self._unplaced)

    def zones_with_endpoints(self) -> list[str]:
        return [z for z, objs in self._by_zone.items() if objs]

    def __len__(self) -> int:
        return sum(len(eps) for eps in self._by_object.values())
