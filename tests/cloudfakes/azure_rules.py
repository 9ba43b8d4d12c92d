"""What the Azure DNS contract fake (azure.py) checks of a record set, and Azure Resource Manager's request
limits, apart from its HTTP handling.

- `check_record_set(rtype, body, others)`: a PUT's body as Azure DNS validates it (Record Sets - Create Or
  Update, 2018-05-01; "Azure DNS limits"): `properties` with a TTL of 1 to 2,147,483,647, the records of
  the set's own type only (`ARecords` for A, one `CNAMERecord` for CNAME, …), each well formed, at most 20
  records in a set; a CNAME set cannot share its name with another set, nor another set a CNAME's (RFC 1034,
  which Azure DNS enforces; the status, 409, is inferred). Returns the stored properties or raises
  ApiFailure.
- `ArmLimits`: the subscription's token buckets for one principal (writes 200 + 10/s, deletes 200 + 10/s,
  reads 250 + 25/s: "Throttling Resource Manager requests", 2024 regional throttling) and Microsoft.Network's
  1,000 writes and deletes per five minutes; `admit(method)` takes a request from them or raises ApiFailure
  429 with Retry-After (the seconds until a token is due, rounded up). The clock is injectable.
"""

from __future__ import annotations

import ipaddress
import math
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from shardsync.pacing.token_bucket import TokenBucket

MAX_TTL = 2**31 - 1
MAX_RECORDS = 20  # per record set
WRITES = (200, 10.0)  # bucket, refill per second
DELETES = (200, 10.0)
READS = (250, 25.0)
NETWORK_WRITES = 1000  # PUT and DELETE on Microsoft.Network, per NETWORK_WINDOW seconds
NETWORK_WINDOW = 300.0

FIELDS = {
    "A": "ARecords",
    "AAAA": "AAAARecords",
    "CAA": "caaRecords",
    "CNAME": "CNAMERecord",
    "MX": "MXRecords",
    "NS": "NSRecords",
    "PTR": "PTRRecords",
    "SOA": "SOARecord",
    "SRV": "SRVRecords",
    "TXT": "TXTRecords",
}


class ApiFailure(Exception):
    """An ARM error answer: status, error code, message (and headers)."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}


def bad(message: str) -> ApiFailure:
    return ApiFailure(400, "BadRequest", message)


def _address(text: Any, version: int) -> bool:
    try:
        return ipaddress.ip_address(str(text)).version == version
    except ValueError:
        return False


def _uint16(value: Any) -> bool:
    return isinstance(value, int) and 0 <= value <= 0xFFFF


_CHECKS: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "A": lambda r: _address(r.get("ipv4Address"), 4),
    "AAAA": lambda r: _address(r.get("ipv6Address"), 6),
    "MX": lambda r: _uint16(r.get("preference")) and bool(r.get("exchange")),
    "NS": lambda r: bool(r.get("nsdname")),
    "PTR": lambda r: bool(r.get("ptrdname")),
    "SRV": lambda r: all(_uint16(r.get(k)) for k in ("priority", "weight", "port")) and bool(r.get("target")),
    "TXT": lambda r: (
        isinstance(r.get("value"), list) and bool(r["value"]) and all(isinstance(s, str) for s in r["value"])
    ),
    "CAA": lambda r: bool(r.get("tag")) and r.get("value") is not None,
}


def check_record_set(rtype: str, body: Any, others: Mapping[str, str]) -> dict[str, Any]:
    """The properties to store for a PUT of a `rtype` set (module docstring). `others`: the types of the
    other sets at its name."""
    if rtype not in FIELDS or rtype == "SOA":
        raise bad(f"record type {rtype} cannot be written here")
    props = body.get("properties") if isinstance(body, dict) else None
    if not isinstance(props, dict):
        raise bad("the request body has no properties")
    ttl = props.get("TTL")
    if not isinstance(ttl, int) or not 1 <= ttl <= MAX_TTL:
        raise bad(f"TTL {ttl!r} must be between 1 and {MAX_TTL}")
    for other, field in FIELDS.items():
        if other != rtype and props.get(field):
            raise bad(f"a record set of type {rtype} cannot hold {field}")
    if rtype == "CNAME":
        cname = props.get("CNAMERecord")
        if not isinstance(cname, dict) or not cname.get("cname"):
            raise bad("a CNAME record set needs CNAMERecord.cname")
    else:
        records = props.get(FIELDS[rtype])
        if not isinstance(records, list) or not records:
            raise bad(f"a record set of type {rtype} needs {FIELDS[rtype]}")
        if len(records) > MAX_RECORDS:
            raise bad(f"{len(records)} records in a record set; at most {MAX_RECORDS}")
        if not all(isinstance(r, dict) and _CHECKS[rtype](r) for r in records):
            raise bad(f"a record of the {rtype} record set is not valid")
    if others and (rtype == "CNAME" or "CNAME" in others.values()):
        raise ApiFailure(409, "Conflict", "a CNAME record set cannot share its name with another record set")
    metadata = props.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise bad("metadata must be an object")
    keep = ("TTL", "metadata", FIELDS[rtype])
    return {k: props[k] for k in keep if props.get(k) is not None}


class ArmLimits:
    """Resource Manager's request limits for one principal (module docstring)."""

    def __init__(self, clock: Callable[[], float], *, scale: float = 1.0) -> None:
        self._clock = clock
        self._buckets = {
            method: TokenBucket(rate * scale, max(1, int(burst * scale)), clock=clock)
            for method, (burst, rate) in (("PUT", WRITES), ("DELETE", DELETES), ("GET", READS))
        }
        self._network: deque[float] = deque()
        self.network_writes = max(1, int(NETWORK_WRITES * scale))
        self.throttled = 0

    def admit(self, method: str) -> None:
        now = self._clock()
        writes = method in ("PUT", "DELETE")
        if writes:
            while self._network and self._network[0] <= now - NETWORK_WINDOW:
                self._network.popleft()
            if len(self._network) >= self.network_writes:
                self._refuse(self._network[0] + NETWORK_WINDOW - now, "Microsoft.Network writes")
        bucket = self._buckets.get(method, self._buckets["GET"])
        wait = bucket.try_take()
        if wait > 0:
            self._refuse(wait, f"subscription {method} requests")
        if writes:
            self._network.append(now)

    def _refuse(self, wait: float, what: str) -> None:
        self.throttled += 1
        raise ApiFailure(
            429,
            "SubscriptionRequestsThrottled",
            f"Number of {what} exceeded the limit. Please try again later.",
            {"Retry-After": str(max(1, math.ceil(wait)))},
        )
