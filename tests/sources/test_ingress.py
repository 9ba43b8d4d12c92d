"""Ingress translation against external-dns's ingress source."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardsync.records.endpoint import CREATED_LABEL, RESOURCE_LABEL, normalize_name
from shardsync.sources.ingress import IngressOptions, ingress_endpoints, ingress_names
from shardsync.sources.options import SourceOptions

from .objects import ALPHA, CREATED, GA, ingress, records

LB = [{"ip": "1.2.3.4"}]


def names(result: Any) -> set[str]:
    return {ep.dns_name for ep in result.endpoints}


def test_rules_tls_and_annotation_hosts() -> None:
    ing = ingress(
        rules=["a.example.com", ""],
        tls=[["b.example.com", "a.example.com"]],
        annotations={GA + "hostname": "c.example.com"},
        lb=LB,
    )
    result = ingress_endpoints(ing)
    assert records(result) == {
        ("a.example.com", "A", ("1.2.3.4",)),
        ("b.example.com", "A", ("1.2.3.4",)),
        ("c.example.com", "A", ("1.2.3.4",)),
    }
    assert result.problems == []
    assert all(
        ep.labels == {RESOURCE_LABEL: "ingress/default/web", CREATED_LABEL: CREATED}
        for ep in result.endpoints
    )


@pytest.mark.parametrize(
    ("opts", "common", "want"),
    [
        (IngressOptions(), None, {"a.example.com", "b.example.com", "c.example.com"}),
        (IngressOptions(ignore_ingress_rules_spec=True), None, {"b.example.com", "c.example.com"}),
        (IngressOptions(ignore_ingress_tls_spec=True), None, {"a.example.com", "c.example.com"}),
        (
            IngressOptions(),
            SourceOptions(ignore_hostname_annotation=True),
            {"a.example.com", "b.example.com"},
        ),
    ],
)
def test_ignore_flags(opts: IngressOptions, common: SourceOptions | None, want: set[str]) -> None:
    ing = ingress(
        rules=["a.example.com"],
        tls=[["b.example.com"]],
        annotations={GA + "hostname": "c.example.com"},
        lb=LB,
    )
    assert names(ingress_endpoints(ing, opts, common)) == want


@pytest.mark.parametrize(
    ("source", "want", "problems"),
    [
        ("defined-hosts-only", {"a.example.com", "b.example.com"}, 0),
        ("Annotation-Only", {"c.example.com"}, 0),
        ("both", set(), 1),
    ],
)
def test_hostname_source_annotation(source: str, want: set[str], problems: int) -> None:
    ann = {GA + "hostname": "c.example.com", ALPHA + "ingress-hostname-source": source}
    result = ingress_endpoints(
        ingress(rules=["a.example.com"], tls=[["b.example.com"]], annotations=ann, lb=LB)
    )
    assert names(result) == want
    assert len(result.problems) == problems


@pytest.mark.parametrize(
    ("lb", "ann", "want"),
    [
        ([{"hostname": "lb.example.net"}], {}, {("CNAME", ("lb.example.net",))}),
        (
            [{"ip": "1.2.3.4", "hostname": "lb.example.net"}],
            {},
            {("A", ("1.2.3.4",)), ("CNAME", ("lb.example.net",))},
        ),
        ([{"ip": "1.2.3.4"}, {"ip": "2001:db8::1"}], {}, {("A", ("1.2.3.4",)), ("AAAA", ("2001:db8::1",))}),
        (LB, {ALPHA + "target": "edge.example.net."}, {("CNAME", ("edge.example.net",))}),
        ([], {}, set()),
    ],
)
def test_targets(lb: list[dict[str, str]], ann: dict[str, str], want: set[Any]) -> None:
    result = ingress_endpoints(ingress(rules=["a.example.com"], annotations=ann, lb=lb))
    assert {(t, targets) for _, t, targets in records(result)} == want


def test_ttl_set_identifier_provider_specific() -> None:
    ann = {GA + "ttl": "120", GA + "set-identifier": "eu", GA + "webhook-zone": "z1"}
    [ep] = ingress_endpoints(ingress(rules=["a.example.com"], annotations=ann, lb=LB)).endpoints
    assert (ep.ttl, ep.set_identifier, ep.provider_specific) == (120, "eu", (("webhook/zone", "z1"),))


@pytest.mark.parametrize(
    ("class_name", "legacy", "published"),
    [
        ("nginx", None, True),
        ("traefik", None, False),
        ("traefik", "nginx", False),  # spec.ingressClassName wins over the annotation
        (None, "nginx", True),
        ("", "nginx", True),
        (None, "traefik", False),
        (None, None, False),
    ],
)
def test_ingress_class_filter(class_name: str | None, legacy: str | None, published: bool) -> None:
    ann = {"kubernetes.io/ingress.class": legacy} if legacy is not None else {}
    ing = ingress(rules=["a.example.com"], annotations=ann, lb=LB, class_name=class_name)
    opts = IngressOptions(ingress_class_names=("nginx", "internal"))
    assert bool(ingress_endpoints(ing, opts).endpoints) is published
    assert ingress_endpoints(ing).endpoints  # no --ingress-class: every class


def test_controller_annotation_skips() -> None:
    ing = ingress(rules=["a.example.com"], annotations={GA + "controller": "other"}, lb=LB)
    assert ingress_endpoints(ing).endpoints == []


def test_invalid_rule_host_reported_on_its_field() -> None:
    result = ingress_endpoints(ingress(rules=["ok.example.com", "bad host.example.com"], lb=LB))
    assert names(result) == {"ok.example.com"}
    [problem] = result.problems
    assert problem.field == "spec.rules[1].host"
    assert problem.ref.kind == "Ingress" and problem.ref.api_version == "networking.k8s.io/v1"


ANYTHING = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
HOSTS = st.one_of(
    st.sampled_from(["a.example.com", "*.example.com", "", "A.Example.COM.", "x"]), st.text(max_size=15)
)


@st.composite
def ingresses(draw: st.DrawFn) -> dict[str, Any]:
    ann = draw(
        st.dictionaries(
            st.sampled_from([GA + "hostname", ALPHA + "target", GA + "ttl", GA + "ingress-hostname-source"]),
            HOSTS,
            max_size=4,
        )
    )
    lb = draw(st.lists(st.fixed_dictionaries({}, optional={"ip": HOSTS, "hostname": HOSTS}), max_size=2))
    ing = ingress(
        rules=draw(st.lists(HOSTS, max_size=3)),
        tls=draw(st.lists(st.lists(HOSTS, max_size=2), max_size=2)),
        annotations=ann,
        lb=lb,
    )
    if draw(st.booleans()):
        ing[draw(st.sampled_from(["spec", "status", "metadata"]))] = draw(ANYTHING)
    return ing


@settings(max_examples=300, deadline=None)
@given(ingresses())
def test_any_ingress_translates_without_exception(ing: dict[str, Any]) -> None:
    result = ingress_endpoints(ing)
    names = {normalize_name(n) for n in ingress_names(ing, SourceOptions()) or ()}  # SourceKind.names
    for ep in result.endpoints:
        ep.validate()
        assert ep.labels[RESOURCE_LABEL].startswith("ingress/")
        assert ep.dns_name in names
