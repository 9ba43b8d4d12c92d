"""Staging a batch of changes against a zone of the fake provider: every change is checked against the zone
as it is before anything is applied, so a batch applies whole or not at all (store.py commits it)."""

from __future__ import annotations

from collections.abc import Mapping

from shardsync.providers.base import BatchRejectedError, FenceToken, fence_record_name
from shardsync.providers.fence_record import fence_value
from shardsync.records.endpoint import Changes, Endpoint, ZoneIndex, same_targets

Key = tuple[str, str, str]


class InvalidChangesError(BatchRejectedError):
    """The changes cannot apply to the zone as it is (create of an existing RRset, delete of a missing one,
    a name outside the zone). Nothing of the batch was applied."""


def stage(
    records: Mapping[Key, Endpoint],
    zone: str,
    changes: Changes,
    index: ZoneIndex,
    exact_deletes: bool,
    exact_updates: bool = False,
) -> dict[Key, Endpoint | None]:
    """Validate `changes` against the zone; return key -> new value (None: delete). Changes nothing.
    `exact_deletes`: a delete must name the current TTL and targets (Route53, Cloud DNS); `exact_updates`:
    so must an update's old side (Cloud DNS, where an update is a deletion and an addition)."""
    staged: dict[Key, Endpoint | None] = {}

    def current(key: Key) -> Endpoint | None:
        return staged[key] if key in staged else records.get(key)

    def check_named(verb: str, named: Endpoint, exact: bool, differ: str) -> None:
        """The RRset a delete (or an update's old side) names is there, and as named when `exact`."""
        now = current(named.key)
        if now is None:
            raise InvalidChangesError(f"{verb} {_describe(named)}: no such record")
        if exact and not _matches(now, named):
            raise InvalidChangesError(f"{verb} {_describe(named)}: {differ}")

    everything = (*changes.create, *changes.update_old, *changes.update_new, *changes.delete)
    for ep in everything:
        if index.zone_of(ep.dns_name) != zone:
            raise InvalidChangesError(f"{ep.dns_name}: not in zone {zone}")
    if len(changes.update_old) != len(changes.update_new):
        raise InvalidChangesError("updateOld and updateNew differ in length")
    # Deletes first, then updates, then creates: a batch may delete an RRset and create it anew.
    for ep in changes.delete:
        # Route53: "the values must match the current values exactly"
        check_named("delete", ep, exact_deletes, "values differ from the current ones")
        staged[ep.key] = None
    for old, new in zip(changes.update_old, changes.update_new, strict=True):
        if old.key != new.key:
            raise InvalidChangesError(f"update {_describe(old)} -> {_describe(new)}: not the same RRset")
        # Cloud DNS: the deletion "must match existing data exactly" (412 conditionNotMet)
        check_named("update", old, exact_updates, "old values differ from the current ones")
        staged[new.key] = new
    for ep in changes.create:
        if current(ep.key) is not None:
            raise InvalidChangesError(f"create {_describe(ep)}: already exists")
        staged[ep.key] = ep
    return staged


def commit(records: dict[Key, Endpoint], staged: Mapping[Key, Endpoint | None]) -> None:
    for key, value in staged.items():
        if value is None:
            records.pop(key, None)
        else:
            records[key] = value


def with_fence(zone: str, changes: Changes, fence: FenceToken | None) -> Changes:
    """The batch as a Route53-like API would count it: with the fence's DELETE and CREATE."""
    if fence is None:
        return changes
    record = Endpoint(fence_record_name(zone), "TXT", (fence_value(fence),))
    return Changes(
        create=[*changes.create, record],
        update_old=changes.update_old,
        update_new=changes.update_new,
        delete=[*changes.delete, record],
    )


def _matches(now: Endpoint, named: Endpoint) -> bool:
    return now.ttl == named.ttl and same_targets(now.targets, named.targets)


def _describe(ep: Endpoint) -> str:
    ident = f" [{ep.set_identifier}]" if ep.set_identifier else ""
    return f"{ep.dns_name} {ep.record_type}{ident}"
