"""The worker's change log: one line per record change applied (or, under --dry-run, planned), as external-dns
logs its changes ("Desired change: CREATE foo.example.org A"), and one summary line per zone and sync.

    event="change applied" action=CREATE name=www.ex.org type=A targets=192.0.2.1 ttl=300 zone=ex.org
    event="zone changes applied" zone=ex.org generation=3 create=2 update=0 delete=0

`action` is CREATE, UPDATE or DELETE; `targets` are joined with ";" as external-dns prints them; `ttl` and
`set_identifier` appear when set; an UPDATE adds `old_targets` / `old_ttl` where they changed. The TXT
ownership records are changes like any other (external-dns logs them too), so they get lines of their own,
marked `ownership=true`. The first `LISTED` lines of one zone's sync are at info; the rest at debug, and the
summary line then says how many were not listed (`unlisted=`). Under --dry-run the events are
"dry run: change planned" and "dry run: changes not applied".
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from prometheus_client import Counter

from shardsync.logs import KVLogger
from shardsync.reconcile.batches import counts_of
from shardsync.records.endpoint import Changes, Endpoint
from shardsync.records.registry import Key, parse_labels

LISTED = 20  # change lines at info per zone per sync; a bigger batch is summarised by its counts
CHANGES = Counter("shardsync_changes_applied_total", "Record changes applied, by type", ["type"])


def _targets(ep: Endpoint) -> str:
    return ";".join(ep.targets)


def _is_ownership(ep: Endpoint) -> bool:
    return ep.record_type == "TXT" and bool(ep.targets) and parse_labels(ep.targets[0]) is not None


def change_fields(action: str, ep: Endpoint, zone: str, old: Endpoint | None = None) -> dict[str, Any]:
    """One change's fields, in the order a reader compares them with external-dns's line."""
    fields: dict[str, Any] = {"action": action, "name": ep.dns_name, "type": ep.record_type}
    fields["targets"] = _targets(ep)
    if ep.ttl:
        fields["ttl"] = ep.ttl
    if ep.set_identifier:
        fields["set_identifier"] = ep.set_identifier
    fields["zone"] = zone
    if old is not None:
        if old.targets != ep.targets:
            fields["old_targets"] = _targets(old)
        if old.ttl != ep.ttl:
            fields["old_ttl"] = old.ttl
    if _is_ownership(ep):
        fields["ownership"] = True
    return fields


class ZoneChangeLog:
    """One zone's sync: `add` what was applied (or planned) as it happens, `close` with the summary line.
    Applied changes are counted in shardsync_changes_applied_total too."""

    __slots__ = ("counts", "debug", "dry_run", "limit", "listed", "log", "unlisted", "zone")

    def __init__(self, log: KVLogger, zone: str, *, dry_run: bool = False, limit: int = LISTED) -> None:
        self.log = log
        self.zone = zone
        self.dry_run = dry_run
        self.limit = limit
        self.listed = 0
        self.unlisted = 0
        self.counts = {"create": 0, "update": 0, "delete": 0}
        self.debug = log.debug_enabled()

    def add(self, changes: Changes, rejected: Collection[Key] = ()) -> None:
        """Log and count `changes`, leaving out the records whose keys are in `rejected`."""
        for kind, n in counts_of(changes, rejected).items():
            self.counts[kind] += n
            if n and not self.dry_run:
                CHANGES.labels(kind).inc(n)
        for ep in changes.create:
            if ep.key not in rejected:
                self._line("CREATE", ep)
        for old, new in zip(changes.update_old, changes.update_new, strict=True):
            if new.key not in rejected:
                self._line("UPDATE", new, old)
        for ep in changes.delete:
            if ep.key not in rejected:
                self._line("DELETE", ep)

    def _line(self, action: str, ep: Endpoint, old: Endpoint | None = None) -> None:
        event = "dry run: change planned" if self.dry_run else "change applied"
        if self.listed < self.limit:
            self.listed += 1
            self.log.info(event, **change_fields(action, ep, self.zone, old))
            return
        self.unlisted += 1
        if self.debug:  # a start-up sync can change thousands of records: no fields built for nobody
            self.log.debug(event, **change_fields(action, ep, self.zone, old))

    def close(self, **fields: Any) -> None:
        """The zone's summary line (with `fields` such as the generation), when anything changed."""
        if not any(self.counts.values()):
            return
        fields |= self.counts
        if self.unlisted:
            fields["unlisted"] = self.unlisted
        event = "dry run: changes not applied" if self.dry_run else "zone changes applied"
        self.log.info(event, zone=self.zone, **fields)
