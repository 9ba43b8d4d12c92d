"""Service → desired endpoints, as external-dns's service source computes them (pure; plain-dict objects).

For each name in the `hostname` (and `internal-hostname`) annotation (unless `--ignore-hostname-annotation`),
and for each `--fqdn-template` name when those give no endpoint or with `--combine-fqdn-annotation`
(shardsync.sources.options), the targets are, unless the `target` annotation replaces them:

- LoadBalancer: spec.externalIPs, else every status.loadBalancer.ingress ip and hostname
  (`internal-hostname`: the cluster IP);
- ClusterIP: the cluster IP, only with `--publish-internal-services` or for `internal-hostname`;
- headless (clusterIP None): from the Service's EndpointSlices, one RRset with every ready pod plus
  `<pod spec.hostname>.<name>` per pod that has a hostname (`publishNotReadyAddresses` adds the not-ready
  ones; `endpoints-type` and `--publish-host-ip` switch to node or host addresses; a pod's own `target`
  annotation replaces its address);
- NodePort: the nodes' ExternalIPs (plus IPv6 InternalIPs with `--expose-internal-ipv6`), else their
  InternalIPs, as the `access` annotation chooses, only the nodes running ready pods when
  externalTrafficPolicy is Local, never unschedulable nodes unless `--exclude-unschedulable=false`; plus
  one SRV record `_<service name>._<protocol>.<name>` → `0 50 <nodePort> <name>.` per node port
  (shardsync.sources.service_nodeport);
- ExternalName: spec.externalIPs, else spec.externalName.

IPv4 targets make A records, IPv6 AAAA, anything else CNAME. Every endpoint carries the labels
`resource=service/<ns>/<name>` and `shardsync/created=<creationTimestamp>`.

Which other objects the result depends on is told by `service_dependencies`, so a cache knows which Node,
EndpointSlice and Pod events must re-translate which Service. `KIND` is the source kind `--source=service`:
its flags, what it watches, and its translator in a watcher (`ServiceTranslator`, which keeps the
`ServiceInputs` index of what each Service reads).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from shardsync.kube.objects import ObjectRef, Resource, get, get_list, get_str, get_str_list, get_str_map
from shardsync.kube.selectors import selector_from_labels
from shardsync.sources import annotations as ann
from shardsync.sources import projections
from shardsync.sources import service_nodeport as nodeport
from shardsync.sources.kind import SourceContext, SourceKind, Translator
from shardsync.sources.options import SourceOptions
from shardsync.sources.read_backs import ReadBacks
from shardsync.sources.result import NOT_YET, EndpointSet, Problem, SourceResult, suitable_type
from shardsync.sources.service_inputs import (
    SERVICE_NAME_LABEL,
    ServiceDependencies,
    ServiceInputs,
    slice_service,
)
from shardsync.sources.service_options import FLAGS as FLAGS  # the kind's flags and options, as other kinds'
from shardsync.sources.service_options import ServiceOptions as ServiceOptions

SERVICES = Resource("", "v1", "services", "Service")
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
PODS = Resource("", "v1", "pods", "Pod")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)

Obj = Mapping[str, Any]

FQDN_TEMPLATE_FIELD = "metadata (--fqdn-template)"  # where a problem with a templated name is reported


def service_type(svc: Obj) -> str:
    return get_str(svc, "spec", "type") or "ClusterIP"


def is_headless(svc: Obj) -> bool:
    return service_type(svc) == "ClusterIP" and get_str(svc, "spec", "clusterIP") == "None"


def _selected(svc: Obj, opts: ServiceOptions, parsed: ann.Annotations) -> bool:
    return opts.service_type_selected(service_type(svc)) and not parsed.controller_mismatch


def service_dependencies(
    svc: Obj, opts: ServiceOptions, common: SourceOptions | None = None
) -> ServiceDependencies:
    """What besides the Service itself `service_endpoints` reads for this Service."""
    common = common or SourceOptions()
    parsed = ann.parse(get_str_map(svc, "metadata", "annotations"))
    if not _selected(svc, opts, parsed) or parsed.targets:
        return ServiceDependencies()
    annotated = not common.ignore_hostname_annotation and (parsed.hostnames or parsed.internal_hostnames)
    if not annotated and common.template is None:
        return ServiceDependencies()
    if service_type(svc) == "NodePort":
        local = get_str(svc, "spec", "externalTrafficPolicy") == "Local"
        return ServiceDependencies(nodes=True, pods=local)
    if is_headless(svc):
        node_ips = parsed.endpoints_type == ann.ENDPOINTS_TYPE_NODE_EXTERNAL_IP
        return ServiceDependencies(nodes=node_ips, endpoint_slices=True, pods=True)
    return ServiceDependencies()


def service_names(svc: Obj, common: SourceOptions) -> list[str] | None:
    """The names a Service's records may have or lie under (`SourceKind.names`): its hostname annotations
    (a headless Service adds `<pod hostname>.<name>`, a NodePort one `_<service>._<protocol>.<name>`);
    None with --fqdn-template, whose names only a translation knows."""
    if common.template is not None:
        return None
    if common.ignore_hostname_annotation:
        return []
    return ann.hostnames_of(get(svc, "metadata", "annotations"), internal=True)


def pod_key(namespace: str, name: str) -> str:
    """The key `service_endpoints` expects in its `pods` mapping."""
    return f"{namespace}/{name}"


def service_endpoints(
    svc: Obj,
    nodes: Mapping[str, Obj] | None = None,
    slices: Sequence[Obj] = (),
    pods: Mapping[str, Obj] | None = None,
    opts: ServiceOptions | None = None,
    common: SourceOptions | None = None,
) -> SourceResult:
    """A Service's desired endpoints and problems.

    `nodes` maps node name → Node; `slices` holds (at least) the Service's EndpointSlices; `pods` maps
    `pod_key(namespace, name)` → Pod and needs (at least) the pods `spec.selector` matches. Extra objects
    are ignored, so a caller may pass its whole cache. A Service skipped by `--service-type-filter` or by
    the `controller` annotation gives an empty result.
    """
    opts = opts or ServiceOptions()
    common = common or SourceOptions()
    ref = ObjectRef.of(svc, SERVICES, "service")
    parsed = ann.parse(get_str_map(svc, "metadata", "annotations"))
    if not _selected(svc, opts, parsed):
        return SourceResult()
    ctx = _Context(svc, ref, parsed, nodes or {}, slices, pods or {}, opts)
    if not common.ignore_hostname_annotation:
        for hostname in parsed.hostnames:
            ctx.generate(hostname, parsed.field(ann.HOSTNAME), internal=False)
        for hostname in parsed.internal_hostnames:
            ctx.generate(hostname, parsed.field(ann.INTERNAL_HOSTNAME), internal=True)
    template = common.template
    if template is not None and (common.combine_fqdn_annotation or ctx.out.empty):
        for hostname in template.names(svc, SERVICES.kind):
            ctx.generate(hostname, FQDN_TEMPLATE_FIELD, internal=False)
    extra = [Problem(ref, p.field, p.message) for p in parsed.problems]
    return ctx.out.result(extra)


class _Context:
    """One Service's translation: the inputs and the EndpointSet the hostnames fill."""

    def __init__(
        self,
        svc: Obj,
        ref: ObjectRef,
        parsed: ann.Annotations,
        nodes: Mapping[str, Obj],
        slices: Sequence[Obj],
        pods: Mapping[str, Obj],
        opts: ServiceOptions,
    ) -> None:
        self.svc, self.ref, self.parsed = svc, ref, parsed
        self.nodes, self.slices, self.pods, self.opts = nodes, slices, pods, opts
        self.namespace = ref.namespace
        self._selected_pods: list[Obj] | None = None
        self.out = EndpointSet(
            ref,
            created=get_str(svc, "metadata", "creationTimestamp"),
            ttl=parsed.ttl,
            set_identifier=parsed.set_identifier,
            provider_specific=parsed.provider_specific,
        )

    def generate(self, hostname: str, field_path: str, internal: bool) -> None:
        """external-dns's generateEndpoints for one hostname."""
        hostname = hostname.rstrip(".")
        targets: Iterable[str] = self.parsed.targets
        if not self.parsed.targets:
            kind = service_type(self.svc)
            if kind == "LoadBalancer":
                targets = self.cluster_ip() if internal else self.load_balancer_targets()
            elif kind == "ClusterIP":
                if is_headless(self.svc):
                    self.headless(hostname, field_path)
                elif internal or self.opts.publish_internal:
                    targets = self.cluster_ip()
            elif kind == "NodePort":
                targets = self.node_port_targets()
                self.node_port_srv(hostname, field_path)
            elif kind == "ExternalName":
                targets = get_str_list(self.svc, "spec", "externalIPs") or [
                    get_str(self.svc, "spec", "externalName")
                ]
        self.out.add_targets(hostname, targets, field_path)

    def cluster_ip(self) -> list[str]:
        ip = get_str(self.svc, "spec", "clusterIP")
        return [] if ip == "None" else [ip]

    def load_balancer_targets(self) -> list[str]:
        external = get_str_list(self.svc, "spec", "externalIPs")
        if external:
            return external
        targets: list[str] = []
        for lb in get_list(self.svc, "status", "loadBalancer", "ingress"):
            targets += [get_str(lb, "ip"), get_str(lb, "hostname")]
        return targets

    # --- NodePort (shardsync.sources.service_nodeport) -----------------------------------------------------

    def selected_pods(self) -> list[Obj]:
        """Pods of the Service's namespace matched by spec.selector (an empty selector matches all)."""
        if self._selected_pods is None:
            selector = selector_from_labels(get_str_map(self.svc, "spec", "selector"))
            prefix = self.namespace + "/"
            self._selected_pods = [
                pod
                for key, pod in self.pods.items()
                if key.startswith(prefix)
                and get_str(pod, "metadata", "namespace") == self.namespace
                and selector.matches(get_str_map(pod, "metadata", "labels"))
            ]
        return self._selected_pods

    def node_port_targets(self) -> list[str]:
        if get_str(self.svc, "spec", "externalTrafficPolicy") == "Local":
            node_list = nodeport.local_traffic_nodes(self.selected_pods(), self.nodes)
        else:
            node_list = [self.nodes[name] for name in sorted(self.nodes)]
        opts = self.opts
        return nodeport.node_port_targets(
            node_list, self.parsed.access, opts.expose_internal_ipv6, opts.exclude_unschedulable
        )

    def node_port_srv(self, hostname: str, field_path: str) -> None:
        for name, target in nodeport.node_port_srv(self.svc, hostname):
            self.out.add(name, "SRV", [target], field_path)

    # --- headless ----------------------------------------------------------------------------------------

    def headless(self, hostname: str, field_path: str) -> None:
        """external-dns's extractHeadlessEndpoints, from EndpointSlices."""
        endpoints_type = self.parsed.endpoints_type
        node_ips = endpoints_type == ann.ENDPOINTS_TYPE_NODE_EXTERNAL_IP
        host_ips = endpoints_type == ann.ENDPOINTS_TYPE_HOST_IP or self.opts.publish_host_ip
        publish_pod_ips = not node_ips and not host_ips
        publish_not_ready = (
            get(self.svc, "spec", "publishNotReadyAddresses") is True
            or self.opts.always_publish_not_ready_addresses
        )
        pods = {get_str(p, "metadata", "name"): p for p in self.selected_pods()}
        found: dict[tuple[str, str], list[str]] = {}
        for endpoint_slice in self.slices:
            if slice_service(endpoint_slice) != (self.namespace, self.ref.name):
                continue
            address_type = get_str(endpoint_slice, "addressType")
            for ep in get_list(endpoint_slice, "endpoints"):
                ready = get(ep, "conditions", "ready")
                if ready is not None and ready is not True and not publish_not_ready:
                    continue
                if publish_pod_ips and address_type not in ("IPv4", "IPv6"):
                    continue
                ref = get(ep, "targetRef")
                if get_str(ref, "kind") != "Pod" or get_str(ref, "apiVersion"):
                    continue
                # A pod missing from the cache (created or deleted a moment ago) is skipped, not reported:
                # the next event about it re-translates the Service.
                pod = pods.get(get_str(ref, "name"))
                if pod is None:
                    continue
                domains = [hostname]
                pod_hostname = get_str(pod, "spec", "hostname")
                if pod_hostname:
                    domains.append(f"{pod_hostname}.{hostname}")
                targets = list(ann.targets_of(get_str_map(pod, "metadata", "annotations")))
                if not targets:
                    if node_ips:
                        node_name = get_str(pod, "spec", "nodeName")
                        node = self.nodes.get(node_name)
                        if node is None:
                            # external-dns gives up on the whole Service here, and so do we.
                            self.out.problem(
                                field_path,
                                f"node {node_name!r} of pod {get_str(ref, 'name')!r} not found; "
                                f"no NodeExternalIP records for {hostname}",
                            )
                            return
                        targets = self.node_external_ips(node)
                    elif host_ips:
                        targets = [get_str(pod, "status", "hostIP")]
                    else:
                        addresses = get_str_list(ep, "addresses")
                        if not addresses:
                            continue
                        targets = addresses[:1]  # further addresses have no defined meaning
                for domain in domains:
                    for target in targets:
                        if target:
                            found.setdefault((domain, suitable_type(target)), []).append(target)
        for (domain, record_type), targets in sorted(found.items()):
            self.out.add(domain, record_type, targets, field_path)

    def node_external_ips(self, node: Obj) -> list[str]:
        out: list[str] = []
        for address in get_list(node, "status", "addresses"):
            value, kind = get_str(address, "address"), get_str(address, "type")
            if kind == "ExternalIP" or (
                self.opts.expose_internal_ipv6 and kind == "InternalIP" and suitable_type(value) == "AAAA"
            ):
                out.append(value)
        return out


class ServiceTranslator(Translator):
    """The service kind in one watcher: each Service is registered in a `ServiceInputs` with what it reads,
    so a Node, EndpointSlice or Pod change re-translates exactly the Services that read it."""

    def __init__(self, context: SourceContext[ServiceOptions]) -> None:
        self.options = context.options
        self.common = context.common
        self.cache = context.cache
        # The Pods and EndpointSlices are read from the watcher's caches, not kept a second time.
        self.inputs = ServiceInputs(
            pods=lambda: context.cache(PODS), slices=lambda: context.cache(ENDPOINT_SLICES)
        )
        self._related = {
            ENDPOINT_SLICES: self.inputs.set_slice,
            PODS: self.inputs.set_pod,
            NODES: self.inputs.set_node,
        }

        self._read_backs = ReadBacks(context.read_back, context.retranslate)

    def _register(self, key: str, obj: dict[str, Any]) -> None:
        deps = service_dependencies(obj, self.options, self.common)
        if self.inputs.register(key, obj, deps):  # reads more than before: left out here, maybe
            namespace, _, name = key.rpartition("/")
            wanted = [(PODS, namespace, self.inputs.label_selector(key))] if deps.pods else []
            if deps.endpoint_slices:
                wanted.append((ENDPOINT_SLICES, namespace, f"{SERVICE_NAME_LABEL}={name}"))
            self._read_backs.ask(key, wanted)

    def listed(self, key: str, obj: dict[str, Any] | None) -> None:
        if obj is not None:
            self._register(key, obj)  # before its Pods are listed: they are kept if it reads them

    def admits(self, resource: Resource, key: str, obj: dict[str, Any]) -> bool:
        if resource == PODS:
            return self.inputs.reads_pod(key, obj)
        return resource != ENDPOINT_SLICES or self.inputs.reads_slice(obj)

    def translate(self, key: str, obj: dict[str, Any] | None) -> SourceResult | None:
        if obj is None:
            self.forget(key)
            return None
        self._register(key, obj)
        if self._read_backs.waits(key):
            return NOT_YET
        return service_endpoints(
            obj,
            nodes=self.cache(NODES),
            slices=self.inputs.slices_for(key),
            pods=self.inputs.pods_for(key),
            opts=self.options,
            common=self.common,
        )

    def related(
        self, resource: Resource, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> Iterable[str]:
        return self._related[resource](key, old, new)

    def forget(self, key: str) -> None:
        self.inputs.unregister(key)  # its Pods' and Nodes' changes need not translate it again
        self._read_backs.cancel(key)


KIND = SourceKind(
    "service",
    SERVICES,
    ServiceTranslator,
    related=(ENDPOINT_SLICES, PODS, NODES),
    flags=FLAGS,
    evictable=True,
    read_by_key=(ENDPOINT_SLICES, PODS),
    names=service_names,
    projections={
        SERVICES: projections.without_bookkeeping,
        ENDPOINT_SLICES: projections.endpoint_slice,
        PODS: projections.pod,
        NODES: projections.node,
    },
    untemplated={SERVICES: projections.service},
)
