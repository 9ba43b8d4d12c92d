"""What the two Istio source kinds share (`istio-gateway`, `istio-virtualservice`): their resources, a
Gateway's hosts, where a Gateway points (its targets), the records an object keeps on an error, and the
slim copies their informers keep (which object reads which: sources.istio_feeds). The rules are
external-dns v0.22's (source/istio_gateway.go, istio_virtualservice.go, endpoints.go):

- a Gateway's hosts are its spec.servers[].hosts, each `host`, `namespace/host` or `./host` (the namespace
  part dropped); `*` (and `namespace/*`) names no host; `*.example.com` is a wildcard record;
- its targets are its `target` annotation when set; else, when its `ingress` annotation names an Ingress
  (`name`, in the Gateway's namespace, or `namespace/name`), that Ingress's status.loadBalancer.ingress;
  else the Services whose spec.selector holds every label of the Gateway's spec.selector (an empty one:
  every Service), in --namespace (every namespace without it), each giving its spec.externalIPs when it has
  any, else its status.loadBalancer.ingress (an entry's ip, else its hostname);
- an `ingress` annotation that is not `name` or `namespace/name`, or that names an Ingress that does not
  exist, stops external-dns's whole sync with an error. Here it is a problem (reason `UnresolvedReference`)
  on the object reading that Gateway, which keeps the records it had (`KeptOnError`) while it lasts.

Resources: networking.istio.io at v1, falling back on v1beta1 then v1alpha3 (Istio before 1.22); Services
and Ingresses at v1, read in --namespace as external-dns reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shardsync.kube.objects import Resource, get, get_list, get_str, get_str_list, get_str_map
from shardsync.manifests import ISTIO_CRDS_FILE
from shardsync.records.endpoint import Endpoint
from shardsync.sources import annotations as ann
from shardsync.sources import projections
from shardsync.sources.ingress import INGRESSES
from shardsync.sources.kind import CrdNotice
from shardsync.sources.options import SourceOptions
from shardsync.sources.projections import Projection
from shardsync.sources.result import SourceResult
from shardsync.sources.service import SERVICES

GROUP = "networking.istio.io"
_OLDER = ("v1beta1", "v1alpha3")
GATEWAYS = Resource(GROUP, "v1", "gateways", "Gateway", older_versions=_OLDER)
VIRTUAL_SERVICES = Resource(GROUP, "v1", "virtualservices", "VirtualService", older_versions=_OLDER)

# The Event reason of a reference that cannot be followed (external-dns fails its sync on it): the object
# keeps the records it had.
UNRESOLVED = "UnresolvedReference"

Obj = Mapping[str, Any]


def crd_notice(*resources: Resource) -> CrdNotice:
    """What a kind reading these Istio resources waits for while their CRDs are not installed."""
    return CrdNotice(
        "Istio CRDs",
        tuple(f"{r.plural}.{GROUP}" for r in resources),
        f"Istio's base chart (or istioctl install); for tests shardsync/manifests/{ISTIO_CRDS_FILE}",
    )


# -- hosts --------------------------------------------------------------------------------------------------


def without_namespace(host: str) -> str:
    """`namespace/host` → `host` (external-dns drops the part before one `/`; more slashes stay)."""
    parts = host.split("/")
    return parts[1] if len(parts) == 2 else host


def server_hosts(gateway: Obj) -> list[tuple[str, str]]:
    """(host, field) of the names a Gateway's servers give (see the module docstring)."""
    out: list[tuple[str, str]] = []
    for i, server in enumerate(get_list(gateway, "spec", "servers")):
        for j, raw in enumerate(get_list(server, "hosts")):
            host = without_namespace(raw) if isinstance(raw, str) else ""
            if host and host != "*":
                out.append((host, f"spec.servers[{i}].hosts[{j}]"))
    return out


def names_with_annotation(hosts: Iterable[str], obj: Obj, common: SourceOptions) -> list[str] | None:
    """Every name an Istio object's records may have (`SourceKind.names`): its hosts and its hostname
    annotation (unless ignored); None with --fqdn-template, whose names only a translation knows."""
    if common.template is not None:
        return None
    names = list(hosts)
    if not common.ignore_hostname_annotation:
        names += ann.hostnames_of(get(obj, "metadata", "annotations"))
    return names


def gateway_names(gateway: Obj, common: SourceOptions) -> list[str] | None:
    return names_with_annotation((h for h, _ in server_hosts(gateway)), gateway, common)


# -- targets ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Feed:
    """What a Gateway's targets are read from: its `target` annotation, an Ingress, or the Services its
    selector picks (`selector` set), or nothing known (`error`, on the annotation `field`)."""

    annotation: tuple[str, ...] = ()
    ingress: str = ""  # the Ingress's cache key, `namespace/name`
    selector: Mapping[str, str] | None = None
    error: str = ""
    field: str = ""


def feed_of(gateway: Obj) -> Feed:
    raw = get_str_map(gateway, "metadata", "annotations")
    targets = ann.targets_of(raw)
    if targets:
        return Feed(annotation=targets)
    values, keys, _ = ann.resolve(raw)
    named = values.get(ann.INGRESS, "")
    if not named:
        return Feed(selector=get_str_map(gateway, "spec", "selector"))
    field = f"metadata.annotations[{keys[ann.INGRESS]}]"
    parts = named.split("/")
    if len(parts) > 2:
        return Feed(error=f"{named!r} is not an Ingress `name` or `namespace/name`", field=field)
    namespace = (parts[0] if len(parts) == 2 else "") or get_str(gateway, "metadata", "namespace")
    return Feed(ingress=f"{namespace}/{parts[-1]}", field=field)


def selects(selector: Mapping[str, str], service: Obj) -> bool:
    """A Gateway selector picks a Service whose spec.selector holds each of its labels (labels.SelectorFromSet
    matched against the Service's selector, as external-dns does: the ingress gateway's Pods' labels)."""
    labels = get(service, "spec", "selector")
    if not isinstance(labels, Mapping):
        return not selector
    return all(labels.get(k) == v for k, v in selector.items())


def load_balancer(obj: Obj) -> list[str]:
    out: list[str] = []
    for lb in get_list(obj, "status", "loadBalancer", "ingress"):
        address = get_str(lb, "ip") or get_str(lb, "hostname")
        if address:
            out.append(address)
    return out


def service_targets(service: Obj) -> list[str]:
    return get_str_list(service, "spec", "externalIPs") or load_balancer(service)


@dataclass(frozen=True, slots=True)
class Targets:
    """A Gateway's targets, or why they cannot be known (`error`, on the Gateway's `field`)."""

    values: tuple[str, ...] = ()
    error: str = ""
    field: str = ""


Select = Callable[[Mapping[str, str]], Iterable[str]]  # a Gateway selector → keys of the Services it may pick


def gateway_targets(
    gateway: Obj, services: Mapping[str, Obj], ingresses: Mapping[str, Obj], select: Select | None = None
) -> Targets:
    """Where a Gateway points (see the module docstring); `services` and `ingresses` are the caches, and
    `select`, when given, the keys of the Services worth looking at (istio_feeds.GatewayFeeds.select),
    else every Service is."""
    feed = feed_of(gateway)
    if feed.annotation:
        return Targets(feed.annotation)
    if feed.error:
        return Targets(error=feed.error, field=feed.field)
    if feed.ingress:
        ingress = ingresses.get(feed.ingress)
        if ingress is None:
            return Targets(error=f"Ingress {feed.ingress} not found", field=feed.field)
        return Targets(tuple(load_balancer(ingress)))
    selector = feed.selector or {}
    found: dict[str, None] = {}  # ordered, as several Services may share a load balancer
    for key in services.keys() if select is None else select(selector):
        service = services.get(key)
        if service is not None and selects(selector, service):
            found.update(dict.fromkeys(service_targets(service)))
    return Targets(tuple(found))


def service_inputs(service: Obj) -> tuple[Any, ...]:
    """What a Gateway's targets read of a Service."""
    return (get(service, "spec", "selector"), get(service, "spec", "externalIPs"), load_balancer(service))


class KeptOnError:
    """The endpoints of each object's last translation without an unresolved reference: an object whose
    translation meets one (problem reason `UNRESOLVED`) keeps them, with the new problems."""

    def __init__(self) -> None:
        self._last: dict[str, list[Endpoint]] = {}  # the endpoints themselves are shared with the result

    def settle(self, key: str, result: SourceResult) -> SourceResult:
        if any(p.reason == UNRESOLVED for p in result.problems):
            return SourceResult(list(self._last.get(key, ())), result.problems)
        if result.endpoints:
            self._last[key] = result.endpoints
        else:
            self._last.pop(key, None)
        return result

    def drop(self, key: str) -> None:
        self._last.pop(key, None)


# -- slim copies --------------------------------------------------------------------------------------------


def _slim(obj: dict[str, Any], spec_fields: tuple[str, ...]) -> dict[str, Any]:
    slim = projections.without_bookkeeping(obj)
    out: dict[str, Any] = {k: slim[k] for k in ("apiVersion", "kind", "metadata") if k in slim}
    spec = obj.get("spec")
    if isinstance(spec, dict):
        out["spec"] = {k: spec[k] for k in spec_fields if k in spec}
    return out


def slim_gateway(obj: dict[str, Any]) -> dict[str, Any]:
    """A Gateway as the Istio kinds read it without --fqdn-template: metadata less bookkeeping, its selector
    and its servers' hosts (each server kept in its place, for the field paths), not its status."""
    out = _slim(obj, ("selector",))
    servers = get(obj, "spec", "servers")
    if isinstance(servers, list):
        out["spec"]["servers"] = [
            {"hosts": s["hosts"]} if isinstance(s, dict) and "hosts" in s else {} for s in servers
        ]
    return out


def slim_virtualservice(obj: dict[str, Any]) -> dict[str, Any]:
    """A VirtualService without --fqdn-template: metadata less bookkeeping, spec.hosts, gateways and
    exportTo (not its routes, the bulk of it, nor its status)."""
    return _slim(obj, ("hosts", "gateways", "exportTo"))


# What both kinds keep of the resources they share (the same functions, so one informer serves both, and
# the service and ingress kinds when chosen too).
PROJECTIONS: dict[Resource, Projection] = {
    GATEWAYS: projections.without_bookkeeping,
    SERVICES: projections.without_bookkeeping,
    INGRESSES: projections.without_bookkeeping,
}
UNTEMPLATED: dict[Resource, Projection] = {GATEWAYS: slim_gateway, SERVICES: projections.service}
