"""Readings of the fake provider's write audit that check safety: did two writers ever write one zone at once?

Test and bench tooling, not production: the provider only records the audit (shardsync/providers/fake/
audit.py); the bench's safety figures and the ownership tests judge it here.
"""

from __future__ import annotations

from collections.abc import Iterable

from shardsync.providers.fake.audit import AuditEntry


def overlapping_writes(
    audit: Iterable[AuditEntry], *, include_refused: bool = False
) -> list[tuple[AuditEntry, AuditEntry]]:
    """Pairs (earlier, later) of applies by two different writers to one zone whose intervals overlap.

    The safety invariant says there are none. Only successful applies count by default: a fenced or failed
    apply changed nothing. Intervals that merely touch (one ends exactly when the other starts) do not
    overlap.
    """
    by_zone: dict[str, list[AuditEntry]] = {}
    for entry in audit:
        if entry.op == "apply" and (include_refused or entry.outcome == "ok"):
            by_zone.setdefault(entry.zone, []).append(entry)
    found: list[tuple[AuditEntry, AuditEntry]] = []
    for entries in by_zone.values():
        entries.sort(key=lambda e: (e.start, e.end, e.seq))
        active: list[AuditEntry] = []
        for entry in entries:
            active = [a for a in active if a.end > entry.start]
            found.extend((a, entry) for a in active if a.writer != entry.writer)
            active.append(entry)
    return found
