"""The pod kind's translation (sources.pod.pod_endpoints), one table of cases mirroring external-dns v0.22's
source/pod_test.go and the --fqdn-template cases of source/pod_fqdn_test.go (each case names the one it
mirrors; left out: the `kops-dns-controller` compatibility cases, shardsync having no --compatibility, and
the --fqdn-target-template / --target-template ones, shardsync having no such flags), then the kind's
translator in a watcher: a Node change re-translates the Pods reading it, and the names that place a Pod."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from shardsync.kube.objects import Resource
from shardsync.records.endpoint import RESOURCE_LABEL, canonical_target, normalize_name
from shardsync.sources.kind import SourceContext
from shardsync.sources.options import SourceOptions
from shardsync.sources.pod import KIND, PodOptions, pod_endpoints, pod_names
from shardsync.sources.projections import pod_source
from shardsync.sources.service import NODES, PODS
from tests.sources.fake_kube import FakeKube
from tests.sources.objects import node

HOSTNAME = "external-dns.kubernetes.io/hostname"
INTERNAL = "external-dns.kubernetes.io/internal-hostname"
TARGET = "external-dns.kubernetes.io/target"
TTL = "external-dns.kubernetes.io/ttl"
CONTROLLER = "external-dns.kubernetes.io/controller"
EXT, INT = "ExternalIP", "InternalIP"

Records = dict[tuple[str, str], tuple[str, ...]]


def pod(
    name: str,
    annotations: dict[str, str] | None = None,
    *,
    namespace: str = "kube-system",
    host_network: bool = False,
    node_name: str = "",
    pod_ip: str = "",
    pod_ips: tuple[str, ...] | None = None,
    labels: dict[str, str] | None = None,
    phase: str = "",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    spec: dict[str, Any] = {"hostNetwork": host_network}
    if node_name:
        spec["nodeName"] = node_name
    status: dict[str, Any] = {}
    if pod_ip:
        status["podIP"] = pod_ip
    ips = pod_ips if pod_ips is not None else ((pod_ip,) if pod_ip else ())
    if ips:
        status["podIPs"] = [{"ip": ip} for ip in ips]
    if phase:
        status["phase"] = phase
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


IPV4_NODES = [
    node("my-node1", (EXT, "54.10.11.1"), (INT, "10.0.1.1")),
    node("my-node2", (EXT, "54.10.11.2"), (INT, "10.0.1.2")),
]
IPV6_NODES = [node("my-node1", (INT, "2001:DB8::1")), node("my-node2", (INT, "2001:DB8::2"))]
BOTH = {INTERNAL: "internal.a.foo.example.org", HOSTNAME: "a.foo.example.org"}


@dataclass
class Case:
    title: str  # the external-dns case it mirrors (pod_test.go unless it says pod_fqdn_test.go)
    pods: list[dict[str, Any]]
    want: Records
    nodes: list[dict[str, Any]] = field(default_factory=lambda: IPV4_NODES)
    options: PodOptions = field(default_factory=PodOptions)
    namespace: str = ""  # --namespace
    template: tuple[str, ...] = ()
    combine: bool = False
    ttls: dict[str, int] = field(default_factory=dict)  # name → TTL, where one is set


IGNORE = PodOptions(ignore_non_host_network_pods=True)


def on_node(i: int, annotations: dict[str, str]) -> dict[str, Any]:
    """external-dns's usual `my-pod<i>`: on the host network of `my-node<i>`, IP 10.0.1.<i>."""
    return pod(f"my-pod{i}", annotations, host_network=True, node_name=f"my-node{i}", pod_ip=f"10.0.1.{i}")


def two_host_network_pods(
    annotations: dict[str, str], ips: tuple[str, str] = ("10.0.1.1", "10.0.1.2")
) -> list[dict[str, Any]]:
    return [
        pod(f"my-pod{i}", annotations, host_network=True, node_name=f"my-node{i}", pod_ip=ip)
        for i, ip in ((1, ips[0]), (2, ips[1]))
    ]


CASES = [
    Case(
        "create IPv4 records based on pod's external and internal IPs",
        two_host_network_pods(BOTH),
        {
            ("a.foo.example.org", "A"): ("54.10.11.1", "54.10.11.2"),
            ("internal.a.foo.example.org", "A"): ("10.0.1.1", "10.0.1.2"),
        },
        options=IGNORE,
    ),
    Case(
        "create IPv6 records based on pod's external and internal IPs",
        two_host_network_pods(BOTH, ("2001:DB8::1", "2001:DB8::2")),
        {
            ("a.foo.example.org", "AAAA"): ("2001:DB8::1", "2001:DB8::2"),
            ("internal.a.foo.example.org", "AAAA"): ("2001:DB8::1", "2001:DB8::2"),
        },
        nodes=IPV6_NODES,
        options=IGNORE,
    ),
    Case(
        "create records based on pod's target annotation",
        [
            on_node(1, {**BOTH, TARGET: "208.1.2.1"}),
            on_node(2, {**BOTH, TARGET: "208.1.2.2"}),
        ],
        {
            ("a.foo.example.org", "A"): ("208.1.2.1", "208.1.2.2"),
            ("internal.a.foo.example.org", "A"): ("208.1.2.1", "208.1.2.2"),
        },
        options=IGNORE,
    ),
    Case(
        "create multiple records",
        [
            on_node(1, {HOSTNAME: "a.foo.example.org", TTL: "1h30m"}),
            on_node(2, {HOSTNAME: "b.foo.example.org"}),
        ],
        {
            ("a.foo.example.org", "A"): ("54.10.11.1",),
            ("a.foo.example.org", "AAAA"): ("2001:DB8::1",),
            ("b.foo.example.org", "A"): ("54.10.11.2",),
        },
        nodes=[
            node("my-node1", (EXT, "54.10.11.1"), (INT, "2001:DB8::1"), (INT, "10.0.1.1")),
            node("my-node2", (EXT, "54.10.11.2"), (INT, "10.0.1.2")),
        ],
        options=IGNORE,
        ttls={"a.foo.example.org": 5400},
    ),
    Case(
        "pods with hostNetwore=false should be ignored",
        [
            on_node(1, {**BOTH, TTL: "1s"}),
            pod("my-pod2", BOTH, host_network=False, node_name="my-node2", pod_ip="100.0.1.2"),
        ],
        {("a.foo.example.org", "A"): ("54.10.11.1",), ("internal.a.foo.example.org", "A"): ("10.0.1.1",)},
        options=IGNORE,
        ttls={"a.foo.example.org": 1, "internal.a.foo.example.org": 1},
    ),
    Case(
        "only watch a given namespace",
        [
            on_node(1, BOTH),
            pod(
                "my-pod2",
                {**BOTH, TTL: "1s"},
                namespace="default",
                host_network=True,
                node_name="my-node2",
                pod_ip="100.0.1.2",
            ),
        ],
        {("a.foo.example.org", "A"): ("54.10.11.1",), ("internal.a.foo.example.org", "A"): ("10.0.1.1",)},
        options=IGNORE,
        namespace="kube-system",
    ),
    Case(
        "split record for internal hostname annotation",
        [on_node(1, {INTERNAL: "internal.a.foo.example.org,internal.b.foo.example.org"})],
        {
            ("internal.a.foo.example.org", "A"): ("10.0.1.1",),
            ("internal.b.foo.example.org", "A"): ("10.0.1.1",),
        },
        nodes=[node("my-node1", (INT, "10.0.1.1"))],
        options=IGNORE,
    ),
    Case(
        "create IPv4 records for non-host network pods",
        [
            pod("my-pod1", {TTL: "1m"}, node_name="my-node1", pod_ip="192.168.1.1"),
            pod("my-pod2", {}, node_name="my-node2", pod_ip="192.168.1.2"),
        ],
        {("my-pod1.example.org", "A"): ("192.168.1.1",), ("my-pod2.example.org", "A"): ("192.168.1.2",)},
        options=PodOptions(pod_source_domain="example.org"),
        ttls={"my-pod1.example.org": 60},
    ),
    Case(
        "create records based on internal hostname annotation for non-host network pod",
        [
            pod(
                "my-pod1",
                {INTERNAL: "internal.a.foo.example.org"},
                node_name="my-node1",
                pod_ip="192.168.1.1",
            )
        ],
        {("internal.a.foo.example.org", "A"): ("192.168.1.1",)},
        nodes=[],
    ),
    Case(
        "create records based on internal hostname annotation for host network pod",
        [
            pod(
                "my-pod1",
                {INTERNAL: "internal.a.foo.example.org"},
                host_network=True,
                node_name="my-node1",
                pod_ip="192.168.1.1",
            )
        ],
        {("internal.a.foo.example.org", "A"): ("192.168.1.1",)},
    ),
    Case(
        "create records based on pod's target annotation with pod source domain",
        [
            on_node(1, {**BOTH, TARGET: "208.1.2.1"}),
            on_node(2, {**BOTH, TARGET: "208.1.2.2"}),
        ],
        {
            ("my-pod1.example.org", "A"): ("208.1.2.1",),
            ("my-pod2.example.org", "A"): ("208.1.2.2",),
            ("a.foo.example.org", "A"): ("208.1.2.1", "208.1.2.2"),
            ("internal.a.foo.example.org", "A"): ("208.1.2.1", "208.1.2.2"),
        },
        options=PodOptions(pod_source_domain="example.org", ignore_non_host_network_pods=True),
    ),
    Case(
        "host network pod on a missing node",
        [
            pod(
                "my-pod1",
                {HOSTNAME: "a.foo.example.org"},
                host_network=True,
                node_name="missing-node",
                pod_ip="10.0.1.1",
            )
        ],
        {},
        options=IGNORE,
    ),
    Case(
        "provider-specific annotation is not supported and is ignored",
        [on_node(1, {HOSTNAME: "a.foo.example.org", "external-dns.kubernetes.io/aws-weight": "10"})],
        {("a.foo.example.org", "A"): ("54.10.11.1",)},
        options=IGNORE,
    ),
    Case(
        "our controller type is dns-controller",
        [on_node(1, {CONTROLLER: "dns-controller", HOSTNAME: "a.foo.example.org"})],
        {("a.foo.example.org", "A"): ("54.10.11.1",)},
        options=IGNORE,
    ),
    Case(
        "different controller types are ignored",
        [on_node(1, {CONTROLLER: "some-other-tool", HOSTNAME: "a.foo.example.org"})],
        {},
        options=IGNORE,
    ),
    # TestPodSourceLogs: what it logs about, the records that remain.
    Case(
        "mixed valid and hostNetwork=false pods with missing node",
        [
            pod("valid-pod", {HOSTNAME: "valid.foo.example.org"}, host_network=True, node_name="my-node1"),
            pod("non-hostnet-pod", {HOSTNAME: "nonhost.foo.example.org"}, node_name="my-node2"),
            pod(
                "missing-node-pod",
                {HOSTNAME: "missing.foo.example.org"},
                host_network=True,
                node_name="missing",
            ),
        ],
        {("valid.foo.example.org", "A"): ("54.10.11.1",)},
        options=IGNORE,
    ),
    Case(
        "when ignoreNonHostNetworkPods=false, no skip logs should be generated",  # the Pod is read: records
        [pod("my-pod1", BOTH, node_name="my-node1", pod_ip="10.0.1.1")],
        {("a.foo.example.org", "A"): ("54.10.11.1",), ("internal.a.foo.example.org", "A"): ("10.0.1.1",)},
    ),
    # pod_fqdn_test.go (--fqdn-template)
    Case(
        "fqdn-template can reference .Kind (pod_fqdn_test.go)",
        [pod("my-pod", namespace="default", pod_ip="100.67.94.101")],
        {("pod.my-pod.example.com", "A"): ("100.67.94.101",)},
        template=("{{.Kind | toLower}}.{{.Name}}.example.com",),
    ),
    Case(
        "fqdn-template expansion with multiple domains (pod_fqdn_test.go)",
        [pod("my-pod-1", namespace="default", pod_ip="100.67.94.101")],
        {
            ("my-pod-1.domainA.com", "A"): ("100.67.94.101",),
            ("my-pod-1.domainB.com", "A"): ("100.67.94.101",),
        },
        template=("{{ .Name }}.domainA.com,{{ .Name }}.domainB.com",),
    ),
    Case(
        "fqdn-template with combine and pod source domain (pod_fqdn_test.go)",
        [pod("my-pod-1", namespace="default", node_name="node-1.internal", pod_ip="100.67.94.101")],
        {
            ("my-pod-1.domainA.com", "A"): ("100.67.94.101",),
            ("my-pod-1.domainB.com", "A"): ("100.67.94.101",),
            ("my-pod-1.example.org", "A"): ("100.67.94.101",),
        },
        nodes=[node("node-1.internal", (EXT, "10.1.192.139"))],
        options=PodOptions(pod_source_domain="example.org"),
        template=("{{ .Name }}.domainA.com,{{ .Name }}.domainB.com",),
        combine=True,
    ),
    Case(
        "fqdn-template with namespace in domain (pod_fqdn_test.go)",
        [
            pod("pod-1", namespace="default", pod_ip="100.67.94.101"),
            pod("pod-2", namespace="kube-system", pod_ip="100.67.94.102"),
        ],
        {
            ("pod-1.default.example.org", "A"): ("100.67.94.101",),
            ("pod-2.kube-system.example.org", "A"): ("100.67.94.102",),
        },
        template=("{{ .Name }}.{{ .Namespace }}.example.org",),
    ),
    Case(
        "fqdn-template with dual-stack pod produces A and AAAA records (pod_fqdn_test.go)",
        [
            pod(
                "pod-1",
                namespace="default",
                pod_ip="100.67.94.101",
                pod_ips=("100.67.94.101", "2041:0000:140F::875B:131B"),
            )
        ],
        {
            ("pod-1.example.org", "A"): ("100.67.94.101",),
            ("pod-1.example.org", "AAAA"): ("2041:0000:140F::875B:131B",),
        },
        template=("{{ .Name }}.example.org",),
    ),
    Case(
        "fqdn-template target annotation does not override pod IPs (pod_fqdn_test.go)",
        [pod("pod-1", {TARGET: "203.2.45.22"}, namespace="default", pod_ip="100.67.94.101")],
        {("pod-1.example.org", "A"): ("100.67.94.101",)},
        template=("{{ .Name }}.example.org",),
    ),
    Case(
        "fqdn-template hostname annotation does not override template hostname (pod_fqdn_test.go)",
        [
            pod(
                "pod-1",
                {HOSTNAME: "ip-10-1-176-1.internal.domain.com"},
                namespace="default",
                pod_ip="100.67.94.101",
            )
        ],
        {("pod-1.example.org", "A"): ("100.67.94.101",)},
        template=("{{ .Name }}.example.org",),
    ),
    Case(
        "fqdn-template expands annotation value (pod_fqdn_test.go)",
        [
            pod("pod-1", {"workload": "cluster-resources"}, pod_ip="100.67.94.101"),
            pod("pod-2", {"workload": "workloads"}, namespace="workloads", pod_ip="100.67.94.102"),
        ],
        {
            ("pod-1.cluster-resources.domain.tld", "A"): ("100.67.94.101",),
            ("pod-2.workloads.domain.tld", "A"): ("100.67.94.102",),
        },
        template=("{{ .Name }}.{{ .Annotations.workload }}.domain.tld",),
    ),
    Case(
        "fqdn-template expands label value (pod_fqdn_test.go)",
        [
            pod("pod-1", labels={"topology.kubernetes.io/region": "eu-west-1a"}, pod_ip="100.67.94.101"),
            pod(
                "pod-2",
                namespace="workloads",
                labels={"topology.kubernetes.io/region": "eu-west-1b"},
                pod_ip="100.67.94.102",
            ),
        ],
        {
            ("pod-1.eu-west-1a.domain.tld", "A"): ("100.67.94.101",),
            ("pod-2.eu-west-1b.domain.tld", "A"): ("100.67.94.102",),
        },
        template=('{{ .Name }}.{{ index .ObjectMeta.Labels "topology.kubernetes.io/region" }}.domain.tld',),
    ),
    Case(
        "fqdn-template shared domain merges targets from multiple pods (pod_fqdn_test.go)",
        [
            pod(
                "pod-1",
                pod_ip="100.67.94.101",
                pod_ips=(
                    "100.67.94.101",
                    "100.67.94.102",
                    "100.67.94.103",
                    "2041:0000:140F::875B:131B",
                    "::11.22.33.44",
                ),
            )
        ],
        {
            ("pods-all.domain.tld", "A"): ("100.67.94.101", "100.67.94.102", "100.67.94.103"),
            ("pods-all.domain.tld", "AAAA"): ("2041:0000:140F::875B:131B", "::11.22.33.44"),
        },
        template=("pods-all.domain.tld",),
    ),
    Case(
        "fqdn-template skips pods with empty IP (pod_fqdn_test.go)",
        [pod("pod-1", pod_ip="100.67.94.101", phase="Running"), pod("pod-2", phase="Failed")],
        {("pod-1.domain.tld", "A"): ("100.67.94.101",)},
        template=("{{ .Name }}.domain.tld",),
    ),
]


def records(case: Case) -> tuple[Records, dict[str, set[int]]]:
    """The records the case's Pods publish, merged across Pods as external-dns's MergeEndpoints (and
    shardsync's planner, for objects of one kind and TTL) merge them, and the TTLs of each name."""
    nodes = {n["metadata"]["name"]: n for n in case.nodes}
    common = SourceOptions(fqdn_template=case.template, combine_fqdn_annotation=case.combine)
    out: dict[tuple[str, str], set[str]] = {}
    ttls: dict[str, set[int]] = {}
    for obj in case.pods:
        if case.namespace and obj["metadata"]["namespace"] != case.namespace:
            continue
        result = pod_endpoints(obj, nodes, case.options, common)
        assert result.problems == []
        meta = obj["metadata"]
        for ep in result.endpoints:
            assert ep.labels[RESOURCE_LABEL] == f"pod/{meta['namespace']}/{meta['name']}"
            out.setdefault((ep.dns_name, ep.record_type), set()).update(ep.targets)
            ttls.setdefault(ep.dns_name, set()).add(ep.ttl)
    return {k: tuple(sorted(v)) for k, v in out.items()}, ttls


@pytest.mark.parametrize("case", CASES, ids=[c.title for c in CASES])
def test_external_dns_pod_cases(case: Case) -> None:
    got, ttls = records(case)
    want = {
        (normalize_name(name), kind): tuple(sorted(canonical_target(kind, t) for t in targets))
        for (name, kind), targets in case.want.items()
    }
    assert got == want
    assert ttls == {normalize_name(name): {case.ttls.get(name, 0)} for name, _ in case.want}


def names(obj: dict[str, Any], options: PodOptions | None = None, **common: Any) -> Sequence[str] | None:
    return pod_names(options or PodOptions())(obj, SourceOptions(**common))


def test_the_names_that_place_a_pod() -> None:
    annotated = pod("web-0", {HOSTNAME: "a.ex.com", INTERNAL: "i.ex.com", TTL: "60"}, host_network=True)
    assert names(annotated) == ["a.ex.com", "i.ex.com"]
    assert names(pod("web-1", {"prometheus.io/scrape": "true"})) == []  # publishes nothing: left out
    assert names(pod("web-1"), PodOptions(pod_source_domain="pods.ex.com")) == ["web-1.pods.ex.com"]
    # --ignore-non-host-network-pods: a Pod off the host network publishes nothing from annotations.
    off_host = pod("web-2", {HOSTNAME: "a.ex.com"})
    assert names(off_host, PodOptions(ignore_non_host_network_pods=True)) == []
    assert names(off_host, PodOptions(ignore_non_host_network_pods=True, pod_source_domain="p.ex.com")) == []
    assert names(annotated, fqdn_template=("{{.Name}}.ex.com",)) is None  # only a translation knows
    # They are what the translation publishes (or lies under).
    nodes = {"n1": node("n1", (EXT, "192.0.2.1"))}
    annotated["spec"]["nodeName"], annotated["status"]["podIP"] = "n1", "10.0.0.1"
    published = {ep.dns_name for ep in pod_endpoints(annotated, nodes).endpoints}
    assert published == set(names(annotated) or ())


def test_the_kinds_slim_copy_keeps_what_its_translation_reads() -> None:
    whole = pod(
        "web-0",
        {HOSTNAME: "a.ex.com", INTERNAL: "i.ex.com", TTL: "60", "prometheus.io/scrape": "true"},
        host_network=True,
        node_name="n1",
        pod_ip="10.0.0.1",
    )
    whole["metadata"]["creationTimestamp"] = "2024-05-01T10:00:00Z"
    whole["spec"]["containers"] = [{"name": "app", "image": "x"}]
    slim = KIND.projection(PODS, templated=False)
    assert slim is pod_source
    kept = slim(whole)
    assert "containers" not in kept["spec"] and "prometheus.io/scrape" not in kept["metadata"]["annotations"]
    nodes = {"n1": node("n1", (EXT, "192.0.2.1"), (INT, "2001:db8::1"))}
    options = PodOptions(pod_source_domain="pods.ex.com")
    assert pod_endpoints(kept, nodes, options) == pod_endpoints(whole, nodes, options)
    assert "podIPs" not in kept["status"]  # read by a template only, which keeps the Pod whole
    assert KIND.projection(PODS, templated=True) is not slim


def context(nodes: dict[str, dict[str, Any]]) -> SourceContext[PodOptions]:
    caches: dict[Resource, dict[str, dict[str, Any]]] = {NODES: nodes}
    return SourceContext(PodOptions(), lambda resource: caches[resource], FakeKube(), lambda: True)


def test_a_node_change_retranslates_the_pods_that_take_its_addresses() -> None:
    nodes = {"n1": node("n1", (EXT, "192.0.2.1")), "n2": node("n2", (EXT, "192.0.2.2"))}
    translator = KIND.start(context(nodes))
    on_n1 = pod("a", {HOSTNAME: "a.ex.com"}, host_network=True, node_name="n1")
    internal_only = pod("b", {INTERNAL: "b.ex.com"}, host_network=True, node_name="n1", pod_ip="10.0.0.2")
    targeted = pod("c", {HOSTNAME: "c.ex.com", TARGET: "lb.ex.com"}, host_network=True, node_name="n1")
    on_n2 = pod("d", {HOSTNAME: "d.ex.com"}, host_network=True, node_name="n2")
    for obj in (on_n1, internal_only, targeted, on_n2):
        translator.translate(f"kube-system/{obj['metadata']['name']}", obj)
    result = translator.translate("kube-system/a", on_n1)
    assert result is not None and [ep.targets for ep in result.endpoints] == [("192.0.2.1",)]

    moved = node("n1", (EXT, "192.0.2.9"))
    assert set(translator.related(NODES, "n1", nodes["n1"], moved)) == {"kube-system/a"}  # only it reads n1
    heartbeat = {**nodes["n1"], "metadata": {"name": "n1", "resourceVersion": "7"}}
    assert set(translator.related(NODES, "n1", nodes["n1"], heartbeat)) == set()
    assert set(translator.related(NODES, "n3", None, node("n3"))) == set()
    # The Pod moves to n2, then goes: it no longer follows n1, then nothing.
    translator.translate("kube-system/a", {**on_n1, "spec": {"hostNetwork": True, "nodeName": "n2"}})
    assert set(translator.related(NODES, "n1", nodes["n1"], None)) == set()
    assert set(translator.related(NODES, "n2", nodes["n2"], None)) == {"kube-system/a", "kube-system/d"}
    translator.translate("kube-system/a", None)
    translator.forget("kube-system/d")
    assert set(translator.related(NODES, "n2", nodes["n2"], None)) == set()


def test_a_pod_waiting_for_its_node_publishes_once_the_node_is_listed() -> None:
    nodes: dict[str, dict[str, Any]] = {}
    translator = KIND.start(context(nodes))
    waiting = pod("a", {HOSTNAME: "a.ex.com"}, host_network=True, node_name="n1")
    result = translator.translate("kube-system/a", waiting)
    assert result is not None and result.endpoints == [] and result.problems == []
    nodes["n1"] = node("n1", (EXT, "192.0.2.1"))
    assert list(translator.related(NODES, "n1", None, nodes["n1"])) == ["kube-system/a"]
    result = translator.translate("kube-system/a", waiting)
    assert result is not None and [ep.dns_name for ep in result.endpoints] == ["a.ex.com"]
