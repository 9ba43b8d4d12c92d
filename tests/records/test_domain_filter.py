"""The one DomainFilter (external-dns's matching rules), as the sources, the replica's zone list and the
webhook provider's negotiation use it."""

from __future__ import annotations

from typing import Any

import pytest

from shardsync.records.domain_filter import DomainFilter, DomainFilterError


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
    with pytest.raises(DomainFilterError, match="regular expression"):
        DomainFilter.parse(regex_domain_filter="(")


def test_configured_and_match_parent() -> None:
    assert not DomainFilter().configured
    df = DomainFilter.parse(["a.example.com", ".b.example.com"], ["x.example.com"])
    assert df.configured
    assert df.match_parent("example.com")
    assert not df.match_parent("example.org")
    assert not df.match_parent("x.example.com")


def test_domain_filter_matching() -> None:
    df = DomainFilter.from_json({"include": ["Example.com.", ".sub.org"], "exclude": ["int.example.com"]})
    assert df.match("example.com") and df.match("a.example.com")
    assert not df.match("a.int.example.com") and not df.match("badexample.com")
    assert df.match("x.sub.org") and not df.match("sub.org")
    assert df.zones() == ["example.com"]
    regex = DomainFilter.from_json({"regexInclude": r"\.example\.com$", "regexExclude": "^int"})
    assert regex.match("a.example.com") and not regex.match("int.example.com")
    assert regex.zones() == []
    assert DomainFilter.from_json({}).match("anything.at.all")


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ([], "not an object"),
        ({"include": "example.com"}, "include must be a list"),
        ({"exclude": [1]}, "exclude must be a list"),
        ({"regexInclude": "("}, "regular expression"),
    ],
)
def test_from_json_refuses_what_is_not_a_filter(data: Any, error: str) -> None:
    with pytest.raises(DomainFilterError, match=error):
        DomainFilter.from_json(data)


def test_from_json_reads_the_lists_as_the_flags_do() -> None:
    sent = DomainFilter.from_json({"include": [" Example.COM.", ""], "exclude": ["int.example.com."]})
    assert sent == DomainFilter.parse(["example.com"], ["int.example.com"])
