"""Builders of the objects external-dns's Istio tests make (fakeIngressGatewayService, fakeIngress,
fakeGatewayConfig, fakeVirtualServiceConfig in source/istio_*_test.go, v0.22.0), as Kubernetes JSON;
`Cluster`, which translates one Istio kind's objects the way external-dns's Endpoints() reads a fake
clientset: --namespace narrowing every list, the label and annotation filters on the kind's own objects,
and the endpoints of all objects merged by name and type; and `Case`, one row of a table of external-dns's
cases, with `check`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from shardsync.kube.objects import object_key
from shardsync.records.endpoint import Endpoint
from shardsync.sources.filters import ObjectFilter
from shardsync.sources.ingress import INGRESSES
from shardsync.sources.istio import GATEWAYS
from shardsync.sources.kind import SourceContext
from shardsync.sources.options import SourceOptions
from shardsync.sources.result import INVALID_REASON, Problem
from shardsync.sources.service import SERVICES
from shardsync.sources.table import SOURCES
from tests.sources.fake_kube import FakeKube

GA = "external-dns.kubernetes.io/"
HOSTNAME, TARGET, TTL, CONTROLLER = GA + "hostname", GA + "target", GA + "ttl", GA + "controller"
INGRESS = GA + "ingress"  # external-dns's IstioGatewayIngressSource
ISTIO = "networking.istio.io/v1"
# The ingress gateway Service's selector of the GWSelectorMatchServiceSelector tests.
SELECTOR = {
    "app": "demo",
    "env": "prod",
    "team": "devops",
    "version": "v1",
    "release": "stable",
    "track": "daily",
    "tier": "backend",
}

Obj = dict[str, Any]
Records = dict[tuple[str, str], tuple[str, ...]]


def _meta(
    name: str, namespace: str, annotations: dict[str, str] | None, labels: dict[str, str] | None
) -> Obj:
    out: Obj = {"name": name, "namespace": namespace}
    if annotations:
        out["annotations"] = annotations
    if labels:
        out["labels"] = labels
    return out


def lb_service(
    name: str = "istio-ingressgateway",
    namespace: str = "default",
    ips: Sequence[str] = (),
    hostnames: Sequence[str] = (),
    external_ips: Sequence[str] = (),
    selector: dict[str, str] | None = None,
) -> Obj:
    """fakeIngressGatewayService: load-balancer status entries of its ips, then of its hostnames."""
    lb = [{"ip": ip} for ip in ips] + [{"hostname": h} for h in hostnames]
    spec: Obj = {"type": "LoadBalancer"}
    if selector is not None:
        spec["selector"] = selector
    if external_ips:
        spec["externalIPs"] = list(external_ips)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(name, namespace, None, None),
        "spec": spec,
        "status": {"loadBalancer": {"ingress": lb}},
    }


def lb_ingress(
    name: str, namespace: str = "default", ips: Sequence[str] = (), hostnames: Sequence[str] = ()
) -> Obj:
    """fakeIngress, as the Istio tests use it: only its load-balancer status matters."""
    lb = [{"ip": ip} for ip in ips] + [{"hostname": h} for h in hostnames]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": _meta(name, namespace, None, None),
        "spec": {"rules": []},
        "status": {"loadBalancer": {"ingress": lb}},
    }


def gateway(
    name: str = "gw",
    namespace: str = "default",
    hosts: Sequence[Sequence[str]] = (),
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    selector: dict[str, str] | None = None,
) -> Obj:
    """fakeGatewayConfig: one server per entry of `hosts`."""
    spec: Obj = {"servers": [{"hosts": list(h)} for h in hosts]}
    if selector is not None:
        spec["selector"] = selector
    return {
        "apiVersion": ISTIO,
        "kind": "Gateway",
        "metadata": _meta(name, namespace, annotations, labels),
        "spec": spec,
    }


def virtualservice(
    name: str = "vs",
    namespace: str = "default",
    gateways: Sequence[str] = (),
    hosts: Sequence[str] = (),
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    export_to: str = "",
) -> Obj:
    """fakeVirtualServiceConfig."""
    spec: Obj = {"gateways": list(gateways), "hosts": list(hosts)}
    if export_to:
        spec["exportTo"] = [export_to]
    return {
        "apiVersion": ISTIO,
        "kind": "VirtualService",
        "metadata": _meta(name, namespace, annotations, labels),
        "spec": spec,
    }


@dataclass
class Cluster:
    """The objects of one external-dns test case, and the flags it runs with."""

    services: list[Obj] = field(default_factory=list)
    ingresses: list[Obj] = field(default_factory=list)
    gateways: list[Obj] = field(default_factory=list)
    virtualservices: list[Obj] = field(default_factory=list)
    namespace: str = ""
    label_filter: str = ""
    annotation_filter: str = ""
    common: SourceOptions = field(default_factory=SourceOptions)

    def _listed(self, objs: list[Obj]) -> dict[str, Obj]:
        return {
            object_key(o): o
            for o in objs
            if not self.namespace or o["metadata"]["namespace"] == self.namespace
        }

    def translate(self, kind: str) -> tuple[list[Endpoint], list[Problem]]:
        """Every endpoint and problem of the kind's objects (`istio-gateway` or `istio-virtualservice`)."""
        caches = {
            SERVICES: self._listed(self.services),
            INGRESSES: self._listed(self.ingresses),
            GATEWAYS: self._listed(self.gateways),
        }
        context = SourceContext(None, lambda r: caches[r], FakeKube(), lambda: True, common=self.common)
        translator = SOURCES[kind].start(context)
        chosen = ObjectFilter.parse(self.namespace, self.label_filter, self.annotation_filter)
        own = self.gateways if kind == "istio-gateway" else self.virtualservices
        endpoints: list[Endpoint] = []
        problems: list[Problem] = []
        for obj in own:
            if chosen.matches(obj):
                result = translator.translate(object_key(obj), obj)
                assert result is not None
                endpoints += result.endpoints
                problems += result.problems
        return endpoints, problems

    def records(self, kind: str) -> Records:
        """The kind's records merged over its objects (external-dns's MergeEndpoints): name and type →
        sorted targets."""
        merged: dict[tuple[str, str], set[str]] = {}
        for ep in self.translate(kind)[0]:
            merged.setdefault((ep.dns_name, ep.record_type), set()).update(ep.targets)
        return {key: tuple(sorted(targets)) for key, targets in merged.items()}


@dataclass
class Case:
    """One of external-dns's test cases, titled as external-dns titles it."""

    title: str
    cluster: Cluster
    want: Records
    reasons: list[str] = field(default_factory=list)  # the problems' Event reasons, in order
    # external-dns publishes these CNAMEs with several targets; shardsync refuses such a CNAME where it is
    # read (README, Differences: "A CNAME with several targets is refused") and reports it on the object.
    two_target_cnames: tuple[str, ...] = ()
    differs: str = ""  # any other way external-dns's expectation is not ours, and why


def a(*targets: str) -> tuple[str, ...]:
    """An RRset's targets as `Cluster.records` gives them."""
    return tuple(sorted(targets))


def check(case: Case, kind: str) -> None:
    """The case's records and problems are as it says (each refused CNAME named by its problem)."""
    assert case.cluster.records(kind) == case.want
    problems = case.cluster.translate(kind)[1]
    assert [p.reason for p in problems] == case.reasons
    refused = [p for p in problems if p.reason == INVALID_REASON]
    assert all("a CNAME has exactly one target, got 2" in p.message for p in refused)
    assert sorted(p.message.split(":")[1].strip() for p in refused) == sorted(case.two_target_cnames)
