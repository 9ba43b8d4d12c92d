"""The istio-gateway kind's translation, one table row per case of external-dns's source/istio_gateway_test.go
(v0.22.0), each titled as external-dns titles it: hosts (namespaced, wildcard, empty), targets from the
ingress gateway Services (selector, load-balancer IPs and hostnames, externalIPs), from an Ingress named by
the `ingress` annotation or from the `target` annotation, the filters, the controller annotation,
--fqdn-template with and without --combine-fqdn-annotation, --ignore-hostname-annotation, TTL and
provider-specific annotations. Where shardsync deliberately differs (README, Differences from external-dns),
the row says what external-dns publishes and why ours is not that."""

from __future__ import annotations

import pytest

from shardsync.records.endpoint import RESOURCE_LABEL
from shardsync.sources import istio
from shardsync.sources.istio_gateway import GatewayTranslator, gateway_endpoints
from shardsync.sources.kind import SourceContext
from shardsync.sources.options import SourceOptions
from shardsync.sources.result import INVALID_REASON

from .fake_kube import FakeKube
from .istio_objects import (
    CONTROLLER,
    GA,
    HOSTNAME,
    INGRESS,
    SELECTOR,
    TARGET,
    TTL,
    Case,
    Cluster,
    a,
    check,
    gateway,
    lb_ingress,
    lb_service,
)

KIND = "istio-gateway"
TEMPLATE = SourceOptions(fqdn_template=("{{.Name}}.ext-dns.test.com",))
TWO_TEMPLATES = ("{{.Name}}.ext-dns.test.com, {{.Name}}.ext-dna.test.com",)


def one(hosts: list[list[str]], **kwargs: object) -> list[dict[str, object]]:
    return [gateway("fake1", hosts=hosts, **kwargs)]  # type: ignore[arg-type]


FOO = [["foo.bar"]]
TWO_SIMPLE = [gateway("fake1", hosts=[["example.org"]]), gateway("fake2", hosts=[["new.org"]])]
BOTH = {("example.org", "A"): a("8.8.8.8"), ("example.org", "CNAME"): a("lb.com")}
BOTH_NEW = {**BOTH, ("new.org", "A"): a("8.8.8.8"), ("new.org", "CNAME"): a("lb.com")}
LB = lb_service(ips=["8.8.8.8"], hostnames=["lb.com"])
LB_IP = lb_service(ips=["8.8.8.8"])
EVERYTHING = lb_service(
    ips=["8.8.8.8", "127.0.0.1"], hostnames=["elb.com", "alb.com"], external_ips=["1.1.1.1", "2.2.2.2"]
)
CLASS = "kubernetes.io/gateway.class"

# testEndpointsFromGatewayConfig: one Gateway (default namespace), no template.
FROM_CONFIG = [
    Case(
        "one rule.host one lb.hostname",
        Cluster([lb_service(hostnames=["lb.com"])], gateways=one(FOO)),
        {("foo.bar", "CNAME"): a("lb.com")},
    ),
    Case(
        "one namespaced rule.host one lb.hostname",
        Cluster([lb_service(hostnames=["lb.com"])], gateways=one([["my-namespace/foo.bar"]])),
        {("foo.bar", "CNAME"): a("lb.com")},
    ),
    Case("one rule.host one lb.IP", Cluster([LB_IP], gateways=one(FOO)), {("foo.bar", "A"): a("8.8.8.8")}),
    Case(
        "one rule.host one ingress.IP",
        Cluster(
            ingresses=[lb_ingress("ingress1", ips=["8.8.8.8"])],
            gateways=one(FOO, annotations={INGRESS: "ingress1"}),
        ),
        {("foo.bar", "A"): a("8.8.8.8")},
    ),
    Case(
        "one rule.host two lb.IP and two lb.Hostname",
        Cluster(
            [lb_service(ips=["8.8.8.8", "127.0.0.1"], hostnames=["elb.com", "alb.com"])], gateways=one(FOO)
        ),
        {("foo.bar", "A"): a("8.8.8.8", "127.0.0.1")},
        [INVALID_REASON],
        ("foo.bar",),
    ),
    Case(
        "one rule.host two ingress.IP and two ingress.Hostname",
        Cluster(
            ingresses=[
                lb_ingress("ingress1", ips=["8.8.8.8", "127.0.0.1"], hostnames=["elb.com", "alb.com"])
            ],
            gateways=one(FOO, annotations={INGRESS: "ingress1"}),
        ),
        {("foo.bar", "A"): a("8.8.8.8", "127.0.0.1")},
        [INVALID_REASON],
        ("foo.bar",),
    ),
    Case("no rule.host", Cluster([EVERYTHING], gateways=one([])), {}),
    Case("one empty rule.host", Cluster([EVERYTHING], gateways=one([[""]])), {}),
    Case(
        "one empty rule.host with gateway ingress annotation",
        Cluster(
            ingresses=[
                lb_ingress("ingress1", ips=["8.8.8.8", "127.0.0.1"], hostnames=["elb.com", "alb.com"])
            ],
            gateways=one([[""]], annotations={INGRESS: "ingress1"}),
        ),
        {},
    ),
    Case("no targets", Cluster([lb_service()], gateways=one([[""]])), {}),
    Case(
        "one gateway, two ingressgateway loadbalancer hostnames",
        Cluster(
            [
                lb_service("gateway1", "istio-other", hostnames=["lb.com"]),
                lb_service("gateway2", "istio-other", hostnames=["lb2.com"]),
            ],
            gateways=one(FOO),
        ),
        {},
        [INVALID_REASON],
        ("foo.bar",),
    ),
    Case(
        "one gateway, ingress in separate namespace",
        Cluster(
            ingresses=[
                lb_ingress("ingress1", "istio-other2", hostnames=["lb.com"]),
                lb_ingress("ingress2", "istio-other", hostnames=["lb2.com"]),
            ],
            gateways=one(FOO, annotations={INGRESS: "istio-other2/ingress1"}),
        ),
        {("foo.bar", "CNAME"): a("lb.com")},
    ),
    Case(
        "one rule.host one lb.externalIP",
        Cluster([lb_service(external_ips=["8.8.8.8"])], gateways=one(FOO)),
        {("foo.bar", "A"): a("8.8.8.8")},
    ),
    Case(
        "one rule.host two lb.IP, two lb.Hostname and two lb.externalIP",
        Cluster([EVERYTHING], gateways=one(FOO)),
        {("foo.bar", "A"): a("1.1.1.1", "2.2.2.2")},
    ),
]

# testGatewayEndpoints, and the Test* functions of the file.
ENDPOINTS = [
    Case("no gateway", Cluster(), {}),
    Case(
        "two simple gateways, one ingressgateway loadbalancer service",
        Cluster([LB], gateways=TWO_SIMPLE),
        BOTH_NEW,
    ),
    Case(
        "two simple gateways on different namespaces, one ingressgateway loadbalancer service",
        Cluster(
            [LB],
            gateways=[
                gateway("fake1", "testing1", [["example.org"]]),
                gateway("fake2", "testing2", [["new.org"]]),
            ],
        ),
        BOTH_NEW,
    ),
    Case(
        "two simple gateways on different namespaces and a target namespace, one ingressgateway loadbalancer "
        "service",
        Cluster(
            [lb_service(namespace="testing1", ips=["8.8.8.8"], hostnames=["lb.com"])],
            gateways=[
                gateway("fake1", "testing1", [["example.org"]]),
                gateway("fake2", "testing2", [["new.org"]]),
            ],
            namespace="testing1",
        ),
        BOTH,
    ),
    Case(
        # external-dns's harness reads every namespace when an Ingress lies outside the target namespace
        "one simple gateways on different namespace and a target namespace, one ingress service",
        Cluster(
            ingresses=[lb_ingress("ingress1", "testing2", ips=["8.8.8.8"], hostnames=["lb.com"])],
            gateways=[gateway("fake1", "testing1", [["example.org"]], {INGRESS: "testing2/ingress1"})],
        ),
        BOTH,
    ),
    Case(
        "valid matching annotation filter expression",
        Cluster(
            [LB_IP],
            gateways=one([["example.org"]], annotations={CLASS: "nginx"}),
            annotation_filter=f"{CLASS} in (alb, nginx)",
        ),
        {("example.org", "A"): a("8.8.8.8")},
    ),
    Case(
        "valid non-matching annotation filter expression",
        Cluster(
            [LB_IP],
            gateways=one([["example.org"]], annotations={CLASS: "tectonic"}),
            annotation_filter=f"{CLASS} in (alb, nginx)",
        ),
        {},
    ),
    Case(
        "valid matching annotation filter label",
        Cluster(
            [LB_IP],
            gateways=one([["example.org"]], annotations={CLASS: "nginx"}),
            annotation_filter=f"{CLASS}=nginx",
        ),
        {("example.org", "A"): a("8.8.8.8")},
    ),
    Case(
        "valid non-matching annotation filter label",
        Cluster(
            [LB_IP],
            gateways=one([["example.org"]], annotations={CLASS: "alb"}),
            annotation_filter=f"{CLASS}=nginx",
        ),
        {},
    ),
    Case(
        "valid matching label filter",
        Cluster(
            [LB_IP],
            gateways=one([["example.org"]], labels={"app": "istio-gateway"}),
            label_filter="app=istio-gateway",
        ),
        {("example.org", "A"): a("8.8.8.8")},
    ),
    Case(
        "valid non-matching label filter",
        Cluster(
            [LB_IP],
            gateways=one([["example.org"]], labels={"app": "other"}),
            label_filter="app=istio-gateway",
        ),
        {},
    ),
    Case(
        "our controller type is dns-controller",
        Cluster([LB_IP], gateways=one([["example.org"]], annotations={CONTROLLER: "dns-controller"})),
        {("example.org", "A"): a("8.8.8.8")},
    ),
    Case(
        "different controller types are ignored",
        Cluster([LB_IP], gateways=one([["example.org"]], annotations={CONTROLLER: "some-other-tool"})),
        {},
    ),
    Case(
        "template for gateway if host is missing",
        Cluster(
            [lb_service(ips=["8.8.8.8"], hostnames=["elb.com"])],
            gateways=one([], annotations={CONTROLLER: "dns-controller"}),
            common=TEMPLATE,
        ),
        {("fake1.ext-dns.test.com", "A"): a("8.8.8.8"), ("fake1.ext-dns.test.com", "CNAME"): a("elb.com")},
    ),
    Case(
        "another controller annotation skipped even with template",
        Cluster([LB_IP], gateways=one([], annotations={CONTROLLER: "other-controller"}), common=TEMPLATE),
        {},
    ),
    Case(
        "multiple FQDN template hostnames",
        Cluster([LB_IP], gateways=one([]), common=SourceOptions(fqdn_template=TWO_TEMPLATES)),
        {("fake1.ext-dns.test.com", "A"): a("8.8.8.8"), ("fake1.ext-dna.test.com", "A"): a("8.8.8.8")},
    ),
    Case(
        "multiple FQDN template hostnames (combined with the annotation)",
        Cluster(
            [LB_IP],
            gateways=[
                gateway("fake1"),
                gateway("fake2", hosts=[["example.org"]], annotations={TARGET: "gateway-target.com"}),
            ],
            common=SourceOptions(fqdn_template=TWO_TEMPLATES, combine_fqdn_annotation=True),
        ),
        {
            ("fake1.ext-dns.test.com", "A"): a("8.8.8.8"),
            ("fake1.ext-dna.test.com", "A"): a("8.8.8.8"),
            ("example.org", "CNAME"): a("gateway-target.com"),
            ("fake2.ext-dns.test.com", "CNAME"): a("gateway-target.com"),
            ("fake2.ext-dna.test.com", "CNAME"): a("gateway-target.com"),
        },
    ),
    Case(
        "gateway rules with annotation",
        Cluster(
            [LB_IP],
            gateways=[
                gateway("fake1", hosts=[["example.org"]], annotations={TARGET: "gateway-target.com"}),
                gateway("fake2", hosts=[["example2.org"]], annotations={TARGET: "gateway-target.com"}),
                gateway(
                    "fake3",
                    hosts=[["example3.org"]],
                    annotations={INGRESS: "not-real/ingress1", TARGET: "1.2.3.4"},
                ),
            ],
        ),
        {
            ("example.org", "CNAME"): a("gateway-target.com"),
            ("example2.org", "CNAME"): a("gateway-target.com"),
            ("example3.org", "A"): a("1.2.3.4"),
        },
    ),
    Case(
        "gateway rules with hostname annotation",
        Cluster(
            [lb_service(ips=["1.2.3.4"])],
            gateways=one([["example.org"]], annotations={HOSTNAME: "dns-through-hostname.com"}),
        ),
        {("example.org", "A"): a("1.2.3.4"), ("dns-through-hostname.com", "A"): a("1.2.3.4")},
    ),
    Case(
        "gateway rules with hostname annotation having multiple hostnames",
        Cluster(
            [lb_service(ips=["1.2.3.4"])],
            gateways=one(
                [["example.org"]],
                annotations={HOSTNAME: "dns-through-hostname.com, another-dns-through-hostname.com"},
            ),
        ),
        {
            ("example.org", "A"): a("1.2.3.4"),
            ("dns-through-hostname.com", "A"): a("1.2.3.4"),
            ("another-dns-through-hostname.com", "A"): a("1.2.3.4"),
        },
    ),
    Case(
        "gateway rules with hostname and target annotation",
        Cluster(
            [lb_service()],
            gateways=one(
                [["example.org"]],
                annotations={HOSTNAME: "dns-through-hostname.com", TARGET: "gateway-target.com"},
            ),
        ),
        {
            ("example.org", "CNAME"): a("gateway-target.com"),
            ("dns-through-hostname.com", "CNAME"): a("gateway-target.com"),
        },
    ),
    Case(
        "gateway rules with hostname, target and ingress annotation",
        Cluster(
            [lb_service()],
            [lb_ingress("ingress1")],
            gateways=one(
                [["example.org"]],
                annotations={
                    INGRESS: "ingress1",
                    HOSTNAME: "dns-through-hostname.com",
                    TARGET: "gateway-target.com",
                },
            ),
        ),
        {
            ("example.org", "CNAME"): a("gateway-target.com"),
            ("dns-through-hostname.com", "CNAME"): a("gateway-target.com"),
        },
    ),
    Case(
        "template for gateway with annotation",
        Cluster(
            [lb_service()],
            gateways=[
                gateway("fake1", annotations={TARGET: "gateway-target.com"}),
                gateway("fake2", annotations={TARGET: "gateway-target.com"}),
                gateway("fake3", annotations={TARGET: "1.2.3.4"}),
            ],
            common=TEMPLATE,
        ),
        {
            ("fake1.ext-dns.test.com", "CNAME"): a("gateway-target.com"),
            ("fake2.ext-dns.test.com", "CNAME"): a("gateway-target.com"),
            ("fake3.ext-dns.test.com", "A"): a("1.2.3.4"),
        },
    ),
    Case(
        "Ingress with empty annotation",
        Cluster([lb_service()], gateways=one([], annotations={TARGET: ""}), common=TEMPLATE),
        {},
    ),
    Case(
        "Gateway with empty ingress annotation",
        Cluster(
            [lb_service()], [lb_ingress("ingress1")], one([], annotations={INGRESS: ""}), common=TEMPLATE
        ),
        {},
    ),
    Case(
        "ignore hostname annotations",
        Cluster(
            [LB],
            gateways=[
                gateway("fake1", hosts=[["example.org"]], annotations={HOSTNAME: "ignore.me"}),
                gateway("fake2", hosts=[["new.org"]], annotations={HOSTNAME: "ignore.me.too"}),
            ],
            common=SourceOptions(ignore_hostname_annotation=True),
        ),
        BOTH_NEW,
    ),
    Case(
        "gateways with wildcard host",
        Cluster(
            [lb_service(ips=["1.2.3.4"])],
            gateways=[gateway("fake1", hosts=[["*"]]), gateway("fake2", hosts=[["some-namespace/*"]])],
        ),
        {},
    ),
    Case(
        "gateways with wildcard host and hostname annotation",
        Cluster(
            [lb_service(ips=["1.2.3.4"])],
            gateways=[
                gateway("fake1", hosts=[["*"]], annotations={HOSTNAME: "fake1.dns-through-hostname.com"}),
                gateway(
                    "fake2",
                    hosts=[["some-namespace/*"]],
                    annotations={HOSTNAME: "fake2.dns-through-hostname.com"},
                ),
            ],
        ),
        {
            ("fake1.dns-through-hostname.com", "A"): a("1.2.3.4"),
            ("fake2.dns-through-hostname.com", "A"): a("1.2.3.4"),
        },
    ),
    Case(
        "gateways with ingress annotation; ingress not found",
        Cluster(
            ingresses=[lb_ingress("ingress1", ips=["8.8.8.8"])],
            gateways=one([["new.org"]], annotations={INGRESS: "ingress2"}),
        ),
        {},
        [istio.UNRESOLVED],
        differs="external-dns fails its whole sync (expectError); the Gateway publishes nothing new",
    ),
    *(
        Case(
            f"TestGatewaySource_GWSelectorMatchServiceSelector: {title}",
            Cluster(
                [lb_service("fake-service", selector=SELECTOR, external_ips=["10.10.10.255"])],
                gateways=[gateway("fake-gateway", hosts=[["example.org"]], selector=selector)],
            ),
            {("example.org", "A"): a("10.10.10.255")},
        )
        for title, selector in (
            ("gw single selector match with single service selector", {"version": "v1"}),
            ("gw selector match all service selectors", SELECTOR),
            (
                "gw selector has subset of service selectors",
                {"version": "v1", "release": "stable", "tier": "backend", "app": "demo"},
            ),
        )
    ),
    Case(
        "TestSingleGatewayMultipleServicesPointingToSameLoadBalancer",
        Cluster(
            [
                lb_service(
                    "istio-ingressgateway",
                    selector={"app": "istio-ingressgateway", "istio": "ingressgateway"},
                    ips=["34.66.66.77"],
                ),
                lb_service(
                    "istio-ingressgatewayudp",
                    selector={"app": "istio-ingressgatewayudp", "istio": "ingressgateway"},
                    ips=["34.66.66.77"],
                ),
            ],
            gateways=[
                gateway(
                    "argocd",
                    "argocd",
                    [["example.org"], ["example.org"]],
                    selector={"istio": "ingressgateway"},
                )
            ],
        ),
        {("example.org", "A"): a("34.66.66.77")},
    ),
]


@pytest.mark.parametrize("case", FROM_CONFIG + ENDPOINTS, ids=lambda c: c.title)
def test_external_dns_case(case: Case) -> None:
    check(case, KIND)


def test_ttl_and_provider_specific_annotations_and_the_resource_label() -> None:
    # testGatewayEndpoints "gateway rules with annotation and custom TTL" (6, 1, 10s);
    # testEndpointsFromGatewayConfig "provider-specific annotation is converted to endpoint property";
    # TestResourceLabelIsSet.
    gateways = [
        gateway("fake1", hosts=[["example.org"]], annotations={TARGET: "gateway-target.com", TTL: "6"}),
        gateway("fake2", hosts=[["example2.org"]], annotations={TARGET: "gateway-target.com", TTL: "1"}),
        gateway("fake3", hosts=[["example3.org"]], annotations={TARGET: "gateway-target.com", TTL: "10s"}),
        gateway("fake4", "istio-system", [["foo.bar"]], annotations={GA + "aws-weight": "10"}),
    ]
    endpoints, problems = Cluster([lb_service(ips=["8.8.8.8"])], gateways=gateways).translate(KIND)
    assert problems == []
    got = {
        (e.dns_name, e.record_type, e.targets, e.ttl, e.provider_specific, e.labels[RESOURCE_LABEL])
        for e in endpoints
    }
    assert got == {
        ("example.org", "CNAME", ("gateway-target.com",), 6, (), "gateway/default/fake1"),
        ("example2.org", "CNAME", ("gateway-target.com",), 1, (), "gateway/default/fake2"),
        ("example3.org", "CNAME", ("gateway-target.com",), 10, (), "gateway/default/fake3"),
        ("foo.bar", "A", ("8.8.8.8",), 0, (("aws/weight", "10"),), "gateway/istio-system/fake4"),
    }


def test_a_wildcard_host_is_a_wildcard_record_and_dot_slash_is_the_gateways_namespace() -> None:
    gw = gateway(hosts=[["*.apps.example.org", "./shop.example.org", "ns/a/b.example.org"]])
    result = gateway_endpoints(gw, {"d/lb": lb_service(ips=["192.0.2.1"])}, {})
    assert {(e.dns_name, e.record_type) for e in result.endpoints} == {
        ("*.apps.example.org", "A"),
        ("shop.example.org", "A"),
    }
    # `ns/a/b.example.org` is not `namespace/host`: external-dns keeps it whole, no DNS name; reported
    assert [(p.field, p.reason) for p in result.problems] == [("spec.servers[0].hosts[2]", INVALID_REASON)]


def test_an_unresolved_ingress_keeps_the_records_the_gateway_had() -> None:
    ingress = lb_ingress("edge", ips=["192.0.2.9"])
    cluster = Cluster(ingresses=[ingress], gateways=one(FOO, annotations={INGRESS: "edge"}))
    translator_records = cluster.records(KIND)
    assert translator_records == {("foo.bar", "A"): a("192.0.2.9")}
    # The same translator, the Ingress gone: the records stay, the problem is said; once fixed, they follow.
    ingresses = {"default/edge": ingress}
    context = SourceContext(
        None, lambda r: ingresses if r.plural == "ingresses" else {}, FakeKube(), lambda: True
    )
    translator = GatewayTranslator(context)
    gw = one(FOO, annotations={INGRESS: "edge"})[0]
    first = translator.translate("default/fake1", gw)
    assert first is not None and [e.targets for e in first.endpoints] == [("192.0.2.9",)]
    del ingresses["default/edge"]
    kept = translator.translate("default/fake1", gw)
    assert kept is not None and kept.endpoints == first.endpoints
    assert [(p.field, p.reason) for p in kept.problems] == [
        (f"metadata.annotations[{INGRESS}]", istio.UNRESOLVED)
    ]
    assert "Ingress default/edge not found" in kept.problems[0].message
    bad = one(FOO, annotations={INGRESS: "a/b/c"})[0]
    still = translator.translate("default/fake1", bad)
    assert (
        still is not None
        and still.endpoints == first.endpoints
        and "not an Ingress" in still.problems[0].message
    )
    fixed = translator.translate("default/fake1", one(FOO, annotations={TARGET: "192.0.2.10"})[0])
    assert (
        fixed is not None and [e.targets for e in fixed.endpoints] == [("192.0.2.10",)] and not fixed.problems
    )
