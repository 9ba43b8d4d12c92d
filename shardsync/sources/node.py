"""Node → desired endpoints, as external-dns's node source computes them (pure; plain-dict objects).

One name per Node: its own name (`node1.example.org`), or the `--fqdn-template` names instead (both with
`--combine-fqdn-annotation`). external-dns v0.22 reads no hostname annotation from a Node. The targets are
the `target` annotation, else the Node's addresses as Kubernetes' preferred-address rule gives them: its
ExternalIPs (plus its IPv6 InternalIPs with `--expose-internal-ipv6`: an IPv6 InternalIP is usually
reachable from outside too), else its InternalIPs, IPv4 and IPv6 alike. IPv4 targets make A records, IPv6
AAAA, names CNAME. A Node with `spec.unschedulable` publishes nothing unless `--exclude-unschedulable=false`;
one whose `controller` annotation names another controller is skipped; the `ttl` annotation sets the TTL;
`set-identifier` and provider-specific annotations are not read (as in external-dns). `--label-filter` and
`--annotation-filter` choose the Nodes, as for every kind (sources.filters). Endpoints carry
`resource=node/<name>`, as external-dns labels them.

A Node with no ExternalIP nor InternalIP (one registering: the kubelet writes its addresses a moment
after it creates it) publishes nothing until it has some; external-dns fails its whole source on it, and
every Node's records wait for its next sync.

`KIND` is the source kind `--source=node`. It shares the service kind's flags (`--expose-internal-ipv6`,
`--exclude-unschedulable`, which external-dns also reads for NodePort Services): its options are a
`ServiceOptions`. Nodes are few and the service and pod kinds read them whole, so the kind is not evictable:
every replica keeps every Node and holds the records of its own zones only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shardsync.kube.objects import ObjectRef, get_str, get_str_map
from shardsync.sources import annotations as ann
from shardsync.sources import projections
from shardsync.sources.kind import SourceContext, SourceKind, Translator
from shardsync.sources.options import SourceOptions
from shardsync.sources.result import EndpointSet, Problem, SourceResult
from shardsync.sources.service import FQDN_TEMPLATE_FIELD, NODES
from shardsync.sources.service_nodeport import node_port_targets, unschedulable
from shardsync.sources.service_options import FLAGS, ServiceOptions

Obj = Mapping[str, Any]


def node_targets(node: Obj, expose_internal_ipv6: bool) -> list[str]:
    """external-dns's nodeAddresses: the ExternalIPs (plus IPv6 InternalIPs when exposed), else the
    InternalIPs; the NodePort rule for one node with no `access` annotation (one home for it)."""
    return node_port_targets([node], "", expose_internal_ipv6, exclude_unschedulable=False)


def node_endpoints(
    node: Obj, opts: ServiceOptions | None = None, common: SourceOptions | None = None
) -> SourceResult:
    """A Node's desired endpoints and problems (empty when skipped: unschedulable, another controller)."""
    opts = opts or ServiceOptions()
    common = common or SourceOptions()
    parsed = ann.parse(get_str_map(node, "metadata", "annotations"))
    if parsed.controller_mismatch or (opts.exclude_unschedulable and unschedulable(node)):
        return SourceResult()
    ref = ObjectRef.of(node, NODES, "node")
    out = EndpointSet(ref, created=get_str(node, "metadata", "creationTimestamp"), ttl=parsed.ttl)
    problems = [Problem(ref, p.field, p.message) for p in parsed.problems]
    template = common.template
    names: list[tuple[str, str]] = []
    if template is None or common.combine_fqdn_annotation:
        names.append((ref.name, "metadata.name"))
    if template is not None:
        names += [(name, FQDN_TEMPLATE_FIELD) for name in template.names(node, NODES.kind)]
    targets = list(parsed.targets) or node_targets(node, opts.expose_internal_ipv6)
    for name, field_path in names:
        out.add_targets(name, targets, field_path)
    return out.result(problems)


class NodeTranslator(Translator):
    """The node kind in one watcher: `node_endpoints` with the kind's and the shared options."""

    def __init__(self, context: SourceContext[ServiceOptions]) -> None:
        self.options, self.common = context.options, context.common

    def translate(self, key: str, obj: Obj | None) -> SourceResult | None:
        return None if obj is None else node_endpoints(obj, self.options, self.common)


KIND = SourceKind(
    "node",
    NODES,
    NodeTranslator,
    flags=FLAGS,
    projections={NODES: projections.without_bookkeeping},
    untemplated={NODES: projections.node_source},
)
