"""The gateway source kinds' translation (sources.gateway.route_endpoints), one table of cases mirroring
external-dns's gateway_httproute_test.go (and its TLS/TCP/UDP/GRPC siblings), written in our own terms:
hostname intersection, wildcards, allowedRoutes, accepted parents, section names and ports, annotations,
several Gateways, the --gateway-* flags."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from shardsync.kube.objects import object_key
from shardsync.records.endpoint import RESOURCE_LABEL
from shardsync.sources import gateway as gw
from shardsync.sources.kind import SourceContext
from shardsync.sources.options import SourceOptions
from shardsync.sources.table import SOURCES, event_ref
from tests.sources.fake_kube import FakeKube
from tests.sources.gateway_objects import ALL, gateway, listener, namespace, parent, route

HOST = "external-dns.kubernetes.io/hostname"
SOURCE = "external-dns.kubernetes.io/gateway-hostname-source"
TARGET = "external-dns.alpha.kubernetes.io/target"

Records = dict[tuple[str, str], tuple[str, ...]]


@dataclass
class Case:
    title: str
    route: dict[str, Any]
    gateways: list[dict[str, Any]]
    want: Records
    options: gw.GatewayOptions = field(default_factory=gw.GatewayOptions)
    common: SourceOptions = field(default_factory=SourceOptions)
    namespaces: list[dict[str, Any]] = field(default_factory=lambda: [namespace("default")])
    kind: gw.RouteKind = gw.HTTP
    problems: int = 0


def a(*targets: str) -> tuple[str, ...]:
    return targets


TWO_GATEWAYS = [
    gateway("gateway-name", "gateway-namespace", addresses=("1.2.3.4",)),
    gateway("not-gateway-name", "gateway-namespace", addresses=("2.3.4.5",)),
]
BOTH = (parent("gateway-name", "gateway-namespace"), parent("not-gateway-name", "gateway-namespace"))
APPS = [namespace("gateway-namespace"), namespace("route-namespace")]

CASES = [
    Case(
        "gateway name keeps only that Gateway",
        route("test", "route-namespace", ("test.example.internal",), BOTH),
        TWO_GATEWAYS,
        {("test.example.internal", "A"): a("1.2.3.4")},
        options=gw.GatewayOptions(gateway_name="gateway-name"),
        namespaces=APPS,
    ),
    Case(
        "gateway name with that Gateway not accepting: nothing",
        route("test", "route-namespace", ("test.example.internal",), BOTH, accepted=BOTH[1:]),
        TWO_GATEWAYS,
        {},
        options=gw.GatewayOptions(gateway_name="gateway-name"),
        namespaces=APPS,
    ),
    Case(
        "gateway namespace keeps the Gateways of that namespace",
        route("test", "route-namespace", ("test.example.internal",), (*BOTH, parent("gw", "other"))),
        [*TWO_GATEWAYS, gateway("gw", "other", addresses=("9.9.9.9",))],
        {("test.example.internal", "A"): a("1.2.3.4", "2.3.4.5")},
        options=gw.GatewayOptions(gateway_namespace="gateway-namespace"),
        namespaces=APPS,
    ),
    Case(
        "gateway label filter",
        route("test", "route-namespace", ("test.example.internal",), BOTH),
        [
            gateway("gateway-name", "gateway-namespace", labels={"foo": "bar"}),
            gateway("not-gateway-name", "gateway-namespace", addresses=("2.3.4.5",)),
        ],
        {("test.example.internal", "A"): a("1.2.3.4")},
        options=gw.GatewayOptions(gateway_label_filter="foo=bar"),
        namespaces=APPS,
    ),
    Case(
        "a route whose controller annotation names another controller is skipped",
        route(
            "api",
            hostnames=("api.example.internal",),
            parents=(parent("gw"),),
            annotations={"external-dns.alpha.kubernetes.io/controller": "something-else"},
        ),
        [gateway("gw")],
        {},
    ),
    Case(
        "a Gateway whose controller annotation names another controller does not count",
        route("api", hostnames=("api.example.internal",), parents=(parent("gw"),)),
        [gateway("gw", annotations={"external-dns.kubernetes.io/controller": "other"})],
        {},
    ),
    Case(
        "several Gateways: their addresses merge",
        route("test", hostnames=("test.example.internal",), parents=(parent("one"), parent("two"))),
        [gateway("one", addresses=("1.2.3.4",)), gateway("two", addresses=("2.3.4.5", "2001:db8::1"))],
        {
            ("test.example.internal", "A"): a("1.2.3.4", "2.3.4.5"),
            ("test.example.internal", "AAAA"): a("2001:db8::1"),
        },
    ),
    Case(
        "several listeners: each hostname through each",
        route("test", hostnames=("*.example.internal",), parents=(parent("gw"),)),
        [
            gateway(
                "gw",
                "default",
                listener("foo", hostname="foo.example.internal"),
                listener("bar", hostname="bar.example.internal"),
            )
        ],
        {("foo.example.internal", "A"): a("1.2.3.4"), ("bar.example.internal", "A"): a("1.2.3.4")},
    ),
    Case(
        "section name picks one listener",
        route("test", hostnames=("*.example.internal",), parents=(parent("gw", section="foo"),)),
        [
            gateway(
                "gw",
                "default",
                listener("foo", hostname="foo.example.internal"),
                listener("bar", hostname="bar.example.internal"),
            )
        ],
        {("foo.example.internal", "A"): a("1.2.3.4")},
    ),
    Case(
        "port picks the listeners of that port",
        route("test", hostnames=("*.example.internal",), parents=(parent("gw", port=80),)),
        [
            gateway(
                "gw",
                "default",
                listener("foo", hostname="foo.example.internal"),
                listener("bar", hostname="bar.example.internal"),
                listener("qux", hostname="qux.example.internal", port=8080),
            )
        ],
        {("foo.example.internal", "A"): a("1.2.3.4"), ("bar.example.internal", "A"): a("1.2.3.4")},
    ),
    Case(
        "wildcard in the Gateway",
        route("test", hostnames=("foo.example.internal",), parents=(parent("gw"),)),
        [gateway("gw", "default", listener(hostname="*.example.internal"))],
        {("foo.example.internal", "A"): a("1.2.3.4")},
    ),
    Case(
        "wildcard in the route",
        route("test", hostnames=("*.example.internal",), parents=(parent("gw"),)),
        [gateway("gw", "default", listener(hostname="foo.example.internal"))],
        {("foo.example.internal", "A"): a("1.2.3.4")},
    ),
    Case(
        "wildcard in both: the route's more specific wildcard",
        route("test", hostnames=("*.sub.example.internal",), parents=(parent("gw"),)),
        [gateway("gw", "default", listener(hostname="*.example.internal"))],
        {("*.sub.example.internal", "A"): a("1.2.3.4")},
    ),
    Case(
        "no route hostname: the listener's",
        route("test", parents=(parent("gw"),)),
        [gateway("gw", "default", listener(hostname="foo.example.internal"))],
        {("foo.example.internal", "A"): a("1.2.3.4")},
    ),
    Case("no Gateways", route("test", hostnames=("a.example.internal",), parents=(parent("gw"),)), [], {}),
    Case(
        "no hostnames anywhere: nothing",
        route("no-hostname", parents=(parent("gw"),)),
        [gateway("gw", "default", listener())],
        {},
    ),
    Case(
        "hostname annotation adds names",
        route(
            "test",
            hostnames=("test.example.internal",),
            parents=(parent("gw"),),
            annotations={HOST: "annotation.example.internal, second.example.internal"},
        ),
        [gateway("gw")],
        {
            ("test.example.internal", "A"): a("1.2.3.4"),
            ("annotation.example.internal", "A"): a("1.2.3.4"),
            ("second.example.internal", "A"): a("1.2.3.4"),
        },
    ),
    Case(
        "ignore hostname annotation",
        route(
            "test",
            hostnames=("test.example.internal",),
            parents=(parent("gw"),),
            annotations={HOST: "annotation.example.internal"},
        ),
        [gateway("gw")],
        {("test.example.internal", "A"): a("1.2.3.4")},
        common=SourceOptions(ignore_hostname_annotation=True, fqdn_template=("{{.Name}}.tpl.internal",)),
    ),
    Case(
        "fqdn template for a route without hostnames",
        route("fqdn-with-hostnames", parents=(parent("gw"),)),
        [gateway("gw")],
        {("fqdn-with-hostnames.default.example.internal", "A"): a("1.2.3.4")},
        common=SourceOptions(fqdn_template=("{{.Name}}.{{.Namespace}}.example.internal",)),
    ),
    Case(
        "fqdn template is not used when the route has hostnames",
        route("r", hostnames=("own.example.internal",), parents=(parent("gw"),)),
        [gateway("gw")],
        {("own.example.internal", "A"): a("1.2.3.4")},
        common=SourceOptions(fqdn_template=("{{.Name}}.tpl.internal",)),
    ),
    Case(
        "combine fqdn template",
        route("r", hostnames=("own.example.internal",), parents=(parent("gw"),)),
        [gateway("gw")],
        {("own.example.internal", "A"): a("1.2.3.4"), ("r.tpl.internal", "A"): a("1.2.3.4")},
        common=SourceOptions(fqdn_template=("{{.Name}}.tpl.internal",), combine_fqdn_annotation=True),
    ),
    Case(
        "different hostnames through different Gateways",
        route(
            "test",
            hostnames=("test.one.internal", "test.two.internal"),
            parents=(parent("one"), parent("two")),
        ),
        [
            gateway("one", "default", listener(hostname="*.one.internal"), addresses=("1.2.3.4",)),
            gateway("two", "default", listener(hostname="*.two.internal"), addresses=("2.3.4.5",)),
        ],
        {("test.one.internal", "A"): a("1.2.3.4"), ("test.two.internal", "A"): a("2.3.4.5")},
    ),
    Case(
        "allowedRoutes Same (the default) refuses a route of another namespace",
        route("test", "route-namespace", ("test.example.internal",), (parent("gw", "gateway-namespace"),)),
        [gateway("gw", "gateway-namespace", listener())],
        {},
        namespaces=APPS,
    ),
    Case(
        "allowedRoutes Same takes a route of the Gateway's namespace",
        route("test", "gateway-namespace", ("test.example.internal",), (parent("gw", "gateway-namespace"),)),
        [gateway("gw", "gateway-namespace", listener())],
        {("test.example.internal", "A"): a("1.2.3.4")},
        namespaces=APPS,
    ),
    Case(
        "allowedRoutes namespace selector",
        route("test", "route-namespace", ("test.example.internal",), (parent("gw", "gateway-namespace"),)),
        [
            gateway(
                "gw",
                "gateway-namespace",
                listener(
                    allowed={"namespaces": {"from": "Selector", "selector": {"matchLabels": {"team": "a"}}}}
                ),
            )
        ],
        {("test.example.internal", "A"): a("1.2.3.4")},
        namespaces=[namespace("gateway-namespace"), namespace("route-namespace", team="a")],
    ),
    Case(
        "allowedRoutes namespace selector with the route's Namespace unknown",
        route("test", "route-namespace", ("test.example.internal",), (parent("gw", "gateway-namespace"),)),
        [
            gateway(
                "gw",
                "gateway-namespace",
                listener(
                    allowed={"namespaces": {"from": "Selector", "selector": {"matchLabels": {"team": "a"}}}}
                ),
            )
        ],
        {},
        namespaces=[namespace("gateway-namespace")],
    ),
    Case(
        "allowedRoutes kinds leave an HTTPRoute out",
        route("test", hostnames=("test.example.internal",), parents=(parent("gw"),)),
        [gateway("gw", "default", listener(allowed={"kinds": [{"kind": "GRPCRoute"}]}))],
        {},
    ),
    Case(
        "target annotation on the Gateway overrides its addresses",
        route("test", hostnames=("test.example.internal",), parents=(parent("gw"),)),
        [gateway("gw", annotations={TARGET: "4.3.2.1"})],
        {("test.example.internal", "A"): a("4.3.2.1")},
    ),
    Case(
        "several Gateways, one with a target annotation",
        route("test", hostnames=("test.example.internal",), parents=(parent("one"), parent("two"))),
        [gateway("one", annotations={TARGET: "lb.example.net"}), gateway("two", addresses=("2.3.4.5",))],
        {
            ("test.example.internal", "CNAME"): a("lb.example.net"),
            ("test.example.internal", "A"): a("2.3.4.5"),
        },
    ),
    Case(
        "ttl, set-identifier and provider-specific annotations of the route",
        route(
            "test",
            hostnames=("test.example.internal",),
            parents=(parent("gw"),),
            annotations={
                "external-dns.alpha.kubernetes.io/ttl": "15s",
                "external-dns.kubernetes.io/aws-weight": "10",
                "external-dns.kubernetes.io/set-identifier": "eu",
            },
        ),
        [gateway("gw")],
        {("test.example.internal", "A"): a("1.2.3.4")},
    ),
    Case("no parentRefs", route("test", hostnames=("test.example.internal",)), [gateway("gw")], {}),
    Case(
        "status names a parent the spec does not",
        route(
            "test",
            hostnames=("test.example.internal",),
            parents=(parent("default-gateway"),),
            accepted=(parent("other-gateway"),),
        ),
        [gateway("default-gateway"), gateway("other-gateway")],
        {},
    ),
    Case(
        "not accepted",
        route("test", hostnames=("test.example.internal",), parents=(parent("gw"),), accepted_status="False"),
        [gateway("gw")],
        {},
    ),
    Case(
        "gateway-hostname-source defined-hosts-only ignores the annotation",
        route(
            "test",
            hostnames=("test.example.internal",),
            parents=(parent("gw"),),
            annotations={HOST: "extra.example.internal", SOURCE: "defined-hosts-only"},
        ),
        [gateway("gw")],
        {("test.example.internal", "A"): a("1.2.3.4")},
    ),
    Case(
        "gateway-hostname-source annotation-only ignores spec.hostnames",
        route(
            "test",
            hostnames=("test.example.internal",),
            parents=(parent("gw"),),
            annotations={HOST: "extra.example.internal", SOURCE: "annotation-only"},
        ),
        [gateway("gw")],
        {("extra.example.internal", "A"): a("1.2.3.4")},
    ),
    Case(
        "an invalid gateway-hostname-source is reported and read as absent",
        route(
            "test",
            hostnames=("test.example.internal",),
            parents=(parent("gw"),),
            annotations={HOST: "extra.example.internal", SOURCE: "sometimes"},
        ),
        [gateway("gw")],
        {("test.example.internal", "A"): a("1.2.3.4"), ("extra.example.internal", "A"): a("1.2.3.4")},
        problems=1,
    ),
    Case(
        "GRPCRoute attaches to an HTTPS listener",
        route("g", hostnames=("grpc.example.internal",), parents=(parent("gw"),), kind="GRPCRoute"),
        [gateway("gw", "default", listener(protocol="HTTPS", port=443))],
        {("grpc.example.internal", "A"): a("1.2.3.4")},
        kind=gw.GRPC,
    ),
    Case(
        "TLSRoute does not attach to an HTTP listener",
        route("t", hostnames=("tls.example.internal",), parents=(parent("gw"),), kind="TLSRoute"),
        [gateway("gw", "default", listener(protocol="HTTP"))],
        {},
        kind=gw.TLS,
    ),
    Case(
        "TCPRoute (no spec.hostnames): the listener's hostname, the annotation's where it fits",
        route(
            "t",
            parents=(parent("gw"),),
            kind="TCPRoute",
            annotations={HOST: "tcp.example.internal,a.tls.internal"},
        ),
        [gateway("gw", "default", listener(protocol="TLS", hostname="*.tls.internal"))],
        {("*.tls.internal", "A"): a("1.2.3.4"), ("a.tls.internal", "A"): a("1.2.3.4")},
        kind=gw.TCP,
    ),
    Case(
        "UDPRoute through a UDP listener, by annotation",
        route("u", parents=(parent("gw"),), kind="UDPRoute", annotations={HOST: "udp.example.internal"}),
        [gateway("gw", "default", listener(protocol="UDP", port=53))],
        {("udp.example.internal", "A"): a("1.2.3.4")},
        kind=gw.UDP,
    ),
    Case(
        "an IP address as a route hostname matches nothing",
        route("test", hostnames=("1.2.3.4",), parents=(parent("gw"),)),
        [gateway("gw", "default", listener(hostname="*.example.internal"))],
        {},
        problems=1,
    ),
]


def by_key(objects: list[dict[str, Any]]) -> Mapping[str, dict[str, Any]]:
    return {object_key(o): o for o in objects}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.title)
def test_route_endpoints(case: Case) -> None:
    gateways = gw.Gateways(
        by_key(case.gateways), by_key(case.namespaces), case.options, case.options.gateway_labels
    )
    result = gw.route_endpoints(case.route, case.kind, gateways, case.common)
    got = {(e.dns_name, e.record_type): e.targets for e in result.endpoints}
    assert got == {k: tuple(sorted(v)) for k, v in case.want.items()}
    assert len(result.problems) == case.problems, result.problems
    meta = case.route["metadata"]
    for ep in result.endpoints:
        assert ep.labels[RESOURCE_LABEL] == f"{case.kind.label}/{meta['namespace']}/{meta['name']}"


def test_route_annotations_reach_the_endpoints() -> None:
    annotations = {
        "external-dns.alpha.kubernetes.io/ttl": "15s",
        "external-dns.kubernetes.io/aws-weight": "10",
        "external-dns.kubernetes.io/set-identifier": "eu",
    }
    r = route("test", hostnames=("test.example.internal",), parents=(parent("gw"),), annotations=annotations)
    result = gw.route_endpoints(r, gw.HTTP, gw.Gateways(by_key([gateway("gw")]), {}))
    (ep,) = result.endpoints
    assert (ep.ttl, ep.set_identifier) == (15, "eu")
    assert dict(ep.provider_specific) == {"aws/weight": "10"}
    assert ep.labels[RESOURCE_LABEL] == "httproute/default/test"


def test_a_bad_gateway_label_filter_is_refused_at_start() -> None:
    from shardsync.flags import ConfigError

    with pytest.raises(ConfigError, match="--gateway-label-filter"):
        gw.FLAGS.validate(gw.GatewayOptions(gateway_label_filter="a in ("))


@pytest.mark.parametrize("route_kind", [gw.HTTP, gw.GRPC, gw.TLS, gw.TCP, gw.UDP], ids=lambda r: r.label)
def test_each_kind_labels_its_endpoints_and_refers_to_its_objects_as_the_table_says(
    route_kind: gw.RouteKind,
) -> None:
    kind = SOURCES[f"gateway-{route_kind.label}"]
    listeners = [listener(p, protocol=p, allowed=ALL) for p in ("HTTP", "TLS", "TCP", "UDP")]
    caches = {
        gw.GATEWAYS: by_key([gateway("gw", "infra", *listeners)]),
        gw.NAMESPACES: by_key([namespace("infra"), namespace("apps")]),
    }
    context = SourceContext(kind.default_options(), lambda r: caches.get(r, {}), FakeKube(), lambda: True)
    annotations = {HOST: "ok.example.internal,bad..example.internal"}
    obj = route(
        "r", "apps", parents=(parent("gw", "infra"),), annotations=annotations, kind=route_kind.resource.kind
    )
    result = kind.start(context).translate("apps/r", obj)
    assert result is not None
    assert [(e.dns_name, e.labels[RESOURCE_LABEL]) for e in result.endpoints] == [
        ("ok.example.internal", f"{route_kind.label}/apps/r")
    ]
    (problem,) = result.problems  # the invalid name, reported on the route
    assert event_ref(problem.ref.resource) == dataclasses.replace(problem.ref, uid="")
