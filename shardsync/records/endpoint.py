"""Endpoint and Changes, the values every stage passes on; DNS name rules and zone matching.

`Endpoint` has external-dns's fields under the same JSON names (dnsName, targets, recordType, recordTTL,
setIdentifier, labels, providerSpecific), so DNSEndpoint objects and webhook payloads map one to one.
Names are kept canonical: lower case, no trailing dot. Targets are kept sorted, because DNS RRsets have no
order and external-dns compares targets as sets.
"""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

# Label keys external-dns uses on endpoints (and inside TXT ownership records).
OWNER_LABEL = "owner"
RESOURCE_LABEL = "resource"
OWNED_RECORD_LABEL = "ownedRecord"
# external-dns's provider-specific property for alias records (Route 53 ALIAS and the like).
ALIAS_PROPERTY = "alias"

# shardsync's own endpoint labels start with this prefix; they steer the planner and are never written
# into TXT ownership records (so those stay byte-identical to external-dns's).
INTERNAL_LABEL_PREFIX = "shardsync/"
# Sources put the source object's metadata.creationTimestamp (RFC 3339, e.g. "2024-05-01T10:00:00Z") here;
# when two objects claim one RRset and external-dns's rule leaves a tie, the planner lets the oldest win
# (see shardsync/records/plan.py).
CREATED_LABEL = INTERNAL_LABEL_PREFIX + "created"

SUPPORTED_TYPES = frozenset({"A", "AAAA", "CNAME", "TXT", "SRV", "MX", "NS", "PTR"})
DEFAULT_MANAGED_TYPES = ("A", "AAAA", "CNAME")

MAX_NAME_LENGTH = 253
MAX_LABEL_LENGTH = 63
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


class InvalidEndpoint(ValueError):
    """An endpoint that no provider could write: bad name, bad target for its type, bad TTL."""


def normalize_name(name: str) -> str:
    """Canonical form of a DNS name: lower case, no trailing dot, surrounding blanks removed."""
    return name.strip().rstrip(".").lower()


def name_error(name: str) -> str | None:
    """Why `name` (canonical form) is not a valid DNS owner name, or None when it is.

    Underscores are allowed (TXT and SRV names use them) and a leading `*` label makes a wildcard.
    """
    if not name:
        return "empty name"
    if len(name) > MAX_NAME_LENGTH:
        return f"name longer than {MAX_NAME_LENGTH} characters"
    labels = name.split(".")
    for i, label in enumerate(labels):
        if not label:
            return "empty label"
        if len(label) > MAX_LABEL_LENGTH:
            return f"label {label[:20]!r}... longer than {MAX_LABEL_LENGTH} characters"
        if label == "*" and i == 0:
            continue
        if not set(label) <= _LABEL_CHARS:
            return f"label {label!r} has characters outside a-z 0-9 - _"
        if label[0] == "-" or label[-1] == "-":
            return f"label {label!r} starts or ends with '-'"
    return None


def canonical_target(record_type: str, target: str) -> str:
    """Addresses in their canonical text form, so `2001:DB8::1` and `2001:db8::1` compare equal."""
    if record_type in ("A", "AAAA"):
        try:
            return str(ipaddress.ip_address(target))
        except ValueError:
            return target
    return target


def _target_key(target: str) -> str:
    text = target.strip().lower()
    if ":" in text:
        try:
            return str(ipaddress.ip_address(text))
        except ValueError:
            pass
    return text.rstrip(".")


def same_targets(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """external-dns's Targets.Same: equal as sets, case-insensitive, IP addresses in any spelling."""
    if a == b:
        return True
    if len(a) != len(b):
        return False
    return sorted(map(_target_key, a)) == sorted(map(_target_key, b))


def _target_error(record_type: str, target: str) -> str | None:
    if not target:
        return "empty target"
    if record_type == "A":
        try:
            ipaddress.IPv4Address(target)
        except ValueError:
            return f"{target!r} is not an IPv4 address"
    elif record_type == "AAAA":
        try:
            ipaddress.IPv6Address(target)
        except ValueError:
            return f"{target!r} is not an IPv6 address"
    elif record_type in ("CNAME", "NS", "PTR"):
        if record_type == "PTR" and _is_address(target):
            return f"{target!r} is an address; a PTR target is a hostname"
        return name_error(normalize_name(target))
    elif record_type == "MX":
        parts = target.split()
        if len(parts) != 2 or not _is_uint16(parts[0]):
            return f"MX target {target!r} is not 'preference host' (preference 0..65535)"
    elif record_type == "SRV":
        # external-dns also wants the host to end with '.'; we accept it without (see README, Differences)
        parts = target.split()
        if len(parts) != 4 or not all(_is_uint16(p) for p in parts[:3]):
            return f"SRV target {target!r} is not 'priority weight port host' (numbers 0..65535)"
    return None


_ALIAS_TYPES = ("A", "AAAA", "CNAME")


def _is_uint16(text: str) -> bool:
    return text.isascii() and text.isdigit() and int(text) <= 0xFFFF


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _is_reverse_name(name: str) -> bool:
    """external-dns's isReverseDNSName: at least one label before `.in-addr.arpa` or `.ip6.arpa`."""
    for suffix in (".in-addr.arpa", ".ip6.arpa"):
        if name.endswith(suffix):
            head = name.removesuffix(suffix)
            return bool(head) and not head.startswith(".")
    return False


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One DNS RRset as shardsync sees it (external-dns's Endpoint)."""

    dns_name: str
    record_type: str
    targets: tuple[str, ...]
    ttl: int = 0  # 0 means "not configured": the provider's default applies
    set_identifier: str = ""
    labels: Mapping[str, str] = field(default_factory=dict, compare=True)
    provider_specific: tuple[tuple[str, str], ...] = ()

    @classmethod
    def new(
        cls,
        dns_name: str,
        record_type: str,
        targets: Iterable[str],
        ttl: int = 0,
        set_identifier: str = "",
        labels: Mapping[str, str] | None = None,
        provider_specific: Iterable[tuple[str, str]] = (),
    ) -> Endpoint:
        """Build an endpoint in canonical form (the constructor itself trusts its input)."""
        rtype = sys.intern(record_type.upper())  # one "A" for all, not a new string per endpoint
        cleaned = (t.strip() for t in targets)
        if rtype in ("CNAME", "NS", "PTR"):
            cleaned = (normalize_name(t) for t in cleaned)
        return cls(
            dns_name=normalize_name(dns_name),
            record_type=rtype,
            targets=tuple(sorted(set(cleaned))),
            ttl=int(ttl),
            set_identifier=set_identifier,
            labels=dict(labels or {}),
            provider_specific=tuple(provider_specific),
        )

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def key(self) -> tuple[str, str, str]:
        """What identifies the RRset: (name, type, set identifier)."""
        return (self.dns_name, self.record_type, self.set_identifier)

    def provider_property(self, name: str) -> str | None:
        """The value of a provider-specific property, None when it is not set (first one wins)."""
        for key, value in self.provider_specific:
            if key == name:
                return value
        return None

    @property
    def alias_type(self) -> str:
        """external-dns's GetAliasProperty: `alias` if "true", "false", "A" or "AAAA", else ""."""
        value = self.provider_property(ALIAS_PROPERTY)
        return value if value in ("true", "false", "A", "AAAA") else ""

    def with_labels(self, **labels: str) -> Endpoint:
        return replace(self, labels={**self.labels, **labels})

    def without_labels(self) -> Endpoint:
        return replace(self, labels={})

    def validate(self) -> None:
        """Raise InvalidEndpoint saying what is wrong, if anything."""
        if self.record_type not in SUPPORTED_TYPES:
            raise InvalidEndpoint(f"{self.dns_name}: unsupported record type {self.record_type!r}")
        err = name_error(self.dns_name)
        if err:
            raise InvalidEndpoint(f"{self.dns_name!r}: {err}")
        if not self.targets:
            raise InvalidEndpoint(f"{self.dns_name}: no targets")
        if self.record_type == "CNAME" and len(self.targets) > 1:
            raise InvalidEndpoint(f"{self.dns_name}: a CNAME has exactly one target, got {len(self.targets)}")
        # external-dns v0.22 CheckEndpoint: only A, AAAA and CNAME may carry `alias` (whatever its value),
        # an A/AAAA with alias=true points at a hostname, and a PTR lives under a reverse zone.
        alias = self.provider_property(ALIAS_PROPERTY)
        if alias is not None and self.record_type not in _ALIAS_TYPES:
            raise InvalidEndpoint(f"{self.dns_name} {self.record_type}: only A, AAAA, CNAME can be aliases")
        if self.record_type == "PTR" and not _is_reverse_name(self.dns_name):
            raise InvalidEndpoint(f"{self.dns_name} PTR: name is not under in-addr.arpa or ip6.arpa")
        if not (alias == "true" and self.record_type in ("A", "AAAA")):
            for target in self.targets:
                err = _target_error(self.record_type, target)
                if err:
                    raise InvalidEndpoint(f"{self.dns_name} {self.record_type}: {err}")
        if not 0 <= self.ttl <= 2**31 - 1:
            raise InvalidEndpoint(f"{self.dns_name}: TTL {self.ttl} outside 0..2^31-1")

    def to_json(self) -> dict[str, Any]:
        """external-dns's JSON form (DNSEndpoint spec.endpoints[] and webhook payloads)."""
        out: dict[str, Any] = {
            "dnsName": self.dns_name,
            "targets": list(self.targets),
            "recordType": self.record_type,
        }
        if self.set_identifier:
            out["setIdentifier"] = self.set_identifier
        if self.ttl:
            out["recordTTL"] = self.ttl
        if self.labels:
            out["labels"] = dict(self.labels)
        if self.provider_specific:
            out["providerSpecific"] = [{"name": n, "value": v} for n, v in self.provider_specific]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Endpoint:
        """Parse external-dns's JSON form; raise InvalidEndpoint on a shape that cannot be an endpoint."""
        if not isinstance(data, Mapping):
            raise InvalidEndpoint(f"endpoint must be an object, got {type(data).__name__}")
        name = data.get("dnsName")
        targets = data.get("targets") or []
        if not isinstance(name, str):
            raise InvalidEndpoint("dnsName missing or not a string")
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise InvalidEndpoint(f"{name}: targets must be a list of strings")
        ttl = data.get("recordTTL") or 0
        if not isinstance(ttl, int) or isinstance(ttl, bool):
            raise InvalidEndpoint(f"{name}: recordTTL must be an integer")
        labels = data.get("labels") or {}
        if not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise InvalidEndpoint(f"{name}: labels must map strings to strings")
        specific = data.get("providerSpecific") or []
        try:
            pairs = [(str(p["name"]), str(p.get("value", ""))) for p in specific]
        except (TypeError, KeyError) as exc:
            raise InvalidEndpoint(f"{name}: providerSpecific must be a list of {{name, value}}") from exc
        return cls.new(
            dns_name=name,
            record_type=str(data.get("recordType") or ""),
            targets=targets,
            ttl=ttl,
            set_identifier=str(data.get("setIdentifier") or ""),
            labels=labels,
            provider_specific=pairs,
        )


@dataclass(slots=True)
class Changes:
    """What a plan asks a provider to do in one zone: external-dns's plan.Changes.

    `update_old[i]` and `update_new[i]` are the before and after of the same RRset.
    """

    create: list[Endpoint] = field(default_factory=list)
    update_old: list[Endpoint] = field(default_factory=list)
    update_new: list[Endpoint] = field(default_factory=list)
    delete: list[Endpoint] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.create) + len(self.update_new) + len(self.delete)

    def is_empty(self) -> bool:
        return len(self) == 0

    def to_json(self) -> dict[str, list[dict[str, Any]]]:
        """The webhook protocol's body for POST /records (v0.17+ lower-case keys)."""
        return {
            "create": [e.to_json() for e in self.create],
            "updateOld": [e.to_json() for e in self.update_old],
            "updateNew": [e.to_json() for e in self.update_new],
            "delete": [e.to_json() for e in self.delete],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Changes:
        """Parse a POST /records body; accepts the capitalised keys of webhook providers before v0.17."""

        def pick(*keys: str) -> list[Endpoint]:
            for key in keys:
                items = data.get(key)
                if items:
                    return [Endpoint.from_json(item) for item in items]
            return []

        return cls(
            create=pick("create", "Create"),
            update_old=pick("updateOld", "UpdateOld"),
            update_new=pick("updateNew", "UpdateNew"),
            delete=pick("delete", "Delete"),
        )


class ZoneIndex:
    """Maps a DNS name to the most specific zone that contains it.

    Lookup walks the name's suffixes from the longest, so it costs O(labels), not O(zones): a replica
    with 100,000 zones places each endpoint in a handful of set lookups.
    """

    __slots__ = ("_below", "_zones")

    def __init__(self, zones: Iterable[str]) -> None:
        # Each zone maps to itself: `zone_of` hands out this one string, not a slice of the name per call
        # (the desired index keeps a zone per object: one copy of each zone name, not one per object).
        self._zones = {z: z for z in map(normalize_name, zones)}
        self._below: dict[str, list[str]] | None = None  # name → the zones under it (built when first asked)

    def __contains__(self, zone: str) -> bool:
        return zone in self._zones

    def __len__(self) -> int:
        return len(self._zones)

    def __iter__(self) -> Any:
        return iter(sorted(self._zones))

    def zone_of(self, name: str) -> str | None:
        name = normalize_name(name)
        while True:
            zone = self._zones.get(name)
            if zone is not None:
                return zone
            dot = name.find(".")
            if dot < 0:
                return None
            name = name[dot + 1 :]

    def reach(self, name: str) -> tuple[str, ...] | None:
        """The zones the records named `name`, or named under it, may fall in: its own zone and every zone
        below it (a child zone `pods.<name>` takes `<pod>.pods.<name>`). None when `name` itself is in no
        zone (its records would fall nowhere)."""
        own = self.zone_of(name)
        if own is None:
            return None
        if self._below is None:
            below: dict[str, list[str]] = {}
            for zone in self._zones.values():
                parent = zone
                while (dot := parent.find(".")) >= 0:
                    parent = parent[dot + 1 :]
                    below.setdefault(parent, []).append(zone)
            self._below = below
        under = self._below.get(normalize_name(name))
        return (own, *under) if under else (own,)


def fingerprint(endpoints: Iterable[Endpoint]) -> int:
    """A hash of the records as read, in order: equal for an unchanged read (the worker's steady-state check;
    a collision's worst case is a plan skipped until the next change, never a wrong write)."""
    return hash(
        tuple(
            (
                e.dns_name,
                e.record_type,
                e.targets,
                e.ttl,
                e.set_identifier,
                tuple(e.labels.items()),
                e.provider_specific,
            )
            for e in endpoints
        )
    )
