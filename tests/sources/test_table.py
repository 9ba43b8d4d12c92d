"""The source table: one line per kind, and what the rest of shardsync reads from it (the `--source` choices,
the kinds' flag groups, the Event reference of an endpoint's `resource` label)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import pytest

from shardsync.flags import ConfigError
from shardsync.kube.objects import ObjectRef
from shardsync.replica import config
from shardsync.sources import crd, gateway, ingress, istio, node, pod, service
from shardsync.sources import table as source_table
from shardsync.sources.kind import SourceContext
from shardsync.sources.table import SHARED_FLAGS, SOURCES, event_ref, flag_groups

from .fake_kube import FakeKube
from .objects import dnsendpoint
from .objects import ingress as ingress_obj
from .objects import pod as pod_obj
from .objects import service as service_obj

HOSTNAME = "external-dns.kubernetes.io/hostname"
TARGET = {"external-dns.kubernetes.io/target": "192.0.2.1"}
LB = [{"ip": "192.0.2.1"}]
META = {"name": "web", "namespace": "default", "annotations": TARGET}
# One object of each kind, giving an endpoint and a problem (an invalid name).
SAMPLES: dict[str, dict[str, Any]] = {
    "service": service_obj(annotations={HOSTNAME: "web.ex.com,bad..ex.com"}, lb=LB),
    "ingress": ingress_obj(rules=["a.ex.com", "x..ex.com"], lb=LB),
    "crd": dnsendpoint(
        [{"dnsName": "c.ex.com", "recordType": "A", "targets": ["1.2.3.4"]}, {"dnsName": "y..ex.com"}]
    ),
    "istio-gateway": {"metadata": META, "spec": {"servers": [{"hosts": ["g.ex.com", "ns/z..ex.com"]}]}},
    "istio-virtualservice": {"metadata": META, "spec": {"hosts": ["v.ex.com", "w..ex.com"]}},
    # A Node named as a DNS name with a TTL annotation that is no TTL; a Pod with a name that is no DNS name.
    "node": {
        "metadata": {"name": "n1.ex.com", "annotations": {"external-dns.kubernetes.io/ttl": "soon"}},
        "status": {"addresses": [{"type": "ExternalIP", "address": "192.0.2.7"}]},
    },
    "pod": pod_obj(
        "web-0", annotations={"external-dns.kubernetes.io/internal-hostname": "p.ex.com,bad..ex.com"}
    ),
}
SAMPLES["pod"]["status"]["podIP"] = "10.0.0.7"


def test_one_line_per_kind_and_the_source_flag_offers_exactly_them() -> None:
    assert list(SOURCES) == [
        "service",
        "ingress",
        "crd",
        "gateway-httproute",
        "gateway-grpcroute",
        "gateway-tlsroute",
        "gateway-tcproute",
        "gateway-udproute",
        "istio-gateway",
        "istio-virtualservice",
        "node",
        "pod",
    ]
    assert [kind.name for kind in SOURCES.values()] == list(SOURCES)
    assert tuple(SOURCES) == config.SOURCES
    [source_flag] = [f for f in config.FLAGS if f.name == "sources"]
    assert tuple(source_flag.choices or ()) == tuple(SOURCES)
    assert SOURCES["service"].watches == (
        service.SERVICES,
        service.ENDPOINT_SLICES,
        service.PODS,
        service.NODES,
    )
    assert SOURCES["ingress"].watches == (ingress.INGRESSES,)
    assert SOURCES["crd"].watches == (crd.DNS_ENDPOINTS,) and SOURCES["crd"].crd is not None
    for route in (gateway.HTTP, gateway.GRPC, gateway.TLS, gateway.TCP, gateway.UDP):
        kind = SOURCES[f"gateway-{route.label}"]
        assert kind.watches == (route.resource, gateway.GATEWAYS, gateway.NAMESPACES)
        assert kind.crd is not None and kind.resource_kind == route.label
    shared = (service.SERVICES, ingress.INGRESSES)
    assert SOURCES["istio-gateway"].watches == (istio.GATEWAYS, *shared)
    assert SOURCES["istio-virtualservice"].watches == (istio.VIRTUAL_SERVICES, istio.GATEWAYS, *shared)
    assert [SOURCES[n].resource_kind for n in ("istio-gateway", "istio-virtualservice")] == [
        "gateway",
        "virtualservice",
    ]
    assert SOURCES["node"].watches == (service.NODES,)
    assert SOURCES["pod"].watches == (service.PODS, service.NODES)


@pytest.mark.parametrize("name", list(SAMPLES))
def test_a_kinds_translator_labels_and_refers_to_its_objects_as_the_table_says(name: str) -> None:
    kind = SOURCES[name]
    context = SourceContext(kind.default_options(), lambda r: {}, FakeKube(), lambda: True)
    result = kind.start(context).translate("default/web", SAMPLES[name])
    assert result is not None and result.endpoints and result.problems
    assert {ep.labels["resource"].split("/")[0] for ep in result.endpoints} == {kind.resource_kind}
    for problem in result.problems:
        assert (problem.ref.kind, problem.ref.api_version) == (kind.resource.kind, kind.resource.api_version)
        assert event_ref(problem.ref.resource) == dataclasses.replace(problem.ref, uid="")


@pytest.mark.parametrize(
    ("label", "want"),
    [
        ("service/default/web", ObjectRef("Service", "default", "web", "", "v1", "service")),
        ("ingress/web/app", ObjectRef("Ingress", "web", "app", "", "networking.k8s.io/v1", "ingress")),
        ("crd/dns/r", ObjectRef("DNSEndpoint", "dns", "r", "", "externaldns.k8s.io/v1alpha1", "crd")),
        ("gateway/in/gw", ObjectRef("Gateway", "in", "gw", "", "networking.istio.io/v1", "gateway")),
        (
            "virtualservice/a/vs",
            ObjectRef("VirtualService", "a", "vs", "", "networking.istio.io/v1", "virtualservice"),
        ),
        ("pod/default/p", ObjectRef("Pod", "default", "p", "", "v1", "pod")),
        ("node/n1.ex.com", ObjectRef("Node", "", "n1.ex.com", "", "v1", "node")),  # cluster-scoped
        ("httpproxy/ns/p", ObjectRef("httpproxy", "ns", "p", "", "v1", "httpproxy")),  # no source of ours
        ("service/web", None),
        ("node/ns/n1", ObjectRef("node", "ns", "n1", "", "v1", "node")),  # a Node has no namespace
        ("a/b/c/d", None),
        ("", None),
    ],
)
def test_event_ref_of_a_resource_label(label: str, want: ObjectRef | None) -> None:
    assert event_ref(label) == want


def test_kinds_sharing_a_flag_group_declare_it_once_after_the_providers() -> None:
    twin = dataclasses.replace(SOURCES["ingress"], name="ingress-twin")
    # The five gateway kinds share one group; the node kind shares the service kind's.
    expected = (SHARED_FLAGS, service.FLAGS, ingress.FLAGS, gateway.FLAGS, pod.FLAGS)
    assert flag_groups({**SOURCES, twin.name: twin}) == expected
    groups = config.flag_groups()
    assert groups[-5:] == expected
    assert node.KIND.flags is service.FLAGS
    assert [g.name for g in groups[: -len(flag_groups())]] == [
        "core",
        "aws",
        "azure",
        "cloudflare",
        "fake",
        "google",
        "pdns",
        "rfc2136",
        "webhook",
    ]


def parse(argv: list[str]) -> config.Settings:
    env = {"POD_NAME": "shardsync-0", "SHARDSYNC_FAKE_ZONE": "ex.com"}
    parser = argparse.ArgumentParser()
    config.configure(parser, env)
    return config.settings_from_args(parser.parse_args(argv), env)


def test_source_flags_keep_their_names_and_fill_their_kinds_options() -> None:
    s = parse(["--publish-internal-services", "--ingress-class=public", "--ingress-class", "internal"])
    assert s.options(service.FLAGS) == service.ServiceOptions(publish_internal=True)
    assert s.options(ingress.FLAGS) == ingress.IngressOptions(ingress_class_names=("public", "internal"))
    assert parse([]).options(service.FLAGS) == service.ServiceOptions()


def test_only_the_chosen_sources_groups_are_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(options: Any) -> None:
        raise ConfigError("--publish-internal-services: refused")

    strict = dataclasses.replace(service.KIND, flags=dataclasses.replace(service.FLAGS, validate=refuse))
    monkeypatch.setitem(source_table.SOURCES, "service", strict)
    assert parse(["--source=ingress"]).sources == ("ingress",)
    with pytest.raises(ConfigError, match="refused"):
        parse(["--source=service"])
