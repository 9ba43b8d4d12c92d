"""The simulation's table, as text (printed at the end of a run) or Markdown (docs/bench.md, "At scale")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tabulate import tabulate

HEADERS = [
    "N",
    "zones",
    "event",
    "max/mean",
    "moved",
    "moved/ideal",
    "s to full",
    "lease writes/s",
    "member ev/s",
    "coordinator ev/s",
    "member peak",
    "deliveries/s",
    "requests/s",
    "assignment B",
    "wall s",
]


def _count(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1_000 and n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def _num(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def rows(doc: Mapping[str, Any]) -> list[list[str]]:
    table = []
    for r in doc.get("rows", []):
        table.append(
            [
                str(r["replicas"]),
                _count(r["zones"]),
                r["event"],
                _num(r["balance_max_over_mean"], ".2f"),
                f"{r['zones_moved']:,}",
                _num(r["moved_ratio"], ".2f"),
                _num(r["seconds_to_full_ownership"], ".1f"),
                _num(r["lease_writes_per_second"], ",.1f"),
                _num(r["watch_events_per_second_per_member"], ",.1f"),
                _num(r["watch_events_per_second_coordinator"], ",.1f"),
                f"{r['watch_events_per_second_per_member_peak']:,}",
                _num(r["watch_deliveries_per_second"], ",.0f"),
                _num(r["api_requests_per_second"], ",.0f"),
                f"{r['assignment_bytes']:,}",
                _num(r["wall_seconds"], ".1f"),
            ]
        )
    return table


def render(doc: Mapping[str, Any], markdown: bool = False) -> str:
    t = doc.get("timing", {})
    m = doc.get("machine", {})
    head = (
        f"shardsync protocol simulation (seed {doc.get('seed')}): lease {t.get('lease_duration')} s, renew "
        f"{t.get('renew_interval')} s, settle {t.get('settle')} s, restart grace {t.get('restart_grace')} s; "
        f"{_num(doc.get('duration_seconds'), '.0f')} s on {m.get('cpu_model', '?')}, Python {m.get('python')}"
    )
    table = tabulate(
        rows(doc),
        headers=HEADERS,
        tablefmt="github" if markdown else "simple",
        disable_numparse=True,
        colalign=("right", "right", "left", *["right"] * (len(HEADERS) - 3)),
    )
    all_rows = doc.get("rows", [])
    overlaps = sum(r["overlapping_zones"] for r in all_rows)
    stale = [r for r in all_rows if r["stale_view_waits"]]
    notes = [
        f"zones run by two replicas at once: {overlaps} (must be 0)",
        "moved/ideal: zones whose owner changed / (zones / the larger of N before and after); "
        "s to full: until every zone runs at exactly one replica under the final generation "
        "(rolling restart: the longest of the restarts)",
        "member ev/s, coordinator ev/s: watch events a replica that does not lead, and the coordinator, "
        "receive a second in the steady state; member peak: the busiest second of one that did not lead "
        "during the event; deliveries/s and requests/s: all replicas together, steady state",
    ]
    if stale:
        worst = max(r["stale_view_wait_max_seconds"] for r in stale)
        notes.append(
            f"rule-4 waits on a view older than the blocker's expiry: in {len(stale)} rows, "
            f"up to {worst:.2f} s"
        )
    return "\n".join([head, "", table, "", *notes])
