"""The Gateway API's attachment rules, as external-dns's gateway sources apply them (pure; plain dicts).

Which names a route gets from the Gateways it is attached to, and which addresses they point at:
- a parent counts only when the route's `status.parents[]` holds it with an `Accepted` condition `True`
  and the route's spec.parentRefs still names it (group gateway.networking.k8s.io, kind Gateway, the
  namespace defaulting to the route's);
- its `sectionName` picks one listener (else every listener), its `port` keeps listeners of that port;
- a listener takes the route when the protocols agree (HTTPS counts as HTTP; a TLS listener takes a TCP
  route), its `allowedRoutes.namespaces.from` admits the route's namespace (Same by default; All;
  Selector: the route's Namespace labels against a metav1.LabelSelector) and its `allowedRoutes.kinds`,
  when given, name the route's kind;
- a route host and a listener hostname intersect to the more specific of the two: an empty one matches
  anything, `*.example.com` matches any name under example.com (not example.com itself); an IP address or
  a name that is not RFC 1123 matches nothing;
- the targets are the Gateway's `target` annotation when set, else its `status.addresses[].value`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shardsync.kube.objects import get, get_list, get_str, get_str_map
from shardsync.kube.selectors import SelectorError, format_label_selector, parse_selector

GROUP = "gateway.networking.k8s.io"
GATEWAY_KIND = "Gateway"

Obj = Mapping[str, Any]

_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def canonical_host(host: str) -> str | None:
    """The host in lower case ("" stays ""); None for an IP address or a name that is not RFC 1123
    (after an optional leading `*.`)."""
    if host == "":
        return ""
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    name = host.removeprefix("*.")
    if not 0 < len(name) <= 255 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        return None
    return host.lower()  # the name is ASCII here: lower() touches only A-Z


def matching_host(a: str, b: str) -> str | None:
    """The more specific of two overlapping hosts (either may be empty or a `*.` wildcard); None when they
    do not overlap or one is invalid."""
    ca, cb = canonical_host(a), canonical_host(b)
    if ca is None or cb is None:
        return None
    if ca == "":
        return cb
    if cb == "" or ca == cb:
        return ca
    # The shorter one (or, of equal length, the wildcard) must be the wildcard covering the other.
    if len(cb) < len(ca) or (len(ca) == len(cb) and cb.startswith("*.")):
        ca, cb = cb, ca
    if ca.startswith("*.") and cb.endswith(ca[1:]):
        return cb
    return None


def protocol_matches(route: str, listener: str) -> bool:
    """Whether a route of protocol `route` may attach to a listener of protocol `listener`."""
    route = "HTTP" if route == "HTTPS" else route
    listener = "HTTP" if listener == "HTTPS" else listener
    if route == "TCP" and listener == "TLS":
        listener = "TCP"
    return route == listener


def accepted(conditions: list[Any]) -> bool:
    """The first `Accepted` condition has status True."""
    for condition in conditions:
        if get_str(condition, "type") == "Accepted":
            return get_str(condition, "status") == "True"
    return False


@dataclass(frozen=True, slots=True)
class ParentRef:
    """A parentRef with its defaults filled in (group and kind of a Gateway, the route's namespace)."""

    group: str
    kind: str
    namespace: str
    name: str
    section: str = ""
    port: int | None = None

    @classmethod
    def of(cls, ref: Any, route_namespace: str) -> ParentRef:
        port = get(ref, "port")
        return cls(
            group=get_str(ref, "group") or GROUP,
            kind=get_str(ref, "kind") or GATEWAY_KIND,
            namespace=get_str(ref, "namespace") or route_namespace,
            name=get_str(ref, "name"),
            section=get_str(ref, "sectionName"),
            port=port if isinstance(port, int) and not isinstance(port, bool) else None,
        )

    @property
    def is_gateway(self) -> bool:
        return self.group == GROUP and self.kind == GATEWAY_KIND

    @property
    def key(self) -> str:
        """The Gateway's cache key, `namespace/name`."""
        return f"{self.namespace}/{self.name}"

    def same_object(self, other: ParentRef) -> bool:
        return (self.group, self.kind, self.namespace, self.name) == (
            other.group,
            other.kind,
            other.namespace,
            other.name,
        )


def accepted_parents(route: Obj) -> list[ParentRef]:
    """The Gateways that accepted the route: status.parents[] entries with Accepted=True whose Gateway the
    route's spec.parentRefs still names (a status left over from a removed parentRef does not count)."""
    namespace = get_str(route, "metadata", "namespace")
    spec_refs = [ParentRef.of(r, namespace) for r in get_list(route, "spec", "parentRefs")]
    out: list[ParentRef] = []
    for status in get_list(route, "status", "parents"):
        ref = ParentRef.of(get(status, "parentRef"), namespace)
        if not ref.is_gateway or not any(ref.same_object(s) for s in spec_refs):
            continue
        if accepted(get_list(status, "conditions")):
            out.append(ref)
    return out


def referenced_gateways(route: Obj) -> set[str]:
    """The cache keys of every Gateway the route's status names, accepted or not: a change to one of them
    may change the route's endpoints."""
    namespace = get_str(route, "metadata", "namespace")
    refs = (ParentRef.of(get(s, "parentRef"), namespace) for s in get_list(route, "status", "parents"))
    return {ref.key for ref in refs if ref.is_gateway}


def namespace_allowed(listener: Obj, gateway_namespace: str, route_namespace: str, ns_labels: Any) -> bool:
    """allowedRoutes.namespaces: Same (the default), All, or Selector against the route's Namespace labels
    (`ns_labels` None: the Namespace is not known, so nothing is allowed)."""
    allowed = get(listener, "allowedRoutes", "namespaces")
    origin = get_str(allowed, "from") or "Same"
    if origin == "All":
        return True
    if origin == "Same":
        return gateway_namespace == route_namespace
    if origin != "Selector" or ns_labels is None:
        return False
    raw = get(allowed, "selector")
    if not _well_formed(raw):
        return False  # a nil (or malformed) selector selects nothing (metav1.LabelSelectorAsSelector)
    try:
        selector = parse_selector(format_label_selector(raw))
    except SelectorError:
        return False
    return selector.matches(ns_labels)


def _well_formed(selector: Any) -> bool:
    """A metav1.LabelSelector of the right shape (the API's schema would refuse any other; a user's object
    may still hold one where no schema is installed)."""
    if not isinstance(selector, Mapping):
        return False
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        return False
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        return False
    for expr in expressions:
        values = get(expr, "values") or []
        if not isinstance(get(expr, "key"), str) or not isinstance(get(expr, "operator"), str):
            return False
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            return False
    return True


def kind_allowed(listener: Obj, route_kind: str) -> bool:
    """allowedRoutes.kinds: any kind when empty, else one entry naming the route's group and kind."""
    kinds = get_list(listener, "allowedRoutes", "kinds")
    if not kinds:
        return True
    return any((get_str(k, "group") or GROUP) == GROUP and get_str(k, "kind") == route_kind for k in kinds)


@dataclass(frozen=True, slots=True)
class RouteShape:
    """What the rules need of a route: its kind, protocol and namespace."""

    kind: str  # HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute
    protocol: str  # the listener protocol it attaches to
    namespace: str


def listeners_for(gateway: Obj, ref: ParentRef) -> list[Obj]:
    """The listeners the parentRef points at: the one of its sectionName, else all; then its port."""
    listeners = [x for x in get_list(gateway, "spec", "listeners") if isinstance(x, Mapping)]
    if ref.section:
        listeners = [x for x in listeners if get_str(x, "name") == ref.section]
    if ref.port is not None:
        listeners = [x for x in listeners if get(x, "port") == ref.port]
    return listeners


def listener_takes(listener: Obj, gateway: Obj, route: RouteShape, namespaces: Mapping[str, Obj]) -> bool:
    """Whether the listener admits the route (protocol, allowedRoutes namespaces and kinds)."""
    if not protocol_matches(route.protocol, get_str(listener, "protocol")):
        return False
    ns = namespaces.get(route.namespace)
    ns_labels = get_str_map(ns, "metadata", "labels") if ns is not None else None
    gateway_namespace = get_str(gateway, "metadata", "namespace")
    if not namespace_allowed(listener, gateway_namespace, route.namespace, ns_labels):
        return False
    return kind_allowed(listener, route.kind)


def gateway_targets(gateway: Obj, annotation_targets: tuple[str, ...]) -> list[str]:
    """The `target` annotation of the Gateway when set, else its status.addresses values."""
    if annotation_targets:
        return list(annotation_targets)
    return [v for a in get_list(gateway, "status", "addresses") if (v := get_str(a, "value"))]


def hosts_through(route_hosts: list[str], listener: Obj) -> list[str]:
    """The names a route's hosts give through one listener ("" route host: the listener's hostname)."""
    listener_host = get_str(listener, "hostname")
    out: list[str] = []
    for host in route_hosts:
        if host == "" and listener_host == "":
            continue  # neither names a host
        found = matching_host(listener_host, host)
        if found:
            out.append(found)
    return out
