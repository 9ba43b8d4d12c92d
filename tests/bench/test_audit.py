"""bench/audit.py: finding two writers whose writes to one zone overlap in the provider's audit."""

from __future__ import annotations

import pytest

from bench.audit import overlapping_writes
from shardsync.providers.fake.audit import AuditEntry

Z0 = "zone-0000.example"
Z1 = "zone-0001.example"


def entry(seq: int, writer: str, start: float, end: float, zone: str = Z0, outcome: str = "ok") -> AuditEntry:
    return AuditEntry.from_json(
        {
            "seq": seq,
            "op": "apply",
            "zone": zone,
            "writer": writer,
            "generation": 1,
            "fence": None,
            "start": start,
            "end": end,
            "startWall": start,
            "endWall": end,
            "outcome": outcome,
        }
    )


def test_overlapping_writes_finds_two_writers_at_once() -> None:
    e1, e2 = entry(0, "a", 1.0, 2.0), entry(1, "b", 1.5, 2.5)
    assert overlapping_writes([e2, e1]) == [(e1, e2)]


@pytest.mark.parametrize(
    "audit",
    [
        [entry(0, "a", 1.0, 2.0), entry(1, "a", 1.5, 2.5)],  # same writer
        [entry(0, "a", 1.0, 2.0), entry(1, "b", 2.0, 3.0)],  # touching, not overlapping
        [entry(0, "a", 1.0, 2.0), entry(1, "b", 1.5, 2.5, zone=Z1)],  # different zones
        [entry(0, "a", 1.0, 2.0), entry(1, "b", 1.5, 2.5, outcome="fenced")],  # refused write
    ],
)
def test_overlapping_writes_ignores_safe_pairs(audit: list[AuditEntry]) -> None:
    assert overlapping_writes(audit) == []


def test_overlapping_writes_long_write_spanning_several() -> None:
    long = entry(0, "a", 0.0, 10.0)
    audit = [long, entry(1, "b", 1.0, 2.0), entry(2, "a", 3.0, 4.0), entry(3, "c", 11.0, 12.0)]
    assert overlapping_writes(audit) == [(long, audit[1])]
    refused = entry(4, "d", 5.0, 6.0, outcome="fenced")
    assert (long, refused) in overlapping_writes([*audit, refused], include_refused=True)
