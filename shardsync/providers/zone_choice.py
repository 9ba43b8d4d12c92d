"""One zone per name, and the warning about the zones left out.

shardsync shards by zone name, so of several zones a provider lists under one name (aws, google: a public and
a private `example.org`; azure: two resource groups; cloudflare: two accounts) it manages one. Which one is
the provider's rule (its zones.py orders the zones, `one_per_name` keeps the first of each name); each zone
left out is logged once, not at every listing, with the flags that choose explicitly (`LeftOutZones`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from shardsync.logs import KVLogger

Z = TypeVar("Z")


def one_per_name(zones: Iterable[Z], name_of: Callable[[Z], str]) -> tuple[dict[str, Z], list[Z]]:
    """The first zone of each name, in the order given, and the others (left out)."""
    chosen: dict[str, Z] = {}
    left: list[Z] = []
    for zone in zones:
        name = name_of(zone)
        if name in chosen:
            left.append(zone)
        else:
            chosen[name] = zone
    return chosen, left


class LeftOutZones:
    """The warning about a zone left out because another zone of its name is managed, once per zone."""

    def __init__(self, log: KVLogger, provider: str, hint: str) -> None:
        self.log = log
        self.provider = provider
        self.hint = hint  # the flags that choose the zone explicitly
        self._warned: set[str] = set()

    def warn(self, name: str, zone_id: str, managed: str, **fields: Any) -> None:
        """Zone `zone_id` of `name` is left out for zone `managed` (ids as the provider's API names them)."""
        if zone_id in self._warned:
            return
        self._warned.add(zone_id)
        self.log.warning(
            f"{self.provider} zone left out: another zone of that name is managed",
            zone=name,
            id=zone_id,
            managed=managed,
            **fields,
            hint=self.hint,
        )
