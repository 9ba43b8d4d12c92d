"""Object, domain and record-type filters with external-dns's semantics."""

from __future__ import annotations

import re

import pytest

from shardsync.endpoint import Endpoint
from shardsync.selectors import SelectorError
from shardsync.sources.filters import DomainFilter, ObjectFilter, RecordTypeFilter, filter_endpoints

from .objects import ALPHA, GA, service


@pytest.mark.parametrize(
    ("include", "exclude", "domain", "matches"),
    [
        ([], [], "anything.org", True),
        (["google.com"], [], "google.com", True),
        (["google.com"], [], "google.com.", True),
        (["google.com"], [], "Exaring.Google.com", True),
        (["google.com"], [], "agoogle.com", False),
        (["google.com"], [], "google.com.evil.org", False),
        (["google.com."], [], "a.google.com", True),
        ([" Google.COM "], [], "a.google.com", True),
        ([".google.com"], [], "google.com", False),
        ([".google.com"], [], "a.google.com", True),
        (["google.com", "example.org"], [], "x.example.org", True),
        (["google.com"], ["api.google.com"], "api.google.com", False),
        (["google.com"], ["api.google.com"], "v1.api.google.com", False),
        (["google.com"], ["api.google.com"], "www.google.com", True),
        ([], ["example.org"], "a.example.org", False),
        ([], ["example.org"], "a.example.com", True),
        ([""], [], "a.example.com", True),
    ],
)
def test_domain_filter(include: list[str], exclude: list[str], domain: str, matches: bool) -> None:
    assert DomainFilter.parse(include, exclude).match(domain) is matches


@pytest.mark.parametrize(
    ("regex", "exclusion", "domain", "matches"),
    [
        (r"example\.(com|org)$", "", "a.example.org", True),
        (r"example\.(com|org)$", "", "a.example.net", False),
        (r"example\.(com|org)$", r"^internal\.", "internal.example.com", False),
        (r"example\.(com|org)$", r"^internal\.", "a.example.net", False),  # both: inclusion still needed
        ("", r"^internal\.", "internal.example.com", False),
        ("", r"^internal\.", "a.example.net", True),
        (r"example", "", "A.EXAMPLE.COM.", True),  # lower-cased, trailing dot dropped, unanchored search
    ],
)
def test_regex_domain_filter(regex: str, exclusion: str, domain: str, matches: bool) -> None:
    # The lists are ignored once a regular expression is given.
    df = DomainFilter.parse(["nothing.test"], [], regex, exclusion)
    assert df.match(domain) is matches


def test_bad_regex_is_a_configuration_error() -> None:
    with pytest.raises(re.error):
        DomainFilter.parse(regex_domain_filter="(")


def test_configured_and_match_parent() -> None:
    assert not DomainFilter().configured
    df = DomainFilter.parse(["a.example.com", ".b.example.com"], ["x.example.com"])
    assert df.configured
    assert df.match_parent("example.com")
    assert not df.match_parent("example.org")
    assert not df.match_parent("x.example.com")


def test_record_types() -> None:
    default = RecordTypeFilter()
    assert default.match("A") and default.match("AAAA") and default.match("CNAME")
    assert not default.match("SRV") and not default.match("TXT")
    custom = RecordTypeFilter.parse(["a", "srv", "CNAME"], ["cname"])
    assert custom.match("SRV") and not custom.match("CNAME") and not custom.match("AAAA")


def test_filter_endpoints() -> None:
    eps = [
        Endpoint.new("a.example.com", "A", ["1.2.3.4"]),
        Endpoint.new("_x._tcp.a.example.com", "SRV", ["0 50 1 a.example.com"]),
        Endpoint.new("a.example.org", "A", ["1.2.3.4"]),
    ]
    kept = filter_endpoints(eps, DomainFilter.parse(["example.com"]), RecordTypeFilter())
    assert kept == eps[:1]


def test_object_filter_namespace_and_labels() -> None:
    svc = service(namespace="prod")
    svc["metadata"]["labels"] = {"team": "dns", "tier": "edge"}
    assert ObjectFilter().matches(svc)
    assert ObjectFilter.parse(namespace="prod").matches(svc)
    assert not ObjectFilter.parse(namespace="dev").matches(svc)
    assert ObjectFilter.parse(label_filter="team=dns,tier in (edge)").matches(svc)
    assert not ObjectFilter.parse(label_filter="team!=dns").matches(svc)


@pytest.mark.parametrize("written", [ALPHA, GA])
@pytest.mark.parametrize("filtered", [ALPHA, GA])
def test_annotation_filter_sees_either_prefix(written: str, filtered: str) -> None:
    svc = service(annotations={written + "hostname": "a.example.com", "team": "dns"})
    assert ObjectFilter.parse(annotation_filter=f"{filtered}hostname").matches(svc)
    assert ObjectFilter.parse(annotation_filter="team=dns").matches(svc)
    assert not ObjectFilter.parse(annotation_filter=f"{filtered}exclude notin (true)," + "team=x").matches(
        svc
    )
    assert ObjectFilter.parse(annotation_filter=f"{filtered}exclude notin (true)").matches(svc)


def test_bad_selectors_are_configuration_errors() -> None:
    with pytest.raises(SelectorError):
        ObjectFilter.parse(label_filter="a in (b")
    with pytest.raises(SelectorError):
        ObjectFilter.parse(annotation_filter="n>1")
