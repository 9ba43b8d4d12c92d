"""The /shards contract as typed data: parse a replica's answer, check its shape, write it back as JSON.

The contract (issue 4, design §3), which users and scripts rely on:
`{"generation", "coordinator", "self", "members": [{"identity", "state", "weight", "zones",
"observedGeneration", "lastRenewSeen"}], "zones": [{"zone", "owner", "state", "lastSync", "lastSyncSeconds",
"records", "lastError"}], "assignment"}`, where `assignment` is the assignment document the view's owners
come from (the ConfigMap's, shardsync.sharding.assignment), kept here as JSON and read by
`Assignment.from_document` where it is used; null when there is none (a replica older than the key reads
as null too). `parse_view` refuses a document of another shape with `InvalidView` (a message,
never a traceback, for the command line); keys it does not know are ignored, so a newer replica that adds
fields still reads. A view built from the cluster objects has no "self" (None) and, without a zone list,
no zones (`zones_known` False) and no per-member zone counts (None); its `notes` say what it could not know.
State names are shardsync.sharding.states' enums; a row keeps the text it was given, so a state this
version does not know (a newer replica's) still reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class InvalidView(ValueError):
    """A /shards document that does not follow the contract; the message says where."""


@dataclass(frozen=True, slots=True)
class MemberRow:
    identity: str
    state: str
    weight: int
    zones: int | None  # None: the zone list is unknown
    observed_generation: int | None
    last_renew_seen: str | None


@dataclass(frozen=True, slots=True)
class ZoneRow:
    zone: str
    owner: str | None
    state: str
    last_sync: str | None = None
    last_sync_seconds: float | None = None
    records: int | None = None
    last_error: str = ""
    sync_known: bool = True  # False: the sync figures are unknown here (only the owner knows), not "never"


@dataclass(frozen=True, slots=True)
class ShardsView:
    generation: int
    coordinator: str
    self_identity: str | None
    members: tuple[MemberRow, ...]
    zones: tuple[ZoneRow, ...]
    zones_known: bool = True
    notes: tuple[str, ...] = ()
    assignment: Mapping[str, Any] | None = None  # the assignment document the owners come from

    def owner_counts(self) -> Counter[str]:
        """Zones per owner ("-" for none), with every member listed (0 when it owns nothing)."""
        counts: Counter[str] = Counter(dict.fromkeys((m.identity for m in self.members), 0))
        counts.update(z.owner or "-" for z in self.zones)
        return counts

    def state_counts(self, owner: str | None = None) -> Counter[str]:
        """Zones per state, of every zone or of one owner's."""
        return Counter(z.state for z in self.zones if owner is None or z.owner == owner)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "generation": self.generation,
            "coordinator": self.coordinator,
            "self": self.self_identity,
            "members": [
                {
                    "identity": m.identity,
                    "state": m.state,
                    "weight": m.weight,
                    "zones": m.zones,
                    "observedGeneration": m.observed_generation,
                    "lastRenewSeen": m.last_renew_seen,
                }
                for m in self.members
            ],
            "zones": [
                {
                    "zone": z.zone,
                    "owner": z.owner,
                    "state": z.state,
                    "lastSync": z.last_sync,
                    "lastSyncSeconds": z.last_sync_seconds,
                    "records": z.records,
                    "lastError": z.last_error,
                }
                for z in self.zones
            ],
            "assignment": dict(self.assignment) if self.assignment is not None else None,
        }
        if self.notes:
            doc["notes"] = list(self.notes)
        return doc


def parse_view(doc: object) -> ShardsView:
    """The view in a /shards answer; InvalidView when it does not follow the contract."""
    if not isinstance(doc, Mapping):
        raise InvalidView("the answer is not a JSON object")
    generation = _get(doc, "generation", int, "/shards")
    members = tuple(
        _member(entry, f"members[{i}]") for i, entry in enumerate(_get(doc, "members", list, "/shards"))
    )
    zones = tuple(_zone(entry, f"zones[{i}]") for i, entry in enumerate(_get(doc, "zones", list, "/shards")))
    notes = doc.get("notes")
    assignment = _optional(doc, "assignment", dict, "/shards")
    return ShardsView(
        generation=generation,
        coordinator=_optional(doc, "coordinator", str, "/shards") or "",
        self_identity=_optional(doc, "self", str, "/shards"),
        members=members,
        zones=zones,
        notes=tuple(str(n) for n in notes) if isinstance(notes, list) else (),
        assignment=assignment,
    )


def _member(entry: object, where: str) -> MemberRow:
    if not isinstance(entry, Mapping):
        raise InvalidView(f"{where} is not an object")
    return MemberRow(
        identity=_get(entry, "identity", str, where),
        state=_get(entry, "state", str, where),
        weight=_optional(entry, "weight", int, where) or 1,
        zones=_optional(entry, "zones", int, where),
        observed_generation=_optional(entry, "observedGeneration", int, where),
        last_renew_seen=_optional(entry, "lastRenewSeen", str, where),
    )


def _zone(entry: object, where: str) -> ZoneRow:
    if not isinstance(entry, Mapping):
        raise InvalidView(f"{where} is not an object")
    seconds = _optional(entry, "lastSyncSeconds", (int, float), where)
    return ZoneRow(
        zone=_get(entry, "zone", str, where),
        owner=_optional(entry, "owner", str, where),
        state=_get(entry, "state", str, where),
        last_sync=_optional(entry, "lastSync", str, where),
        last_sync_seconds=float(seconds) if seconds is not None else None,
        records=_optional(entry, "records", int, where),
        last_error=_optional(entry, "lastError", str, where) or "",
    )


def _type_ok(value: object, kind: type | tuple[type, ...]) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds: Sequence[type] = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _get(doc: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = doc.get(key)
    if not _type_ok(value, kind):
        raise InvalidView(f"{where}: {key!r} must be {_kind_name(kind)}, got {value!r}")
    return value


def _optional(doc: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = doc.get(key)
    if value is None:
        return None
    if not _type_ok(value, kind):
        raise InvalidView(f"{where}: {key!r} must be {_kind_name(kind)} or null, got {value!r}")
    return value
