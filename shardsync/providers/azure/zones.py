"""Which Azure DNS zones the provider manages. Pure.

A zone is a resource `/subscriptions/<s>/resourceGroups/<rg>/providers/Microsoft.Network/dnszones/<name>`.
external-dns lists the zones of one resource group (`--azure-resource-group`, or the config file's
`resourceGroup`); without one, shardsync lists the subscription's. `--zone-id-filter` keeps the zones
whose id ends with one of its values (external-dns's ZoneIDFilter, zone_ids.py); `--domain-filter` applies
to every provider's zones in the replica. shardsync shards by zone name, so of several zones of one name
(in two resource groups) it manages the first by id and `select` names the others, which the provider
logs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shardsync.providers.zone_choice import one_per_name
from shardsync.providers.zone_ids import zone_id_matches


@dataclass(frozen=True, slots=True)
class Zone:
    id: str  # the ARM resource id
    name: str  # canonical
    resource_group: str


def resource_group_of(resource_id: str) -> str:
    """The resource group an ARM id names ("" when it names none)."""
    parts = resource_id.split("/")
    for index, part in enumerate(parts[:-1]):
        if part.lower() == "resourcegroups":
            return parts[index + 1]
    return ""


def select(found: Iterable[Zone], id_filter: Iterable[str] = ()) -> tuple[dict[str, Zone], list[Zone]]:
    """The zones to manage by name, and the ones left out because another zone has their name."""
    filters = tuple(id_filter)
    kept = (z for z in sorted(found, key=lambda z: z.id.lower()) if zone_id_matches(filters, z.id))
    return one_per_name(kept, lambda z: z.name)
