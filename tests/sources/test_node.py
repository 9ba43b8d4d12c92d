"""The node kind's translation (sources.node.node_endpoints), one table of cases mirroring external-dns
v0.22's source/node_test.go and the --fqdn-template cases of source/node_fqdn_test.go (each case names the
one it mirrors; the --fqdn-target-template and --target-template cases are left out: shardsync has no
such flags), then what the kind does in a watcher: its resource label and Events, filters, and the flags
it shares with the service kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from shardsync.kube.objects import ObjectRef
from shardsync.records.endpoint import RESOURCE_LABEL, canonical_target, normalize_name
from shardsync.sources.filters import ObjectFilter
from shardsync.sources.node import KIND, node_endpoints
from shardsync.sources.options import SourceOptions
from shardsync.sources.service import NODES
from shardsync.sources.service_options import ServiceOptions
from shardsync.sources.table import event_ref

TTL = "external-dns.kubernetes.io/ttl"
TARGET = "external-dns.kubernetes.io/target"
CONTROLLER = "external-dns.kubernetes.io/controller"

Records = dict[tuple[str, str], tuple[str, ...]]
EXT, INT = "ExternalIP", "InternalIP"


def node(
    name: str,
    *addresses: tuple[str, str],
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "creationTimestamp": "2024-05-01T10:00:00Z"}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": {"unschedulable": unschedulable} if unschedulable else {},
        "status": {"addresses": [{"type": t, "address": a} for t, a in addresses]},
    }


@dataclass
class Case:
    title: str  # the external-dns case it mirrors (node_test.go unless it says node_fqdn_test.go)
    nodes: list[dict[str, Any]]
    want: Records
    expose_internal_ipv6: bool = True  # external-dns's table sets it true in most cases
    exclude_unschedulable: bool = False  # its table's zero value
    template: tuple[str, ...] = ()
    combine: bool = False
    filter: ObjectFilter = field(default_factory=ObjectFilter)
    problems: int = 0
    ttl: int = 0


def n1(*addresses: tuple[str, str], **kw: Any) -> list[dict[str, Any]]:
    return [node("node1", *addresses, **kw)]


CASES = [
    Case(
        "node with short hostname returns one endpoint", n1((EXT, "1.2.3.4")), {("node1", "A"): ("1.2.3.4",)}
    ),
    Case(
        "node with fqdn returns one endpoint",
        [node("node1.example.org", (EXT, "1.2.3.4"))],
        {("node1.example.org", "A"): ("1.2.3.4",)},
    ),
    Case(
        "ipv6 node with fqdn returns one endpoint",
        [node("node1.example.org", (INT, "2001:DB8::8"))],
        {("node1.example.org", "AAAA"): ("2001:DB8::8",)},
    ),
    Case(
        "node with fqdn template returns endpoint with expanded hostname",
        n1((EXT, "1.2.3.4")),
        {("node1.example.org", "A"): ("1.2.3.4",)},
        template=("{{.Name}}.example.org",),
    ),
    Case(
        "node with fqdn and fqdn template returns one endpoint",
        [node("node1.example.org", (EXT, "1.2.3.4"))],
        {("node1.example.org.example.org", "A"): ("1.2.3.4",)},
        template=("{{.Name}}.example.org",),
    ),
    Case(
        "node with fqdn template returns two endpoints with multiple IP addresses and expanded hostname",
        n1((EXT, "1.2.3.4"), (EXT, "5.6.7.8")),
        {("node1.example.org", "A"): ("1.2.3.4", "5.6.7.8")},
        template=("{{.Name}}.example.org",),
    ),
    Case(
        "node with fqdn template returns two endpoints with dual-stack IP addresses and expanded hostname",
        n1((EXT, "1.2.3.4"), (INT, "2001:DB8::8")),
        {("node1.example.org", "A"): ("1.2.3.4",), ("node1.example.org", "AAAA"): ("2001:DB8::8",)},
        template=("{{.Name}}.example.org",),
    ),
    Case(
        "node with both external and internal IP returns an endpoint with external IP",
        n1((EXT, "1.2.3.4"), (INT, "2.3.4.5")),
        {("node1", "A"): ("1.2.3.4",)},
    ),
    Case(
        "node with both external, internal, and IPv6 IP returns endpoints with external IPs",
        n1((EXT, "1.2.3.4"), (INT, "2.3.4.5"), (INT, "2001:DB8::8")),
        {("node1", "A"): ("1.2.3.4",), ("node1", "AAAA"): ("2001:DB8::8",)},
    ),
    Case(
        "node with only internal IP returns an endpoint with internal IP",
        n1((INT, "2.3.4.5")),
        {("node1", "A"): ("2.3.4.5",)},
    ),
    Case(
        "node with only internal IPs returns endpoints with internal IPs",
        n1((INT, "2.3.4.5"), (INT, "2001:DB8::8")),
        {("node1", "A"): ("2.3.4.5",), ("node1", "AAAA"): ("2001:DB8::8",)},
    ),
    Case(
        "node with only internal IPs with expose internal IP as false shouldn't return AAAA endpoints with "
        "internal IPs",  # its expectation does return the AAAA: with no ExternalIP every InternalIP counts
        n1((INT, "2.3.4.5"), (INT, "2001:DB8::9")),
        {("node1", "A"): ("2.3.4.5",), ("node1", "AAAA"): ("2001:DB8::9",)},
        expose_internal_ipv6=False,
    ),
    # external-dns fails its whole source here; shardsync publishes nothing for this Node alone.
    Case("node with neither external nor internal IP returns no endpoints", n1(), {}),
    Case(
        "node with target annotation",
        [node("node1.example.org", (EXT, "1.2.3.4"), annotations={TARGET: "203.2.45.7"})],
        {("node1.example.org", "A"): ("203.2.45.7",)},
    ),
    Case(
        "annotated node without annotation filter returns endpoint",
        n1((EXT, "1.2.3.4"), annotations={"service.beta.kubernetes.io/external-traffic": "OnlyLocal"}),
        {("node1", "A"): ("1.2.3.4",)},
    ),
    Case(
        "annotated node with matching annotation filter returns endpoint",
        n1((EXT, "1.2.3.4"), annotations={"service.beta.kubernetes.io/external-traffic": "OnlyLocal"}),
        {("node1", "A"): ("1.2.3.4",)},
        filter=ObjectFilter.parse(
            annotation_filter="service.beta.kubernetes.io/external-traffic in (Global, OnlyLocal)"
        ),
    ),
    Case(
        "annotated node with non-matching annotation filter returns nothing",
        n1((EXT, "1.2.3.4"), annotations={"service.beta.kubernetes.io/external-traffic": "SomethingElse"}),
        {},
        filter=ObjectFilter.parse(
            annotation_filter="service.beta.kubernetes.io/external-traffic in (Global, OnlyLocal)"
        ),
    ),
    Case(
        "labeled node with matching label selector returns endpoint",
        n1((EXT, "1.2.3.4"), labels={"service.beta.kubernetes.io/external-traffic": "OnlyLocal"}),
        {("node1", "A"): ("1.2.3.4",)},
        filter=ObjectFilter.parse(
            label_filter="service.beta.kubernetes.io/external-traffic in (Global, OnlyLocal)"
        ),
    ),
    Case(
        "labeled node with non-matching label selector returns nothing",
        n1((EXT, "1.2.3.4"), labels={"service.beta.kubernetes.io/external-traffic": "SomethingElse"}),
        {},
        filter=ObjectFilter.parse(
            label_filter="service.beta.kubernetes.io/external-traffic in (Global, OnlyLocal)"
        ),
    ),
    Case(
        "our controller type is dns-controller",
        n1((EXT, "1.2.3.4"), annotations={CONTROLLER: "dns-controller"}),
        {("node1", "A"): ("1.2.3.4",)},
    ),
    Case(
        "different controller types are ignored",
        n1((EXT, "1.2.3.4"), annotations={CONTROLLER: "not-dns-controller"}),
        {},
    ),
    Case(
        "ttl not annotated should have RecordTTL.IsConfigured set to false",
        n1((EXT, "1.2.3.4")),
        {("node1", "A"): ("1.2.3.4",)},
    ),
    Case(
        "ttl annotated but invalid should have RecordTTL.IsConfigured set to false",
        n1((EXT, "1.2.3.4"), annotations={TTL: "foo"}),
        {("node1", "A"): ("1.2.3.4",)},
        problems=1,  # external-dns warns in its log; shardsync reports it on the Node
    ),
    Case(
        "ttl annotated and is valid should set Record.TTL",
        n1((EXT, "1.2.3.4"), annotations={TTL: "10"}),
        {("node1", "A"): ("1.2.3.4",)},
        ttl=10,
    ),
    Case(
        "unschedulable node return nothing with excludeUnschedulable=true",
        n1((EXT, "1.2.3.4"), unschedulable=True),
        {},
        exclude_unschedulable=True,
    ),
    Case(
        "unschedulable node returns node with excludeUnschedulable=false",
        n1((EXT, "1.2.3.4"), unschedulable=True),
        {("node1", "A"): ("1.2.3.4",)},
    ),
    Case(
        "provider-specific annotation is not supported and is ignored",
        n1((EXT, "1.2.3.4"), annotations={"external-dns.kubernetes.io/aws-weight": "10"}),
        {("node1", "A"): ("1.2.3.4",)},
    ),
    # testNodeEndpointsWithIPv6
    Case(
        "node with only internal IPs should return internal IPvs irrespective of exposeInternalIPv6",
        n1((INT, "2.3.4.5"), (INT, "2001:DB8::9")),
        {("node1", "A"): ("2.3.4.5",), ("node1", "AAAA"): ("2001:DB8::9",)},
        expose_internal_ipv6=False,
    ),
    Case(
        "node with both external, internal, and IPv6 IP returns endpoints with external IPs (IPv6 table)",
        n1((EXT, "1.2.3.4"), (EXT, "2001:DB8::8"), (INT, "2001:DB8::9")),
        {("node1", "A"): ("1.2.3.4",), ("node1", "AAAA"): ("2001:DB8::8",)},
        expose_internal_ipv6=False,
    ),
    Case(
        "node with both external and internal IPs should return internal IPv6 if exposeInternalIPv6 is true",
        n1((EXT, "1.2.3.5"), (INT, "2001:DB8::9")),
        {("node1", "A"): ("1.2.3.5",), ("node1", "AAAA"): ("2001:DB8::9",)},
    ),
    # TestNodeIndexer: every Node with a target annotation publishes, but for a controller mismatch.
    Case(
        "controller mismatch excludes node",
        [
            node(
                f"node-{i}",
                annotations={TARGET: f"1.2.3.{i + 1}", **({CONTROLLER: "other"} if i >= 3 else {})},
            )
            for i in range(5)
        ],
        {(f"node-{i}", "A"): (f"1.2.3.{i + 1}",) for i in range(3)},
    ),
    # node_fqdn_test.go (--fqdn-template)
    Case(
        "fqdn-template can reference .Kind (node_fqdn_test.go)",
        [node("node-name", (EXT, "243.186.136.160"))],
        {("node.node-name.example.com", "A"): ("243.186.136.160",)},
        template=("{{.Kind | toLower}}.{{.Name}}.example.com",),
    ),
    Case(
        "fqdn-template expansion with multiple domains (node_fqdn_test.go)",
        [node("ip-10-1-176-5.internal", (INT, "10.1.176.1"), (INT, "fc00:f853:ccd:e793::1"))],
        {
            ("ip-10-1-176-5.internal.domainA.com", "A"): ("10.1.176.1",),
            ("ip-10-1-176-5.internal.domainA.com", "AAAA"): ("fc00:f853:ccd:e793::1",),
            ("ip-10-1-176-5.internal.domainB.com", "A"): ("10.1.176.1",),
            ("ip-10-1-176-5.internal.domainB.com", "AAAA"): ("fc00:f853:ccd:e793::1",),
        },
        template=("{{.Name}}.domainA.com,{{.Name}}.domainB.com",),
    ),
    Case(
        # external-dns publishes `node-name..example.tld`; shardsync drops the invalid name and reports it.
        "fqdn-template with empty namespace produces double-dot (node_fqdn_test.go)",
        [node("node-name", (INT, "10.1.176.1"))],
        {("node-name.domainA.com", "A"): ("10.1.176.1",)},
        template=("{{.Name}}.domainA.com,{{ .Name }}.{{ .Namespace }}.example.tld",),
        problems=1,
    ),
    Case(
        "fqdn-template overrides hostname annotation (node_fqdn_test.go)",
        [
            node(
                "ip-10-1-176-1",
                (EXT, "243.186.136.160"),
                (INT, "fc00:f853:ccd:e793::1"),
                annotations={"external-dns.kubernetes.io/hostname": "ip-10-1-176-1.internal.domain.com"},
            )
        ],
        {
            ("ip-10-1-176-1.example.com", "A"): ("243.186.136.160",),
            ("ip-10-1-176-1.example.com", "AAAA"): ("fc00:f853:ccd:e793::1",),
        },
        template=("{{.Name}}.example.com",),
    ),
    Case(
        "fqdn-template uses target annotation instead of node addresses (node_fqdn_test.go)",
        [node("node-name", (EXT, "243.186.136.160"), annotations={TARGET: "203.2.45.22"})],
        {("node-name.example.com", "A"): ("203.2.45.22",)},
        template=("{{.Name}}.example.com",),
    ),
    Case(
        "fqdn-template expands annotation value (node_fqdn_test.go)",
        [node("node-name", (EXT, "243.186.136.160"), annotations={"workload": "cluster-resources"})],
        {("node-name.cluster-resources.domain.tld", "A"): ("243.186.136.160",)},
        template=("{{ .Name }}.{{ .Annotations.workload }}.domain.tld",),
    ),
    Case(
        "fqdn-template expands label value (node_fqdn_test.go)",
        [node("node-name", (EXT, "243.186.136.160"), labels={"topology.kubernetes.io/region": "eu-west-1"})],
        {("node-name.eu-west-1.domain.tld", "A"): ("243.186.136.160",)},
        template=('{{ .Name }}.{{ index .ObjectMeta.Labels "topology.kubernetes.io/region" }}.domain.tld',),
    ),
    Case(
        "fqdn-template shared domain across multiple nodes (node_fqdn_test.go)",
        [node("node-name-1", (EXT, "243.186.136.160")), node("node-name-2", (EXT, "243.186.136.178"))],
        {
            ("all.example.com", "A"): ("243.186.136.160", "243.186.136.178"),
            ("node-name-1.domain.tld", "A"): ("243.186.136.160",),
            ("node-name-2.domain.tld", "A"): ("243.186.136.178",),
        },
        template=("{{ .Name }}.domain.tld,all.example.com",),
    ),
    Case(
        "fqdn-template with combine adds template endpoints alongside default node-name endpoints "
        "(node_fqdn_test.go)",
        [node("node-name-1", (EXT, "243.186.136.160")), node("node-name-2", (EXT, "243.186.136.178"))],
        {
            ("all.example.com", "A"): ("243.186.136.160", "243.186.136.178"),
            ("node-name-1.domain.tld", "A"): ("243.186.136.160",),
            ("node-name-2.domain.tld", "A"): ("243.186.136.178",),
            ("node-name-1", "A"): ("243.186.136.160",),
            ("node-name-2", "A"): ("243.186.136.178",),
        },
        template=("{{ .Name }}.domain.tld,all.example.com",),
        combine=True,
    ),
]


def records(case: Case) -> tuple[Records, int, set[int]]:
    """The records the case's Nodes publish, merged across Nodes as external-dns's MergeEndpoints (and
    shardsync's planner, for objects of one kind and TTL) merge them; the problems; the TTLs."""
    opts = ServiceOptions(
        expose_internal_ipv6=case.expose_internal_ipv6, exclude_unschedulable=case.exclude_unschedulable
    )
    common = SourceOptions(fqdn_template=case.template, combine_fqdn_annotation=case.combine)
    out: dict[tuple[str, str], set[str]] = {}
    problems, ttls = 0, set()
    for obj in case.nodes:
        if not case.filter.matches(obj):
            continue
        result = node_endpoints(obj, opts, common)
        problems += len(result.problems)
        for ep in result.endpoints:
            assert ep.labels[RESOURCE_LABEL] == f"node/{obj['metadata']['name']}"
            out.setdefault((ep.dns_name, ep.record_type), set()).update(ep.targets)
            ttls.add(ep.ttl)
    return {k: tuple(sorted(v)) for k, v in out.items()}, problems, ttls


@pytest.mark.parametrize("case", CASES, ids=[c.title for c in CASES])
def test_external_dns_node_cases(case: Case) -> None:
    got, problems, ttls = records(case)
    want = {
        (normalize_name(name), kind): tuple(sorted(canonical_target(kind, t) for t in targets))
        for (name, kind), targets in case.want.items()
    }
    assert got == want
    assert problems == case.problems
    assert ttls <= {case.ttl}


def test_a_problem_in_a_node_names_the_node() -> None:
    [problem] = node_endpoints(node("n1", (EXT, "192.0.2.1"), annotations={TTL: "soon"})).problems
    assert problem.ref == ObjectRef("Node", "", "n1", "uid-n1", "v1", "node")
    # An Event about it names the Node, found again from the endpoints' resource label.
    assert event_ref(problem.ref.resource) == ObjectRef("Node", "", "n1", "", "v1", "node")


def test_the_kind_watches_nodes_with_the_service_kinds_flags_and_slim_copies() -> None:
    assert KIND.resource == NODES and KIND.related == () and not KIND.evictable
    slim = KIND.projection(NODES, templated=False)
    assert slim is not None
    kept = slim(node("n1", (EXT, "192.0.2.1"), labels={"a": "b"}, annotations={TTL: "60", "other": "x"}))
    # What the translation and the label filter read; not other controllers' annotations.
    assert kept["metadata"]["labels"] == {"a": "b"} and kept["metadata"]["annotations"] == {TTL: "60"}
    assert (
        node_endpoints(kept).endpoints
        == node_endpoints(
            node("n1", (EXT, "192.0.2.1"), annotations={TTL: "60"}, labels={"a": "b"})
        ).endpoints
    )
    # --annotation-filter may read any annotation: its slim copies keep them all.
    filtered = KIND.projection(NODES, templated=False, filtered=True)
    assert filtered is not None and filtered(node("n1", annotations={"other": "x"}))["metadata"][
        "annotations"
    ] == {"other": "x"}
