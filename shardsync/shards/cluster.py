"""The /shards view built straight from the cluster objects, for when no replica answers (or to check one).

`read_objects` fetches, through `shardsync.kube.client`, what the replicas themselves coordinate through: the
assignment ConfigMap `<instance>-assignment`, the member Leases `<instance>-member-<identity>` and the
coordinator Lease `<instance>-coordinator`. `build_view` (pure) turns them into the same view a replica
serves, the assignment document included: owners come from the assignment exactly as every replica
computes them.

What one read of the objects cannot know, the view says in its notes rather than guesses silently:
- Liveness. A replica judges a member by watching its renewTime change on its own clock (rule 1); a single
  read sees no change, so here a member counts as expired when its renewTime is older than its lease
  duration on this machine's clock — the same age kubectl shows, good for a person, never used to act.
- Zones. The assignment lists none (design §2): give a zone list (`zones`) for per-zone rows and counts.
- Zone states are judged from the owner's acknowledgement (acknowledged → active), as a peer replica
  would; only the owner itself knows whether it is still waiting for a previous owner.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from shardsync.kube.objects import CONFIGMAPS, LEASES
from shardsync.sharding.assignment import Assignment, CorruptAssignment, configmap_name
from shardsync.sharding.clock import rfc3339
from shardsync.sharding.election import coordinator_lease_name
from shardsync.sharding.handoff import zone_state
from shardsync.sharding.membership import (
    MalformedLease,
    MemberLease,
    MemberStatus,
    label_selector,
    member_state,
)
from shardsync.sharding.states import MemberState
from shardsync.shards.view import MemberRow, ShardsView, ZoneRow

if TYPE_CHECKING:
    from shardsync.kube.client import BlockingKube


class ClusterReadError(Exception):
    """The cluster could not be read (unreachable, forbidden, bad kubeconfig); the message says why."""


@dataclass(frozen=True, slots=True)
class ClusterObjects:
    """The raw objects of one instance, as read."""

    assignment: Mapping[str, Any] | None  # the ConfigMap, None when it does not exist (yet)
    leases: Sequence[Mapping[str, Any]]  # every Lease carrying the instance's labels
    coordinator: Mapping[str, Any] | None  # the coordinator Lease, None when absent


def read_objects(kube: BlockingKube, namespace: str, instance: str) -> ClusterObjects:
    """Blocking reads (this runs in a short-lived command, not on an event loop)."""
    # Imported here: the kubernetes client is slow to import, and `shards --url` never needs it.
    from shardsync.kube.client import KubeError

    timeout = (5.0, 15.0)
    try:
        assignment = kube.get(
            CONFIGMAPS, configmap_name(instance), namespace=namespace, request_timeout=timeout
        )
        leases = kube.list(
            LEASES, namespace=namespace, label_selector=label_selector(instance), request_timeout=timeout
        )
        coordinator = kube.get(
            LEASES, coordinator_lease_name(instance), namespace=namespace, request_timeout=timeout
        )
    except KubeError as exc:
        if exc.status == 0:
            raise ClusterReadError(f"cannot reach the API server: {exc.reason}") from None
        raise ClusterReadError(f"{exc.status} {exc.reason}: {exc.message[:200]}") from None
    items = leases.get("items") or []
    return ClusterObjects(assignment, [i for i in items if isinstance(i, Mapping)], coordinator)


def parse_assignment(objects: ClusterObjects) -> Assignment | None:
    """The published assignment, None when there is none yet; CorruptAssignment when it is unreadable."""
    if objects.assignment is None:
        return None
    data = objects.assignment.get("data")
    return Assignment.from_configmap_data(data if isinstance(data, Mapping) else None)


def _rfc3339(stamp: str | None) -> str | None:
    """A lease timestamp as /shards writes timestamps (RFC 3339, seconds, `Z`); unparsable text as is."""
    if not stamp:
        return None
    try:
        return rfc3339(datetime.fromisoformat(stamp))
    except ValueError:
        return stamp


def _age_seconds(stamp: str | None, now: datetime) -> float | None:
    if not stamp:
        return None
    try:
        then = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if then.tzinfo is None:
        return None
    return (now - then).total_seconds()


def member_statuses(
    leases: Iterable[Mapping[str, Any]], instance: str, now: datetime
) -> tuple[dict[str, MemberLease], dict[str, MemberStatus], list[str]]:
    """Each member's lease and estimated status (see the module docstring), and problems found."""
    found: dict[str, MemberLease] = {}
    statuses: dict[str, MemberStatus] = {}
    problems: list[str] = []
    for obj in leases:
        try:
            lease = MemberLease.from_object(obj, instance)
        except MalformedLease:
            continue  # the coordinator Lease and any other labelled Lease
        problems += [f"member {lease.identity}: {p}" for p in lease.problems]
        age = _age_seconds(lease.renew_time, now)
        live = bool(lease.holder) and age is not None and age < lease.lease_duration
        found[lease.identity] = lease
        statuses[lease.identity] = MemberStatus(
            identity=lease.identity,
            state=member_state(lease, live),
            weight=lease.weight,
            observed_generation=lease.observed_generation,
            lease_duration=float(lease.lease_duration),
            # Judged at 0 on this machine's clock: the last renewal was `age` seconds before.
            last_change=-age if age is not None else float("-inf"),
            as_of=0.0,
            held=bool(lease.holder),
            draining=lease.draining,
            restarting=lease.restarting,
            problems=lease.problems,
        )
    return found, statuses, problems


def build_view(
    objects: ClusterObjects, instance: str, now: datetime, zones: Iterable[str] | None = None
) -> ShardsView:
    """The /shards view of `instance` from its objects at wall time `now`, carrying the assignment document.

    Raises CorruptAssignment when the ConfigMap exists but cannot be read."""
    assignment = parse_assignment(objects)
    leases, statuses, notes = member_statuses(objects.leases, instance, now)
    generation = assignment.generation if assignment is not None else 0
    coordinator = ""
    if objects.coordinator is not None:
        holder = (objects.coordinator.get("spec") or {}).get("holderIdentity")
        coordinator = holder if isinstance(holder, str) else ""
    if assignment is None:
        notes.append("no assignment published yet: no coordinator has written one")
    else:
        notes += assignment.pin_problems()
        for identity in sorted(assignment.identities - set(statuses)):
            notes.append(f"member {identity} is in the assignment but has no lease: its zones are orphaned")

    zone_rows: list[ZoneRow] = []
    if zones is not None:
        for zone in sorted(set(zones)):
            owner = assignment.owner_of(zone) if assignment is not None else None
            status = statuses.get(owner) if owner is not None else None
            state = str(zone_state(owner, status, generation))
            zone_rows.append(ZoneRow(zone, owner, state, sync_known=False))  # only the owner knows
    else:
        notes.append("zone list unknown: give --zones-from-url, --fake-provider-url or --zones-file")

    counts = {identity: 0 for identity in statuses} | (
        {identity: 0 for identity in assignment.identities} if assignment is not None else {}
    )
    for row in zone_rows:
        if row.owner is not None:
            counts[row.owner] = counts.get(row.owner, 0) + 1
    weights = {m.identity: m.weight for m in assignment.members} if assignment is not None else {}
    members = []
    for identity in sorted(counts):
        status = statuses.get(identity)
        lease = leases.get(identity)
        members.append(
            MemberRow(
                identity=identity,
                state=str(status.state if status is not None else MemberState.EXPIRED),
                weight=status.weight if status is not None else weights.get(identity, 1),
                zones=counts[identity] if zones is not None else None,
                observed_generation=status.observed_generation if status is not None else None,
                last_renew_seen=_rfc3339(lease.renew_time) if lease is not None else None,
            )
        )
    return ShardsView(
        generation=generation,
        coordinator=coordinator,
        self_identity=None,
        members=tuple(members),
        zones=tuple(zone_rows),
        zones_known=zones is not None,
        notes=tuple(notes),
        assignment=assignment.to_document() if assignment is not None else None,
    )


__all__ = [
    "ClusterObjects",
    "ClusterReadError",
    "CorruptAssignment",
    "build_view",
    "member_statuses",
    "parse_assignment",
    "read_objects",
]
