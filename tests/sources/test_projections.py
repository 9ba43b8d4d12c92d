"""The slim copies informers keep (sources.projections): translating them gives exactly what translating the
full objects gives, for every Service shape that reads Pods, Nodes or EndpointSlices."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from shardsync.kube import slim_json
from shardsync.sources import projections
from shardsync.sources.options import SourceOptions
from shardsync.sources.service import ServiceOptions, service_endpoints

from .objects import ALPHA, GA, endpoint_slice, node, pod, records, service

HOST = {GA + "hostname": "web.example.com"}


def noisy(obj: dict[str, Any]) -> dict[str, Any]:
    """The object padded with what a real API server sends and translation never reads."""
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    meta["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    meta["resourceVersion"] = "42"
    meta.setdefault("annotations", {})[projections.LAST_APPLIED] = '{"big": "' + "x" * 2000 + '"}'
    meta["annotations"]["prometheus.io/scrape"] = "true"
    meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs"}]
    out.setdefault("spec", {})["containers"] = [{"name": "c", "image": "i", "env": [{"name": "A"}] * 20}]
    out.setdefault("status", {})["containerStatuses"] = [{"name": "c", "ready": True}]
    return out


PODS = {
    "default/web-0": pod("web-0", hostname="web-0", node_name="n1", host_ip="10.0.0.1"),
    "default/web-1": pod("web-1", node_name="n2", host_ip="10.0.0.2", ready=False),
    "default/web-2": pod("web-2", node_name="n2", annotations={ALPHA + "target": "pod2.example.net"}),
    "default/web-3": pod("web-3", node_name="n1", deleting=True),
}
NODES = {
    "n1": node("n1", ("InternalIP", "10.0.0.1"), ("ExternalIP", "203.0.113.1"), ("InternalIP", "fd00::1")),
    "n2": {**node("n2", ("ExternalIP", "203.0.113.2")), "spec": {"unschedulable": True}},
}
SLICES = [
    endpoint_slice(
        "web",
        [("172.16.0.1", "web-0", True), ("172.16.0.2", "web-1", False), ("172.16.0.3", "web-2", None)],
    ),
]
PORTS = [{"name": "http", "port": 80, "nodePort": 30080, "protocol": "TCP"}]


@pytest.mark.parametrize(
    ("svc", "opts"),
    [
        (service(type_="ClusterIP", cluster_ip="None", annotations=HOST), ServiceOptions()),
        (
            service(type_="ClusterIP", cluster_ip="None", annotations=HOST),
            ServiceOptions(publish_host_ip=True),
        ),
        (
            service(
                type_="ClusterIP",
                cluster_ip="None",
                annotations={**HOST, ALPHA + "endpoints-type": "NodeExternalIP"},
            ),
            ServiceOptions(expose_internal_ipv6=True),
        ),
        (
            service(type_="ClusterIP", cluster_ip="None", annotations=HOST, publishNotReadyAddresses=True),
            ServiceOptions(),
        ),
        (service(type_="NodePort", annotations=HOST, ports=PORTS), ServiceOptions()),
        (
            service(type_="NodePort", annotations=HOST, ports=PORTS, externalTrafficPolicy="Local"),
            ServiceOptions(exclude_unschedulable=False),
        ),
        (
            service(annotations=HOST, lb=[{"ip": "192.0.2.7"}, {"hostname": "lb.example.net"}]),
            ServiceOptions(),
        ),
        (service(annotations=HOST, externalIPs=["192.0.2.9"]), ServiceOptions()),
        (
            service(type_="ClusterIP", annotations={GA + "internal-hostname": "in.example.com"}),
            ServiceOptions(),
        ),
        (service(type_="ClusterIP", annotations=HOST), ServiceOptions(publish_internal=True)),
        (service(type_="ExternalName", annotations=HOST, externalName="up.example.net"), ServiceOptions()),
    ],
)
@pytest.mark.parametrize("own", [projections.without_bookkeeping, projections.service])
def test_translation_of_slim_objects_equals_that_of_full_ones(
    svc: dict[str, Any], opts: ServiceOptions, own: projections.Projection
) -> None:
    svc = copy.deepcopy(svc)
    svc["spec"] |= {
        "clusterIPs": [svc["spec"]["clusterIP"]],
        "ipFamilies": ["IPv4"],
        "sessionAffinity": "None",
    }
    svc["metadata"]["uid"] = "u-1"
    svc["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    full_pods = {k: noisy(v) for k, v in PODS.items()}
    full_nodes = {k: noisy(v) for k, v in NODES.items()}
    full_slices = [noisy(s) for s in SLICES]
    full = service_endpoints(noisy(svc), full_nodes, full_slices, full_pods, opts, SourceOptions())
    slim = service_endpoints(
        own(noisy(svc)),
        {k: projections.node(v) for k, v in full_nodes.items()},
        [projections.endpoint_slice(s) for s in full_slices],
        {k: projections.pod(v) for k, v in full_pods.items()},
        opts,
        SourceOptions(),
    )
    assert records(full)  # the case publishes something
    assert records(slim) == records(full)
    assert slim.endpoints == full.endpoints  # labels (resource, creation time) included
    assert slim.problems == full.problems


def test_projections_keep_identity_and_drop_the_rest() -> None:
    full = noisy(PODS["default/web-2"])
    slim = projections.pod(full)
    assert slim["metadata"] == {
        "name": "web-2",
        "namespace": "default",
        "resourceVersion": "42",
        "labels": {"app": "web"},
        "annotations": {ALPHA + "target": "pod2.example.net"},
    }
    assert "containers" not in slim["spec"] and "containerStatuses" not in slim["status"]
    own = projections.without_bookkeeping(full)
    assert "managedFields" not in own["metadata"]
    assert projections.LAST_APPLIED not in own["metadata"]["annotations"]
    assert own["spec"]["containers"] == full["spec"]["containers"]  # a --fqdn-template may read any field


def test_the_untemplated_service_projection_keeps_what_the_service_kind_reads() -> None:
    full = noisy(service(annotations=HOST, lb=[{"ip": "192.0.2.7"}], ports=PORTS))
    full["spec"] |= {"clusterIPs": ["10.96.0.10"], "ipFamilies": ["IPv4"], "sessionAffinity": "None"}
    slim = projections.service(full)
    assert set(slim) == {"apiVersion", "metadata", "spec", "status"}
    assert set(slim["spec"]) == {"type", "clusterIP", "selector", "ports"}
    assert slim["status"] == {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}
    assert "managedFields" not in slim["metadata"] and slim["metadata"]["annotations"] == {
        **HOST,
        "prometheus.io/scrape": "true",  # --annotation-filter and the annotation size limit read any
    }


def test_slim_copies_share_the_values_many_objects_repeat() -> None:
    a, b = (projections.pod(noisy(PODS[k])) for k in ("default/web-0", "default/web-2"))
    assert a["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    assert a["status"]["conditions"] is b["status"]["conditions"]
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    eps = projections.endpoint_slice(noisy(SLICES[0]))["endpoints"]
    assert eps[0]["conditions"] == {"ready": True} and "conditions" not in eps[2]
    assert a["metadata"]["labels"] == {"app": "web"}
    assert a["metadata"]["labels"] is b["metadata"]["labels"]  # a ReplicaSet's Pods: one labels dict
    one, two = (projections.service(noisy(service(n, annotations=HOST, ports=PORTS))) for n in "ab")
    assert one["spec"]["ports"] == PORTS and one["spec"]["ports"] is two["spec"]["ports"]
    for obj in (one, two):  # as the API server sends them: each decoded string its own copy
        obj["metadata"]["creationTimestamp"] = "".join(["2026-01-01T00:00:00", "Z"])
        obj["apiVersion"] = "".join(["v", "1"])
    one, two = (projections.service(obj) for obj in (one, two))
    assert one["apiVersion"] is two["apiVersion"]
    assert one["metadata"]["creationTimestamp"] is two["metadata"]["creationTimestamp"]


def test_only_equal_values_of_equal_types_are_shared() -> None:
    one = projections._shared({"p": 1})
    for other in ({"p": True}, {"p": 1.0}, {"p": [1]}, [{"p": 1}], [["p", 1]]):
        assert projections._shared(other) is other  # equal in Python, or alike, but not the same JSON
    assert projections._shared({"p": 1}) is one
    odd = {"when": {1, 2}}  # not JSON: kept as it is
    assert projections._shared(odd) is odd and projections._shared({"when": {1, 2}}) is not odd


def test_the_pod_kinds_copy_covers_the_service_kinds_so_one_informer_serves_both() -> None:
    full = noisy(PODS["default/web-2"])
    full["spec"]["hostNetwork"] = True
    full["status"]["podIP"] = "10.1.0.2"
    narrow, wide = projections.pod(full), projections.pod_source(full)
    # Everything the service kind reads is there, as it keeps it; and what the pod kind reads besides.
    assert all(wide[part][k] == v for part, fields in narrow.items() for k, v in fields.items())
    assert wide["spec"]["hostNetwork"] is True and wide["status"]["podIP"] == "10.1.0.2"
    assert {"uid", "creationTimestamp"} <= set(wide["metadata"]) and "hostNetwork" not in narrow["spec"]
    cover = projections.covering
    assert cover(projections.pod, projections.pod_source) is projections.pod_source
    assert cover(projections.pod_source, projections.pod) is projections.pod_source
    assert cover(projections.node, projections.node_source) is projections.node_source
    assert cover(projections.pod, projections.without_bookkeeping) is projections.without_bookkeeping
    assert cover(projections.pod, projections.node) is None  # neither keeps the other's: whole
    assert cover(None, projections.pod) is None and cover(projections.pod, projections.pod) is projections.pod


def test_with_annotations_keeps_every_annotation_for_the_annotation_filter() -> None:
    full = noisy(PODS["default/web-2"])
    kept = projections.with_annotations(projections.pod_source)(full)
    assert kept["metadata"]["annotations"] == {
        ALPHA + "target": "pod2.example.net",
        "prometheus.io/scrape": "true",
    }
    assert projections.with_annotations(projections.pod_source) is projections.with_annotations(
        projections.pod_source
    )
    assert projections.with_annotations(projections.service) is projections.service  # keeps them already
    # It covers what it wraps, and is decoded to the same fields (shardsync.kube.slim_json).
    wrapped = projections.with_annotations(projections.pod_source)
    assert projections.covering(projections.pod, wrapped) is wrapped
    assert slim_json.decoder_for(wrapped) is slim_json.decoder_for(projections.pod_source) is not None
