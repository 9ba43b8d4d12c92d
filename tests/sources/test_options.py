"""The flags every source shares (sources.options): --fqdn-template, --combine-fqdn-annotation,
--ignore-hostname-annotation, --default-targets and --force-default-targets.

Rows naming an external-dns test mirror kubernetes-sigs/external-dns v0.22.0 (source/service_test.go
TestServiceSource and TestServiceSourceNodePortServices, source/ingress_test.go, source/wrappers/
multisource_test.go testMultiSourceEndpointsDefaultTargets, pkg/apis/externaldns/validation).
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from shardsync.flags import ConfigError
from shardsync.records.endpoint import RESOURCE_LABEL, Endpoint
from shardsync.replica.config import Settings, configure, settings_from_args
from shardsync.sources import options
from shardsync.sources.crd import dnsendpoint_endpoints
from shardsync.sources.ingress import ingress_endpoints
from shardsync.sources.options import SourceOptions, with_default_targets
from shardsync.sources.service import ServiceOptions, service_dependencies, service_endpoints
from shardsync.sources.service_inputs import ServiceDependencies

from .objects import GA, dnsendpoint, ingress, node, records, service

TEMPLATE = SourceOptions(fqdn_template=("{{.Name}}.fqdn.org,{{.Name}}.fqdn.com",))
LB = [{"ip": "1.2.3.4"}]


def parse(argv: list[str]) -> Settings:
    env = {"POD_NAME": "shardsync-0"}
    parser = argparse.ArgumentParser()
    configure(parser, env)
    return settings_from_args(parser.parse_args([*argv, "--fake-zone", "example.com"]), env)


# --- --fqdn-template on Services ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("svc", "opts", "common_options", "want"),
    [
        # TestServiceSource "FQDN template with multiple hostnames return an endpoint with target IP"
        (
            service("foo", lb=LB),
            ServiceOptions(service_types=("LoadBalancer", "NodePort")),
            TEMPLATE,
            {("foo.fqdn.org", "A", ("1.2.3.4",)), ("foo.fqdn.com", "A", ("1.2.3.4",))},
        ),
        # "with excluded service type should not generate endpoints"
        (service("foo", lb=LB), ServiceOptions(service_types=("NodePort",)), TEMPLATE, set()),
        # "FQDN template with multiple hostnames return an endpoint with target IP when ignoring annotations"
        (
            service("foo", annotations={GA + "hostname": "foo.example.org"}, lb=LB),
            None,
            SourceOptions(fqdn_template=TEMPLATE.fqdn_template, ignore_hostname_annotation=True),
            {("foo.fqdn.org", "A", ("1.2.3.4",)), ("foo.fqdn.com", "A", ("1.2.3.4",))},
        ),
        # the template is not used when the annotation gives endpoints (CombineWithEndpoints) ...
        (
            service("foo", annotations={GA + "hostname": "foo.example.org"}, lb=LB),
            None,
            TEMPLATE,
            {("foo.example.org", "A", ("1.2.3.4",))},
        ),
        # ... unless --combine-fqdn-annotation
        (
            service("foo", annotations={GA + "hostname": "foo.example.org"}, lb=LB),
            None,
            SourceOptions(fqdn_template=("{{.Name}}.fqdn.org",), combine_fqdn_annotation=True),
            {("foo.example.org", "A", ("1.2.3.4",)), ("foo.fqdn.org", "A", ("1.2.3.4",))},
        ),
        # an annotated name that gives no endpoint (ClusterIP without --publish-internal-services) does not
        # stop the template
        (
            service("foo", type_="ClusterIP", annotations={GA + "hostname": "foo.example.org"}),
            ServiceOptions(publish_internal=True),
            SourceOptions(fqdn_template=("{{.Name}}.{{.Namespace}}.svc.example",)),
            {("foo.example.org", "A", ("10.96.0.10",))},
        ),
        (
            service("foo", type_="ClusterIP"),
            ServiceOptions(publish_internal=True),
            SourceOptions(fqdn_template=("{{.Name}}.{{.Namespace}}.svc.example",)),
            {("foo.default.svc.example", "A", ("10.96.0.10",))},
        ),
    ],
)
def test_service_fqdn_template(
    svc: dict[str, Any], opts: ServiceOptions | None, common_options: SourceOptions, want: set[Any]
) -> None:
    assert records(service_endpoints(svc, opts=opts, common=common_options)) == want


def test_node_port_service_with_template_reads_nodes() -> None:
    """TestServiceSourceNodePortServices "non-annotated NodePort services with set fqdnTemplate return an
    endpoint with target IP"."""
    svc = service("foo", type_="NodePort", ports=[{"port": 80, "nodePort": 30192, "protocol": "TCP"}])
    template = SourceOptions(fqdn_template=("{{.Name}}.bar.example.com",))
    nodes = {"n1": node("n1", ("ExternalIP", "54.10.11.1")), "n2": node("n2", ("ExternalIP", "54.10.11.2"))}
    assert service_dependencies(svc, ServiceOptions(), template) == ServiceDependencies(nodes=True)
    assert service_dependencies(svc, ServiceOptions()) == ServiceDependencies()
    assert records(service_endpoints(svc, nodes=nodes, common=template)) == {
        ("foo.bar.example.com", "A", ("54.10.11.1", "54.10.11.2")),
        ("_foo._tcp.foo.bar.example.com", "SRV", ("0 50 30192 foo.bar.example.com.",)),
    }


# --- --fqdn-template on Ingresses --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ing", "common_options", "want"),
    [
        # ingress_test.go "template for ingress if host is missing"
        (
            ingress("fake1", lb=LB),
            SourceOptions(fqdn_template=("{{.Name}}.ext-dns.test.com",)),
            {"fake1.ext-dns.test.com"},
        ),
        # hosts of its own: the template is not used ...
        (
            ingress("fake1", rules=["example.org"], lb=LB),
            SourceOptions(fqdn_template=("{{.Name}}.ext-dns.test.com",)),
            {"example.org"},
        ),
        # ... unless combined
        (
            ingress("fake1", rules=["example.org"], lb=LB),
            SourceOptions(fqdn_template=("{{.Name}}.ext-dns.test.com",), combine_fqdn_annotation=True),
            {"example.org", "fake1.ext-dns.test.com"},
        ),
        # --ignore-hostname-annotation skips only the annotation: spec hosts stay
        (
            ingress("fake1", rules=["example.org"], annotations={GA + "hostname": "a.example.net"}, lb=LB),
            SourceOptions(fqdn_template=("{{.Name}}.ext-dns.test.com",), ignore_hostname_annotation=True),
            {"example.org"},
        ),
    ],
)
def test_ingress_fqdn_template(ing: dict[str, Any], common_options: SourceOptions, want: set[str]) -> None:
    result = ingress_endpoints(ing, common=common_options)
    assert {ep.dns_name for ep in result.endpoints} == want
    assert all(ep.targets == ("1.2.3.4",) for ep in result.endpoints)


# --- --default-targets, --force-default-targets ------------------------------------------------------------

DEFAULTS = ("127.0.0.1", "127.0.0.2", "foo.example.org", "2001:db8::1")
LABELS = {RESOURCE_LABEL: "crd/default/records"}


def by_key(endpoints: list[Endpoint]) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(e.dns_name, e.record_type, e.targets) for e in endpoints}


@pytest.mark.parametrize(
    ("force", "source_targets", "want"),
    [
        # "Defaults applied when source targets are empty"
        (
            False,
            (),
            {
                ("foo", "A", ("127.0.0.1", "127.0.0.2")),
                ("foo", "AAAA", ("2001:db8::1",)),
                ("foo", "CNAME", ("foo.example.org",)),
            },
        ),
        # "Defaults NOT applied when source targets exist"
        (False, ("8.8.8.8",), {("foo", "A", ("8.8.8.8",))}),
        # "Defaults forced when source targets exist and flag is set"
        (
            True,
            ("8.8.8.8",),
            {
                ("foo", "A", ("127.0.0.1", "127.0.0.2")),
                ("foo", "AAAA", ("2001:db8::1",)),
                ("foo", "CNAME", ("foo.example.org",)),
            },
        ),
    ],
)
def test_default_targets(force: bool, source_targets: tuple[str, ...], want: set[Any]) -> None:
    ep = Endpoint("foo", "A", source_targets, ttl=60, labels=LABELS)
    out = with_default_targets([ep], SourceOptions(default_targets=DEFAULTS, force_default_targets=force))
    assert by_key(out) == want
    assert all(e.labels == LABELS and e.ttl == 60 for e in out)


def test_without_default_targets_nothing_changes() -> None:
    ep = Endpoint("foo", "A", ("8.8.8.8",))
    assert with_default_targets([ep], SourceOptions(force_default_targets=True)) == [ep]


def test_dnsendpoint_without_targets_gets_the_default_targets() -> None:
    """external-dns's crd source lets A, AAAA and CNAME entries without targets through for the defaults."""
    obj = dnsendpoint([{"dnsName": "a.example.com", "recordType": "A", "targets": []}])
    filled = dnsendpoint_endpoints(obj, SourceOptions(default_targets=("192.0.2.1", "2001:db8::1")))
    assert records(filled) == {
        ("a.example.com", "A", ("192.0.2.1",)),
        ("a.example.com", "AAAA", ("2001:db8::1",)),
    }
    assert filled.problems == []
    refused = dnsendpoint_endpoints(obj)
    assert refused.endpoints == [] and "no targets" in refused.problems[0].message


# --- the flags ---------------------------------------------------------------------------------------------


def test_flags_fill_one_shared_value() -> None:
    s = parse(
        [
            "--fqdn-template={{.Name}}.example.com",
            "--combine-fqdn-annotation",
            "--ignore-hostname-annotation",
            "--default-targets=192.0.2.1",
            "--default-targets=192.0.2.2",
            "--force-default-targets",
        ]
    )
    assert s.options(options.FLAGS) == SourceOptions(
        fqdn_template=("{{.Name}}.example.com",),
        combine_fqdn_annotation=True,
        ignore_hostname_annotation=True,
        default_targets=("192.0.2.1", "192.0.2.2"),
        force_default_targets=True,
    )
    assert parse([]).options(options.FLAGS) == SourceOptions()


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        # validation.go: "FQDN Template must be set if ignoring annotations"
        (["--ignore-hostname-annotation"], "--ignore-hostname-annotation needs --fqdn-template"),
        (["--fqdn-template={{ if .Name }}x{{ end }}"], "--fqdn-template"),
    ],
)
def test_flags_that_cannot_work_are_refused(argv: list[str], why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse(argv)


@pytest.mark.parametrize(
    ("prefix", "why"),
    [
        # validation.go: "--annotation-prefix cannot be empty", "--annotation-prefix must end with '/'"
        ("", "cannot be empty"),
        ("external-dns.kubernetes.io", "must end with '/'"),
        ("dns.example.com/", "not supported"),
    ],
)
def test_annotation_prefix_other_than_external_dns_is_refused(prefix: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse([f"--annotation-prefix={prefix}"])


@pytest.mark.parametrize("prefix", ["external-dns.kubernetes.io/", "external-dns.alpha.kubernetes.io/"])
def test_annotation_prefix_of_either_external_dns_version_is_accepted(prefix: str) -> None:
    assert parse([f"--annotation-prefix={prefix}"]).options(options.FLAGS).annotation_prefix == prefix
