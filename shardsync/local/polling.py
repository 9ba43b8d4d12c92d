"""What `shardsync local`'s live table reads over HTTP each tick: a replica's /shards, and the fake
provider's records and audit. Every read is best effort: a failure reads as "not known now", never as an
error."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from shardsync.local.table import records_by_zone


async def replica_shards(client: httpx.AsyncClient, port: int) -> Any | None:
    """The replica's /shards document, or None while it does not answer."""
    try:
        resp = await client.get(f"http://127.0.0.1:{port}/shards")
        return orjson.loads(resp.content) if resp.status_code == 200 else None
    except (httpx.HTTPError, orjson.JSONDecodeError):
        return None


async def provider_records(client: httpx.AsyncClient, url: str, zones: list[str]) -> dict[str, int] | None:
    """How many records each zone holds now (the webhook's GET /records), or None when unreadable."""
    try:
        resp = await client.get(url + "/records")
        names = [str(r.get("dnsName") or "") for r in orjson.loads(resp.content)]
    except (httpx.HTTPError, orjson.JSONDecodeError, AttributeError, TypeError):
        return None
    return records_by_zone(names, zones)


async def audit_writes(client: httpx.AsyncClient, url: str, since: int) -> tuple[int, int] | None:
    """(changes written by successful applies since audit entry `since`, the next entry to ask for)."""
    try:
        resp = await client.get(url + "/v1/audit", params={"since": since})
        data = resp.json()
    except (httpx.HTTPError, ValueError):
        return None
    written = sum(
        int(e.get("changes") or 0)
        for e in data.get("audit") or []
        if e.get("op") == "apply" and e.get("outcome") == "ok"
    )
    return written, int(data.get("next") or since)
