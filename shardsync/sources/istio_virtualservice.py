"""Istio VirtualServices → desired endpoints: the `istio-virtualservice` source kind, as external-dns v0.22's
istio-virtualservice source computes them.

A VirtualService's names are its spec.hosts (`namespace/` dropped, `*` naming nothing) and its `hostname`
annotation (unless `--ignore-hostname-annotation`). A name's targets are the VirtualService's `target`
annotation when set; else those of every Gateway of its spec.gateways (`name` in its own namespace or
`namespace/name`; `mesh`, the sidecars, is no Gateway) that the name binds to (`binds`), merged, each
Gateway's targets as sources.istio reads them. The `--fqdn-template` names are used when those give no
endpoint, or added with `--combine-fqdn-annotation`; they take the Gateways' targets only, not the `target`
annotation, as in external-dns. `ttl`, `set-identifier`, provider-specific and `controller` annotations as
for every kind. Endpoints carry `resource=virtualservice/<namespace>/<name>`.

A Gateway the VirtualService names that is not found (not in --namespace, say) is skipped with a problem
(external-dns logs a warning); a spec.gateways entry of more than one `/`, or a Gateway whose `ingress`
annotation cannot be followed, leaves the VirtualService with the records it had and the problem reported
(external-dns fails its whole sync on them).

The kind watches its VirtualServices, the Gateways, the Services and the Ingresses (all in --namespace, as
external-dns). Its translator indexes which VirtualServices name which Gateway and what feeds each
Gateway's targets (sources.istio_feeds, each Gateway's targets computed once until one of them
changes), so a Gateway, Service or Ingress event re-translates exactly the VirtualServices reading it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from shardsync.kube.objects import ObjectRef, Resource, get, get_list, get_str, get_str_list, get_str_map
from shardsync.sources import annotations as ann
from shardsync.sources import istio, projections
from shardsync.sources.ingress import INGRESSES
from shardsync.sources.istio import GATEWAYS, VIRTUAL_SERVICES
from shardsync.sources.istio_feeds import GatewayFeeds, RefIndex
from shardsync.sources.kind import SourceContext, SourceKind, Translator
from shardsync.sources.options import SourceOptions
from shardsync.sources.result import EndpointSet, Problem, SourceResult
from shardsync.sources.service import SERVICES

LABEL = "virtualservice"  # external-dns's `resource` label kind
MESH = "mesh"  # the Gateway name of every sidecar in the mesh
GATEWAY_NOT_FOUND = "GatewayNotFound"  # the Event reason of a spec.gateways entry naming no known Gateway

Obj = Mapping[str, Any]
TargetsOf = Callable[[str, Obj], istio.Targets]  # (Gateway key, Gateway) → its targets


def binds(vs: Obj, gateway: Obj, host: str) -> bool:
    """Whether the VirtualService's `host` binds to the Gateway (external-dns's
    virtualServiceBindsToGateway, after Istio's Server.hosts rules): the VirtualService is exported to the
    Gateway's namespace (spec.exportTo empty, `*`, that namespace, or `.` when both share one), and a server
    host `[namespace/]host` admits it: its namespace `*` (or none), the VirtualService's, or `.` for the
    Gateway's own; its host `*`, the name itself, or `*.suffix` over it."""
    vs_ns = get_str(vs, "metadata", "namespace")
    gw_ns = get_str(gateway, "metadata", "namespace")
    export = get_str_list(vs, "spec", "exportTo")
    if export and not any(ns in ("*", gw_ns) or (ns == "." and gw_ns == vs_ns) for ns in export):
        return False
    for server in get_list(gateway, "spec", "servers"):
        for raw in get_str_list(server, "hosts"):
            parts = raw.split("/")
            if len(parts) > 2:
                continue
            namespace, allowed = (parts[0], parts[1]) if len(parts) == 2 else ("*", raw)
            if not (namespace in ("*", vs_ns) or (namespace == "." and vs_ns == gw_ns)):
                continue
            if allowed in ("*", host) or (allowed.startswith("*.") and host.endswith(allowed[1:])):
                return True
    return False


def gateway_refs(vs: Obj) -> list[tuple[str, str, str]]:
    """(entry, field, Gateway key) of each spec.gateways entry naming a Gateway ("" key: not `name` or
    `namespace/name`); `mesh` and empty entries name none."""
    namespace = get_str(vs, "metadata", "namespace")
    out: list[tuple[str, str, str]] = []
    for i, entry in enumerate(get_list(vs, "spec", "gateways")):
        if not isinstance(entry, str) or entry in ("", MESH):
            continue
        parts = entry.split("/")
        key = "" if len(parts) > 2 else f"{(parts[0] if len(parts) == 2 else '') or namespace}/{parts[-1]}"
        out.append((entry, f"spec.gateways[{i}]", key))
    return out


class _Through:
    """The targets a VirtualService's names get through its Gateways, read once per Gateway and only when a
    name needs them (as external-dns, which meets a Gateway's errors only then), with the problems met."""

    def __init__(self, vs: Obj, ref: ObjectRef, gateways: Mapping[str, Obj], targets_of: TargetsOf) -> None:
        self._vs, self._ref = vs, ref
        self._gateways, self._targets_of = gateways, targets_of
        self._found: list[tuple[Obj, istio.Targets, str]] | None = None
        self.problems: list[Problem] = []

    def _resolve(self) -> list[tuple[Obj, istio.Targets, str]]:
        found: list[tuple[Obj, istio.Targets, str]] = []
        for entry, field_path, key in gateway_refs(self._vs):
            if not key:
                message = f"{entry!r} is not a Gateway `name` or `namespace/name`"
                self.problems.append(Problem(self._ref, field_path, message, istio.UNRESOLVED))
                continue
            gateway = self._gateways.get(key)
            if gateway is None:
                message = f"Gateway {key} not found; ignored"
                self.problems.append(Problem(self._ref, field_path, message, GATEWAY_NOT_FOUND))
                continue
            found.append((gateway, self._targets_of(key, gateway), field_path))
        return found

    def targets(self, host: str) -> list[str]:
        if self._found is None:
            self._found = self._resolve()
        out: dict[str, None] = {}
        for gateway, targets, field_path in self._found:
            if not binds(self._vs, gateway, host):
                continue
            if targets.error:
                message = f"Gateway {get_str(gateway, 'metadata', 'name')} {targets.field}: {targets.error}"
                problem = Problem(self._ref, field_path, message, istio.UNRESOLVED)
                if problem not in self.problems:
                    self.problems.append(problem)
            out.update(dict.fromkeys(targets.values))
        return list(out)


def virtualservice_hosts(vs: Obj) -> list[tuple[str, str]]:
    """(host, field) of the names of spec.hosts."""
    out: list[tuple[str, str]] = []
    for i, raw in enumerate(get_list(vs, "spec", "hosts")):
        host = istio.without_namespace(raw) if isinstance(raw, str) else ""
        if host and host != "*":
            out.append((host, f"spec.hosts[{i}]"))
    return out


def virtualservice_names(vs: Obj, common: SourceOptions) -> list[str] | None:
    return istio.names_with_annotation((h for h, _ in virtualservice_hosts(vs)), vs, common)


def virtualservice_endpoints(
    vs: Obj,
    gateways: Mapping[str, Obj],
    services: Mapping[str, Obj],
    ingresses: Mapping[str, Obj],
    common: SourceOptions | None = None,
    targets_of: TargetsOf | None = None,
) -> SourceResult:
    """A VirtualService's desired endpoints and problems (empty when its controller annotation skips it).
    The mappings are the caches (cache key → object); `targets_of` may give a Gateway's targets from a
    memo (by default they are read from `services` and `ingresses`)."""
    common = common or SourceOptions()
    parsed = ann.parse(get_str_map(vs, "metadata", "annotations"))
    if parsed.controller_mismatch:
        return SourceResult()
    ref = ObjectRef.of(vs, VIRTUAL_SERVICES, LABEL)
    problems = [Problem(ref, p.field, p.message) for p in parsed.problems]

    def read(key: str, gateway: Obj) -> istio.Targets:
        return istio.gateway_targets(gateway, services, ingresses)

    through = _Through(vs, ref, gateways, targets_of or read)
    out = EndpointSet(
        ref,
        created=get_str(vs, "metadata", "creationTimestamp"),
        ttl=parsed.ttl,
        set_identifier=parsed.set_identifier,
        provider_specific=parsed.provider_specific,
    )
    names = virtualservice_hosts(vs)
    if not common.ignore_hostname_annotation:
        names += [(h, parsed.field(ann.HOSTNAME)) for h in parsed.hostnames]
    for name, field_path in names:
        out.add_targets(name, parsed.targets or through.targets(name), field_path)
    template = common.template
    if template is not None and (common.combine_fqdn_annotation or out.empty):
        for name in template.names(vs, VIRTUAL_SERVICES.kind):
            out.add_targets(name, through.targets(name), "metadata (--fqdn-template)")
    return out.result([*problems, *through.problems])


def _gateway_inputs(gateway: Obj) -> tuple[Any, ...]:
    """What a VirtualService's translation reads of a Gateway (not its status nor labels)."""
    return (
        get(gateway, "spec", "selector"),
        get(gateway, "spec", "servers"),
        get(gateway, "metadata", "annotations"),
    )


class VirtualServiceTranslator(Translator):
    """The istio-virtualservice kind in one watcher: `virtualservice_endpoints` over the watcher's caches,
    re-translating the VirtualServices that read a Gateway when it or what feeds its targets changes."""

    def __init__(self, context: SourceContext[None]) -> None:
        self.common = context.common
        self._cache = context.cache
        self.gateways = RefIndex()  # VirtualService key → the Gateway keys it names
        self.feeds = GatewayFeeds(lambda: self._cache(SERVICES))
        self._targets: dict[str, istio.Targets] = {}  # Gateway key → its targets, until they may change
        self._kept = istio.KeptOnError()

    def _targets_of(self, key: str, gateway: Obj) -> istio.Targets:
        targets = self._targets.get(key)
        if targets is None:
            caches = self._cache(SERVICES), self._cache(INGRESSES)
            targets = istio.gateway_targets(gateway, *caches, self.feeds.select)
            self._targets[key] = targets
        return targets

    def translate(self, key: str, obj: Obj | None) -> SourceResult | None:
        if obj is None:
            self.forget(key)
            return None
        self.gateways.register(key, (k for _, _, k in gateway_refs(obj) if k))
        result = virtualservice_endpoints(
            obj,
            self._cache(GATEWAYS),
            self._cache(SERVICES),
            self._cache(INGRESSES),
            self.common,
            self._targets_of,
        )
        return self._kept.settle(key, result)

    def related(self, resource: Resource, key: str, old: Obj | None, new: Obj | None) -> Iterable[str]:
        if resource == GATEWAYS:
            if new is None:
                self.feeds.unregister(key)
            else:
                self.feeds.register(key, new)
            if old is not None and new is not None and _gateway_inputs(old) == _gateway_inputs(new):
                return ()
            changed = {key}
        elif resource == SERVICES:
            changed = self.feeds.service_changed(key, old, new)
        elif resource == INGRESSES:
            changed = self.feeds.ingress_changed(key, old, new)
        else:
            return ()
        for gateway in changed:
            self._targets.pop(gateway, None)
        return self.gateways.owners(changed)

    def forget(self, key: str) -> None:
        self.gateways.unregister(key)
        self._kept.drop(key)


KIND = SourceKind(
    "istio-virtualservice",
    VIRTUAL_SERVICES,
    VirtualServiceTranslator,
    related=(GATEWAYS, SERVICES, INGRESSES),
    label=LABEL,
    crd=istio.crd_notice(GATEWAYS, VIRTUAL_SERVICES),
    evictable=True,
    names=virtualservice_names,
    projections={**istio.PROJECTIONS, VIRTUAL_SERVICES: projections.without_bookkeeping},
    untemplated={**istio.UNTEMPLATED, VIRTUAL_SERVICES: istio.slim_virtualservice},
)
