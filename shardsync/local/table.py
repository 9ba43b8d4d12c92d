"""The launcher's live table: what every replica says on /shards, folded into one screen. Pure.

Each replica reports its own view; a zone counts as synced when the replica that owns it says so (its own
row has a lastSync), since only the owner knows. The generation is the newest any replica reports; replicas
still on an older one are visible in the GEN column. The coordinator is the replica that says it is (only
the holder knows it still holds the lease: another replica's view lags by up to a renew interval, and a
replica that released the lease on a graceful stop no longer claims it); when none does, "-".
RECORDS are counted at the provider when the launcher could read them (what the zones hold now), else as
the owners last read them before their last write.

`Milestones` turns successive screens into event lines: "all 50 zones synced in 4.2s" (at start, and again
after each scale once a new generation is out), and per new generation how many zones moved between whom.
"""

from __future__ import annotations

from collections import Counter
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


def coordinator_of(replicas: Sequence[ReplicaSnapshot]) -> str:
    """The replica that says it is the coordinator (a running one first); "-" when none does, unless the
    one the newest views name is running but did not answer this time."""
    claims = [r for r in replicas if r.shards is not None and r.shards.get("coordinator") == r.identity]
    if claims:
        return min(claims, key=lambda r: r.process != "running").identity
    docs = [r.shards for r in replicas if r.shards is not None]
    newest = max(docs, key=lambda d: int(d.get("generation") or 0), default=None)
    named = str(newest.get("coordinator") or "") if newest else ""
    silent = {r.identity for r in replicas if r.shards is None and r.process == "running"}
    return named if named in silent else "-"


def progress(
    replicas: Sequence[ReplicaSnapshot],
    zone_total: int,
    written: int,
    provider_records: Mapping[str, int] | None = None,
) -> Progress:
    """The header figures; `provider_records` (zone → records at the provider) counts RECORDS when given."""
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
    if provider_records is not None:
        records = dict(provider_records)
    return Progress(
        generation=int(newest.get("generation") or 0) if newest else 0,
        coordinator=coordinator_of(replicas),
        zones=zone_total,
        synced=len(synced),
        records=sum(records.values()),
        written=written,
        errors=len(errors),
    )


def replica_rows(
    replicas: Sequence[ReplicaSnapshot], coordinator: str, provider_records: Mapping[str, int] | None = None
) -> list[list[Any]]:
    rows = []
    for r in replicas:
        doc = r.shards
        mine = own_rows(doc) if doc is not None else []
        if provider_records is not None:
            records = sum(provider_records.get(str(z.get("zone")), 0) for z in mine)
        else:
            records = sum(int(z.get("records") or 0) for z in mine)
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
                records if doc is not None else "-",
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
    provider_records: Mapping[str, int] | None = None,
) -> str:
    p = progress(replicas, zone_total, written, provider_records)
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
            replica_rows(replicas, p.coordinator, provider_records),
        ),
    ]
    if events:
        lines += ["", *events]
    if footer:
        lines += ["", footer]
    return "\n".join(lines)


def owners_of(replicas: Sequence[ReplicaSnapshot]) -> tuple[int, dict[str, str]]:
    """The newest generation and its zone → owner map, as a replica on that generation lists it."""
    docs = [r.shards for r in replicas if r.shards is not None]
    newest = max(docs, key=lambda d: int(d.get("generation") or 0), default=None)
    if newest is None:
        return 0, {}
    owners = {
        str(z.get("zone")): str(z.get("owner") or "-")
        for z in newest.get("zones") or []
        if isinstance(z, Mapping)
    }
    return int(newest.get("generation") or 0), owners


def moves_line(generation: int, before: Mapping[str, str], after: Mapping[str, str]) -> str:
    """`generation 3: 8 of 50 zones moved (shardsync-0→shardsync-3 3, ...)`; the first: who got what."""
    if not before:
        counts = Counter(after.values())
        spread = ", ".join(f"{owner} {n}" for owner, n in sorted(counts.items()))
        return f"generation {generation}: {len(after)} zones assigned ({spread})"
    flows = Counter((before.get(z, "-"), owner) for z, owner in after.items() if before.get(z, "-") != owner)
    moved = sum(flows.values())
    text = f"generation {generation}: {moved} of {len(after)} zones moved"
    if flows:
        text += " (" + ", ".join(f"{a}→{b} {n}" for (a, b), n in sorted(flows.items())) + ")"
    return text


class Milestones:
    """Event lines from successive screens (see the module docstring)."""

    def __init__(self, started: float) -> None:
        self._since = started
        self._what = ""  # "" at start, "the scale" after one
        self._after_generation = -1  # all-synced waits for a generation newer than this
        self._done = False
        self._generation = 0
        self._owners: dict[str, str] = {}

    def scaled(self, now: float, generation: int) -> None:
        """A scale was asked for: report the next time every zone is synced on a newer generation."""
        self._since, self._what, self._after_generation, self._done = now, "the scale", generation, False

    def update(self, replicas: Sequence[ReplicaSnapshot], zone_total: int, now: float) -> list[str]:
        lines = []
        generation, owners = owners_of(replicas)
        if generation > self._generation and owners:
            lines.append(moves_line(generation, self._owners, owners))
            self._generation, self._owners = generation, owners
        p = progress(replicas, zone_total, 0)
        # Every running replica answers on the newest generation: an old owner's rows no longer count.
        settled = all(
            r.shards is not None and int(r.shards.get("generation") or 0) == p.generation
            for r in replicas
            if r.process == "running"
        )
        if (
            not self._done
            and zone_total
            and settled
            and p.synced == zone_total
            and p.generation > self._after_generation
        ):
            self._done = True
            after = f" after {self._what}" if self._what else ""
            lines.append(f"all {zone_total} zones synced in {now - self._since:.1f}s{after}")
        return lines


def records_by_zone(names: Sequence[str], zones: Sequence[str]) -> dict[str, int]:
    """Records per zone from the provider's record names (each counted in the closest enclosing zone)."""
    known = set(zones)
    counts = dict.fromkeys(known, 0)
    for name in names:
        labels = name.rstrip(".").lower().split(".")
        for i in range(len(labels)):
            zone = ".".join(labels[i:])
            if zone in known:
                counts[zone] += 1
                break
    return counts
