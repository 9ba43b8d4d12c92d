"""DNSEndpoint (externaldns.k8s.io/v1alpha1) → desired endpoints, as external-dns's crd source reads them.

spec.endpoints[] holds endpoints in external-dns's JSON form. Each is parsed with `Endpoint.from_json` and
checked with `Endpoint.validate()`; an invalid one is dropped and reported, the others are kept. Like
external-dns v0.22.0 (source/crd.go, then endpoint.CheckEndpoint in its dedup wrapper), a target ending in a
dot is refused for A, AAAA, NS and PTR records, an SRV target must be `<priority> <weight> <port> <host.>`
(16-bit numbers, the host absolute: ending in a dot, RFC 2782), and CNAME, MX and TXT take either. The user's
labels
are kept (except `shardsync/...`, which steer the planner and are set here only), plus
`resource=crd/<ns>/<name>` and `shardsync/created`; A and AAAA targets are put in canonical form. Two
entries for the same RRset merge their targets (a second CNAME target is refused instead, CNAME holding
one), as external-dns's MergeEndpoints does. An A, AAAA or CNAME entry without targets gets
`--default-targets` when they are set (external-dns's multiSource; sources.options), and is refused
otherwise.

`KIND` is the source kind `--source=crd`: it waits for the DNSEndpoint CRD to be served, and its
translator has a `StatusWriter` (sources.status) write each translated generation to
status.observedGeneration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from shardsync.kube.client import Kube
from shardsync.kube.objects import ObjectRef, Resource, get, get_str, same_but_version
from shardsync.manifests import CRD_FILE, CRD_NAME
from shardsync.records.endpoint import (
    CREATED_LABEL,
    INTERNAL_LABEL_PREFIX,
    RESOURCE_LABEL,
    SUPPORTED_TYPES,
    Endpoint,
    InvalidEndpoint,
    canonical_target,
)
from shardsync.sources import projections
from shardsync.sources.kind import CrdNotice, SourceContext, SourceKind, Translator
from shardsync.sources.options import SourceOptions, with_default_targets
from shardsync.sources.result import Problem, SourceResult
from shardsync.sources.status import StatusWriter

DNS_ENDPOINTS = Resource("externaldns.k8s.io", "v1alpha1", "dnsendpoints", "DNSEndpoint")

# Record types whose targets must not end in a dot (external-dns's crd source refuses it; CNAME, MX and TXT
# may, SRV must: `_srv_problem`; the types shardsync does not support are refused by `validate()` anyway).
_NO_DOT = SUPPORTED_TYPES - {"CNAME", "MX", "TXT", "SRV"}
_UINT16 = 0xFFFF
# Record types external-dns lets through without targets, for --default-targets to fill.
_DEFAULT_TARGET_TYPES = frozenset({"A", "AAAA", "CNAME"})


def _srv_problem(target: str) -> str:
    """Why external-dns's NewSRVRecord refuses an SRV target ("" when it accepts it)."""
    parts = target.split()
    if len(parts) != 4:
        return f"SRV target {target!r} is not 'priority weight port host.'"
    if not parts[3].endswith("."):
        return f"SRV target {target!r}: the host must end in a dot (RFC 2782: {parts[3]}.)"
    for what, text in zip(("priority", "weight", "port"), parts[:3], strict=True):
        if not text.isdigit() or int(text) > _UINT16:
            return f"SRV target {target!r}: {what} {text!r} is not a number from 0 to {_UINT16}"
    return ""


Obj = Mapping[str, Any]


def _parse_one(
    raw: Any, ref: ObjectRef, labels: dict[str, str], common: SourceOptions
) -> tuple[list[Endpoint], str]:
    """(endpoints, "") or ([], why it was refused); one entry gives several endpoints only when default
    targets of several types fill it."""
    if not isinstance(raw, Mapping):
        return [], "an endpoint must be an object"
    record_type = raw.get("recordType")
    targets = raw.get("targets")
    if isinstance(record_type, str) and record_type.upper() in _NO_DOT and isinstance(targets, list):
        dotted = [t for t in targets if isinstance(t, str) and t.endswith(".")]
        if dotted:
            return [], f"illegal target {dotted[0]!r} for a {record_type} record: drop the trailing dot"
    if isinstance(record_type, str) and record_type.upper() == "SRV" and isinstance(targets, list):
        for target in targets:
            why = _srv_problem(target) if isinstance(target, str) else ""
            if why:
                return [], why
    try:
        ep = Endpoint.from_json(raw)
    except InvalidEndpoint as exc:
        return [], str(exc)
    user = {k: v for k, v in ep.labels.items() if not k.startswith(INTERNAL_LABEL_PREFIX)}
    # Without labels of its own, an endpoint shares the object's labels dict (never changed in place).
    ep = replace(ep, labels={**user, **labels} if user else labels)
    found = [ep]
    if not ep.targets and ep.record_type in _DEFAULT_TARGET_TYPES:
        found = with_default_targets(found, common)
    out: list[Endpoint] = []
    for one in found:
        targets = tuple(sorted({canonical_target(one.record_type, t) for t in one.targets}))
        one = replace(one, targets=targets)
        try:
            one.validate()
        except InvalidEndpoint as exc:
            return [], str(exc)
        out.append(one)
    return out, ""


def dnsendpoint_endpoints(obj: Obj, common: SourceOptions | None = None) -> SourceResult:
    """A DNSEndpoint's valid endpoints, and one problem per endpoint dropped."""
    common = common or SourceOptions()
    ref = ObjectRef.of(obj, DNS_ENDPOINTS, "crd")
    labels = {RESOURCE_LABEL: ref.resource}
    created = get_str(obj, "metadata", "creationTimestamp")
    if created:
        labels[CREATED_LABEL] = created
    out = SourceResult()
    raw_endpoints = get(obj, "spec", "endpoints")
    if raw_endpoints is None:
        return out
    if not isinstance(raw_endpoints, list):
        out.problems.append(Problem(ref, "spec.endpoints", "must be a list of endpoints"))
        return out
    merged: dict[tuple[str, str, str], Endpoint] = {}
    for i, raw in enumerate(raw_endpoints):
        field_path = f"spec.endpoints[{i}]"
        found, why = _parse_one(raw, ref, labels, common)
        if why:
            out.problems.append(Problem(ref, field_path, f"dropped: {why}"))
        for ep in found:
            _merge(merged, ep, ref, field_path, out.problems)
    out.endpoints = [merged[key] for key in sorted(merged)]
    return out


def _merge(
    merged: dict[tuple[str, str, str], Endpoint],
    ep: Endpoint,
    ref: ObjectRef,
    field_path: str,
    problems: list[Problem],
) -> None:
    first = merged.get(ep.key)
    if first is None:
        merged[ep.key] = ep
        return
    if ep.record_type == "CNAME" and ep.targets != first.targets:
        problems.append(
            Problem(ref, field_path, f"dropped: {ep.dns_name} already has a CNAME to {first.targets[0]}")
        )
        return
    # The first entry's TTL, labels and provider-specific properties stay, as in external-dns.
    union = Endpoint.new(first.dns_name, first.record_type, (*first.targets, *ep.targets))
    merged[ep.key] = replace(first, targets=union.targets)


async def write_observed_generation(kube: Kube, key: str, generation: int) -> None:
    """Set status.observedGeneration of the DNSEndpoint at cache key `key` (the status subresource)."""
    namespace, _, name = key.partition("/")
    body = {"status": {"observedGeneration": generation}}
    await kube.patch(DNS_ENDPOINTS, name, body, namespace=namespace, subresource="status")


def dnsendpoint_names(obj: Obj, common: SourceOptions) -> list[str]:
    """The names of a DNSEndpoint's records (`SourceKind.names`): its endpoints' dnsName."""
    raw = get(obj, "spec", "endpoints")
    if not isinstance(raw, list):
        return []
    return [
        e["dnsName"]
        for e in raw
        if isinstance(e, dict) and isinstance(e.get("dnsName"), str) and e["dnsName"]
    ]


class DNSEndpointTranslator(Translator):
    """The crd kind in one watcher: `dnsendpoint_endpoints`, and the status writes of what it translated."""

    def __init__(self, context: SourceContext[None]) -> None:
        self.status = StatusWriter(context, DNS_ENDPOINTS, partial(write_observed_generation, context.kube))
        self.common = context.common

    def translate(self, key: str, obj: dict[str, Any] | None) -> SourceResult | None:
        self.status.translated(key, obj)
        return None if obj is None else dnsendpoint_endpoints(obj, self.common)

    def unchanged(self, key: str, old: dict[str, Any], new: dict[str, Any]) -> bool:
        # Translation reads no status: a status write (ours, a peer's) changes nothing but what is due.
        if not same_but_version(old, new, "status"):
            return False
        self.status.status_changed(key, new)
        return True

    def forget(self, key: str) -> None:
        self.status.translated(key, None)

    async def run(self) -> None:
        await self.status.run()

    def catch_up(self) -> None:
        self.status.sweep()


KIND = SourceKind(
    "crd",
    DNS_ENDPOINTS,
    DNSEndpointTranslator,
    crd=CrdNotice("DNSEndpoint CRD", (CRD_NAME,), f"shardsync/manifests/{CRD_FILE}"),
    evictable=True,
    names=dnsendpoint_names,
    projections={DNS_ENDPOINTS: projections.without_bookkeeping},
)
