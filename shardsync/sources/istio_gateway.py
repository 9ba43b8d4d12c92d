"""Istio Gateways → desired endpoints: the `istio-gateway` source kind, as external-dns v0.22's istio-gateway
source computes them.

A Gateway's names are its servers' hosts (sources.istio) and its `hostname` annotation (unless
`--ignore-hostname-annotation`); the `--fqdn-template` names are used when those give no endpoint, or added
with `--combine-fqdn-annotation`. Every name points at the Gateway's targets (sources.istio: its `target`
annotation, else the Ingress its `ingress` annotation names, else the load balancers of the Services its
selector picks). `ttl`, `set-identifier` and the provider-specific annotations apply; a Gateway whose
`controller` annotation names another controller is skipped. Endpoints carry
`resource=gateway/<namespace>/<name>`, as external-dns labels them.

The kind watches its Gateways, the Services and the Ingresses (in --namespace, as external-dns); its
translator indexes what each Gateway's targets are read from (sources.istio_feeds), so a Service or
Ingress event re-translates exactly the Gateways it feeds. A Gateway whose `ingress` annotation cannot be
followed keeps the records it had and the problem is reported on it (external-dns fails its whole sync).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from shardsync.kube.objects import ObjectRef, Resource, get_str, get_str_map
from shardsync.sources import annotations as ann
from shardsync.sources import istio
from shardsync.sources.ingress import INGRESSES
from shardsync.sources.istio import GATEWAYS
from shardsync.sources.istio_feeds import GatewayFeeds
from shardsync.sources.kind import SourceContext, SourceKind, Translator
from shardsync.sources.options import SourceOptions
from shardsync.sources.result import EndpointSet, Problem, SourceResult
from shardsync.sources.service import SERVICES

LABEL = "gateway"  # external-dns's `resource` label kind

Obj = Mapping[str, Any]


def gateway_endpoints(
    gateway: Obj,
    services: Mapping[str, Obj],
    ingresses: Mapping[str, Obj],
    common: SourceOptions | None = None,
    select: istio.Select | None = None,
) -> SourceResult:
    """A Gateway's desired endpoints and problems (empty when its controller annotation skips it).
    `services` and `ingresses` are the caches (cache key → object) its targets are read from, `select` an
    index of the Services (sources.istio.gateway_targets)."""
    common = common or SourceOptions()
    parsed = ann.parse(get_str_map(gateway, "metadata", "annotations"))
    if parsed.controller_mismatch:
        return SourceResult()
    ref = ObjectRef.of(gateway, GATEWAYS, LABEL)
    problems = [Problem(ref, p.field, p.message) for p in parsed.problems]
    targets = istio.gateway_targets(gateway, services, ingresses, select)
    if targets.error:
        problems.append(Problem(ref, targets.field, targets.error, istio.UNRESOLVED))
    out = EndpointSet(
        ref,
        created=get_str(gateway, "metadata", "creationTimestamp"),
        ttl=parsed.ttl,
        set_identifier=parsed.set_identifier,
        provider_specific=parsed.provider_specific,
    )
    names = istio.server_hosts(gateway)
    if not common.ignore_hostname_annotation:
        names += [(h, parsed.field(ann.HOSTNAME)) for h in parsed.hostnames]
    for name, field_path in names:
        out.add_targets(name, targets.values, field_path)
    template = common.template
    if template is not None and (common.combine_fqdn_annotation or out.empty):
        for name in template.names(gateway, GATEWAYS.kind):
            out.add_targets(name, targets.values, "metadata (--fqdn-template)")
    return out.result(problems)


class GatewayTranslator(Translator):
    """The istio-gateway kind in one watcher: `gateway_endpoints` over the watcher's Service and Ingress
    caches, re-translating a Gateway when what feeds its targets changes."""

    def __init__(self, context: SourceContext[None]) -> None:
        self.common = context.common
        self._cache = context.cache
        self.feeds = GatewayFeeds(lambda: self._cache(SERVICES))
        self._kept = istio.KeptOnError()

    def translate(self, key: str, obj: Obj | None) -> SourceResult | None:
        if obj is None:
            self.forget(key)
            return None
        self.feeds.register(key, obj)
        caches = self._cache(SERVICES), self._cache(INGRESSES)
        result = gateway_endpoints(obj, *caches, self.common, self.feeds.select)
        return self._kept.settle(key, result)

    def related(self, resource: Resource, key: str, old: Obj | None, new: Obj | None) -> Iterable[str]:
        if resource == SERVICES:
            return self.feeds.service_changed(key, old, new)
        if resource == INGRESSES:
            return self.feeds.ingress_changed(key, old, new)
        return ()

    def forget(self, key: str) -> None:
        self.feeds.unregister(key)
        self._kept.drop(key)


KIND = SourceKind(
    "istio-gateway",
    GATEWAYS,
    GatewayTranslator,
    related=(SERVICES, INGRESSES),
    label=LABEL,
    crd=istio.crd_notice(GATEWAYS),
    evictable=True,
    names=istio.gateway_names,
    projections=istio.PROJECTIONS,
    untemplated=istio.UNTEMPLATED,
)
