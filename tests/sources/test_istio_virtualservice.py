"""The istio-virtualservice kind's translation, one table row per case of external-dns's
source/istio_virtualservice_test.go (v0.22.0), each titled as external-dns titles it: the binding of a
VirtualService host to a Gateway's server hosts and exportTo (testVirtualServiceBindsToGateway), the
Gateway a spec.gateways entry names (TestVirtualServiceSourceGetGateway), targets through the Gateways
(their Services, Ingress or `target` annotation) or the VirtualService's own `target` annotation, the
filters, the controller annotation, --fqdn-template with and without --combine-fqdn-annotation,
--ignore-hostname-annotation and TTL. Where shardsync deliberately differs (README, Differences from
external-dns) the row says what external-dns publishes and why ours is not that."""

from __future__ import annotations

import pytest

from shardsync.records.endpoint import RESOURCE_LABEL
from shardsync.sources import istio
from shardsync.sources.istio_virtualservice import GATEWAY_NOT_FOUND, binds, gateway_refs
from shardsync.sources.options import SourceOptions
from shardsync.sources.result import INVALID_REASON

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
    gateway,
    lb_ingress,
    lb_service,
    virtualservice,
)

KIND = "istio-virtualservice"
NS = "testing"  # testVirtualServiceEndpoints's namespace
TEMPLATE = SourceOptions(fqdn_template=("{{.Name}}.ext-dns.test.com",))
TWO_TEMPLATES = ("{{.Name}}.ext-dns.test.com, {{.Name}}.ext-dna.test.com",)


STAR = [["*"]]
LB = lb_service(ips=["8.8.8.8"], hostnames=["lb.com"])
LB_IP = lb_service(ips=["8.8.8.8"])
EVERYTHING = lb_service(
    ips=["8.8.8.8", "127.0.0.1"], hostnames=["elb.com", "alb.com"], external_ips=["1.1.1.1", "2.2.2.2"]
)
BOTH = {("example.org", "A"): a("8.8.8.8"), ("example.org", "CNAME"): a("lb.com")}
BOTH_NEW = {**BOTH, ("new.org", "A"): a("8.8.8.8"), ("new.org", "CNAME"): a("lb.com")}
EXAMPLE_A = {("example.org", "A"): a("8.8.8.8")}


def config(
    services: list[dict[str, object]],
    gw: dict[str, object],
    vs: dict[str, object],
    ingresses: tuple[dict[str, object], ...] = (),
) -> Cluster:
    """testEndpointsFromVirtualServiceConfig's harness: one Gateway and one VirtualService, in `test`."""
    return Cluster(services, list(ingresses), [gw], [vs])


def mygw(**kwargs: object) -> dict[str, object]:
    return gateway("mygw", "test", STAR, **kwargs)  # type: ignore[arg-type]


def foo(**kwargs: object) -> dict[str, object]:
    return virtualservice("foo", "test", ["mygw"], ["foo.bar"], **kwargs)  # type: ignore[arg-type]


def one_vs(
    annotations: dict[str, str] | None = None,
    annotation_filter: str = "",
    labels: dict[str, str] | None = None,
    label_filter: str = "",
) -> Cluster:
    """A Gateway `fake1` (`*`) in `testing` with its load balancer, and a VirtualService for example.org."""
    vs = virtualservice("vs1", NS, ["fake1"], ["example.org"], annotations, labels)
    services = [lb_service(namespace=NS, ips=["8.8.8.8"])]
    gateways = [gateway("fake1", NS, STAR)]
    return Cluster(
        services, [], gateways, [vs], annotation_filter=annotation_filter, label_filter=label_filter
    )


FROM_CONFIG = [
    Case(
        "one rule.host one lb.hostname",
        config([lb_service(hostnames=["lb.com"])], mygw(), foo()),
        {("foo.bar", "CNAME"): a("lb.com")},
    ),
    Case("one rule.host one lb.IP", config([LB_IP], mygw(), foo()), {("foo.bar", "A"): a("8.8.8.8")}),
    Case(
        "one rule.host one lb.externalIPs",
        config([lb_service(external_ips=["8.8.8.8"])], mygw(), foo()),
        {("foo.bar", "A"): a("8.8.8.8")},
    ),
    Case(
        "one rule.host two lb.IP and two lb.Hostname",
        config([lb_service(ips=["8.8.8.8", "127.0.0.1"], hostnames=["elb.com", "alb.com"])], mygw(), foo()),
        {("foo.bar", "A"): a("8.8.8.8", "127.0.0.1")},
        [INVALID_REASON],
        ("foo.bar",),
    ),
    Case(
        "one rule.host two lb.IP and two lb.Hostname and two lb.externalIPs",
        config([EVERYTHING], mygw(), foo()),
        {("foo.bar", "A"): a("1.1.1.1", "2.2.2.2")},
    ),
    Case("no rule.host", config([EVERYTHING], mygw(), virtualservice("foo", "test", ["mygw"], [])), {}),
    Case("no rule.gateway", config([EVERYTHING], mygw(), virtualservice("foo", "test", [], ["foo.bar"])), {}),
    Case(
        "one empty rule.host",
        config([EVERYTHING], gateway("", "test", [[""]]), virtualservice("", "test")),
        {},
    ),
    Case("no targets", config([lb_service()], mygw(), virtualservice("foo", "test", [], ["foo.bar"])), {}),
    Case(
        "matching selectors for service and gateway",
        config(
            [
                lb_service("service1", selector={"app": "myservice"}, hostnames=["elb.com", "alb.com"]),
                lb_service("service2", selector={"app": "otherservice"}, ips=["8.8.8.8", "127.0.0.1"]),
            ],
            mygw(selector={"app": "myservice"}),
            foo(),
        ),
        {},  # not service2's A records: its selector is not the Gateway's
        [INVALID_REASON],
        ("foo.bar",),
    ),
    Case(
        "ingress gateway annotation same namespace",
        config(
            [],
            mygw(annotations={INGRESS: "ingress1"}),
            foo(),
            (
                lb_ingress("ingress1", "test", hostnames=["alb.com", "elb.com"]),
                lb_ingress("ingress2", "test", ips=["127.0.0.1", "8.8.8.8"]),
            ),
        ),
        {},
        [INVALID_REASON],
        ("foo.bar",),
    ),
    Case(
        "ingress gateway annotation separate namespace",
        config(
            [],
            mygw(annotations={INGRESS: "ingress/ingress2"}),
            foo(),
            (
                lb_ingress("ingress1", "ingress", hostnames=["alb.com", "elb.com"]),
                lb_ingress("ingress2", "ingress", ips=["127.0.0.1", "8.8.8.8"]),
            ),
        ),
        {("foo.bar", "A"): a("127.0.0.1", "8.8.8.8")},
    ),
]

COMPLEX = Cluster(
    [
        lb_service("svc1", "istio-system", selector={"app": "igw1"}, hostnames=["target1.com"]),
        lb_service("svc2", "testing1", selector={"app": "igw2"}, hostnames=["target2.com"]),
        lb_service("svc3", "testing2", selector={"app": "igw3"}, hostnames=["target3.com"]),
    ],
    [
        lb_ingress("ingress1", "testing1", hostnames=["target4.com"]),
        lb_ingress("ingress3", "testing3", hostnames=["target5.com"]),
    ],
    [
        gateway("fake1", "istio-system", STAR, selector={"app": "igw1"}),
        gateway("fake2", "testing1", [["*.baz.com"], ["*.bar.com"]], selector={"app": "igw2"}),
        gateway("fake3", "testing2", [["*.bax.com", "*.bar.com"]], selector={"app": "igw3"}),
        gateway(
            "fake4",
            "testing3",
            [["*.bax.com", "*.bar.com"]],
            {INGRESS: "testing1/ingress1"},
            selector={"app": "igw4"},
        ),
    ],
    [
        virtualservice(
            "vs1", "testing3", ["istio-system/fake1", "testing1/fake2"], ["somedomain.com", "foo.bar.com"]
        ),
        virtualservice(
            "vs2",
            "testing2",
            ["testing1/fake2", "fake3"],
            ["hello.bar.com", "hello.bax.com", "hello.bak.com"],
        ),
        virtualservice(
            "vs3", "testing1", ["istio-system/fake1", "testing2/fake3"], ["world.bax.com", "world.bak.com"]
        ),
        virtualservice(
            "vs4", "testing1", ["istio-system/fake1", "testing3/fake4"], ["foo.bax.com", "foo.bak.com"]
        ),
    ],
    common=TEMPLATE,
)

ENDPOINTS = [
    Case(
        "two simple virtualservices with one gateway each, one ingressgateway loadbalancer service",
        Cluster(
            [lb_service(namespace=NS, ips=["8.8.8.8"], hostnames=["lb.com"])],
            gateways=[gateway("fake1", NS, [["example.org"]]), gateway("fake2", NS, [["new.org"]])],
            virtualservices=[
                virtualservice("vs1", NS, ["fake1"], ["example.org"]),
                virtualservice("vs2", NS, ["fake2"], ["new.org"]),
            ],
        ),
        BOTH_NEW,
    ),
    Case(
        "two simple virtualservices with one gateway each, one ingress",
        Cluster(
            [lb_service(namespace=NS, ips=["8.8.8.8"], hostnames=["lb.com"])],
            [lb_ingress("ingress1", NS, ips=["8.8.8.8"], hostnames=["lb.com"])],
            [
                gateway("fake1", NS, [["example.org"]], {INGRESS: "ingress1"}),
                gateway("fake2", NS, [["new.org"]], {INGRESS: "ingress1"}),
            ],
            [
                virtualservice("vs1", NS, ["fake1"], ["example.org"]),
                virtualservice("vs2", NS, ["fake2"], ["new.org"]),
            ],
        ),
        BOTH_NEW,
    ),
    *(
        Case(
            title,
            Cluster(
                [service],
                gateways=[gateway("gw1", NS, STAR), gateway("gw2", NS, STAR)],
                virtualservices=[virtualservice("vs", NS, ["gw1", "gw2"], ["example.org"])],
            ),
            EXAMPLE_A,
        )
        for title, service in (
            (
                "one virtualservice with two gateways, one ingressgateway loadbalancer service",
                lb_service(namespace=NS, ips=["8.8.8.8"]),
            ),
            (
                "one virtualservice with two gateways, one ingressgateway loadbalancer service with "
                "externalIPs",
                lb_service(namespace=NS, external_ips=["8.8.8.8"]),
            ),
        )
    ),
    Case(
        "two simple virtualservices on different namespaces with the same target gateway, one ingressgateway "
        "loadbalancer service",
        Cluster(
            [lb_service(namespace="istio-system", ips=["8.8.8.8"], hostnames=["lb.com"])],
            gateways=[gateway("fake1", "istio-system", STAR)],
            virtualservices=[
                virtualservice("vs1", "testing1", ["istio-system/fake1"], ["example.org"]),
                virtualservice("vs2", "testing2", ["istio-system/fake1"], ["new.org"]),
            ],
        ),
        BOTH_NEW,
    ),
    *(
        Case(
            "two simple virtualservices with one gateway on different namespaces and a target namespace, "
            + title,
            Cluster(
                services,
                ingresses,
                [gateway("fake1", "testing1", STAR, annotations)],
                [
                    virtualservice("vs1", "testing1", ["testing1/fake1"], ["example.org"]),
                    virtualservice("vs2", "testing2", ["testing1/fake1"], ["new.org"]),
                ],
                namespace="testing1",
            ),
            want,
        )
        for title, services, ingresses, annotations, want in (
            (
                "one ingressgateway loadbalancer service",
                [lb_service(namespace="testing1", ips=["8.8.8.8"], hostnames=["lb.com"])],
                [],
                None,
                BOTH,
            ),
            (
                "one ingressgateway loadbalancer service with externalIPs",
                [lb_service(namespace="testing1", external_ips=["8.8.8.8"])],
                [],
                None,
                EXAMPLE_A,
            ),
            (
                "one ingress",
                [],
                [lb_ingress("ingress1", "testing1", ips=["8.8.8.8"], hostnames=["lb.com"])],
                {INGRESS: "ingress1"},
                BOTH,
            ),
        )
    ),
    *(
        Case(title, one_vs(annotations, annotation_filter), want)
        for title, annotations, annotation_filter, want in (
            (
                "valid matching annotation filter expression",
                {"kubernetes.io/virtualservice.class": "nginx"},
                "kubernetes.io/virtualservice.class in (alb, nginx)",
                EXAMPLE_A,
            ),
            (
                "valid non-matching annotation filter expression",
                {"kubernetes.io/virtualservice.class": "tectonic"},
                "kubernetes.io/gateway.class in (alb, nginx)",
                {},
            ),
            (
                "valid matching annotation filter label",
                {"kubernetes.io/virtualservice.class": "nginx"},
                "kubernetes.io/virtualservice.class=nginx",
                EXAMPLE_A,
            ),
            (
                "valid non-matching annotation filter label",
                {"kubernetes.io/virtualservice.class": "alb"},
                "kubernetes.io/virtualservice.class=nginx",
                {},
            ),
            ("our controller type is dns-controller", {CONTROLLER: "dns-controller"}, "", EXAMPLE_A),
            ("different controller types are ignored", {CONTROLLER: "some-other-tool"}, "", {}),
        )
    ),
    Case(
        "valid matching label filter",
        one_vs(labels={"app": "istio-vs"}, label_filter="app=istio-vs"),
        EXAMPLE_A,
    ),
    Case("valid non-matching label filter", one_vs(labels={"app": "other"}, label_filter="app=istio-vs"), {}),
    Case(
        "gateway ingress annotation; ingress not found",
        Cluster(
            ingresses=[lb_ingress("ingress1", NS, ips=["8.8.8.8"])],
            gateways=[gateway("fake1", NS, STAR, {INGRESS: "ingress2"})],
            virtualservices=[virtualservice("vs1", NS, ["fake1"], ["example.org"])],
        ),
        {},
        [istio.UNRESOLVED],
        differs="external-dns fails its whole sync (expectError); the VirtualService publishes nothing "
        "new and says why",
    ),
    Case(
        "template for virtualservice if host is missing",
        Cluster(
            [lb_service(namespace=NS, ips=["8.8.8.8"], hostnames=["elb.com"])],
            gateways=[gateway("fake1", NS, STAR)],
            virtualservices=[virtualservice("vs1", NS, ["fake1"], [""])],
            common=TEMPLATE,
        ),
        {("vs1.ext-dns.test.com", "A"): a("8.8.8.8"), ("vs1.ext-dns.test.com", "CNAME"): a("elb.com")},
    ),
    Case(
        "multiple FQDN template hostnames",
        Cluster(
            [lb_service(namespace=NS, ips=["8.8.8.8"])],
            gateways=[gateway("fake1", NS, STAR)],
            virtualservices=[virtualservice("vs1", NS, ["fake1"], [""])],
            common=SourceOptions(fqdn_template=TWO_TEMPLATES),
        ),
        {("vs1.ext-dns.test.com", "A"): a("8.8.8.8"), ("vs1.ext-dna.test.com", "A"): a("8.8.8.8")},
    ),
    Case(
        "multiple FQDN template hostnames with restricted gw.hosts",
        Cluster(
            gateways=[
                gateway("fake1", NS, [["*.org", "*.ext-dns.test.com"]], {TARGET: "gateway-target.com"})
            ],
            virtualservices=[
                virtualservice("vs1", NS, ["fake1"], ["example.org"]),
                virtualservice("vs2", NS, ["fake1"], []),
            ],
            common=SourceOptions(fqdn_template=TWO_TEMPLATES, combine_fqdn_annotation=True),
        ),
        {
            ("vs1.ext-dns.test.com", "CNAME"): a("gateway-target.com"),
            ("vs2.ext-dns.test.com", "CNAME"): a("gateway-target.com"),
            ("example.org", "CNAME"): a("gateway-target.com"),
        },
    ),
    Case(
        "virtualservice with target annotation",
        Cluster(
            [lb_service(namespace=NS, ips=["8.8.8.8"])],
            virtualservices=[
                virtualservice("vs1", NS, ["fake1"], ["example.org"], {TARGET: "virtualservice-target.com"}),
                virtualservice("vs2", NS, ["fake1"], ["example2.org"], {TARGET: "virtualservice-target.com"}),
            ],
        ),
        {
            ("example.org", "CNAME"): a("virtualservice-target.com"),
            ("example2.org", "CNAME"): a("virtualservice-target.com"),
        },
    ),
    *(
        Case(
            title,
            Cluster(
                [lb_service(namespace=NS, ips=["8.8.8.8"])],
                [lb_ingress("ingress1", NS, ips=["1.1.1.1"])],
                [gateway("fake1", NS, STAR, annotations)],
                [
                    virtualservice("vs1", NS, ["fake1"], ["example.org"]),
                    virtualservice("vs2", NS, ["fake1"], ["example2.org"]),
                ],
            ),
            {
                ("example.org", "CNAME"): a("gateway-target.com"),
                ("example2.org", "CNAME"): a("gateway-target.com"),
            },
        )
        for title, annotations in (
            ("virtualservice; gateway with target annotation", {TARGET: "gateway-target.com"}),
            (
                "virtualservice; gateway with target and ingress annotation",
                {TARGET: "gateway-target.com", INGRESS: "ingress1"},
            ),
        )
    ),
    Case(
        "virtualservice with hostname annotation",
        Cluster(
            [lb_service(namespace=NS, ips=["1.2.3.4"])],
            gateways=[gateway("fake1", NS, STAR)],
            virtualservices=[
                virtualservice("vs1", NS, ["fake1"], ["example.org"], {HOSTNAME: "dns-through-hostname.com"})
            ],
        ),
        {("example.org", "A"): a("1.2.3.4"), ("dns-through-hostname.com", "A"): a("1.2.3.4")},
    ),
    Case(
        "virtualservice with hostname annotation having multiple hostnames, restricted by gw.hosts",
        Cluster(
            [lb_service(namespace=NS, ips=["1.2.3.4"])],
            gateways=[gateway("fake1", NS, [["*.bar.com"]])],
            virtualservices=[
                virtualservice(
                    "vs1",
                    NS,
                    ["fake1"],
                    ["baz.bar.org"],
                    {HOSTNAME: "foo.bar.com, another-dns-through-hostname.com"},
                )
            ],
        ),
        {("foo.bar.com", "A"): a("1.2.3.4")},
    ),
    Case(
        "template for virtualservice; gateway with target annotation",
        Cluster(
            gateways=[
                gateway("fake1", NS, STAR, {TARGET: "gateway-target.com"}),
                gateway("fake2", NS, STAR, {TARGET: "gateway-target.com"}),
                gateway("fake3", NS, STAR, {TARGET: "1.2.3.4"}),
            ],
            virtualservices=[
                virtualservice("vs1", NS, ["fake1"]),
                virtualservice("vs2", NS, ["fake2"]),
                virtualservice("vs3", NS, ["fake3"]),
            ],
            common=TEMPLATE,
        ),
        {
            ("vs1.ext-dns.test.com", "CNAME"): a("gateway-target.com"),
            ("vs2.ext-dns.test.com", "CNAME"): a("gateway-target.com"),
            ("vs3.ext-dns.test.com", "A"): a("1.2.3.4"),
        },
    ),
    Case(
        "ignore hostname annotations",
        Cluster(
            [lb_service(namespace=NS, ips=["8.8.8.8"], hostnames=["lb.com"])],
            gateways=[gateway("fake1", NS, STAR)],
            virtualservices=[
                virtualservice("vs1", NS, ["fake1"], ["example.org"], {HOSTNAME: "ignore.me"}),
                virtualservice("vs2", NS, ["fake1"], ["new.org"], {HOSTNAME: "ignore.me.too"}),
            ],
            common=SourceOptions(ignore_hostname_annotation=True),
        ),
        BOTH_NEW,
    ),
    Case(
        "complex setup with multiple gateways and multiple vs.hosts only matching some of the gateway",
        COMPLEX,
        {
            ("somedomain.com", "CNAME"): a("target1.com"),
            ("hello.bax.com", "CNAME"): a("target3.com"),
            ("world.bak.com", "CNAME"): a("target1.com"),
            ("foo.bak.com", "CNAME"): a("target1.com"),
        },
        [INVALID_REASON] * 4,
        # external-dns: foo.bar.com → target1, target2; hello.bar.com → target2, target3;
        # world.bax.com → target1, target3; foo.bax.com → target1, target4
        ("foo.bar.com", "hello.bar.com", "world.bax.com", "foo.bax.com"),
    ),
    *(
        Case(
            f"TestIstioVirtualServiceSource_GWServiceSelectorMatchServiceSelector: {title}",
            Cluster(
                [lb_service("fake-service", selector=SELECTOR, external_ips=["10.10.10.255"])],
                gateways=[gateway("fake-gateway", hosts=[["example.org"]], selector=selector)],
                virtualservices=[
                    virtualservice(
                        "fake-vservice",
                        gateways=["default/fake-gateway"],
                        hosts=["example.org"],
                        export_to="*",
                    )
                ],
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
]


@pytest.mark.parametrize("case", FROM_CONFIG + ENDPOINTS, ids=lambda c: c.title)
def test_external_dns_case(case: Case) -> None:
    assert case.cluster.records(KIND) == case.want
    problems = case.cluster.translate(KIND)[1]
    assert [p.reason for p in problems] == case.reasons
    dropped = [p.message.split(":")[1].strip() for p in problems if p.reason == INVALID_REASON]
    assert sorted(dropped) == sorted(case.two_target_cnames)
    assert all(
        "a CNAME has exactly one target, got 2" in p.message for p in problems if p.reason == INVALID_REASON
    )


# testVirtualServiceBindsToGateway: (title, Gateway namespace and server hosts, VirtualService namespace and
# exportTo, host, binds).
BINDS = [
    ("matching host *", ("default", "*"), ("default", ""), "foo.bar", True),
    ("matching host *.<domain>", ("default", "*.foo.bar"), ("default", ""), "baz.foo.bar", True),
    (
        "not matching host *.<domain> (the domain itself)",
        ("default", "*.foo.bar"),
        ("default", ""),
        "foo.bar",
        False,
    ),
    ("not matching host *.<domain> (no dot)", ("default", "*.foo.bar"), ("default", ""), "bazfoo.bar", False),
    ("not matching host *.<domain> (a star)", ("default", "*.foo.bar"), ("default", ""), "*foo.bar", False),
    ("matching host */*", ("default", "*/*"), ("default", ""), "foo.bar", True),
    ("matching host <namespace>/*", ("istio-system", "myns/*"), ("myns", ""), "foo.bar", True),
    ("matching host ./*", ("istio-system", "./*"), ("istio-system", ""), "foo.bar", True),
    ("not matching host ./*", ("istio-system", "./*"), ("myns", ""), "foo.bar", False),
    ("not matching host <namespace>/*", ("istio-system", "myns/*"), ("otherns", ""), "foo.bar", False),
    ("matching exportTo *", ("istio-system", "*"), ("otherns", "*"), "foo.bar", True),
    ("matching exportTo <namespace>", ("istio-system", "*"), ("otherns", "istio-system"), "foo.bar", True),
    ("not matching exportTo <namespace>", ("istio-system", "*"), ("otherns", "myns"), "foo.bar", False),
    ("not matching exportTo .", ("istio-system", "*"), ("otherns", "."), "foo.bar", False),
]


@pytest.mark.parametrize(("title", "gw", "vs", "host", "want"), BINDS, ids=[b[0] for b in BINDS])
def test_virtualservice_binds_to_gateway(
    title: str, gw: tuple[str, str], vs: tuple[str, str], host: str, want: bool
) -> None:
    gateway_obj = gateway("gw", gw[0], [[gw[1]]])
    assert binds(virtualservice("vs", vs[0], export_to=vs[1]), gateway_obj, host) is want


def test_the_gateway_a_spec_gateways_entry_names() -> None:
    # TestVirtualServiceSourceGetGateway: EmptyGateway and MeshGateway name none, MissingGateway is skipped
    # (external-dns warns), InvalidGatewayStr is an error, ExistingGateway is found in its namespace.
    vs = virtualservice(
        "exist", "doesnt", ["", "mesh", "doesnt/exist", "1/2/3/", "bar/foo", "local"], ["a.ex.com"]
    )
    assert gateway_refs(vs) == [
        ("doesnt/exist", "spec.gateways[2]", "doesnt/exist"),
        ("1/2/3/", "spec.gateways[3]", ""),
        ("bar/foo", "spec.gateways[4]", "bar/foo"),
        ("local", "spec.gateways[5]", "doesnt/local"),
    ]
    found = Cluster(
        [lb_service(ips=["192.0.2.1"])], gateways=[gateway("foo", "bar", STAR)], virtualservices=[vs]
    )
    endpoints, problems = found.translate(KIND)
    assert [(p.field, p.reason) for p in problems] == [
        ("spec.gateways[2]", GATEWAY_NOT_FOUND),
        ("spec.gateways[3]", istio.UNRESOLVED),
        ("spec.gateways[5]", GATEWAY_NOT_FOUND),
    ]
    assert endpoints == []  # an unresolved entry: the VirtualService keeps what it had, here nothing
    fine = virtualservice("exist", "doesnt", ["mesh", "bar/foo"], ["a.ex.com"])
    found = Cluster(
        [lb_service(ips=["192.0.2.1"])], gateways=[gateway("foo", "bar", STAR)], virtualservices=[fine]
    )
    assert found.records(KIND) == {("a.ex.com", "A"): ("192.0.2.1",)}


def test_ttl_provider_specific_and_the_resource_label() -> None:
    # testVirtualServiceEndpoints "virtualservices with annotation and custom TTL"; testEndpointsFromVirtual-
    # ServiceConfig "provider-specific annotation is converted to endpoint property"; TestResourceLabelIsSet.
    cluster = Cluster(
        [lb_service(namespace=NS, ips=["8.8.8.8"])],
        gateways=[gateway("fake1", NS, STAR), gateway("foo-gateway-with-targets", "istio-system", STAR)],
        virtualservices=[
            virtualservice("vs1", NS, ["fake1"], ["example.org"], {TTL: "6"}),
            virtualservice("vs2", NS, ["fake1"], ["example2.org"], {TTL: "1"}),
            virtualservice("vs3", NS, ["fake1"], ["foo.bar"], {GA + "aws-weight": "10"}),
            virtualservice(
                "foo-virtualservice", "istio-other", ["istio-system/foo-gateway-with-targets"], ["foo"]
            ),
        ],
    )
    endpoints, problems = cluster.translate(KIND)
    assert problems == []
    got = {(e.dns_name, e.targets, e.ttl, e.provider_specific, e.labels[RESOURCE_LABEL]) for e in endpoints}
    assert got == {
        ("example.org", ("8.8.8.8",), 6, (), "virtualservice/testing/vs1"),
        ("example2.org", ("8.8.8.8",), 1, (), "virtualservice/testing/vs2"),
        ("foo.bar", ("8.8.8.8",), 0, (("aws/weight", "10"),), "virtualservice/testing/vs3"),
        ("foo", ("8.8.8.8",), 0, (), "virtualservice/istio-other/foo-virtualservice"),
    }
