"""external-dns's `--zone-id-filter`, one flag for every provider that names its zones by id (aws, azure,
cloudflare, google).

`ZONE_ID_FILTER` is the flag itself: each such provider puts this same `Flag` in its group (field
`zone_id_filter`), and `shardsync.replica.config` declares it once and gives its value to each of them.
`zone_id_matches(filters, *ids)` is external-dns's ZoneIDFilter.Match, which its AWS and Google providers
use: no filter (or only empty ones) keeps every zone, else a zone is kept when one of its ids ends with one
of the filters.
"""

from __future__ import annotations

from collections.abc import Iterable

from shardsync.flags import mirrored

ZONE_ID_FILTER = mirrored(
    "zone_id_filter", "only manage the zones with these ids (repeatable)", repeat=True, flag="zone-id-filter"
)


def zone_id_matches(filters: Iterable[str], *ids: str) -> bool:
    """Whether a zone known by `ids` passes `--zone-id-filter` (module docstring)."""
    wanted = [f for f in filters if f]
    return not wanted or any(i.endswith(f) for i in ids for f in wanted)
