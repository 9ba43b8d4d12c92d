"""external-dns annotations: both prefixes, each annotation's parsing, and no exception on any input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardsync.sources import annotations as ann

from .objects import ALPHA, ANNOTATION_NAMES, GA


@pytest.mark.parametrize("prefix", [ALPHA, GA])
def test_hostname_list_under_either_prefix(prefix: str) -> None:
    parsed = ann.parse({prefix + "hostname": " a.example.com, b.example.com.,c.example.com "})
    assert parsed.hostnames == ("a.example.com", "b.example.com.", "c.example.com")
    assert parsed.key("hostname") == prefix + "hostname"
    assert parsed.problems == ()


def test_new_prefix_wins_and_the_conflict_is_reported() -> None:
    parsed = ann.parse({ALPHA + "hostname": "old.example.com", GA + "hostname": "new.example.com"})
    assert parsed.hostnames == ("new.example.com",)
    [problem] = parsed.problems
    assert problem.key == ALPHA + "hostname"
    assert "takes precedence" in problem.message


def test_same_value_under_both_prefixes_is_no_conflict() -> None:
    parsed = ann.parse({ALPHA + "ttl": "60", GA + "ttl": "60"})
    assert parsed.ttl == 60
    assert parsed.problems == ()


def test_empty_list_entries_are_skipped_and_reported() -> None:
    parsed = ann.parse({GA + "hostname": "a.example.com,,b.example.com,"})
    assert parsed.hostnames == ("a.example.com", "b.example.com")
    assert len(parsed.problems) == 2


def test_unrelated_annotations_are_ignored() -> None:
    parsed = ann.parse({"kubernetes.io/ingress.class": "nginx", "example.com/hostname": "x"})
    assert parsed == ann.Annotations()


@pytest.mark.parametrize(
    ("value", "ttl"),
    [
        ("60", 60),
        ("1", 1),
        ("+60", 60),
        ("1m", 60),
        ("1h30m", 5400),
        ("1.5s", 1),  # fraction dropped, as external-dns does
        ("1.9m", 114),
        ("90s", 90),
        ("1500ms", 1),
        ("2147483647", 2**31 - 1),
        (".5m", 30),
    ],
)
def test_ttl_values(value: str, ttl: int) -> None:
    parsed = ann.parse({GA + "ttl": value})
    assert (parsed.ttl, parsed.problems) == (ttl, ())


@pytest.mark.parametrize(
    "value",
    [
        "0",
        "0s",
        "-1",
        "-5m",
        "2147483648",
        "999999h",
        "500ms",
        "abc",
        "",
        " 60",
        "60 ",
        "1d",
        "1w",
        "6_0",
        "1m 2s",
        "\u0661s",  # a non-ASCII digit
    ],
)
def test_ttl_invalid_or_out_of_range_is_not_configured_and_reported(value: str) -> None:
    parsed = ann.parse({ALPHA + "ttl": value})
    assert parsed.ttl == 0
    [problem] = parsed.problems
    assert problem.key == ALPHA + "ttl"
    assert problem.field == f"metadata.annotations[{ALPHA}ttl]"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0),
        ("-0", 0),
        ("1h", 3600),
        ("1h1m1s", 3661),
        ("2.5h", 9000),
        ("1000us", 0),
        ("-90s", -90),
        ("1.s", 1),
    ],
)
def test_go_duration_seconds(text: str, seconds: int) -> None:
    assert ann.parse_go_duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "1", "s", "1x", "1mh", ".s", "1.2.3s", "1h-1m", "+", "1 h"])
def test_go_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        ann.parse_go_duration_seconds(text)


@pytest.mark.parametrize(
    ("value", "targets"),
    [
        ("1.2.3.4", ("1.2.3.4",)),
        ("lb.example.net.", ("lb.example.net",)),
        ("1.2.3.4, 5.6.7.8", ("1.2.3.4", "5.6.7.8")),
        ("", ()),  # an empty target annotation is no annotation
    ],
)
def test_target_annotation(value: str, targets: tuple[str, ...]) -> None:
    assert ann.parse({GA + "target": value}).targets == targets
    assert ann.targets_of({ALPHA + "target": value}) == targets


@pytest.mark.parametrize(
    ("value", "mismatch"),
    [(None, False), ("dns-controller", False), ("", True), ("other", True), ("Dns-Controller", True)],
)
def test_controller(value: str | None, mismatch: bool) -> None:
    raw = {} if value is None else {ALPHA + "controller": value}
    raw[GA + "hostname"] = "a.example.com"
    assert ann.parse(raw).controller_mismatch is mismatch


def test_set_identifier_access_endpoints_type() -> None:
    parsed = ann.parse(
        {GA + "set-identifier": "blue", ALPHA + "access": "private", GA + "endpoints-type": "HostIP"}
    )
    assert (parsed.set_identifier, parsed.access, parsed.endpoints_type) == ("blue", "private", "HostIP")
    assert parsed.problems == ()


@pytest.mark.parametrize(("name", "value"), [("access", "internal"), ("endpoints-type", "PodIP")])
def test_unknown_enum_values_are_reported(name: str, value: str) -> None:
    parsed = ann.parse({GA + name: value})
    [problem] = parsed.problems
    assert problem.key == GA + name


def test_provider_specific_properties() -> None:
    parsed = ann.parse(
        {
            ALPHA + "alias": "true",
            ALPHA + "aws-weight": "10",
            GA + "webhook-foo": "bar",
            GA + "scw-x": "y",
            ALPHA + "cloudflare-proxied": "true",
            GA + "hostname": "a.example.com",
        }
    )
    assert dict(parsed.provider_specific) == {
        "alias": "true",
        "aws/weight": "10",
        "webhook/foo": "bar",
        "scw/x": "y",
        GA + "cloudflare-proxied": "true",
    }


def test_alias_only_when_true() -> None:
    assert ann.parse({GA + "alias": "yes"}).provider_specific == ()


def test_with_both_prefixes_mirrors_resolved_values() -> None:
    out = ann.with_both_prefixes({ALPHA + "hostname": "old", GA + "hostname": "new", "x": "1"})
    assert out == {ALPHA + "hostname": "new", GA + "hostname": "new", "x": "1"}


NAMES = st.sampled_from(ANNOTATION_NAMES)
KEYS = st.one_of(st.builds(lambda p, n: p + n, st.sampled_from([ALPHA, GA]), NAMES), st.text(max_size=30))
VALUES = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["1m", "60", "-1", "0", "1.2.3.4", "a.example.com,b.example.com", "public", "HostIP"]),
)


@given(st.dictionaries(KEYS, VALUES, max_size=8))
def test_parse_never_raises(raw: dict[str, str]) -> None:
    parsed = ann.parse(raw)
    assert parsed.ttl == 0 or ann.TTL_MIN <= parsed.ttl <= ann.TTL_MAX
    assert all(parsed.hostnames) and all(parsed.targets)
    assert parsed.access in ("", "public", "private") or any(
        p.key.endswith("access") for p in parsed.problems
    )
    for problem in parsed.problems:
        assert problem.key in raw


RAW_VALUES = st.one_of(VALUES, st.integers(), st.none(), st.lists(st.text(max_size=5), max_size=2))


@given(st.dictionaries(KEYS, RAW_VALUES, max_size=8))
def test_hostnames_of_reads_what_parse_reads(raw: dict[str, object]) -> None:
    # The sharded replica's quick look (every listed object) must place an object by the very names its
    # translation will use: a name parse reads and hostnames_of missed would leave records unwritten.
    strings = {k: v for k, v in raw.items() if isinstance(v, str)}
    parsed = ann.parse(strings)
    assert ann.hostnames_of(raw) == list(parsed.hostnames)
    assert ann.hostnames_of(raw, internal=True) == [*parsed.hostnames, *parsed.internal_hostnames]


def test_hostnames_of_new_prefix_wins_and_empty_entries_go() -> None:
    raw = {ALPHA + "hostname": "old.example.com", GA + "hostname": "a.example.com,, b.example.com"}
    raw[ALPHA + "internal-hostname"] = "in.example.com"
    assert ann.hostnames_of(raw) == ["a.example.com", "b.example.com"]
    assert ann.hostnames_of(raw, internal=True) == ["a.example.com", "b.example.com", "in.example.com"]
    assert ann.hostnames_of({GA + "hostname": 7, ALPHA + "hostname": "x.example.com"}) == ["x.example.com"]
    assert ann.hostnames_of(None) == []
    assert ann.hostnames_of(["external-dns.kubernetes.io/hostname"]) == []  # a malformed annotations field
