"""The assignment (what the coordinator publishes) and the coordinator's decision of when to publish.

`Assignment` is the content of the ConfigMap `<instance>-assignment` (design §2): generation, members
(identity, weight), ring parameters, pins (zone → identity), createdAt and the coordinator that wrote it. It
lists no zones: every replica builds the same `Ring` from it and computes `owner_of(zone)` locally.
`from_configmap_data` rejects anything it cannot trust with `CorruptAssignment`; the caller then keeps its
last good view (rule 5: never act on a view you cannot read).

Parking needs nothing more in the document: a restarting member simply stays listed (so its zones stay
on it) until its grace runs out; that its zones are "parked" rather than active is read from its member
lease (`restarting`), which every replica watches anyway. Publishing a flag would cost a generation, and a
round of acknowledgements, per restart for nothing.

Pins. A pin whose member is absent from the assignment is kept in the published document and reported
(`pin_problems()`, `explain()`), and the zone goes to its ring owner meanwhile. Leaving it unowned would stop
DNS updates for it until someone notices; re-hashing it silently would hide the mistake. Kept in the document,
the pin takes effect again by itself when its member comes back.

`Publisher` is the coordinator's brain as a pure state machine (rules 2, 6, 7): fed the members it sees and
the pins, it proposes generation g+1 only when the membership (live, non-draining members, and restarting
ones within their grace), a weight, a pin or the ring parameters changed, once the change has been quiet for
`settle` seconds (a burst — a rolling restart, scaling by several — makes one generation), or at the latest
`max_delay` after the first unpublished change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any, TypeVar

import orjson

from shardsync.endpoint import normalize_name
from shardsync.sharding.clock import rfc3339
from shardsync.sharding.membership import MemberStatus, labels
from shardsync.sharding.ring import (
    InvalidRing,
    Move,
    Placement,
    Ring,
    RingParams,
    moves_between,
    weight_error,
)
from shardsync.sharding.states import MemberState

CONFIGMAP_KEY = "assignment.json"
FORMAT_VERSION = 1


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
    placement: Placement | None  # where the ring would put it (None: no members)
    reason: str


@dataclass(frozen=True, slots=True)
class Layout:
    """What decides ownership; two assignments with the same layout own every zone the same way."""

    members: tuple[Member, ...]
    ring: RingParams
    pins: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Assignment:
    generation: int
    members: tuple[Member, ...]
    ring: RingParams = field(default_factory=RingParams)
    pins: Mapping[str, str] = field(default_factory=dict, hash=False)
    created_at: str = ""
    coordinator: str = ""
    _ring: Ring = field(init=False, repr=False, compare=False, hash=False)

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
        object.__setattr__(self, "members", members)
        object.__setattr__(self, "pins", MappingProxyType(dict(sorted(pins.items()))))
        object.__setattr__(self, "_ring", ring)

    @property
    def identities(self) -> frozenset[str]:
        return frozenset(self._ring.members)

    @property
    def layout(self) -> Layout:
        return Layout(self.members, self.ring, tuple(self.pins.items()))

    def owner_of(self, zone: str) -> str | None:
        """The member that owns `zone`: its pin when the pinned member is present, else its ring owner."""
        if self.pins:
            pinned = self.pins.get(normalize_name(zone))
            if pinned is not None and pinned in self._ring.members:
                return pinned
        return self._ring.owner_of(zone)

    def zones_of(self, identity: str, zones: Iterable[str]) -> set[str]:
        """The zones among `zones` that `identity` owns."""
        return {zone for zone in zones if self.owner_of(zone) == identity}

    def explain(self, zone: str) -> Explanation:
        name = normalize_name(zone)
        placement = self._ring.explain(name)
        pinned = self.pins.get(name)
        owner = self.owner_of(name)
        if pinned is not None and pinned == owner:
            reason = f"pinned to {pinned}"
        elif placement is None:
            reason = "no members: nobody owns it"
        else:
            reason = (
                f"hashes to {placement.zone_point:x}, next ring point {placement.ring_point:x} belongs to "
                f"{placement.owner} (weight {placement.weight}, {placement.points} points, "
                f"{placement.share:.1%} of the ring)"
            )
            if pinned is not None:
                reason = f"pinned to {pinned}, which is not a member: ring owner used; " + reason
        return Explanation(name, owner, pinned, pinned is not None and pinned == owner, placement, reason)

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

    def with_members(self, members: Iterable[Member]) -> Assignment:
        """The same assignment over other members (for `--what-if-replicas`); same generation, never
        published."""
        return Assignment(
            self.generation, tuple(members), self.ring, self.pins, self.created_at, self.coordinator
        )

    # --- the ConfigMap --------------------------------------------------------------------------------

    def to_document(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "generation": self.generation,
            "createdAt": self.created_at,
            "coordinator": self.coordinator,
            "ring": {"hash": self.ring.hash, "vnodes": self.ring.vnodes},
            "members": [{"identity": m.identity, "weight": m.weight} for m in self.members],
            "pins": dict(self.pins),
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
        if version != FORMAT_VERSION:
            raise CorruptAssignment(f"unsupported assignment version {version!r} (this build reads 1)")
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
        return cls(
            generation=generation,
            members=tuple(members),
            ring=ring,
            pins=pins,
            created_at=_field(doc, "createdAt", str),
            coordinator=_field(doc, "coordinator", str),
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


DEFAULT_SETTLE = 2.0  # --settle-delay
DEFAULT_RESTART_GRACE = 30.0  # --restart-grace


@dataclass(frozen=True, slots=True)
class PublisherConfig:
    settle: float = DEFAULT_SETTLE  # quiet period that ends a burst of changes
    max_delay: float = 10.0  # publish by then even if changes keep coming
    restart_grace: float = DEFAULT_RESTART_GRACE  # how long a restarting member's zones stay parked for it
    ring: RingParams = field(default_factory=RingParams)

    def __post_init__(self) -> None:
        if not 0 <= self.settle <= self.max_delay:
            raise ValueError("settle must be between 0 and max_delay")
        if self.restart_grace < 0:
            raise ValueError("restart_grace must not be negative")


@dataclass(slots=True)
class _Pending:
    layout: Layout
    first_change: float  # when the layout first differed from the published one
    last_change: float  # when the desired layout last changed


class Publisher:
    """Decides when the coordinator publishes a new generation, and what it holds.

    Round: `proposal = observe(statuses, pins, now, wall)`; when not None, write it (create, or replace
    with the stored resourceVersion); on success `committed(proposal)`; on 409 read the stored one and
    `reset(stored)`. Until committed, every call proposes again (with the latest view), so a failed write
    is simply retried on the next round. `statuses` come from the coordinator's LivenessTracker
    (`statuses(now)`, judged at the time its view was last known current); call `observe` only once the
    leases have been listed: a member missing from `statuses` counts as gone. `next_wakeup()` says when to
    call again without events.
    """

    def __init__(
        self, identity: str, config: PublisherConfig | None = None, stored: Assignment | None = None
    ):
        self.identity = identity
        self.config = config if config is not None else PublisherConfig()
        self.current = stored  # the last generation known to be written (rule 7: failover continues here)
        self._pending: _Pending | None = None
        self._restarting_since: dict[str, float] = {}
        self._highest_acked = 0
        self.problems: list[str] = []  # what the last `observe` found wrong with the pins, for the log

    def _members(self, statuses: Mapping[str, MemberStatus], now: float) -> tuple[Member, ...]:
        """Who belongs in the assignment at `now`: ready members, and restarting members that are already
        in it for up to `restart_grace` after the coordinator first saw them restarting (their zones
        stay parked for them). Draining and expired members are left out."""
        current_ids = self.current.identities if self.current is not None else frozenset()
        for identity in list(self._restarting_since):
            status = statuses.get(identity)
            if status is None or status.state is not MemberState.RESTARTING:
                del self._restarting_since[identity]
        members = []
        for identity, status in sorted(statuses.items()):
            if status.state is MemberState.READY:
                members.append(Member(identity, status.weight))
            elif status.state is MemberState.RESTARTING and identity in current_ids:
                since = self._restarting_since.setdefault(identity, now)
                if now - since < self.config.restart_grace:
                    members.append(Member(identity, status.weight))
        return tuple(members)

    def observe(
        self, statuses: Mapping[str, MemberStatus], pins: Mapping[str, str], now: float, wall: datetime
    ) -> Assignment | None:
        """The assignment to publish now, or None when nothing is to be published yet."""
        for status in statuses.values():
            if status.observed_generation is not None:
                self._highest_acked = max(self._highest_acked, status.observed_generation)
        members = self._members(statuses, now)
        valid_pins, self.problems = validate_pins(pins)
        layout = Layout(members, self.config.ring, tuple(sorted(valid_pins.items())))
        ids = {m.identity for m in members}
        self.problems += [
            f"zone {zone} is pinned to {identity}, which is not a member; its ring owner serves it"
            for zone, identity in layout.pins
            if identity not in ids
        ]
        if self.current is not None and self.current.layout == layout:
            self._pending = None
            return None
        if self._pending is None:
            self._pending = _Pending(layout, now, now)
        elif self._pending.layout != layout:
            self._pending.layout = layout
            self._pending.last_change = now
        pending = self._pending
        if now < min(pending.last_change + self.config.settle, pending.first_change + self.config.max_delay):
            return None
        return Assignment(
            generation=self.next_generation(),
            members=layout.members,
            ring=layout.ring,
            pins=dict(layout.pins),
            created_at=rfc3339(wall),
            coordinator=self.identity,
        )

    def next_generation(self) -> int:
        """One above the stored generation, and above any generation a member has acknowledged: even if the
        ConfigMap was lost or unreadable, generations never go backwards."""
        stored = self.current.generation if self.current is not None else 0
        return max(stored, self._highest_acked) + 1

    def committed(self, assignment: Assignment) -> None:
        """The proposal was written: it is now the generation to build on."""
        self.current = assignment
        if self._pending is not None and self._pending.layout == assignment.layout:
            self._pending = None

    def reset(self, stored: Assignment | None) -> None:
        """Someone else's write won (409): continue from what is stored."""
        self.current = stored

    def next_wakeup(self) -> float | None:
        """The monotonic time at which `observe` may decide differently with no new event: the end of the
        settle delay, or the end of a restarting member's grace."""
        times = [since + self.config.restart_grace for since in self._restarting_since.values()]
        if self._pending is not None:
            p = self._pending
            times.append(min(p.last_change + self.config.settle, p.first_change + self.config.max_delay))
        return min(times) if times else None
