"""The assignment (what the coordinator publishes) and the coordinator's decision of when to publish.

`Assignment` is the content of the ConfigMap `<instance>-assignment` (design §2): version, generation,
members (identity, weight), the slot table (sharding/slots.py: per slot, the index of its member), the
coordinator's overrides (zone → index of its member, where slot granularity could not balance:
sharding/balance.py), pins (zone → identity), createdAt and the coordinator that wrote it. Every replica
computes `owner_of(zone)` locally: pin, else override, else slot; a zone no one lists follows its slot. A
document with overrides is version 3 (a build that reads only 1 and 2 rejects it instead of ignoring the
overrides and disagreeing on owners); without, version 2 as before. Version 1 documents (a ring instead of
a slot table, written by earlier builds) are still read: their owners come from `Ring`.
`from_configmap_data` rejects anything it cannot trust, an unknown version included, with
`CorruptAssignment`; the caller then keeps its last good view (rule 5: never act on a view you cannot read).

Parking needs nothing more in the document: a restarting member simply stays listed (so its zones stay
on it) until its grace runs out; that its zones are "parked" rather than active is read from its member
lease (`restarting`), which the coordinator watches anyway (and /shards reads). Publishing a flag would cost
a generation, and a round of acknowledgements, per restart for nothing.

Pins. A pin whose member is absent from the assignment is kept in the published document and reported
(`pin_problems()`, `explain()`), and the zone goes to its ring owner meanwhile. Leaving it unowned would stop
DNS updates for it until someone notices; re-hashing it silently would hide the mistake. Kept in the document,
the pin takes effect again by itself when its member comes back.

What the coordinator vouches for (rules 2 and 4). Two optional fields carry what the coordinator's view
of every member Lease showed when it wrote the generation, so that a replica acquiring a zone need hear
only from that zone's previous owner, not from every member: `acknowledged`, the generation every member
whose Lease was live on the coordinator's clock had acknowledged (0: nothing vouched for), and
`departed`, the members of the previous generation dropped because their Lease had lapsed on its clock,
each with the renewTime it last saw (a member that renews after that no longer matches). Builds that do
not know them ignore them (they read the same owners) and keep asking every member, as before.

When to publish and what (the coordinator's Publisher) is sharding/publisher.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, TypeVar

import orjson

from shardsync.records.endpoint import normalize_name
from shardsync.sharding.balance import rebalance
from shardsync.sharding.membership import labels
from shardsync.sharding.ring import (
    InvalidRing,
    Move,
    Placement,
    Ring,
    RingParams,
    moves_between,
    weight_error,
)
from shardsync.sharding.slots import decode, encode, slot_of

CONFIGMAP_KEY = "assignment.json"
FORMAT_VERSION = 2  # what this build writes: the slot table
OVERRIDES_VERSION = 3  # ... with per-zone overrides
RING_VERSION = 1  # read still: a consistent-hash ring, no slot table


class CorruptAssignment(ValueError):
    """An assignment document that cannot be trusted; the message says what is wrong with it."""


def configmap_name(instance: str) -> str:
    return f"{instance}-assignment"


@dataclass(frozen=True, slots=True)
class Member:
    identity: str
    weight: int = 1


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a zone has the owner it has (for `shardsync shards --explain`)."""

    zone: str
    owner: str | None
    pinned_to: str | None  # the pin, if any, whether or not it took effect
    pin_effective: bool
    placement: Placement | None  # where the ring would put it (None: no members, or a slot table)
    reason: str
    slot: int | None = None  # its slot in the slot table (None: a version-1 ring assignment)
    slot_owner: str | None = None  # the slot's member
    overridden_to: str | None = None  # the coordinator's override, if any (in effect unless pinned)


@dataclass(frozen=True, slots=True)
class Layout:
    """What decides ownership; two assignments with the same layout own every zone the same way."""

    members: tuple[Member, ...]
    ring: RingParams
    pins: tuple[tuple[str, str], ...]
    slotted: bool = True  # owners come from a slot table (False: a version-1 ring; republished as slots)


@dataclass(frozen=True, slots=True)
class Assignment:
    generation: int
    members: tuple[Member, ...]
    ring: RingParams = field(default_factory=RingParams)
    pins: Mapping[str, str] = field(default_factory=dict, hash=False)
    created_at: str = ""
    coordinator: str = ""
    slots: tuple[str, ...] = ()  # owner per slot; () in a version-1 document (the ring decides)
    overrides: Mapping[str, str] = field(default_factory=dict, hash=False)  # zone -> member (coordinator's)
    acknowledged: int = 0  # every member live on the coordinator's clock had acknowledged this generation
    departed: Mapping[str, str] = field(default_factory=dict, hash=False)  # lapsed member -> renewTime seen
    _ring: Ring = field(init=False, repr=False, compare=False, hash=False)
    # identity → (the zones asked about, the ones it owns): a replica asks on every shard pass with the
    # same zones, and placing 2,000 zones each time was ~6 % of a syncing replica's CPU (py-spy)
    _owned: dict[str, tuple[frozenset[str], frozenset[str]]] = field(
        init=False, repr=False, compare=False, hash=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        if isinstance(self.generation, bool) or not isinstance(self.generation, int) or self.generation < 0:
            raise CorruptAssignment(f"generation must be a non-negative integer, got {self.generation!r}")
        members = tuple(sorted(self.members, key=lambda m: m.identity))
        identities = [m.identity for m in members]
        if len(set(identities)) != len(identities):
            raise CorruptAssignment(f"duplicate member identities in {identities}")
        pins: dict[str, str] = {}
        for zone, identity in self.pins.items():
            if not isinstance(zone, str) or not normalize_name(zone):
                raise CorruptAssignment(f"pin zone {zone!r} is not a zone name")
            if not isinstance(identity, str) or not identity:
                raise CorruptAssignment(f"pin of {zone!r} names no member: {identity!r}")
            pins[normalize_name(zone)] = identity
        try:
            ring = Ring({m.identity: m.weight for m in members}, self.ring)
        except InvalidRing as e:
            raise CorruptAssignment(str(e)) from None
        strays = set(self.slots) - set(identities)
        if strays:
            raise CorruptAssignment(f"slots name members not in the assignment: {sorted(strays)[:3]}")
        if self.slots and len(self.slots) & (len(self.slots) - 1):
            raise CorruptAssignment(f"{len(self.slots)} slots is not a power of two")
        overrides: dict[str, str] = {}
        for zone, identity in self.overrides.items():
            name = normalize_name(zone) if isinstance(zone, str) else ""
            if not name:
                raise CorruptAssignment(f"override zone {zone!r} is not a zone name")
            if identity not in identities:
                raise CorruptAssignment(f"override of {name} names no member: {identity!r}")
            overrides[name] = identity
        if overrides and not self.slots:
            raise CorruptAssignment("overrides need a slot table")
        acknowledged = self.acknowledged
        if isinstance(acknowledged, bool) or not isinstance(acknowledged, int):
            raise CorruptAssignment(f"acknowledged must be an integer, got {acknowledged!r}")
        if not 0 <= acknowledged < max(1, self.generation):
            raise CorruptAssignment(f"acknowledged {acknowledged} is not below generation {self.generation}")
        departed: dict[str, str] = {}
        for identity, renew_time in self.departed.items():
            if not isinstance(identity, str) or not identity or not isinstance(renew_time, str):
                raise CorruptAssignment(f"departed {identity!r}: {renew_time!r} is not a member's renewTime")
            if identity in identities:
                raise CorruptAssignment(f"departed {identity} is still a member")
            departed[identity] = renew_time
        object.__setattr__(self, "departed", MappingProxyType(dict(sorted(departed.items()))))
        object.__setattr__(self, "overrides", MappingProxyType(dict(sorted(overrides.items()))))
        object.__setattr__(self, "slots", tuple(self.slots))
        object.__setattr__(self, "members", members)
        object.__setattr__(self, "pins", MappingProxyType(dict(sorted(pins.items()))))
        object.__setattr__(self, "_ring", ring)

    @property
    def identities(self) -> frozenset[str]:
        return frozenset(self._ring.members)

    @property
    def layout(self) -> Layout:
        return Layout(self.members, self.ring, tuple(self.pins.items()), bool(self.slots) or not self.members)

    def owner_of(self, zone: str) -> str | None:
        """The member that owns `zone`: its pin when the pinned member is present, else its override, else
        its slot's member (a version-1 document: its ring owner)."""
        if self.pins or self.overrides:
            name = normalize_name(zone)
            pinned = self.pins.get(name)
            if pinned is not None and pinned in self._ring.members:
                return pinned
            overridden = self.overrides.get(name)
            if overridden is not None:
                return overridden
        if self.slots:
            return self.slots[slot_of(zone, len(self.slots))]
        return self._ring.owner_of(zone)

    def zones_of(self, identity: str, zones: Iterable[str]) -> set[str]:
        """The zones among `zones` that `identity` owns."""
        asked = zones if isinstance(zones, frozenset) else frozenset(zones)
        last = self._owned.get(identity)
        if last is None or last[0] != asked:
            last = asked, frozenset(zone for zone in asked if self.owner_of(zone) == identity)
            self._owned[identity] = last
        return set(last[1])

    def explain(self, zone: str) -> Explanation:
        name = normalize_name(zone)
        pinned = self.pins.get(name)
        owner = self.owner_of(name)
        slot = slot_of(name, len(self.slots)) if self.slots else None
        slot_owner = self.slots[slot] if slot is not None else None
        overridden = self.overrides.get(name)
        placement = None if self.slots else self._ring.explain(name)
        if pinned is not None and pinned == owner:
            reason = f"pinned to {pinned}"
        elif owner is None:
            reason = "no members: nobody owns it"
        elif overridden is not None:
            reason = (
                f"hashes to slot {slot} of {len(self.slots)}, whose member is {slot_owner}; the coordinator "
                f"placed this zone on {overridden} by an override ({len(self.overrides)} in all): "
                "whole slots could not bring every member to its share, so this zone moved on its own"
            )
        elif slot is not None:
            held = sum(1 for o in self.slots if o == owner)
            reason = (
                f"hashes to slot {slot} of {len(self.slots)}; the coordinator gave that slot to {owner} "
                f"({held} slots, balanced on the zones it knew; zones move only from members that left, to "
                "members that joined, or from the busiest when zones appear)"
            )
        else:
            assert placement is not None
            reason = (
                f"hashes to {placement.zone_point:x}, next ring point {placement.ring_point:x} belongs to "
                f"{placement.owner} (weight {placement.weight}, {placement.points} points, "
                f"{placement.share:.1%} of the ring)"
            )
        if pinned is not None and pinned != owner:
            used = "slot owner used" if slot is not None else "ring owner used"
            reason = f"pinned to {pinned}, which is not a member: {used}; " + reason
        return Explanation(
            name,
            owner,
            pinned,
            pinned is not None and pinned == owner,
            placement,
            reason,
            slot,
            slot_owner,
            overridden,
        )

    def pin_problems(self) -> list[str]:
        """Pins that do not take effect (their member is absent), one message each."""
        return [
            f"zone {zone} is pinned to {identity}, which is not a member; its ring owner serves it"
            for zone, identity in self.pins.items()
            if identity not in self._ring.members
        ]

    def moved(self, other: Assignment, zones: Iterable[str]) -> list[Move]:
        """Zones whose owner differs between this assignment and `other`."""
        return moves_between(self.owner_of, other.owner_of, zones)

    def with_members(self, members: Iterable[Member], zones: Iterable[str] = ()) -> Assignment:
        """The assignment over other members (for `--what-if-replicas`): the slot table rebalanced on
        `zones` as the coordinator would (slots move only from members gone and to members new), or the
        same ring; same generation, never published."""
        chosen = tuple(members)
        slots: tuple[str, ...] = ()
        overrides: Mapping[str, str] = {}
        if chosen and self.slots:  # a version-1 ring stays a ring
            weights = {m.identity: m.weight for m in chosen}
            balanced = rebalance(self.slots, weights, zones, overrides=self.overrides, pins=self.pins)
            slots, overrides = balanced.owners, balanced.overrides
        return Assignment(
            self.generation, chosen, self.ring, self.pins, self.created_at, self.coordinator, slots, overrides
        )

    # --- the ConfigMap --------------------------------------------------------------------------------

    def to_document(self) -> dict[str, Any]:
        identities = [m.identity for m in self.members]
        extra: dict[str, Any] = {}
        version = FORMAT_VERSION if self.slots else RING_VERSION
        if self.overrides:
            version = OVERRIDES_VERSION
            index = {m: i for i, m in enumerate(identities)}
            extra["overrides"] = {zone: index[m] for zone, m in self.overrides.items()}
        if self.acknowledged:
            extra["acknowledged"] = self.acknowledged
        if self.departed:
            extra["departed"] = dict(self.departed)
        return {
            "version": version,
            "generation": self.generation,
            "createdAt": self.created_at,
            "coordinator": self.coordinator,
            "ring": {"hash": self.ring.hash, "vnodes": self.ring.vnodes},
            "members": [{"identity": m.identity, "weight": m.weight} for m in self.members],
            "pins": dict(self.pins),
            "slots": encode(self.slots, identities),
            **extra,
        }

    def to_configmap_data(self) -> dict[str, str]:
        """The ConfigMap's `data`: the document as JSON under one key (sorted keys: stable bytes)."""
        return {CONFIGMAP_KEY: orjson.dumps(self.to_document(), option=orjson.OPT_SORT_KEYS).decode()}

    def to_configmap(self, instance: str, resource_version: str | None = None) -> dict[str, Any]:
        """The whole ConfigMap in Kubernetes JSON form; with `resource_version`, a replace that loses a race
        is refused with 409 instead of overwriting another coordinator's generation."""
        metadata: dict[str, Any] = {"name": configmap_name(instance), "labels": labels(instance)}
        if resource_version is not None:
            metadata["resourceVersion"] = resource_version
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata,
            "data": self.to_configmap_data(),
        }

    @classmethod
    def from_configmap_data(cls, data: Mapping[str, str] | None) -> Assignment:
        """Parse a ConfigMap's `data`; CorruptAssignment on anything missing, mistyped or inconsistent."""
        if not data or CONFIGMAP_KEY not in data:
            raise CorruptAssignment(f"no {CONFIGMAP_KEY!r} key in the ConfigMap data")
        try:
            doc = orjson.loads(data[CONFIGMAP_KEY])
        except orjson.JSONDecodeError as e:
            raise CorruptAssignment(f"{CONFIGMAP_KEY} is not JSON: {e}") from None
        return cls.from_document(doc)

    @classmethod
    def from_document(cls, doc: object) -> Assignment:
        if not isinstance(doc, dict):
            raise CorruptAssignment("the assignment is not a JSON object")
        version = doc.get("version")
        if version not in (RING_VERSION, FORMAT_VERSION, OVERRIDES_VERSION) or isinstance(version, bool):
            raise CorruptAssignment(
                f"unsupported assignment version {version!r} (this build reads {RING_VERSION} to "
                f"{OVERRIDES_VERSION})"
            )
        generation = _field(doc, "generation", int)
        if generation < 1:
            raise CorruptAssignment(f"generation must be at least 1, got {generation}")
        ring_doc = _field(doc, "ring", dict)
        try:
            ring = RingParams(hash=_field(ring_doc, "hash", str), vnodes=_field(ring_doc, "vnodes", int))
        except InvalidRing as e:
            raise CorruptAssignment(str(e)) from None
        members = []
        for i, entry in enumerate(_field(doc, "members", list)):
            if not isinstance(entry, dict):
                raise CorruptAssignment(f"members[{i}] is not an object")
            identity = _field(entry, "identity", str)
            if not identity:
                raise CorruptAssignment(f"members[{i}] has an empty identity")
            weight = _field(entry, "weight", int)
            problem = weight_error(weight)
            if problem is not None:
                raise CorruptAssignment(f"member {identity}: {problem}")
            members.append(Member(identity, weight))
        pins = _field(doc, "pins", dict)
        slots: tuple[str, ...] = ()
        overrides: dict[str, str] = {}
        if version != RING_VERSION:
            identities = sorted(m.identity for m in members)
            decoded = decode(doc.get("slots"), identities)
            if isinstance(decoded, str):
                raise CorruptAssignment(decoded)
            slots = decoded
        if version == OVERRIDES_VERSION:
            for zone, index in _field(doc, "overrides", dict).items():
                if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(identities):
                    raise CorruptAssignment(f"override of {zone!r} = {index!r} names no member")
                overrides[zone] = identities[index]
        acknowledged = doc.get("acknowledged", 0)
        departed = doc.get("departed", {})
        if not isinstance(departed, dict):
            raise CorruptAssignment(f"'departed' must be dict, got {departed!r}")
        return cls(
            generation=generation,
            members=tuple(members),
            ring=ring,
            pins=pins,
            created_at=_field(doc, "createdAt", str),
            coordinator=_field(doc, "coordinator", str),
            slots=slots,
            overrides=overrides,
            acknowledged=acknowledged,
            departed=departed,
        )


_T = TypeVar("_T")


def _field(doc: dict[str, Any], key: str, kind: type[_T]) -> _T:
    value = doc.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CorruptAssignment(f"{key!r} must be {kind.__name__}, got {value!r}")
    return value


def is_successor(current: Assignment | None, incoming: Assignment) -> bool:
    """Whether a replica holding `current` should switch to `incoming`: only to a higher generation. An
    older one is a stale read; the same generation with other content would mean two writers and is
    ignored (resourceVersion preconditions make it impossible, this is the belt to those braces)."""
    return current is None or incoming.generation > current.generation


def validate_pins(pins: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Pins in canonical form, and a message for each one that cannot be used at all (left out)."""
    valid: dict[str, str] = {}
    problems = []
    for zone, identity in pins.items():
        name = normalize_name(zone) if isinstance(zone, str) else ""
        if not name:
            problems.append(f"pin {zone!r} -> {identity!r}: not a zone name; ignored")
        elif not isinstance(identity, str) or not identity:
            problems.append(f"pin of zone {name} names no member; ignored")
        else:
            valid[name] = identity
    return valid, problems
