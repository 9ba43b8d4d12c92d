"""Gateway API routes → desired endpoints: the five kinds `gateway-httproute`, `gateway-grpcroute`,
`gateway-tlsroute`, `gateway-tcproute` and `gateway-udproute`, as external-dns's gateway sources compute
them.

A route's names are its spec.hostnames (TCPRoute and UDPRoute have none), else the `--fqdn-template`
names (or both with `--combine-fqdn-annotation`), a route without spec.hostnames taking the hostnames of
the listeners it attaches to, plus the `hostname` annotation (unless `--ignore-hostname-annotation`). The
`gateway-hostname-source` annotation keeps only the defined names (`defined-hosts-only`) or only the
annotation's (`annotation-only`). Each name is intersected with the hostname of every listener of every
Gateway that accepted the route (the rules: sources.gateway_match); what survives points at that
Gateway's targets. A name that is not a DNS name (an IP address, `bad..name`) matches nothing and is
reported on the route. `ttl`, `set-identifier` and the provider-specific annotations of the route apply; a
route or a Gateway whose `controller` annotation names another controller is skipped. `--gateway-name`,
`--gateway-namespace` and `--gateway-label-filter` choose the Gateways that count. Endpoints carry
`resource=<kind>/<namespace>/<name>` with the lower-case kind (`httproute`), as external-dns labels them.

Each kind watches its routes, the Gateways (in every namespace whatever `--namespace` says: a route's
Gateway usually lives elsewhere) and the Namespaces (for allowedRoutes selectors). Its translator indexes
which routes name which Gateway in their status, so a Gateway event re-translates exactly those routes,
and a Namespace whose labels changed re-translates the routes in it. Versions are the newest served:
v1 for Gateway, HTTPRoute and GRPCRoute; TLSRoute v1, v1alpha3 or v1alpha2; TCPRoute and UDPRoute v1 or
v1alpha2 (the first of them the CRD serves, `Resource.older_versions`). Until the CRDs are served the
kinds wait and say what to install (`SourceKind.crd`, sources.served).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shardsync.flags import ConfigError, FlagGroup, mirrored
from shardsync.kube.objects import ObjectRef, Resource, get, get_list, get_str, get_str_list, get_str_map
from shardsync.kube.selectors import Selector, SelectorError, parse_selector
from shardsync.manifests import GATEWAY_CRDS_FILE
from shardsync.sources import annotations as ann
from shardsync.sources import gateway_match as match
from shardsync.sources.kind import CrdNotice, SourceContext, SourceKind, Translator
from shardsync.sources.options import SourceOptions
from shardsync.sources.result import EndpointSet, Problem, SourceResult

GROUP = match.GROUP
GATEWAYS = Resource(GROUP, "v1", "gateways", "Gateway")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class GatewayOptions:
    """The flags of the five gateway kinds, external-dns's names and defaults."""

    gateway_name: str = ""  # only Gateways of this name count ("" any)
    gateway_namespace: str = ""  # only Gateways of this namespace count ("" any)
    gateway_label_filter: str = ""  # only Gateways with these labels count (a label selector)

    @property
    def gateway_labels(self) -> Selector:
        return parse_selector(self.gateway_label_filter, for_annotations=True)


def _validate(options: GatewayOptions) -> None:
    try:
        parse_selector(options.gateway_label_filter, for_annotations=True)
    except SelectorError as exc:
        raise ConfigError(f"--gateway-label-filter {options.gateway_label_filter!r}: {exc}") from None


FLAGS = FlagGroup(
    "gateway",
    "Gateway API sources (--source=gateway-httproute, gateway-grpcroute, gateway-tlsroute, ...)",
    GatewayOptions,
    (
        mirrored("gateway_name", "only read routes attached to Gateways of this name"),
        mirrored("gateway_namespace", "only read routes attached to Gateways in this namespace"),
        mirrored("gateway_label_filter", "only read routes attached to Gateways with these labels"),
    ),
    validate=_validate,
)


@dataclass(frozen=True, slots=True)
class RouteKind:
    """What differs between the five route kinds."""

    resource: Resource
    protocol: str  # the listener protocol its routes attach to
    has_hostnames: bool = True  # spec.hostnames exists (not on TCPRoute, UDPRoute)

    @property
    def label(self) -> str:
        """external-dns's `resource` label kind: `httproute`."""
        return self.resource.kind.lower()


def _route(
    plural: str, kind: str, protocol: str, older: tuple[str, ...] = (), hosts: bool = True
) -> RouteKind:
    return RouteKind(Resource(GROUP, "v1", plural, kind, older_versions=older), protocol, hosts)


HTTP = _route("httproutes", "HTTPRoute", "HTTP")
GRPC = _route("grpcroutes", "GRPCRoute", "HTTPS")
TLS = _route("tlsroutes", "TLSRoute", "TLS", ("v1alpha3", "v1alpha2"))
TCP = _route("tcproutes", "TCPRoute", "TCP", ("v1alpha2",), hosts=False)
UDP = _route("udproutes", "UDPRoute", "UDP", ("v1alpha2",), hosts=False)


@dataclass(frozen=True, slots=True)
class Gateways:
    """The Gateways and Namespaces a translation reads, and which Gateways count (the flags, the
    `controller` annotation)."""

    gateways: Mapping[str, Obj]  # cache key `namespace/name` → Gateway
    namespaces: Mapping[str, Obj]  # name → Namespace
    options: GatewayOptions = GatewayOptions()
    labels: Selector = field(default_factory=Selector)

    def counted(self, ref: match.ParentRef) -> Obj | None:
        """The Gateway a parentRef names, when it exists and the filters keep it."""
        gateway = self.gateways.get(ref.key)
        if gateway is None:
            return None
        opts = self.options
        if opts.gateway_name and ref.name != opts.gateway_name:
            return None
        if opts.gateway_namespace and ref.namespace != opts.gateway_namespace:
            return None
        if not self.labels.empty() and not self.labels.matches(get_str_map(gateway, "metadata", "labels")):
            return None
        if ann.parse(get_str_map(gateway, "metadata", "annotations")).controller_mismatch:
            return None
        return gateway


def _route_hosts(
    route: Obj, kind: RouteKind, parsed: ann.Annotations, common: SourceOptions, problems: list[Problem]
) -> list[tuple[str, str]]:
    """(host, field) pairs of the route, "" standing for the listeners' hostnames (external-dns's hosts)."""
    ref = ObjectRef.of(route, kind.resource, kind.label)
    spec = (
        [(h, "spec.hostnames") for h in get_str_list(route, "spec", "hostnames")]
        if kind.has_hostnames
        else []
    )
    defined = list(spec)
    template = common.template
    if template is not None and (not spec or common.combine_fqdn_annotation):
        defined += [(h, "metadata (--fqdn-template)") for h in template.names(route, kind.resource.kind)]
    from_annotation = [(h, parsed.field(ann.HOSTNAME)) for h in parsed.hostnames]
    values, keys, _ = ann.resolve(get_str_map(route, "metadata", "annotations"))
    source = values.get(ann.GATEWAY_HOSTNAME_SOURCE)
    if source is not None and source.lower() == ann.HOSTNAME_SOURCE_ANNOTATION_ONLY:
        return [] if common.ignore_hostname_annotation else from_annotation
    if source is not None and source.lower() == ann.HOSTNAME_SOURCE_DEFINED_HOSTS_ONLY:
        return defined
    if source is not None:  # external-dns warns and reads the route as if the annotation were absent
        field_path = f"metadata.annotations[{keys[ann.GATEWAY_HOSTNAME_SOURCE]}]"
        message = f"{source!r} is not one of defined-hosts-only, annotation-only; ignored"
        problems.append(Problem(ref, field_path, message))
    if not spec:
        defined.append(("", "spec.parentRefs (the listeners' hostnames)"))
    if not common.ignore_hostname_annotation:
        defined += from_annotation
    return defined


def route_endpoints(
    route: Obj, kind: RouteKind, gateways: Gateways, common: SourceOptions | None = None
) -> SourceResult:
    """A route's desired endpoints and problems (empty when its controller annotation skips it)."""
    common = common or SourceOptions()
    parsed = ann.parse(get_str_map(route, "metadata", "annotations"))
    if parsed.controller_mismatch:
        return SourceResult()
    ref = ObjectRef.of(route, kind.resource, kind.label)
    problems = [Problem(ref, p.field, p.message) for p in parsed.problems]
    hosts = _route_hosts(route, kind, parsed, common, problems)
    for host, field_path in hosts:
        if host and match.canonical_host(host) is None:  # external-dns drops it with a debug line only
            problems.append(Problem(ref, field_path, f"{host!r} is not a DNS name (RFC 1123); ignored"))
    out = EndpointSet(
        ref,
        created=get_str(route, "metadata", "creationTimestamp"),
        ttl=parsed.ttl,
        set_identifier=parsed.set_identifier,
        provider_specific=parsed.provider_specific,
    )
    shape = match.RouteShape(kind.resource.kind, kind.protocol, ref.namespace)
    route_hosts = [h for h, _ in hosts]
    fields = dict(reversed(hosts))  # the first field naming a host
    for parent in match.accepted_parents(route):
        gateway = gateways.counted(parent)
        if gateway is None:
            continue
        gw_targets = ann.targets_of(get_str_map(gateway, "metadata", "annotations"))
        targets = match.gateway_targets(gateway, gw_targets)
        for listener in match.listeners_for(gateway, parent):
            if not match.listener_takes(listener, gateway, shape, gateways.namespaces):
                continue
            for host in match.hosts_through(route_hosts, listener):
                out.add_targets(host, targets, fields.get(host, "spec.parentRefs"))
    return out.result(problems)


def _gateway_inputs(gateway: Obj | None) -> tuple[Any, ...] | None:
    """What a translation reads of a Gateway: status conditions and managed fields change often and are not
    read, so they re-translate nothing."""
    if gateway is None:
        return None
    meta = get(gateway, "metadata")
    return (
        get(gateway, "spec"),
        get_list(gateway, "status", "addresses"),
        get_str_map(meta, "labels"),
        get_str_map(meta, "annotations"),
    )


class RouteIndex:
    """Which routes name which Gateway in their status, and which namespace each route is in (pure)."""

    def __init__(self) -> None:
        self._gateways: dict[str, set[str]] = {}  # route key → Gateway keys
        self._by_gateway: defaultdict[str, set[str]] = defaultdict(set)
        self._by_namespace: defaultdict[str, set[str]] = defaultdict(set)

    def register(self, key: str, route: Obj) -> None:
        self.unregister(key)
        gateways = match.referenced_gateways(route)
        self._gateways[key] = gateways
        for gateway in gateways:
            self._by_gateway[gateway].add(key)
        self._by_namespace[key.partition("/")[0]].add(key)

    def unregister(self, key: str) -> None:
        for gateway in self._gateways.pop(key, ()):
            _discard(self._by_gateway, gateway, key)
        _discard(self._by_namespace, key.partition("/")[0], key)

    def gateway_changed(self, key: str, old: Obj | None, new: Obj | None) -> set[str]:
        if old is not None and new is not None and _gateway_inputs(old) == _gateway_inputs(new):
            return set()
        return set(self._by_gateway.get(key, ()))

    def namespace_changed(self, name: str, old: Obj | None, new: Obj | None) -> set[str]:
        labels = (get_str_map(o, "metadata", "labels") if o is not None else None for o in (old, new))
        if old is not None and new is not None and len(set(map(_frozen, labels))) == 1:
            return set()
        return set(self._by_namespace.get(name, ()))

    def __len__(self) -> int:
        return len(self._gateways)


def _frozen(labels: Mapping[str, str] | None) -> frozenset[tuple[str, str]] | None:
    return None if labels is None else frozenset(labels.items())


def _discard(index: defaultdict[str, set[str]], slot: str, key: str) -> None:
    members = index.get(slot)
    if members is not None:
        members.discard(key)
        if not members:
            del index[slot]


class RouteTranslator(Translator):
    """One route kind in one watcher: `route_endpoints` over the watcher's Gateway and Namespace caches."""

    def __init__(self, kind: RouteKind, context: SourceContext[GatewayOptions]) -> None:
        self.kind = kind
        self.options = context.options
        self.common = context.common
        self.labels = context.options.gateway_labels
        self._cache = context.cache
        self.index = RouteIndex()

    def translate(self, key: str, obj: Obj | None) -> SourceResult | None:
        if obj is None:
            self.index.unregister(key)
            return None
        self.index.register(key, obj)
        gateways = Gateways(self._cache(GATEWAYS), self._cache(NAMESPACES), self.options, self.labels)
        return route_endpoints(obj, self.kind, gateways, self.common)

    def related(self, resource: Resource, key: str, old: Obj | None, new: Obj | None) -> Iterable[str]:
        if resource == GATEWAYS:
            return self.index.gateway_changed(key, old, new)
        if resource == NAMESPACES:
            return self.index.namespace_changed(key, old, new)
        return ()


def _start(kind: RouteKind) -> Callable[[SourceContext[GatewayOptions]], Translator]:
    return lambda context: RouteTranslator(kind, context)


def _kind(route: RouteKind) -> SourceKind[GatewayOptions]:
    return SourceKind(
        f"gateway-{route.label}",
        route.resource,
        _start(route),
        related=(GATEWAYS, NAMESPACES),
        flags=FLAGS,
        label=route.label,
        crd=CrdNotice(
            "Gateway API CRDs",
            (f"gateways.{GROUP}", f"{route.resource.plural}.{GROUP}"),
            "the Gateway API's standard (or, for TLS/TCP/UDP routes, experimental) install; for tests "
            f"shardsync/manifests/{GATEWAY_CRDS_FILE}",
        ),
        all_namespaces=(GATEWAYS,),
    )


HTTPROUTE_KIND = _kind(HTTP)
GRPCROUTE_KIND = _kind(GRPC)
TLSROUTE_KIND = _kind(TLS)
TCPROUTE_KIND = _kind(TCP)
UDPROUTE_KIND = _kind(UDP)
KINDS = (HTTPROUTE_KIND, GRPCROUTE_KIND, TLSROUTE_KIND, TCPROUTE_KIND, UDPROUTE_KIND)
