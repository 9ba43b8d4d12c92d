"""Pod → desired endpoints, as external-dns's pod source computes them (pure; plain-dict objects).

From a Pod's annotations (external-dns v0.22, source/pod.go):
- `internal-hostname`: each name → the Pod's IP (status.podIP);
- `hostname`: each name → the addresses of the Node the Pod runs on (spec.nodeName): its ExternalIPs and
  its IPv6 InternalIPs (an IPv6 InternalIP is usually reachable from outside too). A Pod on the host
  network shares its Node's addresses, which is what the annotation is for; external-dns reads the Node
  for any Pod, and so does shardsync. A Pod whose Node is not (yet) known publishes nothing for these;
- `target`: replaces both (its names as targets);
- `--pod-source-domain=D`: `<pod name>.D` → the Pod's IP (or its `target`s), for every Pod;
- `--fqdn-template`: when the above give nothing, or added with `--combine-fqdn-annotation`, the
  template's names → every address of status.podIPs (the `target` annotation does not apply).
`--ignore-non-host-network-pods` skips the annotation and `--pod-source-domain` names of Pods not on the
host network. As in v0.22, a Pod publishes whatever its phase or readiness: a Pod without an IP yet
publishes nothing for its IP names. The `ttl` and `controller` annotations are read; `set-identifier` and
provider-specific annotations are not (external-dns ignores them on Pods). Endpoints carry
`resource=pod/<namespace>/<name>` (external-dns v0.22 leaves a Pod's resource label out: a TODO there).

`KIND` is the source kind `--source=pod`, with its flags (`FLAGS`, filling `PodOptions`). Pods are the
largest objects list of a big cluster, so the kind is evictable and placeable by its names
(`pod_names`: the two hostname annotations and the `--pod-source-domain` name): a sharded replica keeps
only the Pods whose names reach its zones, and none of the Pods that publish nothing (no such
annotation). Its informer keeps `projections.pod_source`; with the service kind the two share one informer
(sources.watcher: each keeps the Pods it reads). A Node change re-translates the Pods whose `hostname`
names take that Node's addresses (`PodTranslator`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shardsync.flags import FlagGroup, mirrored
from shardsync.kube.objects import ObjectRef, Resource, get, get_list, get_str, get_str_map
from shardsync.sources import annotations as ann
from shardsync.sources import projections
from shardsync.sources.kind import Names, SourceContext, SourceKind, Translator
from shardsync.sources.options import SourceOptions
from shardsync.sources.result import EndpointSet, Problem, SourceResult, suitable_type
from shardsync.sources.service import FQDN_TEMPLATE_FIELD, NODES, PODS
from shardsync.sources.service_inputs import node_inputs

Obj = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PodOptions:
    """The pod source's options, named after external-dns's flags (`FLAGS`); the defaults are
    external-dns's."""

    # --pod-source-domain: every Pod publishes `<pod name>.<domain>` → its IP ("" none).
    pod_source_domain: str = ""
    # --ignore-non-host-network-pods: Pods not on the host network publish nothing from annotations.
    ignore_non_host_network_pods: bool = False


FLAGS = FlagGroup(
    "pod",
    "pod source (--source=pod)",
    PodOptions,
    (
        mirrored("pod_source_domain", "domain under which every pod publishes its name, pointing at its IP"),
        mirrored(
            "ignore_non_host_network_pods",
            "pods not on the host network publish nothing from their annotations",
            switch=True,
        ),
    ),
)


def _skipped(pod: Obj, opts: PodOptions) -> bool:
    """--ignore-non-host-network-pods leaves this Pod's annotation names out."""
    return opts.ignore_non_host_network_pods and get(pod, "spec", "hostNetwork") is not True


def pod_names(opts: PodOptions) -> Names:
    """The kind's `SourceKind.names` given its options: what a Pod's records may be named (its hostname
    and internal-hostname annotations, `<pod>.<--pod-source-domain>`); none for a Pod that publishes
    nothing; None with --fqdn-template, whose names only a translation knows. Asked of every Pod a
    sharded replica lists, before anything else is read of it."""
    domain = opts.pod_source_domain

    def names(pod: Obj, common: SourceOptions) -> list[str] | None:
        if common.template is not None:
            return None
        if _skipped(pod, opts):
            return []
        out = ann.hostnames_of(get(pod, "metadata", "annotations"), internal=True)
        if domain:
            out.append(f"{get_str(pod, 'metadata', 'name')}.{domain}")
        return out

    return names


def node_addresses(node: Obj) -> list[str]:
    """A Node's addresses a `hostname` name takes: its ExternalIPs and IPv6 InternalIPs."""
    out: list[str] = []
    for address in get_list(node, "status", "addresses"):
        value, kind = get_str(address, "address"), get_str(address, "type")
        if kind == "ExternalIP" or (kind == "InternalIP" and suitable_type(value) == "AAAA"):
            out.append(value)
    return out


def _translate(
    pod: Obj, nodes: Mapping[str, Obj], opts: PodOptions, common: SourceOptions
) -> tuple[SourceResult, str]:
    """The Pod's result, and the name of the Node whose addresses it read ("" none)."""
    parsed = ann.parse(get_str_map(pod, "metadata", "annotations"))
    if parsed.controller_mismatch:
        return SourceResult(), ""
    names = parsed.hostnames or parsed.internal_hostnames or opts.pod_source_domain
    if not names and not parsed.problems and common.template is None:
        return SourceResult(), ""  # most Pods of a cluster: nothing to publish, nothing to build
    ref = ObjectRef.of(pod, PODS, "pod")
    out = EndpointSet(ref, created=get_str(pod, "metadata", "creationTimestamp"), ttl=parsed.ttl)
    problems = [Problem(ref, p.field, p.message) for p in parsed.problems]
    node_name = ""
    if not _skipped(pod, opts):
        targets = list(parsed.targets)
        own = targets or [get_str(pod, "status", "podIP")]
        for name in parsed.internal_hostnames:
            out.add_targets(name, own, parsed.field(ann.INTERNAL_HOSTNAME))
        if parsed.hostnames:
            if not targets:
                node_name = get_str(pod, "spec", "nodeName")
                node = nodes.get(node_name)
                # A Pod not scheduled yet, or on a Node not listed yet, publishes these once the Node is
                # known (its event re-translates the Pod), as external-dns skips it until then.
                targets = [] if node is None else node_addresses(node)
            for name in parsed.hostnames:
                out.add_targets(name, targets, parsed.field(ann.HOSTNAME))
        if opts.pod_source_domain:
            name = f"{ref.name}.{opts.pod_source_domain}"
            out.add_targets(name, own, "metadata.name (--pod-source-domain)")
    template = common.template
    if template is not None and (common.combine_fqdn_annotation or out.empty):
        addresses = [get_str(ip, "ip") for ip in get_list(pod, "status", "podIPs")]
        for name in template.names(pod, PODS.kind):
            out.add_targets(name, addresses, FQDN_TEMPLATE_FIELD)
    return out.result(problems), node_name


def pod_endpoints(
    pod: Obj,
    nodes: Mapping[str, Obj] | None = None,
    opts: PodOptions | None = None,
    common: SourceOptions | None = None,
) -> SourceResult:
    """A Pod's desired endpoints and problems; `nodes` maps node name → Node (at least the Pod's own)."""
    return _translate(pod, nodes or {}, opts or PodOptions(), common or SourceOptions())[0]


class PodTranslator(Translator):
    """The pod kind in one watcher: each Pod whose names take its Node's addresses is filed under that
    Node, so a Node change re-translates exactly those Pods (a heartbeat, which changes neither the Node's
    addresses nor its schedulability, none)."""

    def __init__(self, context: SourceContext[PodOptions]) -> None:
        self.options, self.common = context.options, context.common
        self.cache = context.cache
        self._node_of: dict[str, str] = {}  # Pod key → the Node it read
        self._on_node: dict[str, set[str]] = {}  # Node name → the Pods that read it

    def translate(self, key: str, obj: dict[str, Any] | None) -> SourceResult | None:
        if obj is None:
            self.forget(key)
            return None
        result, node_name = _translate(obj, self.cache(NODES), self.options, self.common)
        self._file(key, node_name)
        return result

    def related(
        self, resource: Resource, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> Iterable[str]:
        if old is not None and new is not None and node_inputs(old) == node_inputs(new):
            return ()
        return tuple(self._on_node.get(key, ()))

    def forget(self, key: str) -> None:
        self._file(key, "")

    def _file(self, key: str, node_name: str) -> None:
        before = self._node_of.pop(key, "")
        if before:
            pods = self._on_node[before]
            pods.discard(key)
            if not pods:
                del self._on_node[before]
        if node_name:
            self._node_of[key] = node_name
            self._on_node.setdefault(node_name, set()).add(key)


KIND = SourceKind(
    "pod",
    PODS,
    PodTranslator,
    related=(NODES,),
    flags=FLAGS,
    evictable=True,
    names_with=pod_names,
    leaves_out_unnamed=True,
    projections={PODS: projections.without_bookkeeping, NODES: projections.node},
    untemplated={PODS: projections.pod_source},
)
