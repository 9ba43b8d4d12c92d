"""What a zone reconcile reports about single records: name conflicts, changes held back by ownership or
policy, and records the provider refused — each a log line, a metric and, where a source object is to
blame, a Kubernetes Event on it (the worker's reporting, apart from its loop)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter

from shardsync.kube.events import EventRecorder
from shardsync.logs import get_logger
from shardsync.providers.base import Rejected
from shardsync.records.endpoint import RESOURCE_LABEL
from shardsync.records.plan import Conflict, Skipped
from shardsync.sources.table import event_ref

log = get_logger("shardsync.reconcile.worker")  # the worker's lines, as before this module was split from it

REJECTED = Counter("shardsync_records_rejected_total", "Records the provider refused (others applied)")
CONFLICTS = Counter(
    "shardsync_conflicts_total",
    "Records claimed by several source objects where one object's endpoint won (as external-dns resolves it)",
)
SKIPPED = Counter("shardsync_changes_skipped_total", "Changes not made because of ownership", ["reason"])


@dataclass(frozen=True, slots=True)
class ZoneReports:
    """The worker's reports, with Events through `events` (None: logs and metrics only)."""

    events: EventRecorder | None = None

    def conflicts(self, zone: str, conflicts: list[Conflict]) -> None:
        for conflict in conflicts:
            CONFLICTS.inc()
            winner = conflict.winner.labels.get(RESOURCE_LABEL, "?")
            for loser in conflict.loser_resources:
                message = (
                    f"{conflict.winner.dns_name} {conflict.winner.record_type} is published from {winner}; "
                    f"this object's endpoint is not ({conflict.reason})"
                )
                log.warning(
                    "name conflict", zone=zone, name=conflict.winner.dns_name, winner=winner, loser=loser
                )
                self.event(loser, "DNSNameConflict", message)

    def skipped(self, zone: str, skipped: list[Skipped], seen: set[tuple[tuple[str, str, str], str]]) -> None:
        """Count every skipped change; log each once per zone (`seen`: the zone's marks so far)."""
        for item in skipped:
            SKIPPED.labels(str(item.reason)).inc()
            mark = (item.endpoint.key, str(item.reason))
            if mark in seen:
                continue
            seen.add(mark)
            log.info(
                "change skipped",
                zone=zone,
                name=item.endpoint.dns_name,
                type=item.endpoint.record_type,
                reason=str(item.reason),
                owner=item.owner,
            )

    def rejected(self, zone: str, rejected_list: list[Rejected]) -> None:
        for rejected in rejected_list:
            REJECTED.inc()
            log.error(
                "record rejected by the provider",
                zone=zone,
                name=rejected.endpoint.dns_name,
                type=rejected.endpoint.record_type,
                reason=rejected.reason,
            )
            resource = rejected.endpoint.labels.get(RESOURCE_LABEL, "")
            self.event(resource, "DNSRecordRejected", str(rejected))

    def event(self, resource: str, reason: str, message: str) -> None:
        """An Event on the source object an endpoint's `resource` label names (the source table knows its
        kind and apiVersion)."""
        ref = event_ref(resource)
        if self.events is not None and ref is not None:
            self.events.record(ref, reason, message)
