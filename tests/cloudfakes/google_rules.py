"""What Cloud DNS does with one `changes.create`, as the contract fake (tests/cloudfakes/google.py) encodes
it: pure, over a zone's record sets keyed by (lower-case absolute name, type).

`applied(dns_name, rrsets, additions, deletions)` returns the zone's record sets after the change, or raises
the `ApiError` Cloud DNS answers with — the whole change refused, nothing applied:
- the limits of one change: 1,000 additions, 1,000 deletions, 100,000 bytes of record data, 100 values per
  set → 403 quotaExceeded "The change would exceed quota for …" (the words Cloud DNS answers with,
  external-dns #1028);
- a name outside the zone or not absolute, an unknown type, a negative TTL, no values, an A/AAAA value that
  is not such an address, a CNAME/NS/PTR/MX/SRV host that is not absolute, a set twice in one list → 400
  invalid;
- a deletion of a set that does not exist → 404 notFound; of one whose TTL or values differ from the
  current set's, in their order → 412 conditionNotMet ("Must match existing data exactly", the v1
  reference of `changes`);
- an addition of a set that exists once the deletions are applied → 409 alreadyExists.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

MAX_ADDITIONS = 1000
MAX_DELETIONS = 1000
MAX_RRDATA_BYTES = 100_000
MAX_RECORDS_PER_RRSET = 100
TYPES = frozenset({"A", "AAAA", "CAA", "CNAME", "DS", "MX", "NAPTR", "NS", "PTR", "SOA", "SPF", "SRV", "TXT"})
_HOST_LAST = {"CNAME": 1, "NS": 1, "PTR": 1, "MX": 2, "SRV": 4}  # fields of a value ending with a host

RRset = dict[str, Any]
Key = tuple[str, str]


class ApiError(Exception):
    """An answer of Cloud DNS other than 200: its status, its reason and its message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


def key_of(rrset: Mapping[str, Any]) -> Key:
    return str(rrset.get("name", "")).lower(), str(rrset.get("type", ""))


def applied(
    dns_name: str, rrsets: Mapping[Key, RRset], additions: list[RRset], deletions: list[RRset]
) -> dict[Key, RRset]:
    """The record sets after the change (module docstring)."""
    if not additions and not deletions:
        raise ApiError(400, "required", "The 'entity.change' parameter is required but was missing.")
    _within_quota(additions, deletions)
    for part, listed in (("additions", additions), ("deletions", deletions)):
        seen: set[Key] = set()
        for index, rrset in enumerate(listed):
            _check(dns_name, f"entity.change.{part}[{index}]", rrset)
            if key_of(rrset) in seen:
                raise ApiError(400, "invalid", f"Duplicate value for 'entity.change.{part}[{index}]'")
            seen.add(key_of(rrset))
    after = dict(rrsets)
    for index, rrset in enumerate(deletions):
        current = after.pop(key_of(rrset), None)
        if current is None:
            raise ApiError(
                404,
                "notFound",
                f"The 'entity.change.deletions[{index}]' resource named '{rrset['name']} ({rrset['type']})' "
                "does not exist.",
            )
        if (current["ttl"], current["rrdatas"]) != (rrset["ttl"], rrset["rrdatas"]):
            raise ApiError(
                412, "conditionNotMet", f"Precondition not met for 'entity.change.deletions[{index}]'"
            )
    for index, rrset in enumerate(additions):
        if key_of(rrset) in after:
            raise ApiError(
                409,
                "alreadyExists",
                f"The 'entity.change.additions[{index}]' resource named '{rrset['name']} ({rrset['type']})' "
                "already exists.",
            )
        after[key_of(rrset)] = rrset
    return after


def _within_quota(additions: list[RRset], deletions: list[RRset]) -> None:
    data = sum(len(str(v).encode()) for r in additions + deletions for v in r["rrdatas"])
    for what, over in (
        ("additions per change", len(additions) > MAX_ADDITIONS),
        ("deletions per change", len(deletions) > MAX_DELETIONS),
        ("total rrdata size per change", data > MAX_RRDATA_BYTES),
        ("resource records per rrset", any(len(r["rrdatas"]) > MAX_RECORDS_PER_RRSET for r in additions)),
    ):
        if over:
            raise ApiError(403, "quotaExceeded", f"The change would exceed quota for {what}.")


def _check(dns_name: str, where: str, rrset: RRset) -> None:
    name, rtype = str(rrset["name"]).lower(), rrset["type"]
    if not name.endswith(".") or not (name == dns_name or name.endswith("." + dns_name)):
        raise ApiError(400, "invalid", f"Invalid value for '{where}.name': '{rrset['name']}'")
    if rtype not in TYPES:
        raise ApiError(400, "invalid", f"Invalid value for '{where}.type': '{rtype}'")
    if rrset["ttl"] < 0:
        raise ApiError(400, "invalid", f"Invalid value for '{where}.ttl': '{rrset['ttl']}'")
    if not rrset["rrdatas"]:
        raise ApiError(400, "invalid", f"Invalid value for '{where}.rrdata': '<empty>'")
    for n, value in enumerate(rrset["rrdatas"]):
        if not _valid(rtype, value):
            raise ApiError(400, "invalid", f"Invalid value for '{where}.rrdata[{n}]': '{value}'")


def _valid(rtype: str, value: str) -> bool:
    if rtype in ("A", "AAAA"):
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            return False
        return address.version == (4 if rtype == "A" else 6)
    fields = value.split()
    if rtype in _HOST_LAST:
        return len(fields) == _HOST_LAST[rtype] and fields[-1].endswith(".")
    return bool(value)
