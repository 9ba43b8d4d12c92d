"""Every replica's sync state in one view, for `shardsync shards --url`: only a zone's owner knows when it
last synced it, so the answering replica's rows for zones other replicas own say nothing about that.

`member_urls` finds where the other members answer: `--member-url` (a template, `{identity}` replaced, e.g.
`http://{identity}.shardsync.shardsync.svc:7979`), else the running `shardsync local` whose run.json lists
the URL asked (its `statusUrls`). `gather` reads those members' /shards concurrently and takes each owner's
own rows (state, last sync, duration, records, error) into the view; the zones of a member that could not
be read keep no sync figures, are marked `sync_known=False` (the table prints "unknown", not "-", which
would read as never synced), and a note says whose and why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import httpx
import orjson

from shardsync.shards.view import ShardsView, ZoneRow

ReadView = Callable[[str], ShardsView]  # a member's status URL → its view; raises Exception when unreadable


def _base(url: str) -> str:
    """scheme://host:port of a status URL, for comparing two of them."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return url
    return f"{parsed.scheme}://{parsed.host}:{parsed.port or ''}"


def local_status_urls(run_dir: Path | None = None) -> dict[str, str]:
    """identity → status URL of the running `shardsync local`'s replicas ({} when there is none)."""
    from shardsync.local import control

    try:
        doc = orjson.loads((control.find_run_dir(run_dir) / "run.json").read_bytes())
    except (control.ControlError, OSError, orjson.JSONDecodeError):
        return {}
    urls = doc.get("statusUrls") if isinstance(doc, dict) else None
    if not isinstance(urls, dict):
        return {}
    return {str(k): str(v) for k, v in urls.items() if isinstance(v, str)}


def member_urls(
    view: ShardsView, asked: str, template: str | None, local: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Where each other member of `view` answers, as far as is known (see the module docstring)."""
    others = [m.identity for m in view.members if m.identity != view.self_identity]
    if template:
        return {identity: template.replace("{identity}", identity) for identity in others}
    local = local_status_urls() if local is None else local
    if _base(asked) not in {_base(u) for u in local.values()}:
        return {}  # another deployment than the one asked about
    return {identity: local[identity] for identity in others if identity in local}


def gather(view: ShardsView, urls: Mapping[str, str], read: ReadView) -> ShardsView:
    """`view` with each zone's sync state taken from its owner's own /shards (see the module docstring)."""
    owners = sorted({z.owner for z in view.zones if z.owner and z.owner != view.self_identity})
    if not owners:
        return view
    reachable = [o for o in owners if o in urls]
    views: dict[str, ShardsView] = {}
    problems: dict[str, str] = {
        o: "its status address is unknown (--member-url)" for o in owners if o not in urls
    }
    with ThreadPoolExecutor(max_workers=min(8, max(1, len(reachable)))) as pool:
        futures = {o: pool.submit(read, urls[o]) for o in reachable}
        for owner, future in futures.items():
            try:
                views[owner] = future.result()
            except Exception as exc:  # every failure reads as a message; the rest of the view stands
                problems[owner] = f"{urls[owner]}: {exc}"
    theirs: dict[str, ZoneRow] = {}
    for owner, peer in views.items():
        theirs |= {z.zone: z for z in peer.zones if z.owner == owner}
    rows = []
    for row in view.zones:
        if row.owner is None or row.owner == view.self_identity:
            rows.append(row)
        elif row.zone in theirs and row.owner in views:
            own = theirs[row.zone]
            rows.append(
                replace(
                    row,
                    state=own.state,
                    last_sync=own.last_sync,
                    last_sync_seconds=own.last_sync_seconds,
                    records=own.records,
                    last_error=own.last_error,
                )
            )
        else:
            rows.append(replace(row, sync_known=False))
    notes = list(view.notes)
    if views:
        notes.append(f"sync state of other owners' zones read from their /shards: {', '.join(sorted(views))}")
    for owner, why in sorted(problems.items()):
        count = sum(1 for z in rows if z.owner == owner and not z.sync_known)
        notes.append(f"sync state of the {count} zones {owner} owns unknown: {why}")
    return replace(view, zones=tuple(rows), notes=tuple(notes))
