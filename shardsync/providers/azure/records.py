"""Azure DNS record sets and shardsync endpoints, both ways, as external-dns's Azure provider maps them.

Pure functions over the API's JSON form of a record set (`{"name", "type", "etag", "properties": {"TTL",
"metadata", "ARecords", …}}`, Microsoft.Network 2018-05-01):
- `endpoint_of(record_set, zone)`: one listed record set as an endpoint: its name made absolute (`@` is
  the apex), its values as external-dns's targets (an MX as "<preference> <exchange>", an SRV as
  "<priority> <weight> <port> <target>"), its TTL, and its metadata as the provider-specific properties
  `azure/metadata-<key>` plus `azure/metadata-keys` (the keys, sorted). None for a type shardsync does not
  read (SOA, CAA), an alias record set (no values) or one without a name;
- `body_of(ep)`: the record set one endpoint is written as: TTL 300 when none is set, a TXT target as one
  TXT record holding it (in strings of at most 255 characters: one string, byte for byte what
  external-dns writes, for every ownership record), the metadata from `azure/metadata-*`. Raises
  InvalidTargetError for a value Azure cannot hold (an address that is not one, an MX or SRV not in its
  form, a second CNAME target);
- `adjust(ep)`: external-dns's AdjustEndpoints and RetainProviderProperties for Azure: the `azure-tags`
  annotation (`key=value,…`) becomes metadata, and every property Azure does not keep is dropped, so a
  desired endpoint reads as the zone will list it and an adopted zone plans no change.

external-dns reads only the first string of a TXT record set's first record and writes one record with the
first target: the same bytes for its ownership records; shardsync keeps every TXT record of a set (each
one's strings joined) and writes every target.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from shardsync.records.endpoint import Endpoint, normalize_name

DEFAULT_TTL = 300  # external-dns's, when an endpoint sets none
TYPE_PREFIX = "microsoft.network/dnszones/"
TXT_CHUNK = 255  # characters of one TXT string
TAGS = "azure/tags"  # the `azure-tags` annotation, as external-dns names its property
METADATA_PREFIX = "azure/metadata-"
METADATA_KEYS = "azure/metadata-keys"

# The types shardsync reads and writes here, with the property holding each one's records.
FIELDS = {
    "A": "ARecords",
    "AAAA": "AAAARecords",
    "CNAME": "CNAMERecord",
    "MX": "MXRecords",
    "NS": "NSRecords",
    "PTR": "PTRRecords",
    "SRV": "SRVRecords",
    "TXT": "TXTRecords",
}


class InvalidTargetError(ValueError):
    """A value that cannot be written as an Azure record (module docstring)."""


def relative_name(name: str, zone: str) -> str:
    """A record set's name relative to its zone (`@` for the apex), as the API names it."""
    name, zone = normalize_name(name), normalize_name(zone)
    if name == zone:
        return "@"
    return name.removesuffix("." + zone)


def absolute_name(relative: str, zone: str) -> str:
    return normalize_name(zone) if relative == "@" else normalize_name(f"{relative}.{zone}")


def type_of(record_set: Mapping[str, Any]) -> str:
    """The record type: the part of `type` after `Microsoft.Network/dnszones/`."""
    text = str(record_set.get("type") or "")
    return text[len(TYPE_PREFIX) :].upper() if text.lower().startswith(TYPE_PREFIX) else text.upper()


def _targets(rtype: str, props: Mapping[str, Any]) -> list[str]:
    field = FIELDS[rtype]
    value = props.get(field)
    if rtype == "CNAME":
        return [str(value["cname"])] if isinstance(value, Mapping) and value.get("cname") else []
    items = [item for item in value or () if isinstance(item, Mapping)]
    if rtype == "A":
        return [str(i["ipv4Address"]) for i in items if i.get("ipv4Address")]
    if rtype == "AAAA":
        return [str(i["ipv6Address"]) for i in items if i.get("ipv6Address")]
    if rtype == "MX":
        return [f"{int(i.get('preference') or 0)} {i['exchange']}" for i in items if i.get("exchange")]
    if rtype == "NS":
        return [str(i["nsdname"]) for i in items if i.get("nsdname")]
    if rtype == "PTR":
        return [str(i["ptrdname"]) for i in items if i.get("ptrdname")]
    if rtype == "SRV":
        numbers = ("priority", "weight", "port")
        return [
            " ".join([*(str(int(i.get(n) or 0)) for n in numbers), str(i["target"])])
            for i in items
            if i.get("target")
        ]
    return ["".join(str(s) for s in i.get("value") or ()) for i in items if i.get("value")]  # TXT


def metadata_properties(metadata: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """A record set's metadata as provider-specific properties (module docstring)."""
    found = {str(k): str(v) for k, v in (metadata or {}).items() if v is not None}
    if not found:
        return []
    props = [(METADATA_PREFIX + k, v) for k, v in sorted(found.items())]
    return [*props, (METADATA_KEYS, ",".join(sorted(found)))]


def endpoint_of(record_set: Mapping[str, Any], zone: str) -> Endpoint | None:
    """One listed record set as an endpoint (module docstring)."""
    rtype, name = type_of(record_set), str(record_set.get("name") or "")
    props = record_set.get("properties")
    if rtype not in FIELDS or not name or not isinstance(props, Mapping):
        return None
    targets = _targets(rtype, props)
    if not targets:
        return None
    return Endpoint.new(
        absolute_name(name, zone),
        rtype,
        targets,
        ttl=int(props.get("TTL") or 0),
        provider_specific=sorted(metadata_properties(props.get("metadata"))),
    )


def metadata_of(ep: Endpoint) -> dict[str, str]:
    """The metadata an endpoint's `azure/metadata-*` properties ask for (external-dns's
    extractMetadataFromEndpoint: the keys `azure/metadata-keys` names, empty values left out)."""
    keys = ep.provider_property(METADATA_KEYS) or ""
    found = {}
    for key in keys.split(","):
        value = ep.provider_property(METADATA_PREFIX + key) if key else None
        if value:
            found[key] = value
    return found


def _numbers(target: str, form: str) -> tuple[list[int], str]:
    """The numbers and the host of an MX or SRV target in `form` (InvalidTargetError when it is not)."""
    count = len(form.split()) - 1
    parts = target.split()
    if len(parts) != count + 1 or not all(p.isdigit() for p in parts[:count]):
        raise InvalidTargetError(f"target {target!r}: not '{form}'")
    return [int(p) for p in parts[:count]], parts[count]


def _record(rtype: str, target: str) -> dict[str, Any]:
    if rtype in ("A", "AAAA"):
        try:
            address = ipaddress.ip_address(target)
        except ValueError:
            raise InvalidTargetError(f"{rtype} target {target!r} is not an address") from None
        if (address.version == 4) != (rtype == "A"):
            raise InvalidTargetError(f"{rtype} target {target!r} is an IPv{address.version} address")
        return {"ipv4Address" if rtype == "A" else "ipv6Address": str(address)}
    if rtype == "MX":
        (preference,), exchange = _numbers(target, "<preference> <exchange>")
        return {"preference": preference, "exchange": exchange}
    if rtype == "SRV":
        (priority, weight, port), host = _numbers(target, "<priority> <weight> <port> <target>")
        return {"priority": priority, "weight": weight, "port": port, "target": host}
    if rtype == "NS":
        return {"nsdname": target}
    if rtype == "PTR":
        return {"ptrdname": target}
    chunks = [target[i : i + TXT_CHUNK] for i in range(0, len(target), TXT_CHUNK)] or [""]
    return {"value": chunks}  # TXT


def body_of(ep: Endpoint) -> dict[str, Any]:
    """The record set `ep` is written as (module docstring); InvalidTargetError when it cannot be."""
    rtype = ep.record_type
    if rtype not in FIELDS:
        raise InvalidTargetError(f"record type {rtype} is not written to Azure DNS")
    props: dict[str, Any] = {"TTL": ep.ttl if ep.ttl > 0 else DEFAULT_TTL}
    metadata = metadata_of(ep)
    if metadata:
        props["metadata"] = metadata
    if rtype == "CNAME":
        if len(ep.targets) != 1:
            raise InvalidTargetError(f"a CNAME record set holds one target, not {len(ep.targets)}")
        props["CNAMERecord"] = {"cname": ep.targets[0]}
    else:
        props[FIELDS[rtype]] = [_record(rtype, t) for t in ep.targets]
    return {"properties": props}


def tags_properties(text: str) -> list[tuple[str, str]]:
    """external-dns's parseAzureTagsAnnotation: `key=value` pairs, comma-separated, blanks trimmed, pairs
    without a key or a value dropped; as metadata properties (module docstring)."""
    found: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if sep and key.strip() and value.strip():
            found[key.strip()] = value.strip()
    return metadata_properties(found)


def adjust(ep: Endpoint) -> Endpoint:
    """external-dns's AdjustEndpoints and RetainProviderProperties (module docstring)."""
    props = dict(ep.provider_specific)
    tags = props.pop(TAGS, None)
    kept = {k: v for k, v in props.items() if k.startswith(METADATA_PREFIX)}
    if tags is not None:
        kept.update(tags_properties(tags))
    wanted = tuple(
        sorted(metadata_properties(metadata_of(replace(ep, provider_specific=tuple(kept.items())))))
    )
    return ep if wanted == ep.provider_specific else replace(ep, provider_specific=wanted)
