"""Text tables for people: the /shards view, an explanation, a what-if. Scripts use `-o json` instead.

Zones are listed one per row only when there are few (`ZONE_ROWS`) or when asked (`all_zones`): at 100,000
zones a list says less than a summary, so the default is a per-owner count by state plus the zones that
need attention (not active, or with an error).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from tabulate import tabulate

from shardsync.sharding.states import ZoneState
from shardsync.shards.analysis import WhatIf
from shardsync.shards.view import ShardsView, ZoneRow

ZONE_ROWS = 20  # list zones one by one up to this many
ATTENTION_ROWS = 10  # zones needing attention listed in a summary


def grid(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain aligned table (no borders: easy to read, grep and paste)."""
    return tabulate(
        list(rows), headers=list(headers), tablefmt="simple", missingval="-", disable_numparse=True
    )


def _dash(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def members_table(view: ShardsView) -> str:
    rows = []
    for m in view.members:
        marks = []
        if m.identity == view.coordinator:
            marks.append("coordinator")
        if view.self_identity is not None and m.identity == view.self_identity:
            marks.append("self")
        rows.append(
            [
                m.identity,
                m.state,
                m.weight,
                _dash(m.zones),
                _dash(m.observed_generation),
                _dash(m.last_renew_seen),
                ",".join(marks),
            ]
        )
    return grid(["MEMBER", "STATE", "WEIGHT", "ZONES", "OBSERVED-GEN", "LAST-RENEW", "ROLE"], rows)


def _zone_row(z: ZoneRow) -> list[str]:
    if not z.sync_known:  # "-" would read as never synced
        return [z.zone, _dash(z.owner), z.state, "unknown", "unknown", "unknown", z.last_error]
    seconds = f"{z.last_sync_seconds:.3f}" if z.last_sync_seconds is not None else None
    return [
        z.zone,
        _dash(z.owner),
        z.state,
        _dash(z.last_sync),
        _dash(seconds),
        _dash(z.records),
        z.last_error,
    ]


def zones_table(zones: Sequence[ZoneRow]) -> str:
    return grid(["ZONE", "OWNER", "STATE", "LAST-SYNC", "SECONDS", "RECORDS", "ERROR"], map(_zone_row, zones))


def zones_summary(view: ShardsView) -> str:
    """Per owner: zones by state; then the zones that need attention."""
    states: list[str] = [s for s in ZoneState if any(z.state == s for z in view.zones)]
    states += sorted({z.state for z in view.zones} - set(ZoneState))
    owners = view.owner_counts()
    rows = []
    for owner in sorted(owners, key=lambda o: (o == "-", o)):
        mine = [z for z in view.zones if (z.owner or "-") == owner]
        by_state = Counter(z.state for z in mine)
        errors = sum(1 for z in mine if z.last_error)
        rows.append([owner, owners[owner], *(by_state.get(s, 0) for s in states), errors])
    totals = view.state_counts()
    rows.append(
        [
            "total",
            len(view.zones),
            *(totals.get(s, 0) for s in states),
            sum(1 for z in view.zones if z.last_error),
        ]
    )
    text = grid(["OWNER", "ZONES", *(s.upper() for s in states), "ERRORS"], rows)
    attention = [z for z in view.zones if z.state != ZoneState.ACTIVE or z.last_error]
    if attention:
        shown = attention[:ATTENTION_ROWS]
        more = f" (first {len(shown)} of {len(attention)})" if len(attention) > len(shown) else ""
        text += f"\n\nzones needing attention{more}:\n" + zones_table(shown)
    return text


def render_view(view: ShardsView, all_zones: bool = False) -> str:
    header = (
        f"generation {view.generation}   coordinator {view.coordinator or '-'}"
        + (f"   answered by {view.self_identity}" if view.self_identity else "")
        + (f"   zones {len(view.zones)}" if view.zones_known else "")
    )
    parts = [header, "", members_table(view)]
    if view.zones_known:
        parts.append("")
        if not view.zones:
            parts.append("no zones")
        elif all_zones or len(view.zones) <= ZONE_ROWS:
            parts.append(zones_table(view.zones))
        else:
            parts.append(zones_summary(view))
            parts.append(f"\n({len(view.zones)} zones summarised; --zones lists them all)")
    if view.notes:
        parts.append("")
        parts += [f"note: {n}" for n in view.notes]
    return "\n".join(parts)


def render_explanation(doc: dict[str, Any]) -> str:
    lines = [
        f"zone         {doc['zone']}",
        f"owner        {_dash(doc['owner'])}   (generation {doc['generation']}, {doc['members']} members)",
        f"pin          {_pin_text(doc)}",
    ]
    if doc.get("slot") is not None:
        lines += [
            f"slot         {doc['slot']} of {doc['slots']}  (md5 of the zone name, low bits)",
            f"slot owner   {_dash(doc.get('slotOwner'))}  holds {doc['slotsOfOwner']} slots, given by the "
            "coordinator",
            f"override     {_override_text(doc)}",
            f"why          {doc['reason']}",
        ]
        return "\n".join(lines)
    if doc["ringPoint"] is not None:
        lines += [
            f"zone hash    {doc['zonePoint']}",
            f"ring point   {doc['ringPoint']}  (the first member point clockwise from the zone hash)",
            f"ring owner   {doc['ringOwner']}  weight {doc['weight']}, {doc['points']} points, "
            f"{doc['share']:.1%} of the ring",
        ]
    else:
        lines.append(f"why          {doc['reason']}")
    lines.append(f"ring         {doc['ring']['hash']}, {doc['ring']['vnodes']} points per unit of weight")
    return "\n".join(lines)


def _override_text(doc: dict[str, Any]) -> str:
    to = doc.get("overriddenTo")
    if to is None:
        return f"none (the zone follows its slot; {doc.get('overrides', 0)} zones in all are overridden)"
    used = "in effect" if doc["owner"] == to and not doc["pinEffective"] else "the pin wins"
    return f"to {to} ({used}; the coordinator's, to even what whole slots could not)"


def _pin_text(doc: dict[str, Any]) -> str:
    if doc["pinnedTo"] is None:
        return "none"
    if doc["pinEffective"]:
        return f"pinned to {doc['pinnedTo']} (in effect)"
    return f"pinned to {doc['pinnedTo']}, not a member: ignored until it joins"


def render_what_if(w: WhatIf, survivors: Iterable[str]) -> str:
    basis = f"{w.zones} sample zone names (no zone list given)" if w.estimated else f"{w.zones} zones"
    lines = [
        f"scale {w.statefulset}: {w.replicas_before} -> {w.replicas_after} replicas, over {basis}",
        f"would move   {w.moved} zones ({w.fraction:.1%}); ideal {w.ideal:.1%}"
        + (f" ({w.ideal * w.zones:.0f} zones)" if not w.estimated else ""),
        f"between members that stay: {w.between_survivors(survivors)}",
    ]
    if w.flows:
        lines += ["", grid(["FROM", "TO", "ZONES"], ([_dash(s), _dash(d), n] for s, d, n in w.flows))]
    return "\n".join(lines)
