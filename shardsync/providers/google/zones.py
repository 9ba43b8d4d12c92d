"""Which Cloud DNS managed zones the google provider manages: external-dns's `--zone-id-filter` and
`--google-zone-visibility` (`--domain-filter` is applied to every provider's zones by the replica).

Pure. As external-dns does, a peering zone is never managed (its records live in another network's zone),
a zone passes `--zone-id-filter` by its numeric id or by its name, and `--google-zone-visibility` keeps
the public or the private ones. Several managed zones may share a DNS name (split horizon: a public and a
private `example.org.`); shardsync shards by zone name, so it manages one of them — the public one, else
the one whose managed-zone name sorts first — and logs the others it leaves out, which
`--google-zone-visibility` or `--zone-id-filter` choose explicitly. (external-dns lists every such zone
and writes each record to whichever of them its map iteration meets first.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from shardsync.providers.zone_choice import one_per_name
from shardsync.providers.zone_ids import zone_id_matches
from shardsync.records.endpoint import normalize_name

VISIBILITIES = ("", "public", "private")


@dataclass(frozen=True, slots=True)
class ManagedZone:
    name: str  # the managed zone's own name (`example-org`): what the API's paths name
    dns_name: str  # canonical, without the trailing dot: what shardsync shards by
    id: str
    visibility: str  # "public" or "private"
    peering: bool

    @classmethod
    def from_api(cls, data: Mapping[str, object]) -> ManagedZone:
        return cls(
            name=str(data["name"]),
            dns_name=normalize_name(str(data["dnsName"])),
            id=str(data.get("id", "")),
            visibility=str(data.get("visibility") or "public"),
            peering=bool(data.get("peeringConfig")),
        )


@dataclass(frozen=True, slots=True)
class ZoneFilter:
    ids: tuple[str, ...] = ()  # --zone-id-filter: a zone's id or name ends with one of these
    visibility: str = ""  # --google-zone-visibility: "", "public" or "private"

    def matches(self, zone: ManagedZone) -> bool:
        if zone.peering or (self.visibility and zone.visibility != self.visibility):
            return False
        return zone_id_matches(self.ids, zone.id, zone.name)


def by_dns_name(zones: Iterable[ManagedZone]) -> tuple[dict[str, ManagedZone], list[ManagedZone]]:
    """One managed zone per DNS name (the public one, else the first by name) and the ones left out."""
    ordered = sorted(zones, key=lambda z: (z.dns_name, z.visibility != "public", z.name))
    return one_per_name(ordered, lambda z: z.dns_name)
