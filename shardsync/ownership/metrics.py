"""The metrics of the ownership modes (names unchanged: dashboards rely on them)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

GENERATION = Gauge("shardsync_assignment_generation", "The assignment generation this replica works under")
MOVED = Counter("shardsync_zones_moved_total", "Zones handed to or taken from this replica", ["direction"])
HANDOFF_WAIT = Histogram(
    "shardsync_handoff_wait_seconds",
    "From seeing a gained zone to starting it: the wait for every previous writer of the zone to let it go",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60),
)
