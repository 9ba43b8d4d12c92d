"""The launcher's live table: what every replica says on /shards, folded into one screen. Pure.

Each replica reports its own view; a zone counts as synced when the replica that owns it says so (its own
row has a lastSync), since only the owner knows. Generation and coordinator are taken from the replica
with the newest generation; replicas still on an older one are visible in the GEN column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shardsync.sharding.states import ZoneState
from shardsync.shards.table import grid


@dataclass(frozen=True, slots=True)
class ReplicaSnapshot:
    identity: str
    pid: int | None
    port: int
    process: str  # running, stopping, exited 1, restarting in 3s ...
    shards: Mapping[str, Any] | None  # its last /shards answer (None: not answering yet)
    restarts: int = 0


@dataclass(frozen=True, slots=True)
class Progress:
    generation: int
    coordinator: str
    zones: int
    synced: int
    records: int  # records in the zones, as their owners last read them
    written: int  # record changes applied to the provider since start
    errors: int


def own_rows(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    me = doc.get("self")
    return [z for z in doc.get("zones") or [] if isinstance(z, Mapping) and z.get("owner") == me]


def _synced(row: Mapping[str, Any]) -> bool:
    return row.get("state") == ZoneState.ACTIVE and row.get("lastSync") is not None


def _own_state(doc: Mapping[str, Any]) -> str:
    me = doc.get("self")
    for member in doc.get("members") or []:
        if isinstance(member, Mapping) and member.get("identity") == me:
            return str(member.get("state") or "?")
    return "not a member"


def progress(replicas: Sequence[ReplicaSnapshot], zone_total: int, written: int) -> Progress:
    docs = [r.shards for r in replicas if r.shards is not None]
    newest = max(docs, key=lambda d: int(d.get("generation") or 0), default=None)
    # Per zone, so a zone two replicas both report (during a handoff, or unsharded) counts once.
    synced: set[str] = set()
    records: dict[str, int] = {}
    errors: set[str] = set()
    for doc in docs:
        for row in own_rows(doc):
            zone = str(row.get("zone"))
            if _synced(row):
                synced.add(zone)
            records[zone] = max(records.get(zone, 0), int(row.get("records") or 0))
            if row.get("lastError"):
                errors.add(zone)
    return Progress(
        generation=int(newest.get("generation") or 0) if newest else 0,
        coordinator=str(newest.get("coordinator") or "-") if newest else "-",
        zones=zone_total,
        synced=len(synced),
        records=sum(records.values()),
        written=written,
        errors=len(errors),
    )


def replica_rows(replicas: Sequence[ReplicaSnapshot], coordinator: str) -> list[list[Any]]:
    rows = []
    for r in replicas:
        doc = r.shards
        mine = own_rows(doc) if doc is not None else []
        rows.append(
            [
                r.identity,
                r.pid if r.pid is not None else "-",
                r.port,
                r.process
                if r.restarts == 0
                else f"{r.process} ({r.restarts} restart{'s' * (r.restarts > 1)})",
                _own_state(doc) if doc is not None else "-",
                doc.get("generation", "-") if doc is not None else "-",
                len(mine) if doc is not None else "-",
                sum(1 for z in mine if _synced(z)) if doc is not None else "-",
                sum(int(z.get("records") or 0) for z in mine) if doc is not None else "-",
                sum(1 for z in mine if z.get("lastError")) if doc is not None else "-",
                "coordinator" if r.identity == coordinator else "",
            ]
        )
    return rows


def render(
    replicas: Sequence[ReplicaSnapshot],
    *,
    desired: int,
    zone_total: int,
    written: int,
    elapsed: float,
    run_dir: str,
    footer: str = "",
    events: Sequence[str] = (),
) -> str:
    p = progress(replicas, zone_total, written)
    minutes, seconds = divmod(int(elapsed), 60)
    lines = [
        f"shardsync local   up {minutes:02d}:{seconds:02d}   replicas {desired}   run dir {run_dir}",
        f"generation {p.generation}   coordinator {p.coordinator}   "
        f"zones synced {p.synced}/{p.zones}   records {p.records}   written {p.written}"
        + (f"   zones with errors {p.errors}" if p.errors else ""),
        "",
        grid(
            [
                "REPLICA",
                "PID",
                "PORT",
                "PROCESS",
                "STATE",
                "GEN",
                "ZONES",
                "SYNCED",
                "RECORDS",
                "ERRORS",
                "ROLE",
            ],
            replica_rows(replicas, p.coordinator),
        ),
    ]
    if events:
        lines += ["", *events]
    if footer:
        lines += ["", footer]
    return "\n".join(lines)
