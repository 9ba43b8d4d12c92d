"""The zones and records `FakeStore.seed(n, r)` adds, by a layout that callers can compute without asking.

Zones `zone-0000.example` … `zone-<n-1>.example` (four digits, more when n > 10,000, so names sort in
index order), each with r A records `host-0000.<zone>` … whose target is
`10.<i // 256 % 256>.<i % 256>.<j % 254 + 1>` for zone i, record j. Seeded records carry no TXT ownership
record, so a replica treats them as someone else's and leaves them alone.
"""

from __future__ import annotations

from shardsync.records.endpoint import Endpoint

SEED_DOMAIN = "example"


def _width(count: int) -> int:
    return max(4, len(str(max(count - 1, 0))))


def zone_name(index: int, count: int) -> str:
    """Name of seeded zone `index` out of `count`."""
    return f"zone-{index:0{_width(count)}d}.{SEED_DOMAIN}"


def seeded_records(index: int, zone: str, count: int) -> list[Endpoint]:
    """The `count` A records seeded into zone number `index`."""
    width = _width(count)
    prefix = f"10.{index // 256 % 256}.{index % 256}"
    return [
        Endpoint.new(f"host-{j:0{width}d}.{zone}", "A", [f"{prefix}.{j % 254 + 1}"]) for j in range(count)
    ]
