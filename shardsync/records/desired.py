"""The desired state: every source object's endpoints, indexed by the zone they fall in.

Sources call `set_object(key, endpoints)` whenever an object's endpoints may have changed; the index
answers which zones that touched (so only those are marked dirty) and `desired(zone)` returns the zone's
endpoints in one dict walk. A replica with 100,000 zones never relists every zone per event.

Per-shard state (`restricted`, the sharded replicas): endpoints are kept only for the zones this replica
runs (`keep(zone)` / `drop(zone)`, from the worker's own / release) or is about to run (`expect(zones)`:
the zones the newest assignment gives it, so objects read before the worker gains them are translated once,
not again on gaining), plus a compact index of which zones each object touches. Endpoints in no known zone
are kept too (a zone list change may place them). An object whose endpoints fall partly outside the held
zones is "partial": only its slices in held zones are held. When a zone is held again, or the zone list
changes, the partial objects it needs are handed to `on_rebuild` (the watcher translates them again from
its caches); the zone is not `ready` until they are back, so the worker never plans it from half its
inputs. An object whose names reach no held zone may be left untranslated (`defer`), with nothing kept
of it: from then on a zone newly held (or every held zone, after a zone list change) waits for a sweep
(`on_sweep`: the watcher reads such objects back, keeping those whose names reach the zone) and for the
objects it found (`swept`). Keys for which
`pinned(key)` is true (what the watcher cannot translate again: the PTR records it
derives) are always kept whole.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

from shardsync.records.endpoint import Endpoint, ZoneIndex


def _never(key: str) -> bool:
    return False


def _ignore(keys: set[str]) -> None:
    return None


def _ignore_sweep(zones: dict[str, int]) -> None:
    return None


class DesiredIndex:
    """Endpoints by source object and by zone. Endpoints outside every known zone are kept aside."""

    def __init__(
        self, zones: Iterable[str] = (), *, restricted: bool = False, pinned: Callable[[str], bool] = _never
    ) -> None:
        self._zones = ZoneIndex(zones)
        self.restricted = restricted
        self.pinned = pinned
        self.on_rebuild: Callable[[set[str]], None] = _ignore  # partial objects to translate again
        self.on_freed: Callable[[set[str]], None] = _ignore  # objects of a dropped zone now held nowhere
        # Zones newly held that objects left untranslated (`defer`) may have records in: read them back and
        # call `swept` (the zones wait meanwhile).
        self.on_sweep: Callable[[dict[str, int]], None] = _ignore_sweep  # zone → the sweep's ticket
        # Zones the names of objects left untranslated reach (not counted down: nothing is kept per object):
        # such a zone newly held needs a sweep; a sweep's end takes it out.
        self._deferred: set[str] = set()
        self._sweep_of: dict[str, int] = {}  # zone → the ticket of the sweep it waits for
        self._tickets = 0
        self._kept: set[str] = set()  # restricted: the zones the worker runs
        self._expected: set[str] = set()  # restricted: the zones the assignment gives this replica
        self._by_object: dict[str, tuple[Endpoint, ...]] = {}  # objects held whole
        self._by_zone: defaultdict[str, dict[str, tuple[Endpoint, ...]]] = defaultdict(dict)
        self._unplaced: dict[str, tuple[Endpoint, ...]] = {}
        # object → the known zones it touches (a tuple: most objects touch one, and a 1-tuple is a fifth of
        # a frozenset's size)
        self._zones_of: dict[str, tuple[str, ...]] = {}
        self._keys_in: defaultdict[str, set[str]] = defaultdict(set)  # zone → the objects touching it
        # Rebuilding: zone → how many partial objects it waits for, object → the zones waiting for it, and
        # the objects every held zone waits for (after a zone list change).
        self._waiting: dict[str, int] = {}
        self._awaited: dict[str, set[str]] = {}
        self._everywhere: set[str] = set()
        self._versions: defaultdict[str, int] = defaultdict(int)  # zone → changes of its held endpoints
        self._epoch = 0  # changes of what is held at all (keep, drop, the zone list)

    def _holds(self, zone: str) -> bool:
        return not self.restricted or zone in self._kept or zone in self._expected

    # -- which zones are held (restricted) ----------------------------------------------------------------

    def keep(self, zone: str) -> None:
        """Hold `zone`'s endpoints from now on (restricted; else a no-op); partial objects touching it go
        to `on_rebuild` and the zone waits for them (unless it was held already, being expected)."""
        if not self.restricted or zone in self._kept:
            return
        self._epoch += 1
        held = self._holds(zone)
        self._kept.add(zone)
        if not held:
            self._hold(zone)
            self._sweep({zone})

    def drop(self, zone: str) -> None:
        """Stop holding `zone`'s endpoints (restricted; else a no-op): they are freed, unless the zone is
        still expected."""
        if not self.restricted or zone not in self._kept:
            return
        self._epoch += 1
        self._kept.discard(zone)
        if not self._holds(zone):
            self._free(zone)

    def expect(self, zones: Iterable[str]) -> None:
        """The zones this replica is about to run (restricted; else a no-op): held like the kept ones, so
        objects translated before the worker gains them need no second translation. Zones no longer
        expected and not kept are freed."""
        new = set(zones)
        if not self.restricted or new == self._expected:
            return
        self._epoch += 1
        gone, added = self._expected - new - self._kept, new - self._expected - self._kept
        self._expected = new
        for zone in gone:
            self._free(zone)
        for zone in added:
            self._hold(zone)
        self._sweep(added)

    def _hold(self, zone: str) -> None:
        rebuild: set[str] = set()
        for key in self._keys_in.get(zone, ()):
            endpoints = self._by_object.get(key)
            if endpoints is None:
                rebuild.add(key)
            else:
                eps = tuple(ep for ep in endpoints if self._zones.zone_of(ep.dns_name) == zone)
                self._by_zone[zone][key] = eps
        if rebuild:
            self._waiting[zone] = self._waiting.get(zone, 0) + len(rebuild)
            for key in rebuild:
                self._awaited.setdefault(key, set()).add(zone)
            self.on_rebuild(rebuild)

    def _sweep(self, zones: set[str]) -> None:
        """The zones just held that objects left untranslated may reach wait for a sweep."""
        zones = zones & self._deferred
        if not zones:
            return
        self._tickets += 1
        for zone in zones:
            if zone not in self._sweep_of:
                self._waiting[zone] = self._waiting.get(zone, 0) + 1
            self._sweep_of[zone] = self._tickets  # an older sweep asked for it no longer counts
        self.on_sweep(dict.fromkeys(zones, self._tickets))

    def swept(self, zones: Mapping[str, int], keys: Iterable[str]) -> None:
        """A sweep (`on_sweep`'s zones with their tickets) is over: `keys` were read back and are about
        to be translated; each zone still waiting for that sweep waits for them instead."""
        keys = set(keys)
        for zone, ticket in zones.items():
            if self._sweep_of.get(zone) != ticket:
                continue  # freed meanwhile, or a newer sweep asked for
            del self._sweep_of[zone]
            self._deferred.discard(zone)  # held: nothing reaching it is left untranslated any more
            for key in keys:
                awaited = self._awaited.setdefault(key, set())
                if zone not in awaited:
                    awaited.add(zone)
                    self._waiting[zone] += 1
            self._count_down(zone)

    def _free(self, zone: str) -> None:
        self._sweep_of.pop(zone, None)
        if self._waiting.pop(zone, None) is not None:
            for key in [k for k, zones in self._awaited.items() if zone in zones]:
                self._arrived_in(key, zone)
        self._by_zone.pop(zone, None)
        freed = set()
        for key in self._keys_in.get(zone, ()):
            if not self.pinned(key):
                self._by_object.pop(key, None)
                if self.holds_nothing_of(key):
                    freed.add(key)
        if freed:
            self.on_freed(freed)

    def holds_nothing_of(self, key: str) -> bool:
        """Restricted: `key` has endpoints, all of them in known zones not held (its object is needed only
        when one of those zones is kept)."""
        zones = self._zones_of.get(key)
        return (
            self.restricted
            # before this replica runs or expects any zone, what it will hold is not known yet
            and bool(self._kept or self._expected)
            and zones is not None
            and key not in self._unplaced
            and not self.pinned(key)
            and not any(self._holds(zone) for zone in zones)
        )

    def reached(self, names: Iterable[str]) -> set[str] | None:
        """The known zones records named at or under `names` may fall in (ZoneIndex.reach); None when one
        of the names is in no known zone."""
        zones: set[str] = set()
        for name in names:
            reach = self._zones.reach(name)
            if reach is None:
                return None
            zones.update(reach)
        return zones

    def holds_any(self, zones: Iterable[str]) -> bool:
        return any(self._holds(zone) for zone in zones)

    def defer(self, key: str, names: Iterable[str], *, unnamed: bool = False) -> bool:
        """Restricted: an object whose records can only be named at or under `names` need not be translated
        while none of the zones those fall in is held. True: leave it untranslated; nothing is kept of it
        here, and every zone held from now on waits for a sweep (`on_sweep`) that reads such objects back.
        False: translate it (a zone of it is held, a name is in no known zone, what is held is not known
        yet, or what is indexed of it has endpoints held or awaited, which only a translation replaces).
        An object indexed with endpoints in zones not held alone (translated before, then changed: a peer
        wrote its status, say) is left untranslated too, its index entry dropped: with N replicas every
        change of an object reaches all N, and N - 1 of them would translate it for nothing. An object
        without names reaches no zone: translated, unless `unnamed` (its kind's nameless objects publish
        nothing), then left out as well."""
        if not self.restricted or not (self._kept or self._expected) or self.pinned(key):
            return False
        if key in self._unplaced or key in self._awaited or key in self._everywhere:
            return False
        indexed = self._zones_of.get(key)
        if indexed is not None and self.holds_any(indexed):
            return False
        zones = self.reached(names)
        if zones is None or (not zones and not unnamed) or self.holds_any(zones):
            return False
        if indexed is not None:
            self.set_object(key, ())  # nothing is kept of it: a zone its names reach, held later, is swept
        self._deferred.update(zones)
        return True

    @property
    def epoch(self) -> int:
        """Changes whenever what is held at all may have (keep, drop, the zone list)."""
        return self._epoch

    def version(self, zone: str) -> tuple[int, int]:
        """Changes whenever `desired(zone)` may have (the worker's steady-state check)."""
        return self._epoch, self._versions[zone]

    def ready(self, zone: str) -> bool:
        """False while `zone` waits for objects to be translated again (see the module docstring)."""
        return zone not in self._waiting and not (self._everywhere and zone in self._kept | self._expected)

    # -- writes -----------------------------------------------------------------------------------------

    def set_zones(self, zones: Iterable[str]) -> set[str]:
        """Change the known zones; returns the zones whose desired endpoints changed by it (restricted: the
        partial objects are translated again, and their held zones wait for them)."""
        self._zones = ZoneIndex(zones)
        self._epoch += 1
        whole = dict(self._by_object)  # an object with only unplaced endpoints is held whole too
        partial = set(self._zones_of) - set(whole)
        before = {zone: dict(objs) for zone, objs in self._by_zone.items()}
        touched_before = set(self._keys_in)
        self._by_object.clear()
        self._by_zone.clear()
        self._unplaced.clear()
        self._zones_of.clear()
        self._keys_in.clear()
        for key, endpoints in whole.items():
            self.set_object(key, endpoints)
        after = self._by_zone
        changed = {z for z in set(before) | set(after) if before.get(z) != after.get(z)}
        if partial:
            # Until translated again, their zones are not known: every held zone waits for them.
            self._everywhere |= partial
            changed |= touched_before
            self.on_rebuild(partial)
        # Names of objects left untranslated may fall in other zones now (a child zone added or removed).
        if self._deferred:
            self._deferred |= self._kept | self._expected
            self._sweep(self._kept | self._expected)
        return changed

    def set_object(self, key: str, endpoints: Sequence[Endpoint]) -> set[str]:
        """Record `key`'s endpoints (empty: the object is gone); returns the zones this changed."""
        new_endpoints = tuple(endpoints)
        new = self._slices(new_endpoints)
        old_zones = self._zones_of.pop(key, ())
        old: dict[str, tuple[Endpoint, ...] | None] = {}
        for zone in old_zones:
            keys = self._keys_in.get(zone)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._keys_in[zone]
            held = self._by_zone.get(zone)
            old[zone] = held.pop(key, None) if held is not None else None
            if held is not None and not held:
                del self._by_zone[zone]
        self._by_object.pop(key, None)
        self._unplaced.pop(key, None)
        placed = frozenset(z for z in new if z is not None)
        whole = True
        for place, eps in new.items():
            if place is None:
                self._unplaced[key] = eps
            elif self._holds(place):
                self._by_zone[place][key] = eps
            else:
                whole = False
        if placed:
            self._zones_of[key] = tuple(placed)
            for zone in placed:
                self._keys_in[zone].add(key)
        if new_endpoints and (whole or self.pinned(key)):
            self._by_object[key] = new_endpoints
        self._everywhere.discard(key)
        for zone in self._awaited.pop(key, ()):
            self._count_down(zone)
        changed = {
            z
            for z in placed.union(old_zones)
            if not self._holds(z) or old.get(z) != new.get(z)  # not held: what it was is unknown
        }
        for zone in changed:
            self._versions[zone] += 1
        return changed

    def _arrived_in(self, key: str, zone: str) -> None:
        zones = self._awaited.get(key)
        if zones is not None:
            zones.discard(zone)
            if not zones:
                del self._awaited[key]

    def _count_down(self, zone: str) -> None:
        left = self._waiting.get(zone)
        if left is None:
            return
        if left <= 1:
            del self._waiting[zone]
        else:
            self._waiting[zone] = left - 1

    def _slices(self, endpoints: Iterable[Endpoint]) -> dict[str | None, tuple[Endpoint, ...]]:
        """The endpoints grouped by zone (None: in no known zone)."""
        out: defaultdict[str | None, list[Endpoint]] = defaultdict(list)
        for ep in endpoints:
            out[self._zones.zone_of(ep.dns_name)].append(ep)
        if len(out) == 1 and isinstance(endpoints, tuple):
            return {zone: endpoints for zone in out}  # one zone: its slice is the whole (one tuple, shared)
        return {zone: tuple(eps) for zone, eps in out.items()}

    # -- reads ------------------------------------------------------------------------------------------

    def desired(self, zone: str) -> list[Endpoint]:
        return [ep for eps in self._by_zone.get(zone, {}).values() for ep in eps]

    def unplaced(self) -> dict[str, tuple[Endpoint, ...]]:
        """Endpoints whose name is in no known zone, by object (reported, never written)."""
        return dict(self._unplaced)

    def zones_with_endpoints(self) -> list[str]:
        """Zones some object has endpoints in (restricted: held or not)."""
        return [z for z, keys in self._keys_in.items() if keys]

    def __len__(self) -> int:
        """Endpoints held."""
        return sum(len(eps) for objs in self._by_zone.values() for eps in objs.values()) + sum(
            len(eps) for eps in self._unplaced.values()
        )
