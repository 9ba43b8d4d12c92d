"""Cloudflare DNS records and shardsync endpoints, both ways, as external-dns's Cloudflare provider maps them.

Pure functions over the API's JSON record (the SDK's models as dicts):
- `Record.of(raw)`: one listed record, its value in external-dns's target form (an MX as
  "<priority> <host>", an SRV as "<priority> <weight> <port> <target>." from its structured data);
- `endpoints_of(records)`: Cloudflare keeps one record per value, external-dns one endpoint per name and
  type: the records grouped so, with the first one's TTL, `cloudflare-proxied`, comment and tags as
  provider-specific properties (external-dns's groupByNameAndType);
- `adjust(ep, …)`: external-dns's AdjustEndpoints, applied to the desired endpoints before planning, so they
  read as the zone will list them (proxied explicit, TTL left to Cloudflare when proxied, the
  `--cloudflare-record-comment` default, tags sorted) and an adopted zone plans no change;
- `body_of(ep, target, …)`: the record one value of an endpoint is written as (TTL 1, "automatic", when
  none is set; proxied never for the types Cloudflare cannot proxy; the MX priority and the SRV data as
  fields of their own).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from shardsync.logs import get_logger
from shardsync.records.endpoint import Endpoint, normalize_name

log = get_logger("shardsync.providers.cloudflare")

# external-dns names Cloudflare's provider-specific properties by their full annotation key.
_PREFIX = "external-dns.kubernetes.io/cloudflare-"
PROXIED = _PREFIX + "proxied"
COMMENT = _PREFIX + "record-comment"
TAGS = _PREFIX + "tags"
CUSTOM_HOSTNAME = _PREFIX + "custom-hostname"  # Cloudflare for SaaS: not supported, dropped as when disabled
REGION_KEY = _PREFIX + "region-key"  # regional services: not supported, dropped as when disabled

AUTO_TTL = 1  # Cloudflare's "automatic" TTL, what external-dns writes when none is set
# The types external-dns reads from a Cloudflare zone (provider.SupportedRecordType plus MX), and PTR,
# which shardsync manages (external-dns would create a PTR again every loop, never seeing it).
TYPES = frozenset({"A", "AAAA", "CNAME", "DNAME", "SRV", "TXT", "NS", "MX", "PTR"})
NOT_PROXIABLE = frozenset({"LOC", "MX", "NS", "SPF", "TXT", "SRV"})  # external-dns's list
FREE_COMMENT_LIMIT = 100  # characters of a record comment on a free zone; 500 on a paid one
PAID_COMMENT_LIMIT = 500
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})  # Go's strconv.ParseBool
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


class InvalidTargetError(ValueError):
    """A value that cannot be written as a Cloudflare record (an MX or SRV target not in its form)."""


@dataclass(frozen=True, slots=True)
class Record:
    """One listed Cloudflare record, its value as external-dns's target."""

    id: str
    name: str  # canonical
    type: str
    target: str
    ttl: int
    proxied: bool
    comment: str
    tags: tuple[str, ...]

    @property
    def key(self) -> tuple[str, str, str]:
        """What a change names a record by: (name, type, target)."""
        return (self.name, self.type, self.target)

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Record:
        rtype = str(raw.get("type") or "")
        return cls(
            id=str(raw.get("id") or ""),
            name=normalize_name(str(raw.get("name") or "")),
            type=rtype,
            target=_target(rtype, raw),
            ttl=int(raw.get("ttl") or AUTO_TTL),
            proxied=bool(raw.get("proxied")),
            comment=str(raw.get("comment") or ""),
            tags=tuple(sorted(str(t) for t in raw.get("tags") or ())),
        )


def _num(value: Any) -> str:
    """A number as Go's %v prints a float64: 10, not 10.0."""
    number = float(value)
    return str(int(number)) if number.is_integer() else str(number)


def _target(rtype: str, raw: Mapping[str, Any]) -> str:
    content = str(raw.get("content") or "")
    if rtype == "MX":
        return f"{_num(raw.get('priority') or 0)} {content}"
    data = raw.get("data")
    if rtype == "SRV" and isinstance(data, Mapping) and data.get("target"):
        target = str(data["target"])
        target = target if target == "." or target.endswith(".") else target + "."
        numbers = " ".join(_num(data.get(field) or 0) for field in ("priority", "weight", "port"))
        return f"{numbers} {target}"
    return content


def endpoints_of(records: Iterable[Record]) -> list[Endpoint]:
    """One endpoint per name and type (module docstring); types external-dns does not read are left out."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for record in records:
        if record.type in TYPES:
            groups.setdefault((record.name, record.type), []).append(record)
    out = []
    for (name, rtype), group in groups.items():
        first = group[0]
        props = [(PROXIED, "true" if first.proxied else "false")]
        if first.comment:
            props.append((COMMENT, first.comment))
        if first.tags:
            props.append((TAGS, ",".join(first.tags)))
        out.append(
            Endpoint.new(name, rtype, [r.target for r in group], ttl=first.ttl, provider_specific=props)
        )
    return out


def proxied(ep: Endpoint, by_default: bool) -> bool:
    """external-dns's shouldBeProxied: the annotation, else `--cloudflare-proxied`; never for the types
    Cloudflare cannot proxy."""
    value = by_default
    text = ep.provider_property(PROXIED)
    if text is not None:
        if text in _TRUE:
            value = True
        elif text in _FALSE:
            value = False
        else:
            log.warning(
                "cloudflare-proxied annotation is not a boolean; ignored", name=ep.dns_name, value=text
            )
    return value and ep.record_type not in NOT_PROXIABLE


def sorted_tags(text: str) -> list[str]:
    """external-dns's parseTagsAnnotation: comma-separated, blanks trimmed, empty ones dropped, sorted."""
    return sorted(t.strip() for t in text.split(",") if t.strip())


def adjust(ep: Endpoint, *, proxied_by_default: bool, comment: str, comment_limit: int) -> Endpoint:
    """external-dns's AdjustEndpoints for one desired endpoint (module docstring).

    Two differences, both so that a zone settles: an empty comment or tag list is dropped (Cloudflare
    lists none, and external-dns would update such a record every loop), and a comment is cut to the
    zone's limit here, as it will be listed, not only when written.
    """
    is_proxied = proxied(ep, proxied_by_default)
    props = {k: v for k, v in ep.provider_specific if k not in (CUSTOM_HOSTNAME, REGION_KEY)}
    props[PROXIED] = "true" if is_proxied else "false"
    if TAGS in props:
        props[TAGS] = ",".join(sorted_tags(props[TAGS]))
    if comment and COMMENT not in props:
        props[COMMENT] = comment
    if COMMENT in props and len(props[COMMENT]) > comment_limit:
        log.warning(
            "cloudflare record comment too long for the zone; cut",
            name=ep.dns_name,
            length=len(props[COMMENT]),
            limit=comment_limit,
        )
        props[COMMENT] = props[COMMENT][:comment_limit]
    props = {k: v for k, v in props.items() if v or k not in (TAGS, COMMENT)}
    return replace(ep, ttl=0 if is_proxied else ep.ttl, provider_specific=tuple(sorted(props.items())))


def body_of(ep: Endpoint, target: str, *, proxied_by_default: bool, comment: str) -> dict[str, Any]:
    """The record one value (`target`) of `ep` is written as (external-dns's newCloudFlareChange and its
    batch parameters). InvalidTargetError for an MX or SRV target not in its form."""
    note = ep.provider_property(COMMENT)
    body: dict[str, Any] = {
        "name": ep.dns_name,
        "type": ep.record_type,
        "ttl": ep.ttl if ep.ttl > 0 else AUTO_TTL,
        "proxied": proxied(ep, proxied_by_default),
        "comment": comment if note is None else note,
    }
    tags = sorted_tags(ep.provider_property(TAGS) or "")
    if tags:
        body["tags"] = tags
    if ep.record_type == "MX":
        priority, _, host = target.partition(" ")
        if not priority.isdigit() or not host.strip():
            raise InvalidTargetError(f"MX target {target!r}: not '<priority> <host>'")
        body["priority"], body["content"] = int(priority), host.strip()
    elif ep.record_type == "SRV":
        parts = target.split()
        if len(parts) != 4 or not all(p.isdigit() for p in parts[:3]):
            raise InvalidTargetError(f"SRV target {target!r}: not '<priority> <weight> <port> <target>'")
        host = parts[3] if parts[3] == "." else parts[3].rstrip(".")
        body["data"] = {
            "priority": int(parts[0]),
            "weight": int(parts[1]),
            "port": int(parts[2]),
            "target": host,
        }
    else:
        body["content"] = target
    return body
