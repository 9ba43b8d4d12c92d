"""Which hosted zones the AWS provider manages: external-dns's `--zone-id-filter`, `--aws-zone-type` and
`--aws-zone-tags` (`--domain-filter` is applied to every provider's zones by the replica).

Pure: `ZoneFilter.select(zones, tags)` over the listed hosted zones and, when tags are asked for, their
tags. Several hosted zones may share a name (a public and a private `example.org`); shardsync shards by
zone name, so it manages one of them — the public one, as external-dns picks the public zone among
matching ones — and logs the others it leaves out, which `--aws-zone-type` or `--zone-id-filter` choose
explicitly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from shardsync.providers.aws.records import clean_zone_id
from shardsync.providers.zone_choice import one_per_name
from shardsync.providers.zone_ids import zone_id_matches
from shardsync.records.endpoint import normalize_name


@dataclass(frozen=True, slots=True)
class HostedZone:
    id: str  # without the /hostedzone/ prefix
    name: str  # canonical
    private: bool

    @classmethod
    def from_api(cls, data: Mapping[str, object]) -> HostedZone:
        config = data.get("Config")
        private = bool(config.get("PrivateZone")) if isinstance(config, Mapping) else False
        return cls(clean_zone_id(str(data["Id"])), normalize_name(str(data["Name"])), private)


def parse_tags(items: Iterable[str]) -> dict[str, str]:
    """`key=value` or `key` (any value) per item, blanks trimmed, empty keys dropped (external-dns's)."""
    tags: dict[str, str] = {}
    for item in items:
        key, _, value = item.partition("=")
        if key.strip():
            tags[key.strip()] = value.strip()
    return tags


@dataclass(frozen=True, slots=True)
class ZoneFilter:
    ids: tuple[str, ...] = ()  # a zone matches when its id ends with one of these
    zone_type: str = ""  # "", "public" or "private"
    tags: Mapping[str, str] | None = None  # key -> value ("" = any value); None or empty: no tag filter

    @property
    def needs_tags(self) -> bool:
        return bool(self.tags)

    def matches(self, zone: HostedZone) -> bool:
        if not zone_id_matches(self.ids, f"/hostedzone/{zone.id}"):
            return False
        if self.zone_type == "public" and zone.private:
            return False
        return not (self.zone_type == "private" and not zone.private)

    def matches_tags(self, tags: Mapping[str, str]) -> bool:
        for key, want in (self.tags or {}).items():
            if key not in tags or (want and tags[key] != want):
                return False
        return True


def by_name(zones: Iterable[HostedZone]) -> tuple[dict[str, HostedZone], list[HostedZone]]:
    """One hosted zone per name (the public one, else the lowest id) and the ones left out."""
    return one_per_name(sorted(zones, key=lambda z: (z.name, z.private, z.id)), lambda z: z.name)
