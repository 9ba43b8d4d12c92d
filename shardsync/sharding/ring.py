"""The consistent-hash ring: which member owns a zone under a version-1 assignment, and why. This build
publishes a slot table instead (sharding/slots.py, for its balance) and reads rings only from documents
earlier builds wrote; the rest of this docstring is why the ring was kept as it was.

A thin, cached wrapper over `uhashring` (160 points per unit of weight, md5: deterministic across processes
and Python versions, no PYTHONHASHSEED involved). Every replica builds the same `Ring` from the same
assignment and so computes the same `owner_of(zone)` without anyone listing zones; adding the (N+1)-th member
moves about 1/(N+1) of the zones, all of them to the new member.

Zones are hashed in canonical form (lower case, no trailing dot), so `Example.COM.` and `example.com` land on
the same member whoever asks. Members are added to the ring in sorted order, so even a collision of two
ring points resolves the same way on every replica.

Bounded loads ("consistent hashing with bounded loads", Mirrokni et al.) are deliberately not used, although
with few zones the plain ring is uneven (3 → 4 members, 50 zones: max/mean load ≈ 1.35; ε = 0.1 would make it
≈ 1.12). The bounded assignment depends on the full zone list: computed by each replica, it is identical only
if every replica lists exactly the same zones at the same moment, which nothing guarantees (zones appear and
disappear, and each replica lists its provider on its own schedule) — two replicas would then both own, or
both skip, a zone within one generation, breaking the handoff rules. Computed once by the coordinator and
published as overrides, it is identical everywhere but no longer minimal: on a join about 1-3 % of the zones
(measured, 50 zones, ε 0.1-0.25) move between old members as capacities shrink, and every new zone could
reshuffle others and force a new generation. Weights and pins are the knobs for an uneven few-zone setup;
`Ring.load()` and `explain()` show the imbalance.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from uhashring import HashRing

from shardsync.records.endpoint import normalize_name

HASHES = ("md5", "ketama")
DEFAULT_HASH = "md5"
DEFAULT_VNODES = 160
MAX_VNODES = 10_000
MAX_WEIGHT = 100

# Size of the hash space each function maps into, to turn ring arcs into shares of the ring.
_SPACE = {"md5": 1 << 128, "ketama": 1 << 32}
# Cached lookups kept per ring; beyond this the cache is dropped and refilled (zone sets are bounded anyway).
_CACHE_LIMIT = 1 << 20


class InvalidRing(ValueError):
    """Ring parameters or member weights that no replica should build a ring from."""


@dataclass(frozen=True, slots=True)
class RingParams:
    """How the ring is built; published in the assignment so every replica builds the same one.

    `vnodes` is the number of ring points per unit of weight (uhashring's meaning for md5; for ketama
    uhashring spreads `vnodes * members` points by weight and hashes each 4 times).
    """

    hash: str = DEFAULT_HASH
    vnodes: int = DEFAULT_VNODES

    def __post_init__(self) -> None:
        if self.hash not in HASHES:
            raise InvalidRing(f"unknown ring hash {self.hash!r} (known: {', '.join(HASHES)})")
        if isinstance(self.vnodes, bool) or not isinstance(self.vnodes, int):
            raise InvalidRing(f"vnodes must be an integer, got {self.vnodes!r}")
        if not 1 <= self.vnodes <= MAX_VNODES:
            raise InvalidRing(f"vnodes must be between 1 and {MAX_VNODES}, got {self.vnodes}")


def weight_error(weight: object) -> str | None:
    """Why `weight` cannot be a member's weight (an integer 1..MAX_WEIGHT), or None when it can."""
    if isinstance(weight, bool) or not isinstance(weight, int):
        return f"weight must be an integer, got {weight!r}"
    if not 1 <= weight <= MAX_WEIGHT:
        return f"weight must be between 1 and {MAX_WEIGHT}, got {weight}"
    return None


@dataclass(frozen=True, slots=True)
class Placement:
    """Why a zone sits where it sits on the ring (for `shardsync shards --explain`)."""

    zone: str
    zone_point: int  # the zone's hash
    ring_point: int  # the first member point at or after it, clockwise
    owner: str
    weight: int
    points: int  # how many ring points the owner has
    share: float  # fraction of the hash space the owner covers


@dataclass(frozen=True, slots=True)
class Move:
    """A zone whose owner differs between two rings (None: no owner, the ring was empty)."""

    zone: str
    before: str | None
    after: str | None


class Ring:
    """An immutable consistent-hash ring over `members` (identity → integer weight)."""

    def __init__(self, members: Mapping[str, int], params: RingParams | None = None) -> None:
        self.params = params if params is not None else RingParams()
        for identity, weight in members.items():
            if not isinstance(identity, str) or not identity:
                raise InvalidRing(f"member identity must be a non-empty string, got {identity!r}")
            problem = weight_error(weight)
            if problem is not None:
                raise InvalidRing(f"member {identity}: {problem}")
        ordered = {identity: members[identity] for identity in sorted(members)}
        self.members: Mapping[str, int] = MappingProxyType(ordered)
        if self.params.hash == "ketama":
            self._ring = HashRing(nodes=ordered, hash_fn="ketama", vnodes=self.params.vnodes)
        else:
            self._ring = HashRing(nodes=ordered, vnodes=self.params.vnodes)
        self._cache: dict[str, str | None] = {}
        self._shares: dict[str, float] | None = None

    def __repr__(self) -> str:
        return f"Ring({dict(self.members)!r}, {self.params!r})"

    def owner_of(self, zone: str) -> str | None:
        """The member that owns `zone`, or None when the ring has no members. Cached per ring."""
        try:
            return self._cache[zone]
        except KeyError:
            pass
        owner: str | None = self._ring.get_node(normalize_name(zone)) if self.members else None
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[zone] = owner
        return owner

    def explain(self, zone: str) -> Placement | None:
        """Where `zone` hashes, which ring point it lands on and whose it is; None on an empty ring."""
        if not self.members:
            return None
        name = normalize_name(zone)
        ring_point, owner = self._ring.get_server(name)
        return Placement(
            zone=name,
            zone_point=int(self._ring.hashi(name)),
            ring_point=int(ring_point),
            owner=str(owner),
            weight=self.members[owner],
            points=int(self._ring.distribution[owner]),
            share=self.shares()[owner],
        )

    def shares(self) -> dict[str, float]:
        """Fraction of the hash space each member covers (what weights buy; sums to 1)."""
        if self._shares is None:
            points: list[tuple[int, str]] = self._ring.get_points()
            shares = dict.fromkeys(self.members, 0.0)
            space = _SPACE[self.params.hash]
            previous = points[-1][0] - space if points else 0
            # A key maps to the first point strictly after its hash, so each point covers the arc behind it.
            for position, owner in points:
                shares[owner] += (position - previous) / space
                previous = position
            self._shares = shares
        return dict(self._shares)

    def load(self, zones: Iterable[str]) -> Counter[str]:
        """How many of `zones` each member owns (members owning none are listed with 0)."""
        counts: Counter[str] = Counter(dict.fromkeys(self.members, 0))
        for zone in zones:
            owner = self.owner_of(zone)
            if owner is not None:
                counts[owner] += 1
        return counts

    def moved(self, other: Ring, zones: Iterable[str]) -> list[Move]:
        """The zones of `zones` whose owner in `other` differs from their owner here."""
        return moves_between(self.owner_of, other.owner_of, zones)


def moves_between(
    before: Callable[[str], str | None], after: Callable[[str], str | None], zones: Iterable[str]
) -> list[Move]:
    """The zones whose owner under `after` differs from their owner under `before` (rings or assignments)."""
    return [Move(zone, b, a) for zone in zones if (b := before(zone)) != (a := after(zone))]
