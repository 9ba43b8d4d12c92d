"""Service translation, per Service type and per annotation, against external-dns's service source.

Rows naming an external-dns test mirror kubernetes-sigs/external-dns v0.22.0 (source/service_test.go).
"""

from __future__ import annotations

from typing import Any

import pytest

from shardsync.records.endpoint import CREATED_LABEL, RESOURCE_LABEL
from shardsync.sources.options import SourceOptions
from shardsync.sources.service import ServiceOptions, service_dependencies, service_endpoints
from shardsync.sources.service_inputs import ServiceDependencies, slice_service

from .objects import ALPHA, CREATED, GA, endpoint_slice, node, pod, records, service

HOST2 = {GA + "hostname": "web.example.com,www.example.com"}
HOST = {GA + "hostname": "web.example.com"}
NODES = {
    "n1": node("n1", ("InternalIP", "10.0.0.1"), ("ExternalIP", "203.0.113.1"), ("InternalIP", "fd00::1")),
    "n2": node("n2", ("InternalIP", "10.0.0.2"), ("ExternalIP", "203.0.113.2"), ("Hostname", "n2")),
}
PRIVATE_NODES = {"n1": node("n1", ("InternalIP", "10.0.0.1")), "n2": node("n2", ("InternalIP", "10.0.0.2"))}


# --- LoadBalancer ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lb", "external_ips", "want"),
    [
        ([{"ip": "1.2.3.4"}], None, {("web.example.com", "A", ("1.2.3.4",))}),
        ([{"ip": "1.2.3.4"}, {"ip": "1.2.3.5"}], None, {("web.example.com", "A", ("1.2.3.4", "1.2.3.5"))}),
        ([{"ip": "2001:DB8::1"}], None, {("web.example.com", "AAAA", ("2001:db8::1",))}),
        ([{"hostname": "LB.Example.NET"}], None, {("web.example.com", "CNAME", ("lb.example.net",))}),
        (
            [{"ip": "1.2.3.4", "hostname": "lb.example.net"}],
            None,
            {("web.example.com", "A", ("1.2.3.4",)), ("web.example.com", "CNAME", ("lb.example.net",))},
        ),
        ([{"ip": "1.2.3.4"}], ["198.51.100.7"], {("web.example.com", "A", ("198.51.100.7",))}),
        ([], None, set()),
    ],
)
def test_load_balancer(lb: list[dict[str, str]], external_ips: list[str] | None, want: set[Any]) -> None:
    spec: dict[str, Any] = {"externalIPs": external_ips} if external_ips else {}
    result = service_endpoints(service(annotations=HOST, lb=lb, **spec))
    assert records(result) == want
    assert result.problems == []


def test_load_balancer_with_two_hostnames_is_an_invalid_cname_reported() -> None:
    svc = service(annotations=HOST, lb=[{"hostname": "a.lb.net"}, {"hostname": "b.lb.net"}])
    result = service_endpoints(svc)
    assert result.endpoints == []
    [problem] = result.problems
    assert problem.field == f"metadata.annotations[{GA}hostname]"
    assert "CNAME" in problem.message


def test_internal_hostname_on_load_balancer_uses_cluster_ip() -> None:
    ann = {GA + "hostname": "web.example.com", ALPHA + "internal-hostname": "web.internal.example.com"}
    result = service_endpoints(service(annotations=ann, lb=[{"ip": "1.2.3.4"}]))
    assert records(result) == {
        ("web.example.com", "A", ("1.2.3.4",)),
        ("web.internal.example.com", "A", ("10.96.0.10",)),
    }


def test_labels_on_every_endpoint() -> None:
    svc = service(annotations=HOST, lb=[{"ip": "1.2.3.4"}], namespace="prod")
    [ep] = service_endpoints(svc).endpoints
    assert ep.labels == {RESOURCE_LABEL: "service/prod/web", CREATED_LABEL: CREATED}
    a, b = service_endpoints(svc | {"metadata": svc["metadata"] | {"annotations": HOST2}}).endpoints
    assert a.labels == ep.labels and a.labels is b.labels  # one dict per object, not per endpoint


def test_no_created_label_without_creation_timestamp() -> None:
    svc = service(annotations=HOST, lb=[{"ip": "1.2.3.4"}])
    del svc["metadata"]["creationTimestamp"]
    [ep] = service_endpoints(svc).endpoints
    assert CREATED_LABEL not in ep.labels


def test_ttl_set_identifier_and_provider_specific_apply_to_all_records() -> None:
    ann = {
        GA + "hostname": "web.example.com,api.example.com",
        GA + "ttl": "5m",
        ALPHA + "set-identifier": "blue",
        ALPHA + "aws-weight": "10",
    }
    result = service_endpoints(service(annotations=ann, lb=[{"ip": "1.2.3.4"}]))
    assert len(result.endpoints) == 2
    for ep in result.endpoints:
        assert (ep.ttl, ep.set_identifier, ep.provider_specific) == (300, "blue", (("aws/weight", "10"),))


# --- ClusterIP -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("publish_internal", "ann", "want"),
    [
        (False, HOST, set()),
        (True, HOST, {("web.example.com", "A", ("10.96.0.10",))}),
        (
            False,
            {GA + "internal-hostname": "web.svc.example.com"},
            {("web.svc.example.com", "A", ("10.96.0.10",))},
        ),
    ],
)
def test_cluster_ip(publish_internal: bool, ann: dict[str, str], want: set[Any]) -> None:
    opts = ServiceOptions(publish_internal=publish_internal)
    assert records(service_endpoints(service(type_="ClusterIP", annotations=ann), opts=opts)) == want


# --- ExternalName ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({"externalName": "backend.example.org."}, ("CNAME", ("backend.example.org",))),
        ({"externalName": "192.0.2.9"}, ("A", ("192.0.2.9",))),
        ({"externalName": "2001:db8::9"}, ("AAAA", ("2001:db8::9",))),
        ({"externalName": "backend.example.org", "externalIPs": ["192.0.2.10"]}, ("A", ("192.0.2.10",))),
    ],
)
def test_external_name(spec: dict[str, Any], want: tuple[str, tuple[str, ...]]) -> None:
    svc = service(type_="ExternalName", annotations=HOST, cluster_ip="", **spec)
    assert records(service_endpoints(svc)) == {("web.example.com", *want)}


# --- NodePort --------------------------------------------------------------------------------------------


def node_port_service(ann: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    ports = [
        {"name": "http", "port": 80, "nodePort": 30080, "protocol": "TCP"},
        {"name": "dns", "port": 53, "nodePort": 30053, "protocol": "UDP"},
        {"name": "none", "port": 9000},
    ]
    return service(type_="NodePort", annotations={**HOST, **(ann or {})}, ports=ports, **spec)


V6 = ServiceOptions(expose_internal_ipv6=True)
CORDONED = {
    **NODES,
    "n2": {**NODES["n2"], "spec": {"unschedulable": True}},
}


# Rows name the external-dns v0.22.0 TestServiceSourceNodePortServices case they mirror.
@pytest.mark.parametrize(
    ("nodes", "access", "opts", "want"),
    [
        # "annotated NodePort services return an endpoint with IP addresses of the cluster's nodes"
        (NODES, None, None, {("A", ("203.0.113.1", "203.0.113.2"))}),
        # "access=public ... external IP addresses of the cluster's nodes if exposeInternalIPv6 is unset"
        (NODES, "public", None, {("A", ("203.0.113.1", "203.0.113.2"))}),
        # "access=public ... public IP addresses of the cluster's nodes if exposeInternalIPv6 is set to true"
        (NODES, "public", V6, {("A", ("203.0.113.1", "203.0.113.2")), ("AAAA", ("fd00::1",))}),
        (NODES, None, V6, {("A", ("203.0.113.1", "203.0.113.2")), ("AAAA", ("fd00::1",))}),
        # "access=private annotation NodePort services return an endpoint with private IP addresses ..."
        (NODES, "private", None, {("A", ("10.0.0.1", "10.0.0.2")), ("AAAA", ("fd00::1",))}),
        # "annotated NodePort services return an endpoint with IP addresses of the private cluster's nodes"
        (PRIVATE_NODES, None, None, {("A", ("10.0.0.1", "10.0.0.2"))}),
        (PRIVATE_NODES, "public", None, set()),
        # "NodePort services ignore unschedulable node" (ExcludeUnschedulable: true, the default)
        (CORDONED, None, None, {("A", ("203.0.113.1",))}),
        (
            CORDONED,
            None,
            ServiceOptions(exclude_unschedulable=False),
            {("A", ("203.0.113.1", "203.0.113.2"))},
        ),
    ],
)
def test_node_port_targets(
    nodes: dict[str, Any], access: str | None, opts: ServiceOptions | None, want: set[Any]
) -> None:
    ann = {ALPHA + "access": access} if access else {}
    result = service_endpoints(node_port_service(ann), nodes=nodes, opts=opts)
    got = {(t, targets) for name, t, targets in records(result) if name == "web.example.com"}
    assert got == want


def test_node_port_local_traffic_policy_leaves_out_unschedulable_nodes() -> None:
    pods = {"default/a": pod("a", node_name="n1"), "default/b": pod("b", node_name="n2")}
    svc = node_port_service(externalTrafficPolicy="Local")
    result = service_endpoints(svc, nodes=CORDONED, pods=pods)
    assert ("web.example.com", "A", ("203.0.113.1",)) in records(result)


def test_node_port_srv_records_one_per_node_port() -> None:
    """external-dns: `_foo._tcp.foo.example.org` → `0 50 30192 foo.example.org.` (target host absolute)."""
    result = service_endpoints(node_port_service(), nodes=NODES)
    srv = {(name, targets) for name, t, targets in records(result) if t == "SRV"}
    assert srv == {
        ("_web._tcp.web.example.com", ("0 50 30080 web.example.com.",)),
        ("_web._udp.web.example.com", ("0 50 30053 web.example.com.",)),
    }


def test_node_port_local_traffic_policy_uses_nodes_with_ready_pods() -> None:
    pods = {
        "default/a": pod("a", node_name="n1"),
        "default/b": pod("b", node_name="n2", ready=False),
        "default/other": pod("other", app="db", node_name="n2"),
    }
    svc = node_port_service(externalTrafficPolicy="Local")
    result = service_endpoints(svc, nodes=NODES, pods=pods)
    assert ("web.example.com", "A", ("203.0.113.1",)) in records(result)


def test_node_port_local_node_ready_if_any_of_its_pods_is() -> None:
    pods = {
        "default/a": pod("a", node_name="n1", ready=False),
        "default/b": pod("b", node_name="n1"),
        "default/c": pod("c", node_name="n2"),
    }
    for order in (pods, dict(reversed(pods.items()))):
        result = service_endpoints(node_port_service(externalTrafficPolicy="Local"), nodes=NODES, pods=order)
        assert ("web.example.com", "A", ("203.0.113.1", "203.0.113.2")) in records(result)


@pytest.mark.parametrize(
    ("pods", "want"),
    [
        # Only terminating ready pods: fall back to the nodes of ready pods.
        ({"default/a": pod("a", node_name="n2", deleting=True)}, ("203.0.113.2",)),
        # No ready pod at all: every node running one.
        ({"default/a": pod("a", node_name="n1", ready=False)}, ("203.0.113.1",)),
        # Nothing running: no node, no address record.
        ({"default/a": pod("a", node_name="n1", phase="Pending")}, None),
    ],
)
def test_node_port_local_fallbacks(pods: dict[str, Any], want: tuple[str, ...] | None) -> None:
    svc = node_port_service(externalTrafficPolicy="Local")
    got = {
        targets for name, t, targets in records(service_endpoints(svc, nodes=NODES, pods=pods)) if t == "A"
    }
    assert got == ({want} if want else set())


# --- headless --------------------------------------------------------------------------------------------


def headless(ann: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return service(type_="ClusterIP", cluster_ip="None", annotations={**HOST, **(ann or {})}, **spec)


HEADLESS_PODS = {
    "default/web-0": pod("web-0", hostname="web-0", node_name="n1", host_ip="10.0.0.1"),
    "default/web-1": pod("web-1", hostname="web-1", node_name="n2", host_ip="10.0.0.2"),
    "default/web-2": pod("web-2", node_name="n2", host_ip="10.0.0.2"),
}
HEADLESS_SLICES = [
    endpoint_slice("web", [("172.16.0.1", "web-0", True), ("172.16.0.2", "web-1", None)]),
    endpoint_slice("web", [("172.16.0.3", "web-2", True), ("172.16.0.4", "web-3", True)], name="web-2nd"),
    endpoint_slice("other", [("172.16.9.9", "web-0", True)]),
    endpoint_slice("web", [("172.16.8.8", "web-0", True)], namespace="elsewhere"),
]


def test_headless_one_record_with_all_pods_plus_one_per_pod_hostname() -> None:
    result = service_endpoints(headless(), slices=HEADLESS_SLICES, pods=HEADLESS_PODS)
    assert records(result) == {
        ("web.example.com", "A", ("172.16.0.1", "172.16.0.2", "172.16.0.3")),
        ("web-0.web.example.com", "A", ("172.16.0.1",)),
        ("web-1.web.example.com", "A", ("172.16.0.2",)),
    }
    assert result.problems == []  # web-3 is not in the cache: skipped quietly


@pytest.mark.parametrize(
    ("spec", "opts", "want"),
    [
        ({}, ServiceOptions(), ("172.16.0.1",)),
        ({"publishNotReadyAddresses": True}, ServiceOptions(), ("172.16.0.1", "172.16.0.5")),
        ({}, ServiceOptions(always_publish_not_ready_addresses=True), ("172.16.0.1", "172.16.0.5")),
    ],
)
def test_headless_not_ready_endpoints(
    spec: dict[str, Any], opts: ServiceOptions, want: tuple[str, ...]
) -> None:
    slices = [endpoint_slice("web", [("172.16.0.1", "web-0", True), ("172.16.0.5", "web-1", False)])]
    result = service_endpoints(headless(**spec), slices=slices, pods=HEADLESS_PODS, opts=opts)
    assert ("web.example.com", "A", want) in records(result)


def test_headless_host_ip() -> None:
    for svc, opts in [
        (headless({GA + "endpoints-type": "HostIP"}), ServiceOptions()),
        (headless(), ServiceOptions(publish_host_ip=True)),
    ]:
        result = service_endpoints(svc, slices=HEADLESS_SLICES, pods=HEADLESS_PODS, opts=opts)
        assert ("web.example.com", "A", ("10.0.0.1", "10.0.0.2")) in records(result)
        assert ("web-1.web.example.com", "A", ("10.0.0.2",)) in records(result)


@pytest.mark.parametrize(
    ("opts", "want"),
    [
        (ServiceOptions(), {("A", ("203.0.113.1", "203.0.113.2"))}),
        (
            ServiceOptions(expose_internal_ipv6=True),
            {("A", ("203.0.113.1", "203.0.113.2")), ("AAAA", ("fd00::1",))},
        ),
    ],
)
def test_headless_node_external_ip(opts: ServiceOptions, want: set[Any]) -> None:
    svc = headless({ALPHA + "endpoints-type": "NodeExternalIP"})
    result = service_endpoints(svc, nodes=NODES, slices=HEADLESS_SLICES, pods=HEADLESS_PODS, opts=opts)
    assert {(t, targets) for name, t, targets in records(result) if name == "web.example.com"} == want


def test_headless_node_external_ip_with_missing_node_gives_up_and_reports() -> None:
    svc = headless({ALPHA + "endpoints-type": "NodeExternalIP"})
    nodes = {"n1": NODES["n1"]}
    result = service_endpoints(svc, nodes=nodes, slices=HEADLESS_SLICES, pods=HEADLESS_PODS)
    assert result.endpoints == []
    [problem] = result.problems
    assert "n2" in problem.message


def test_headless_pod_target_annotation_replaces_its_address() -> None:
    pods = dict(HEADLESS_PODS)
    pods["default/web-0"] = pod("web-0", hostname="web-0", annotations={ALPHA + "target": "pod0.example.net"})
    result = service_endpoints(headless(), slices=HEADLESS_SLICES[:1], pods=pods)
    assert records(result) == {
        ("web.example.com", "A", ("172.16.0.2",)),
        ("web.example.com", "CNAME", ("pod0.example.net",)),
        ("web-0.web.example.com", "CNAME", ("pod0.example.net",)),
        ("web-1.web.example.com", "A", ("172.16.0.2",)),
    }


def test_headless_uses_only_the_first_address_of_an_endpoint() -> None:
    s = endpoint_slice("web", [("172.16.0.1", "web-2", True)])
    s["endpoints"][0]["addresses"].append("172.16.0.99")
    assert records(service_endpoints(headless(), slices=[s], pods=HEADLESS_PODS)) == {
        ("web.example.com", "A", ("172.16.0.1",))
    }


def test_headless_ipv6_and_fqdn_slices() -> None:
    slices = [
        endpoint_slice("web", [("fd00::10", "web-2", True)], address_type="IPv6"),
        endpoint_slice("web", [("pod.example.net", "web-2", True)], address_type="FQDN", name="fqdn"),
    ]
    result = service_endpoints(headless(), slices=slices, pods=HEADLESS_PODS)
    assert records(result) == {("web.example.com", "AAAA", ("fd00::10",))}


def test_headless_skips_endpoints_that_are_not_pods_or_not_selected() -> None:
    s = endpoint_slice("web", [("172.16.0.1", "web-0", True), ("172.16.0.7", "db-0", True)])
    s["endpoints"][0]["targetRef"]["kind"] = "Node"
    pods = {**HEADLESS_PODS, "default/db-0": pod("db-0", app="db")}
    assert records(service_endpoints(headless(), slices=[s], pods=pods)) == set()


# --- annotations that change everything ------------------------------------------------------------------


@pytest.mark.parametrize("type_", ["LoadBalancer", "ClusterIP", "NodePort", "ExternalName"])
def test_target_annotation_replaces_derived_targets(type_: str) -> None:
    ann = {**HOST, ALPHA + "target": "192.0.2.1, edge.example.net."}
    svc = service(
        type_=type_, annotations=ann, lb=[{"ip": "1.2.3.4"}], ports=[{"port": 80, "nodePort": 30080}]
    )
    assert records(service_endpoints(svc, nodes=NODES)) == {
        ("web.example.com", "A", ("192.0.2.1",)),
        ("web.example.com", "CNAME", ("edge.example.net",)),
    }


def test_target_annotation_on_headless_skips_endpoint_slices() -> None:
    svc = headless({GA + "target": "192.0.2.1"})
    result = service_endpoints(svc, slices=HEADLESS_SLICES, pods=HEADLESS_PODS)
    assert records(result) == {("web.example.com", "A", ("192.0.2.1",))}


@pytest.mark.parametrize(("controller", "published"), [("dns-controller", True), ("someone-else", False)])
def test_controller_annotation(controller: str, published: bool) -> None:
    svc = service(annotations={**HOST, ALPHA + "controller": controller}, lb=[{"ip": "1.2.3.4"}])
    assert bool(service_endpoints(svc).endpoints) is published


def test_service_type_filter_and_ignore_hostname_annotation() -> None:
    svc = service(annotations={**HOST, GA + "ttl": "bogus"}, lb=[{"ip": "1.2.3.4"}])
    assert service_endpoints(svc, opts=ServiceOptions(service_types=("NodePort",))).endpoints == []
    assert service_endpoints(svc, opts=ServiceOptions(service_types=("LoadBalancer",))).endpoints
    ignored = service_endpoints(svc, common=SourceOptions(ignore_hostname_annotation=True))
    assert ignored.endpoints == []  # (external-dns refuses the flag without --fqdn-template)


def test_unknown_service_type_filter_is_a_configuration_error() -> None:
    """external-dns v0.22.0 TestNewServiceSourceWithServiceTypeFilters_Unsupported."""
    with pytest.raises(ValueError, match="--service-type-filter: unsupported service type Headless"):
        ServiceOptions(service_types=("Headless",))


def test_invalid_hostname_is_reported_and_others_kept() -> None:
    ann = {GA + "hostname": "good.example.com,bad_-.example.com,-x.example.com", GA + "ttl": "forever"}
    result = service_endpoints(service(annotations=ann, lb=[{"ip": "1.2.3.4"}]))
    assert records(result) == {("good.example.com", "A", ("1.2.3.4",))}
    fields = sorted(p.field for p in result.problems)
    assert fields == [f"metadata.annotations[{GA}hostname]"] * 2 + [f"metadata.annotations[{GA}ttl]"]
    assert all(
        p.ref.kind == "Service" and p.ref.name == "web" and p.ref.uid == "uid-web" for p in result.problems
    )


def test_no_hostname_no_endpoints() -> None:
    assert service_endpoints(service(lb=[{"ip": "1.2.3.4"}])).endpoints == []


# --- dependencies ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("svc", "want"),
    [
        (service(annotations=HOST), ServiceDependencies()),
        (service(type_="NodePort"), ServiceDependencies()),
        (node_port_service(), ServiceDependencies(nodes=True)),
        (node_port_service(externalTrafficPolicy="Local"), ServiceDependencies(nodes=True, pods=True)),
        (node_port_service({GA + "target": "1.2.3.4"}), ServiceDependencies()),
        (node_port_service({GA + "controller": "other"}), ServiceDependencies()),
        (headless(), ServiceDependencies(endpoint_slices=True, pods=True)),
        (
            headless({GA + "endpoints-type": "NodeExternalIP"}),
            ServiceDependencies(nodes=True, endpoint_slices=True, pods=True),
        ),
    ],
)
def test_dependencies(svc: dict[str, Any], want: ServiceDependencies) -> None:
    assert service_dependencies(svc, ServiceOptions()) == want


def test_slice_service() -> None:
    assert slice_service(endpoint_slice("web", [], namespace="prod")) == ("prod", "web")
    assert slice_service({"metadata": {"name": "x"}}) is None
