"""The rows of `/shards`, a contract users and scripts rely on (issue 4):

    {"generation": int, "coordinator": str, "self": str,
     "members": [{"identity", "state", "weight", "zones", "observedGeneration", "lastRenewSeen"}],
     "zones": [{"zone", "owner", "state", "lastSync", "lastSyncSeconds", "records", "lastError"}],
     "assignment": {...} | null}

member state: a shardsync.sharding.states.MemberState; zone state: a ZoneState; timestamps RFC 3339 (UTC,
`Z`), null when unknown. `assignment` is the assignment document the replica works under, as the
ConfigMap holds it (`Assignment.to_document()`: members, weights, slot table, overrides, pins), so
`shardsync shards --url` explains and predicts from exactly what the replicas compute owners from; null
when there is none (no generation yet, `--sharding=off`, `--once`). Pure formatting; each ownership mode
fills it in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from shardsync.ownership.port import ZoneStatus
from shardsync.sharding.clock import rfc3339
from shardsync.sharding.states import MemberState, ZoneState


def unix_rfc3339(ts: float) -> str | None:
    """A Unix time as RFC 3339 (None for 0: never)."""
    return rfc3339(datetime.fromtimestamp(ts, UTC)) if ts else None


def member_row(
    identity: str,
    state: MemberState,
    weight: int,
    zones: int,
    observed_generation: int | None,
    last_renew_seen: datetime | None,
) -> dict[str, Any]:
    return {
        "identity": identity,
        "state": str(state),
        "weight": weight,
        "zones": zones,
        "observedGeneration": observed_generation,
        "lastRenewSeen": rfc3339(last_renew_seen) if last_renew_seen is not None else None,
    }


def zone_row(zone: str, owner: str | None, state: ZoneState, status: ZoneStatus | None) -> dict[str, Any]:
    """One zone; `status` is this replica's worker status when it runs the zone (else no sync figures)."""
    return {
        "zone": zone,
        "owner": owner,
        "state": str(state),
        "lastSync": unix_rfc3339(status.last_sync) if status else None,
        "lastSyncSeconds": round(status.last_sync_seconds, 6) if status and status.syncs else None,
        "records": status.records if status and status.syncs else None,
        "lastError": status.last_error if status else "",
    }


def snapshot(
    generation: int,
    coordinator: str,
    identity: str,
    members: Iterable[dict[str, Any]],
    zones: Iterable[dict[str, Any]],
    assignment: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "generation": generation,
        "coordinator": coordinator,
        "self": identity,
        "members": list(members),
        "zones": list(zones),
        "assignment": dict(assignment) if assignment is not None else None,
    }


def coordinator(observed: str, identity: str, leading: bool) -> str:
    """The coordinator to name: the lease holder last observed, except this replica once it no longer
    leads (lease released on a graceful stop, or lapsed on our clock) though its last observation says so."""
    return "" if observed == identity and not leading else observed


def zone_counts(owners: Mapping[str, str | None]) -> dict[str, int]:
    """Zones per owner, from zone → owner."""
    counts: dict[str, int] = {}
    for owner in owners.values():
        if owner is not None:
            counts[owner] = counts.get(owner, 0) + 1
    return counts
