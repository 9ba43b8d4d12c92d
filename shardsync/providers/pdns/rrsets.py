"""The pure half of the pdns provider: PowerDNS API rrsets ↔ endpoints, and a plan as one PATCH's rrsets.

Both ways as external-dns's pdns provider (provider/pdns/pdns.go), so a zone it wrote reads back as it
wrote it and what shardsync writes is, byte for byte, what it would have written:

- names are absolute in the API (`www.ex.com.`);
- CNAME, MX, SRV, NS and PTR contents (and ALIAS's) get a trailing dot on the whole target
  (`10 mail.ex.com.`); A, AAAA and TXT go as they are. A TXT target is zone-file text in double quotes,
  as the TXT registry writes `"heritage=external-dns,..."`; PowerDNS refuses unquoted text (422), so such
  a target is rejected here, before anything is sent;
- the TTL is the endpoint's, else 300 (external-dns's default for pdns); a DELETE carries none;
- a CNAME at the zone apex, or with the `alias` property "true", is written as PowerDNS's ALIAS; an ALIAS
  reads back as a CNAME, with `alias` "true" below the apex, so a record written that way plans no change;
- read: one endpoint per rrset of the managed types (shardsync.records.endpoint.SUPPORTED_TYPES, and ALIAS),
  the contents of its enabled records as targets, their trailing dot trimmed except on TXT and SRV
  (external-dns's NewEndpointWithTTL). A disabled record is no target, and an rrset with none enabled is not
  listed. SOA and every other type are not listed, so never changed, as external-dns's plan leaves the
  types it does not manage alone;
- write: deletes first (changetype DELETE), then the new rrsets (REPLACE: updates, then creates). An
  update whose PowerDNS type changes (CNAME ↔ ALIAS) deletes the old type in the same PATCH. PowerDNS
  refuses two rrsets of one name and type in one PATCH (422), so a second endpoint for an rrset already
  written by the call is rejected; external-dns sends creates, updates and deletes as three PATCHes, where
  shardsync sends one, applied by PowerDNS in one transaction.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from shardsync.providers.base import Rejected
from shardsync.records.endpoint import ALIAS_PROPERTY, SUPPORTED_TYPES, Changes, Endpoint, normalize_name

DEFAULT_TTL = 300  # external-dns's pdns defaultTTL, written for an endpoint without one
MAX_TTL = 2**31 - 1  # external-dns refuses a TTL that overflows int32
ALIAS = "ALIAS"
# Types whose content is (or ends with) a host name, written with its trailing dot.
_TRAILING_DOT = frozenset({"CNAME", "MX", "SRV", "NS", "PTR", ALIAS})
# Types read back as written; on the others a final dot is trimmed (external-dns's NewEndpointWithTTL).
_KEPT_AS_IS = frozenset({"TXT", "SRV"})
_READ_TYPES = SUPPORTED_TYPES | {ALIAS}

RRset = dict[str, Any]


def absolute(name: str) -> str:
    """A name as the API spells it: canonical, with the trailing dot."""
    return normalize_name(name) + "."


def in_zone(name: str, zone: str) -> bool:
    return name == zone or name.endswith("." + zone)


# -- read ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ZoneRead:
    """A zone's endpoints, and how many rrsets of the answer could not be read (skipped, counted)."""

    endpoints: list[Endpoint]
    unreadable: int


def endpoints_of(zone: str, answer: Any, skip: Collection[str] = ()) -> ZoneRead:
    """The endpoints of `GET .../zones/<zone>`'s answer; names in `skip` (the fence) are left out.

    ValueError when the answer is not a zone (no `rrsets` list); one rrset that cannot be read costs that
    rrset, not the zone."""
    rrsets = answer.get("rrsets") if isinstance(answer, dict) else None
    if not isinstance(rrsets, list):
        raise ValueError("the answer holds no rrsets list")
    zone = normalize_name(zone)
    skipped = {normalize_name(n) for n in skip}
    out: list[Endpoint] = []
    unreadable = 0
    for rrset in rrsets:
        try:
            ep = _endpoint(zone, rrset)
        except (LookupError, TypeError, ValueError, AttributeError):
            unreadable += 1
            continue
        if ep is not None and ep.dns_name not in skipped:
            out.append(ep)
    return ZoneRead(out, unreadable)


def _endpoint(zone: str, rrset: Any) -> Endpoint | None:
    name, rtype, ttl = rrset["name"], rrset["type"], rrset.get("ttl", 0)
    if not isinstance(name, str) or not isinstance(rtype, str) or rtype.upper() not in _READ_TYPES:
        return None
    if not isinstance(ttl, int) or isinstance(ttl, bool):
        raise ValueError(f"ttl {ttl!r}")
    rtype = rtype.upper()
    dns_name = normalize_name(name)
    if not in_zone(dns_name, zone):
        return None
    targets = [
        _read_content(rtype, record["content"]) for record in rrset["records"] if not record.get("disabled")
    ]
    if not targets:
        return None
    specific: tuple[tuple[str, str], ...] = ()
    if rtype == ALIAS:
        rtype = "CNAME"
        if dns_name != zone:
            specific = ((ALIAS_PROPERTY, "true"),)
    return Endpoint.new(dns_name, rtype, targets, ttl=ttl, provider_specific=specific)


def _read_content(rtype: str, content: Any) -> str:
    if not isinstance(content, str):
        raise TypeError(f"content {content!r}")
    return content if rtype in _KEPT_AS_IS else content.removesuffix(".")


# -- write ---------------------------------------------------------------------------------------------


def pdns_type(ep: Endpoint, zone: str) -> str:
    """The type PowerDNS stores the endpoint as: ALIAS for a CNAME at the apex or marked `alias` "true"."""
    if ep.record_type == "CNAME" and (ep.dns_name == zone or ep.provider_property(ALIAS_PROPERTY) == "true"):
        return ALIAS
    return ep.record_type


def content_of(rtype: str, target: str) -> str:
    """A record's content as external-dns sends it (see the module docstring)."""
    if rtype in _TRAILING_DOT and not target.endswith("."):
        return target + "."
    return target


def ttl_of(ep: Endpoint) -> int:
    return ep.ttl if ep.ttl > 0 else DEFAULT_TTL


def _quoted(target: str) -> bool:
    return len(target) >= 2 and target[0] == '"' and target[-1] == '"'


def write_error(ep: Endpoint, zone: str, reserved: Collection[str]) -> str | None:
    """Why the endpoint cannot be written to the zone, or None."""
    if not in_zone(ep.dns_name, zone):
        return f"not in zone {zone}"
    if ep.dns_name in reserved:
        return "name is reserved for shardsync's write fence"
    if ep.record_type not in SUPPORTED_TYPES:
        return f"record type {ep.record_type!r} is not managed by this provider"
    if not ep.targets:
        return "no targets"
    if not 0 <= ep.ttl <= MAX_TTL:
        return f"TTL {ep.ttl} outside 0..{MAX_TTL}"
    if ep.record_type == "TXT":
        bare = next((t for t in ep.targets if not _quoted(t)), None)
        if bare is not None:
            return f"TXT target {bare[:60]!r} is not in double quotes, as PowerDNS wants TXT content"
    return None


@dataclass(slots=True)
class Patch:
    """One PATCH's rrsets in the order sent, and the changes left out with their reasons."""

    rrsets: list[RRset]
    rejected: list[Rejected]

    def describe(self) -> str:
        """`DELETE www.ex.com. A, REPLACE ...` (the first few), for logs."""
        shown = ", ".join(f"{r['changetype']} {r['name']} {r['type']}" for r in self.rrsets[:5])
        more = len(self.rrsets) - 5
        return shown + (f" and {more} more" if more > 0 else "")


def patch_of(zone: str, changes: Changes, reserved: Collection[str] = ()) -> Patch:
    """The rrsets of one PATCH applying `changes` to the zone (see the module docstring)."""
    if len(changes.update_old) != len(changes.update_new):
        raise ValueError(
            f"update_old has {len(changes.update_old)} entries, update_new {len(changes.update_new)}"
        )
    zone = normalize_name(zone)
    reserved = {normalize_name(n) for n in reserved}
    rejected: list[Rejected] = []
    deletes: dict[tuple[str, str], RRset] = {}
    replaces: dict[tuple[str, str], RRset] = {}

    def usable(ep: Endpoint) -> bool:
        reason = write_error(ep, zone, reserved)
        if reason is not None:
            rejected.append(Rejected(ep, reason))
        return reason is None

    def delete(ep: Endpoint) -> None:
        key = (absolute(ep.dns_name), pdns_type(ep, zone))
        deletes.setdefault(key, {"name": key[0], "type": key[1], "changetype": "DELETE"})

    def replace(ep: Endpoint) -> None:
        key = (absolute(ep.dns_name), pdns_type(ep, zone))
        if key in replaces:
            rejected.append(Rejected(ep, f"another change of this batch writes {key[0]} {key[1]}"))
            return
        replaces[key] = {
            "name": key[0],
            "type": key[1],
            "ttl": ttl_of(ep),
            "changetype": "REPLACE",
            "records": [{"content": content_of(key[1], t), "disabled": False} for t in ep.targets],
        }

    for ep in changes.delete:
        if usable(ep):
            delete(ep)
    for old, new in zip(changes.update_old, changes.update_new, strict=True):
        if old.record_type != new.record_type:
            rejected.append(Rejected(new, f"update changes the type from {old.record_type}"))
        elif old.dns_name != new.dns_name:
            rejected.append(Rejected(new, f"update renames {old.dns_name}"))
        elif usable(new):
            if pdns_type(old, zone) != pdns_type(new, zone):
                delete(old)
            replace(new)
    for ep in changes.create:
        if usable(ep):
            replace(ep)
    return Patch([*deletes.values(), *replaces.values()], rejected)
