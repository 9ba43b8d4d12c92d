"""`--create-ptr` and the `record-type` annotation: PTR records for the addresses of A and AAAA records.

As external-dns v0.22.0's PTR source wrapper (source/wrappers/ptr.go), installed only when PTR is a managed
record type: every non-wildcard A or AAAA endpoint of every source asks for reverse records when
`--create-ptr` is set, unless its `record-type` (the annotation, or a DNSEndpoint's provider-specific
property of that name) says otherwise; `record-type: ptr` asks for them without the flag. For each address
one PTR endpoint `<reverse name>` → every name that asked for it, across all objects (names sharing an
address are grouped into one RRset), with the smallest TTL among them. The `record-type` property is
removed from the endpoints, as external-dns removes it.

The index keeps each object's claims by address, so an object's change recomputes only the addresses it
claimed before or claims now. The watcher stores each address's PTR endpoint in the desired index under
`ptr/<address>` (`desired_key`); like external-dns's, it carries no labels.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import replace

from shardsync.records.endpoint import Endpoint

RECORD_TYPE_PROPERTY = "record-type"  # external-dns's endpoint.ProviderSpecificRecordType
Claim = tuple[str, int]  # (name asking for the PTR, its TTL)


def reverse_name(address: str) -> str:
    """`4.3.2.1.in-addr.arpa` for 1.2.3.4; the nibble form under ip6.arpa for IPv6."""
    return ipaddress.ip_address(address).reverse_pointer


def desired_key(address: str) -> str:
    return f"ptr/{address}"


def _requested(ep: Endpoint) -> str | None:
    for name, value in ep.provider_specific:
        if name == RECORD_TYPE_PROPERTY:
            return value
    return None


def _stripped(ep: Endpoint) -> Endpoint:
    if _requested(ep) is None:
        return ep
    kept = tuple(p for p in ep.provider_specific if p[0] != RECORD_TYPE_PROPERTY)
    return replace(ep, provider_specific=kept)


def wants_ptr(ep: Endpoint, default: bool) -> bool:
    """external-dns's supportsPTR plus the `record-type` override of `--create-ptr`."""
    if ep.record_type not in ("A", "AAAA") or ep.dns_name.startswith("*."):
        return False
    requested = _requested(ep)
    return default if requested is None else requested.upper() == "PTR"


class PtrIndex:
    """Which names ask for a PTR record of which address, by source object (see the module docstring)."""

    def __init__(self, default_enabled: bool) -> None:
        self.default_enabled = default_enabled
        self._by_object: dict[str, dict[str, list[Claim]]] = {}
        self._by_address: dict[str, dict[str, list[Claim]]] = {}

    def update(self, key: str, endpoints: Iterable[Endpoint]) -> tuple[list[Endpoint], set[str]]:
        """Record object `key`'s endpoints; returns them without the `record-type` property, and the
        addresses whose PTR endpoint may have changed."""
        claims: dict[str, list[Claim]] = {}
        out: list[Endpoint] = []
        for ep in endpoints:
            if wants_ptr(ep, self.default_enabled):
                for address in ep.targets:
                    claims.setdefault(address, []).append((ep.dns_name, ep.ttl))
            out.append(_stripped(ep))
        old = self._by_object.pop(key, {})
        if claims:
            self._by_object[key] = claims
        changed: set[str] = set()
        for address in set(old) | set(claims):
            if old.get(address) == claims.get(address):
                continue
            changed.add(address)
            holders = self._by_address.setdefault(address, {})
            if address in claims:
                holders[key] = claims[address]
            else:
                holders.pop(key, None)
            if not holders:
                del self._by_address[address]
        return out, changed

    def endpoints(self, address: str) -> list[Endpoint]:
        """The PTR endpoint of `address` (none when no name asks for it)."""
        holders = self._by_address.get(address)
        if not holders:
            return []
        names: dict[str, None] = {}
        ttls: list[int] = []
        for key in sorted(holders):
            for name, ttl in holders[key]:
                names[name] = None
                ttls.append(ttl)
        return [Endpoint.new(reverse_name(address), "PTR", names, ttl=min(ttls))]
