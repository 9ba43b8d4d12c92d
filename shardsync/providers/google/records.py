"""Cloud DNS resource record sets and shardsync endpoints, both ways, as external-dns's Google provider maps
them.

Pure functions over the API's JSON shapes (`{"name", "type", "ttl", "rrdatas"}`):
- `endpoint_of(rrset)`: a listed record set as an endpoint, None for one external-dns does not manage (a
  type outside TYPES, or a routing-policy set, which has no rrdatas). Names lose their trailing dot;
  targets too, but TXT values, which are kept byte for byte (quotes included: the ownership records
  external-dns wrote read back as it wrote them);
- `rrset_of(ep)`: the record set a change writes: names absolute (a trailing dot), and so the host in a
  CNAME, NS, PTR, MX or SRV value, TTL 300 when the endpoint sets none (external-dns's newRecord);
- `listed(rrset)`: a listed set as a deletion names it. A deletion must match the current set exactly
  (values in their order, TTL), so a set that `rrset_of(endpoint_of(rrset))` would not give back exactly
  is deleted as listed (provider.py keeps those);
- `rrdata_size(rrset)`: the bytes of its values, as Cloud DNS counts them toward a change's limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shardsync.records.endpoint import Endpoint, normalize_name

DEFAULT_TTL = 300
# external-dns's supported types for Google (A, AAAA, CNAME, SRV, TXT, NS, MX; DNAME, which shardsync does
# not write, aside), and PTR, which shardsync writes with --create-ptr.
TYPES = frozenset({"A", "AAAA", "CNAME", "TXT", "SRV", "MX", "NS", "PTR"})
# Types whose value ends with a host name, written absolute.
_HOST_VALUED = frozenset({"CNAME", "NS", "PTR", "MX", "SRV"})

RRset = dict[str, Any]


def absolute(name: str) -> str:
    """external-dns's EnsureTrailingDot."""
    return name if name.endswith(".") else name + "."


def endpoint_of(rrset: Mapping[str, Any]) -> Endpoint | None:
    """The endpoint one listed record set stands for (module docstring)."""
    rtype = str(rrset.get("type", ""))
    values = rrset.get("rrdatas")
    if rtype not in TYPES or not values:
        return None
    targets = [str(v) if rtype == "TXT" else str(v).rstrip(".") for v in values]
    return Endpoint.new(str(rrset["name"]), rtype, targets, ttl=int(rrset.get("ttl") or 0))


def rrset_of(ep: Endpoint) -> RRset:
    """The record set a change writes for `ep` (external-dns's newRecord)."""
    values = [absolute(t) if ep.record_type in _HOST_VALUED else t for t in ep.targets]
    return {
        "name": absolute(ep.dns_name),
        "type": ep.record_type,
        "ttl": ep.ttl if ep.ttl > 0 else DEFAULT_TTL,
        "rrdatas": values,
    }


def listed(rrset: Mapping[str, Any]) -> RRset:
    """A listed record set reduced to what a deletion names (the API lists `kind` and more besides)."""
    return {
        "name": str(rrset["name"]),
        "type": str(rrset["type"]),
        "ttl": int(rrset.get("ttl") or 0),
        "rrdatas": [str(v) for v in rrset.get("rrdatas") or ()],
    }


def rrdata_size(rrset: Mapping[str, Any]) -> int:
    return sum(len(str(v).encode()) for v in rrset.get("rrdatas") or ())


def key_of(rrset: Mapping[str, Any]) -> tuple[str, str]:
    """(canonical name, type): what identifies a record set in a managed zone."""
    return normalize_name(str(rrset["name"])), str(rrset["type"])
