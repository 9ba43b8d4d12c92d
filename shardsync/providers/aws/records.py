"""Route53 resource record sets and shardsync endpoints, both ways, as external-dns's AWS provider maps them.

Pure functions over boto3's dict shapes:
- `endpoints_of(rrset)`: a listed RRset as endpoints (records with values and alias records; the routing
  policy and health check as `aws/*` provider-specific properties under the set identifier);
- `rrset_of(ep, evaluate_target_health)`: the RRset a change writes (TTL 300 when unset; an alias with its
  target's hosted zone);
- `adjust(endpoints, …)`: external-dns's AdjustEndpoints, applied to desired endpoints before planning, so
  they read the way `endpoints_of` reads the zone (a CNAME to a load balancer becomes an A alias plus an
  AAAA alias, alias TTLs are 300, `aws/evaluate-target-health` is explicit) and an adopted zone plans no
  change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from shardsync.providers.aws.canonical import canonical_hosted_zone
from shardsync.records.endpoint import ALIAS_PROPERTY, Endpoint, normalize_name

DEFAULT_TTL = 300
TYPES = frozenset({"A", "AAAA", "CNAME", "TXT", "SRV", "MX", "NS", "PTR", "NAPTR"})

# external-dns's provider-specific property names (the `aws-*` annotations of a source object become these)
TARGET_HOSTED_ZONE = "aws/target-hosted-zone"
EVALUATE_TARGET_HEALTH = "aws/evaluate-target-health"
WEIGHT = "aws/weight"
REGION = "aws/region"
FAILOVER = "aws/failover"
CONTINENT = "aws/geolocation-continent-code"
COUNTRY = "aws/geolocation-country-code"
SUBDIVISION = "aws/geolocation-subdivision-code"
MULTI_VALUE_ANSWER = "aws/multi-value-answer"
HEALTH_CHECK_ID = "aws/health-check-id"
# A change of one of these needs DELETE + CREATE, not UPSERT (external-dns's requiresDeleteCreate).
POLICY_PROPERTIES = (WEIGHT, REGION, FAILOVER, CONTINENT, COUNTRY, SUBDIVISION)
SAME_ZONE = "same-zone"  # an alias to a name in the record's own hosted zone


def unescape(name: str) -> str:
    """Route53 returns `*` as `\\052` and other special characters as octal escapes."""
    if "\\" not in name:
        return name
    out, i = [], 0
    while i < len(name):
        chunk = name[i + 1 : i + 4]
        if (
            name[i] == "\\"
            and len(chunk) == 3
            and chunk.isdigit()
            and chunk[0] in "0123"
            and "8" not in chunk
        ):
            out.append(chr(int(chunk, 8)))
            i += 4
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def endpoints_of(rrset: Mapping[str, Any]) -> list[Endpoint]:
    """The endpoints one listed RRset stands for (none for types external-dns does not manage)."""
    rtype = str(rrset.get("Type", ""))
    if rtype not in TYPES:
        return []
    name = normalize_name(unescape(str(rrset["Name"])))
    ttl = int(rrset.get("TTL") or 0)
    found: list[tuple[int, list[str], list[tuple[str, str]]]] = []
    values = [str(r["Value"]) for r in rrset.get("ResourceRecords") or ()]
    if values:
        found.append((ttl, values, [(ALIAS_PROPERTY, "false")] if rtype == "CNAME" else []))
    alias = rrset.get("AliasTarget")
    if alias:
        health = "true" if alias.get("EvaluateTargetHealth") else "false"
        target = normalize_name(unescape(str(alias["DNSName"])))
        # Alias records have no TTL: the default, to match the TTL the TXT records were generated with
        found.append(
            (ttl or DEFAULT_TTL, [target], [(EVALUATE_TARGET_HEALTH, health), (ALIAS_PROPERTY, "true")])
        )
    set_id = str(rrset.get("SetIdentifier") or "")
    policy = _policy_properties(rrset) if set_id else []
    health_check = rrset.get("HealthCheckId")
    extra = [(HEALTH_CHECK_ID, str(health_check))] if health_check else []
    return [
        Endpoint.new(
            name, rtype, targets, ttl=t, set_identifier=set_id, provider_specific=[*props, *policy, *extra]
        )
        for t, targets, props in found
    ]


def _policy_properties(rrset: Mapping[str, Any]) -> list[tuple[str, str]]:
    if rrset.get("Weight") is not None:
        return [(WEIGHT, str(int(rrset["Weight"])))]
    if rrset.get("Region"):
        return [(REGION, str(rrset["Region"]))]
    if rrset.get("Failover"):
        return [(FAILOVER, str(rrset["Failover"]))]
    if rrset.get("MultiValueAnswer"):
        return [(MULTI_VALUE_ANSWER, "")]
    geo = rrset.get("GeoLocation")
    if geo:
        if geo.get("ContinentCode"):
            return [(CONTINENT, str(geo["ContinentCode"]))]
        out = []
        if geo.get("CountryCode"):
            out.append((COUNTRY, str(geo["CountryCode"])))
        if geo.get("SubdivisionCode"):
            out.append((SUBDIVISION, str(geo["SubdivisionCode"])))
        return out
    return []


def alias_zone(ep: Endpoint) -> str:
    """external-dns's isAWSAlias: the hosted zone of an alias record's target ("" for a record with values).

    An A or AAAA with alias=true is an alias: to the zone named by `aws/target-hosted-zone`, else to the
    canonical zone of a known AWS hostname, else to a name in the record's own zone (`SAME_ZONE`).
    """
    if (
        ep.provider_property(ALIAS_PROPERTY) != "true"
        or ep.record_type not in ("A", "AAAA")
        or not ep.targets
    ):
        return ""
    return ep.provider_property(TARGET_HOSTED_ZONE) or canonical_hosted_zone(ep.targets[0]) or SAME_ZONE


def rrset_of(ep: Endpoint, evaluate_target_health: bool, own_zone_id: str = "") -> dict[str, Any]:
    """The ResourceRecordSet a change writes for `ep` (external-dns's newChange)."""
    rrset: dict[str, Any] = {"Name": ep.dns_name, "Type": ep.record_type}
    target_zone = alias_zone(ep)
    if target_zone:
        health = ep.provider_property(EVALUATE_TARGET_HEALTH)
        rrset["AliasTarget"] = {
            "HostedZoneId": clean_zone_id(own_zone_id if target_zone == SAME_ZONE else target_zone),
            "DNSName": ep.targets[0],
            "EvaluateTargetHealth": evaluate_target_health if health is None else health.lower() == "true",
        }
    else:
        rrset["TTL"] = ep.ttl if ep.ttl > 0 else DEFAULT_TTL
        rrset["ResourceRecords"] = [{"Value": t} for t in ep.targets]
    if ep.set_identifier:
        rrset["SetIdentifier"] = ep.set_identifier
    props = dict(ep.provider_specific)
    if WEIGHT in props:
        rrset["Weight"] = _int(props[WEIGHT])
    if props.get(REGION):
        rrset["Region"] = props[REGION]
    if props.get(FAILOVER):
        rrset["Failover"] = props[FAILOVER]
    if MULTI_VALUE_ANSWER in props:
        rrset["MultiValueAnswer"] = True
    if props.get(CONTINENT):
        rrset["GeoLocation"] = {"ContinentCode": props[CONTINENT]}
    elif props.get(COUNTRY) or props.get(SUBDIVISION):
        geo = {"CountryCode": props.get(COUNTRY), "SubdivisionCode": props.get(SUBDIVISION)}
        rrset["GeoLocation"] = {k: v for k, v in geo.items() if v}
    if props.get(HEALTH_CHECK_ID):
        rrset["HealthCheckId"] = props[HEALTH_CHECK_ID]
    return rrset


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0  # external-dns: "using weight of 0"


def clean_zone_id(zone_id: str) -> str:
    return zone_id.removeprefix("/hostedzone/")


def value_size(rrset: Mapping[str, Any]) -> tuple[int, int]:
    """(values, characters of values) of an RRset, as Route53 counts them toward a batch's limits."""
    alias = rrset.get("AliasTarget")
    if alias:
        return 1, len(str(alias["DNSName"]).encode())
    values = [str(r["Value"]) for r in rrset.get("ResourceRecords") or ()]
    return len(values), sum(len(v.encode()) for v in values)


# ---- external-dns's AdjustEndpoints ----


def adjust(
    endpoints: Iterable[Endpoint], *, prefer_cname: bool, evaluate_target_health: bool
) -> list[Endpoint]:
    """Desired endpoints as the zone will list them once written (module docstring)."""
    out: list[Endpoint] = []
    extra: list[Endpoint] = []
    for ep in endpoints:
        if ep.record_type in ("A", "AAAA"):
            out.append(_adjust_address(ep, evaluate_target_health))
        elif ep.record_type == "CNAME":
            alias = ep.alias_type
            if not alias:
                use = not prefer_cname and bool(ep.targets) and canonical_hosted_zone(ep.targets[0]) != ""
                alias = "true" if use else "false"
                ep = _set(ep, ALIAS_PROPERTY, alias)
            if alias in ("true", "A", "AAAA"):
                as_a = _alias(
                    replace(ep, record_type="AAAA" if alias == "AAAA" else "A"), evaluate_target_health
                )
                out.append(as_a)
                if alias == "true":
                    extra.append(replace(as_a, record_type="AAAA"))
            else:
                out.append(_drop(ep, EVALUATE_TARGET_HEALTH))
        else:
            out.append(ep)
    return out + extra


def _adjust_address(ep: Endpoint, evaluate_target_health: bool) -> Endpoint:
    if ep.alias_type == "true":
        return _alias(ep, evaluate_target_health)
    return _drop(_drop(ep, ALIAS_PROPERTY), EVALUATE_TARGET_HEALTH)


def _alias(ep: Endpoint, evaluate_target_health: bool) -> Endpoint:
    """An alias record as listed: TTL 300 if one was set, evaluate-target-health true/false, alias=true."""
    if ep.ttl > 0:
        ep = replace(ep, ttl=DEFAULT_TTL)
    health = ep.provider_property(EVALUATE_TARGET_HEALTH)
    value = evaluate_target_health if health is None else _bool(health, evaluate_target_health)
    ep = _set(ep, EVALUATE_TARGET_HEALTH, "true" if value else "false")
    return _set(ep, ALIAS_PROPERTY, "true")


def _bool(text: str, default: bool) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "t"):
        return True
    if lowered in ("false", "0", "f"):
        return False
    return default


def _set(ep: Endpoint, name: str, value: str) -> Endpoint:
    props = [(k, v) for k, v in ep.provider_specific if k != name]
    return replace(ep, provider_specific=(*props, (name, value)))


def _drop(ep: Endpoint, name: str) -> Endpoint:
    if ep.provider_property(name) is None:
        return ep
    return replace(ep, provider_specific=tuple((k, v) for k, v in ep.provider_specific if k != name))


def requires_delete_create(old: Endpoint, new: Endpoint) -> bool:
    """external-dns's requiresDeleteCreate: an UPSERT cannot turn one into the other."""
    if old.record_type != new.record_type or old.set_identifier != new.set_identifier:
        return True
    if old.record_type == "A" and old.provider_property(ALIAS_PROPERTY) != new.provider_property(
        ALIAS_PROPERTY
    ):
        return True
    return any(
        (old.provider_property(p) is None) != (new.provider_property(p) is None) for p in POLICY_PROPERTIES
    )
