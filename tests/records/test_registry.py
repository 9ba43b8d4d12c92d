"""TXT registry: external-dns's TXT names and contents, reading ownership, writing it with the changes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardsync.records.endpoint import (
    CREATED_LABEL,
    OWNED_RECORD_LABEL,
    OWNER_LABEL,
    RESOURCE_LABEL,
    Changes,
    Endpoint,
)
from shardsync.records.plan import Policy, SkipReason, plan
from shardsync.records.registry import (
    RegistryConfigError,
    TxtNameMapper,
    TxtRegistry,
    ZoneView,
    parse_labels,
    serialize_labels,
)

ME = "me"


def rec(name: str, rtype: str, *targets: str, set_id: str = "", **labels: str) -> Endpoint:
    return Endpoint.new(name, rtype, targets, set_identifier=set_id, labels=labels)


def txt(name: str, owner: str, resource: str | None = None, set_id: str = "") -> Endpoint:
    """An ownership TXT record as external-dns writes it."""
    labels = {"owner": owner} if resource is None else {"owner": owner, "resource": resource}
    return Endpoint(name, "TXT", (serialize_labels(labels),), set_identifier=set_id)


# -- content ------------------------------------------------------------------------------------------


def test_content_is_external_dns_bytes() -> None:
    assert (
        serialize_labels({"resource": "service/default/web", "owner": "default"})
        == '"heritage=external-dns,external-dns/owner=default,external-dns/resource=service/default/web"'
    )
    assert serialize_labels({}) == '"heritage=external-dns"'


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        (
            '"heritage=external-dns,external-dns/owner=me,external-dns/resource=ingress/ns/x"',
            {"owner": "me", "resource": "ingress/ns/x"},
        ),
        ("heritage=external-dns,external-dns/owner=me", {"owner": "me"}),  # unquoted
        ('""heritage=external-dns,external-dns/owner=me""', {"owner": "me"}),  # all quotes trimmed
        ("external-dns/owner=me,heritage=external-dns", {"owner": "me"}),  # any order
        # external-dns v0.22 registry/txt_test.go: an owner id with '=' is kept whole (split at the first '=')
        (
            "heritage=external-dns,external-dns/owner=a=b,external-dns/resource=r",
            {"owner": "a=b", "resource": "r"},
        ),
        ("heritage=external-dns,external-dns/owner,external-dns/resource=r", {"resource": "r"}),
        ("heritage=external-dns,foo=bar", {}),  # keys outside external-dns/ ignored
        ("heritage=external-dns", {}),
        ("heritage=someone-else,external-dns/owner=me", None),
        ("external-dns/owner=me", None),  # no heritage
        ("v=spf1 include:_spf.example.com ~all", None),
        ("", None),
    ],
)
def test_parse_labels(text: str, labels: dict[str, str] | None) -> None:
    assert parse_labels(text) == labels


@given(
    st.dictionaries(
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz-/.", min_size=1, max_size=12),
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-/.", max_size=20),
        max_size=5,
    )
)
def test_labels_round_trip(labels: dict[str, str]) -> None:
    assert parse_labels(serialize_labels(labels)) == labels


# -- names --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "suffix", "wildcard", "name", "rtype", "txt_name"),
    [
        ("", "", "", "www.ex.com", "A", "a-www.ex.com"),
        ("", "", "", "www.ex.com", "AAAA", "aaaa-www.ex.com"),
        ("", "", "", "www.ex.com", "CNAME", "cname-www.ex.com"),
        ("", "", "", "foo.example.com", "NS", "ns-foo.example.com"),
        ("", "", "", "foo.example.com", "MX", "mx-foo.example.com"),
        ("", "", "", "foo.example.com", "SRV", "srv-foo.example.com"),
        ("", "", "", "foo.example.com", "NAPTR", "naptr-foo.example.com"),
        ("", "", "", "WWW.Ex.Com", "A", "a-www.ex.com"),
        ("", "", "", "ex", "A", "a-ex"),
        ("foo", "", "", "example.com", "A", "fooa-example.com"),
        ("foo-", "", "", "example.com", "A", "foo-a-example.com"),
        ("foo.", "", "", "example.com", "CNAME", "foo.cname-example.com"),
        ("foo.bar.", "", "", "example.com", "CNAME", "foo.bar.cname-example.com"),
        ("TXT.", "", "", "www.ex.com", "A", "txt.a-www.ex.com"),
        ("", "foo", "", "example.com", "AAAA", "aaaa-examplefoo.com"),
        ("", "foo", "", "example", "AAAA", "aaaa-examplefoo"),
        ("", "-foo", "", "example.com", "CNAME", "cname-example-foo.com"),
        ("", ".foo", "", "example.com", "CNAME", "cname-example.foo.com"),
        ("", ".foo.bar.test", "", "example.com", "CNAME", "cname-example.foo.bar.test.com"),
        ("%{record_type}-", "", "", "foo.example.com", "A", "a-foo.example.com"),
        ("%{record_type}-foo", "", "", "example.com", "A", "a-fooexample.com"),
        ("%{record_type}foo.", "", "", "example.com", "CNAME", "cnamefoo.example.com"),
        ("bar.%{record_type}.foo.", "", "", "example.com", "CNAME", "bar.cname.foo.example.com"),
        ("", "-%{record_type}", "", "foo.example.com", "A", "foo-a.example.com"),
        ("", "foo-%{record_type}", "", "example.com", "A", "examplefoo-a.com"),
        ("", ".foo%{record_type}", "", "example.com", "A", "example.fooa.com"),
        ("", ".foo%{record_type}.bar", "", "example.com", "A", "example.fooa.bar.com"),
        ("txt-", "", "wild", "*.example.com", "A", "txt-a-wild.example.com"),
        ("txt-", "", "wild", "*.example.com", "MX", "txt-mx-wild.example.com"),
        ("", "", "", "*.example.com", "A", "a-*.example.com"),  # no replacement: kept as is
        ("", "", "wild", "a.*.example.com", "A", "a-a.*.example.com"),  # only a leading '*'
    ],
)
def test_txt_name_and_back(
    prefix: str, suffix: str, wildcard: str, name: str, rtype: str, txt_name: str
) -> None:
    mapper = TxtNameMapper(prefix, suffix, wildcard)
    assert mapper.txt_name(name, rtype) == txt_name
    expected = name.lower()
    if wildcard and expected.startswith("*."):
        expected = wildcard + expected[1:]
    assert mapper.endpoint_name(txt_name) == (expected, rtype)


@pytest.mark.parametrize(
    ("prefix", "suffix", "txt_name", "expected"),
    [
        ("", "", "ns-zone.example.com", ("zone.example.com", "NS")),
        ("", "", "aaaa-zone.example.com", ("zone.example.com", "AAAA")),
        ("", "", "ptr-zone.example.com", ("zone.example.com", "PTR")),
        ("", "", "txt-foo.example.com", ("foo.example.com", "TXT")),
        ("", "", "zone.example.com", ("zone.example.com", "")),  # legacy
        ("", "", "A-WWW.EX.COM", ("www.ex.com", "A")),
        ("foo-%{record_type}-", "", "foo-cname-test.example.com", ("test.example.com", "CNAME")),
        ("foo-%{record_type}-", "", "foo--test.example.com", ("test.example.com", "")),  # legacy
        ("", "-%{record_type}-foo", "test-a-foo.example.com", ("test.example.com", "A")),
        ("", "-%{record_type}-foo", "test--foo.example.com", ("test.example.com", "")),
        ("txt.", "", "txt.www.ex.com", ("www.ex.com", "")),  # legacy with a prefix
        ("txt.", "", "other.a-www.ex.com", ("", "")),  # not our prefix
        ("", ".s", "a-www", ("", "")),  # too few labels for the suffix
    ],
)
def test_endpoint_name(prefix: str, suffix: str, txt_name: str, expected: tuple[str, str]) -> None:
    assert TxtNameMapper(prefix, suffix).endpoint_name(txt_name) == expected


@pytest.mark.parametrize(
    ("prefix", "suffix", "wildcard", "name", "legacy"),
    [
        ("", "", "", "www.ex.com", "www.ex.com"),
        ("txt.", "", "", "www.ex.com", "txt.www.ex.com"),
        ("", "-txt", "", "www.ex.com", "www-txt.ex.com"),
        ("%{record_type}-x.", "", "", "www.ex.com", "-x.www.ex.com"),
        ("txt-", "", "wild", "*.ex.com", "txt-wild.ex.com"),
    ],
)
def test_legacy_txt_name(prefix: str, suffix: str, wildcard: str, name: str, legacy: str) -> None:
    mapper = TxtNameMapper(prefix, suffix, wildcard)
    assert mapper.legacy_txt_name(name) == legacy


def test_config_errors() -> None:
    with pytest.raises(RegistryConfigError):
        TxtNameMapper("p-", "-s")
    with pytest.raises(RegistryConfigError):
        TxtRegistry(owner_id="")


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_types = st.sampled_from(["A", "AAAA", "CNAME", "NS", "MX", "PTR", "SRV", "NAPTR", "TXT"])
_affix = st.one_of(
    st.tuples(
        st.sampled_from(["", "txt-", "txt.", "x", "own.er.", "%{record_type}-", "t.%{record_type}."]),
        st.just(""),
    ),
    st.tuples(st.just(""), st.sampled_from(["-txt", ".txt", "-%{record_type}", ".a.b", "-%{record_type}.z"])),
)


@settings(max_examples=300)
@given(
    labels=st.lists(_label, min_size=1, max_size=4),
    wildcard=st.booleans(),
    rtype=_types,
    affix=_affix,
    replacement=st.sampled_from(["", "wild"]),
)
def test_names_round_trip(
    labels: list[str], wildcard: bool, rtype: str, affix: tuple[str, str], replacement: str
) -> None:
    name = ".".join(["*", *labels] if wildcard else labels)
    mapper = TxtNameMapper(affix[0], affix[1], replacement)
    expected = f"{replacement}{name[1:]}" if wildcard and replacement else name
    assert mapper.endpoint_name(mapper.txt_name(name, rtype)) == (expected, rtype)


# -- reading ------------------------------------------------------------------------------------------


def labels_of(view: ZoneView) -> dict[tuple[str, str, str], dict[str, str]]:
    return {e.key: dict(e.labels) for e in view.current}


def test_read_labels_records_and_consumes_ownership_txts() -> None:
    spf = rec("ex.com", "TXT", "v=spf1 -all")
    view = TxtRegistry(ME).read(
        [
            rec("www.ex.com", "A", "1.1.1.1"),
            txt("a-www.ex.com", ME, "service/ns/web"),
            rec("www.ex.com", "AAAA", "2001:db8::1"),
            txt("aaaa-www.ex.com", "other", "service/ns/other"),
            rec("api.ex.com", "CNAME", "lb.ex.net"),
            spf,
            Endpoint("empty.ex.com", "TXT", ()),
        ]
    )
    assert labels_of(view) == {
        ("www.ex.com", "A", ""): {"owner": ME, "resource": "service/ns/web"},
        ("www.ex.com", "AAAA", ""): {"owner": "other", "resource": "service/ns/other"},
        ("api.ex.com", "CNAME", ""): {},
        ("ex.com", "TXT", ""): {},
    }
    assert view.upgrades == []
    assert set(view.ownership_txts) == {("a-www.ex.com", ""), ("aaaa-www.ex.com", "")}
    assert TxtRegistry(ME).to_current([spf]) == [spf]


def test_read_legacy_txt_labels_everything_but_aaaa_and_typed_wins() -> None:
    view = TxtRegistry(ME, prefix="txt.").read(
        [
            rec("www.ex.com", "A", "1.1.1.1"),
            rec("www.ex.com", "AAAA", "2001:db8::1"),
            rec("www.ex.com", "MX", "10 mx.ex.com"),
            txt("txt.www.ex.com", ME, "service/ns/legacy"),
            txt("txt.mx-www.ex.com", "other"),
        ]
    )
    assert labels_of(view) == {
        ("www.ex.com", "A", ""): {"owner": ME, "resource": "service/ns/legacy"},
        ("www.ex.com", "AAAA", ""): {},
        ("www.ex.com", "MX", ""): {"owner": "other"},
    }
    # A is ours through the legacy record only: its typed record is due; MX is not managed.
    assert [e.key for e in view.upgrades] == [("www.ex.com", "A", "")]


def test_read_matches_set_identifiers_and_wildcards() -> None:
    view = TxtRegistry(ME, wildcard_replacement="wild").read(
        [
            rec("www.ex.com", "A", "1.1.1.1", set_id="eu"),
            rec("www.ex.com", "A", "1.1.1.2", set_id="us"),
            txt("a-www.ex.com", ME, set_id="eu"),
            txt("a-www.ex.com", "other", set_id="us"),
            rec("*.ex.com", "A", "1.1.1.3"),
            txt("a-wild.ex.com", ME, "ingress/ns/wild"),
        ]
    )
    assert labels_of(view) == {
        ("www.ex.com", "A", "eu"): {"owner": ME},
        ("www.ex.com", "A", "us"): {"owner": "other"},
        ("*.ex.com", "A", ""): {"owner": ME, "resource": "ingress/ns/wild"},
    }


def test_multi_string_ownership_rrset_keeps_only_the_ownership_value() -> None:
    both = Endpoint("a-www.ex.com", "TXT", (serialize_labels({"owner": ME}), '"some other text"'))
    view = TxtRegistry(ME).read([rec("www.ex.com", "A", "1.1.1.1"), both])
    assert view.ownership_txts[("a-www.ex.com", "")].targets == both.targets[:1]
    result = TxtRegistry(ME).with_ownership(Changes(delete=list(view.current)), view)
    assert [e.targets for e in result.changes.delete if e.record_type == "TXT"] == [both.targets[:1]]


# -- writing ------------------------------------------------------------------------------------------


def test_create_gets_owner_and_typed_txt() -> None:
    reg = TxtRegistry(ME)
    web = rec(
        "www.ex.com", "A", "1.1.1.1", resource="service/ns/web", **{CREATED_LABEL: "2024-01-01T00:00:00Z"}
    )
    result = reg.with_ownership(Changes(create=[web]), reg.read([]))
    record, ownership = result.changes.create
    assert record.labels[OWNER_LABEL] == ME
    assert ownership == Endpoint(
        "a-www.ex.com",
        "TXT",
        ('"heritage=external-dns,external-dns/owner=me,external-dns/resource=service/ns/web"',),
        labels={OWNED_RECORD_LABEL: "www.ex.com"},
    )
    assert result.skipped == []


def test_create_keeps_set_identifier_and_provider_specific_on_txt() -> None:
    reg = TxtRegistry(ME, suffix="-own")
    web = Endpoint.new(
        "www.ex.com", "CNAME", ["lb.ex.net"], set_identifier="eu", provider_specific=[("k", "v")]
    )
    (_, ownership) = reg.with_ownership(Changes(create=[web])).changes.create
    assert (ownership.dns_name, ownership.set_identifier, ownership.provider_specific) == (
        "cname-www-own.ex.com",
        "eu",
        (("k", "v"),),
    )


@pytest.mark.parametrize(
    ("zone", "owner"),
    [
        ([rec("www.ex.com", "A", "1.1.1.1"), txt("a-www.ex.com", "other")], "other"),
        ([rec("www.ex.com", "A", "1.1.1.1")], ""),  # unowned
        ([rec("www.ex.com", "CNAME", "x.ex.net"), txt("cname-www.ex.com", "other")], "other"),
        ([txt("aaaa-www.ex.com", "other")], "other"),  # a claim left without its record
    ],
)
def test_create_on_a_name_held_by_someone_else_is_skipped(zone: list[Endpoint], owner: str) -> None:
    reg = TxtRegistry(ME)
    want = rec("www.ex.com", "AAAA", "2001:db8::1")
    result = reg.with_ownership(Changes(create=[want]), reg.read(zone))
    assert result.changes.is_empty()
    assert [(s.endpoint.key, s.reason, s.owner) for s in result.skipped] == [
        (want.key, SkipReason.FOREIGN_OWNER, owner)
    ]


def test_create_beside_an_orphan_txt_of_ours_reuses_or_rewrites_it() -> None:
    reg = TxtRegistry(ME)
    want = rec("www.ex.com", "A", "1.1.1.1", resource="service/ns/web")
    same = reg.with_ownership(Changes(create=[want]), reg.read([txt("a-www.ex.com", ME, "service/ns/web")]))
    assert [e.record_type for e in same.changes.create] == ["A"]
    assert same.changes.update_new == []
    stale = txt("a-www.ex.com", ME, "service/ns/gone")
    other = reg.with_ownership(Changes(create=[want]), reg.read([stale]))
    assert [e.record_type for e in other.changes.create] == ["A"]
    assert other.changes.update_old == [stale]
    assert other.changes.update_new == [reg.ownership_record(want)]


def test_update_rewrites_txt_only_when_its_content_changes() -> None:
    reg = TxtRegistry(ME)
    zone = [rec("www.ex.com", "A", "1.1.1.1"), txt("a-www.ex.com", ME, "service/ns/web")]
    view = reg.read(zone)
    (old,) = view.current
    targets_only = rec("www.ex.com", "A", "1.1.1.2", resource="service/ns/web", owner=ME)
    result = reg.with_ownership(Changes(update_old=[old], update_new=[targets_only]), view)
    assert (result.changes.update_old, result.changes.update_new) == ([old], [targets_only])
    assert result.changes.create == result.changes.delete == []

    moved = rec("www.ex.com", "A", "1.1.1.2", resource="ingress/ns/web", owner=ME)
    result = reg.with_ownership(Changes(update_old=[old], update_new=[moved]), view)
    assert result.changes.update_old == [old, zone[1]]
    assert result.changes.update_new == [moved, reg.ownership_record(moved)]


def test_update_and_delete_of_records_not_ours_are_refused() -> None:
    reg = TxtRegistry(ME)
    view = reg.read([rec("www.ex.com", "A", "1.1.1.1"), txt("a-www.ex.com", "other")])
    (theirs,) = view.current
    new = rec("www.ex.com", "A", "1.1.1.2")
    result = reg.with_ownership(Changes(update_old=[theirs], update_new=[new], delete=[theirs]), view)
    assert result.changes.is_empty()
    assert [(s.reason, s.owner) for s in result.skipped] == [
        (SkipReason.NOT_OWNED, "other"),
        (SkipReason.NOT_OWNED, "other"),
    ]
    # A label saying "ours" does not win against what the zone says.
    forged = theirs.with_labels(owner=ME)
    result = reg.with_ownership(Changes(delete=[forged]), view)
    assert result.changes.is_empty()
    assert [s.reason for s in result.skipped] == [SkipReason.NOT_OWNED]


def test_delete_removes_the_txt_value_the_zone_holds() -> None:
    reg = TxtRegistry(ME)
    # external-dns wrote it with an extra label: the delete must match the stored value, not a regenerated one
    stored = Endpoint(
        "a-www.ex.com", "TXT", (serialize_labels({"owner": ME, "resource": "r", "extra": "x"}),)
    )
    view = reg.read([rec("www.ex.com", "A", "1.1.1.1"), stored])
    result = reg.with_ownership(Changes(delete=list(view.current)), view)
    assert result.changes.delete == [*view.current, stored]


def test_delete_of_record_without_txt_deletes_no_txt() -> None:
    reg = TxtRegistry(ME)
    view = reg.read([rec("www.ex.com", "A", "1.1.1.1", owner=ME)])  # labelled by the provider itself
    result = reg.with_ownership(Changes(delete=list(view.current)), view)
    assert [e.record_type for e in result.changes.delete] == ["A"]


def test_legacy_records_are_upgraded_and_their_txt_goes_with_the_last_record() -> None:
    reg = TxtRegistry(ME)
    legacy = txt("www.ex.com", ME, "service/ns/web")
    zone = [rec("www.ex.com", "A", "1.1.1.1"), rec("www.ex.com", "CNAME", "x.ex.net"), legacy]
    view = reg.read(zone)
    a, cname = sorted(view.current, key=lambda e: e.key)
    # nothing to change: the typed records are created next to the legacy one, which stays
    upgrade = reg.with_ownership(Changes(), view).changes
    assert sorted(e.dns_name for e in upgrade.create) == ["a-www.ex.com", "cname-www.ex.com"]
    assert upgrade.delete == []
    # one of two records deleted: the legacy record still labels the other
    one = reg.with_ownership(Changes(delete=[a]), view).changes
    assert one.delete == [a]
    assert [e.dns_name for e in one.create] == ["cname-www.ex.com"]
    # both deleted: the legacy record goes too, and no typed record is created for them
    both = reg.with_ownership(Changes(delete=[a, cname]), view).changes
    assert both.delete == [a, cname, legacy]
    assert both.create == []


def test_legacy_record_updated_gets_typed_txt_created() -> None:
    reg = TxtRegistry(ME, prefix="txt-")
    view = reg.read([rec("www.ex.com", "A", "1.1.1.1"), txt("txt-www.ex.com", ME, "service/ns/web")])
    (old,) = view.current
    new = rec("www.ex.com", "A", "1.1.1.2", resource="service/ns/web", owner=ME)
    changes = reg.with_ownership(Changes(update_old=[old], update_new=[new]), view).changes
    assert changes.create == [reg.ownership_record(new)]
    assert changes.create[0].dns_name == "txt-a-www.ex.com"
    assert (changes.update_old, changes.update_new) == ([old], [new])


def test_foreign_legacy_records_are_not_upgraded() -> None:
    reg = TxtRegistry(ME)
    view = reg.read([rec("www.ex.com", "A", "1.1.1.1"), txt("www.ex.com", "other")])
    assert view.upgrades == []
    assert reg.with_ownership(Changes(), view).changes.is_empty()


def test_typed_name_that_looks_legacy_is_not_deleted_as_legacy() -> None:
    # Without a prefix the legacy name of "a-foo.ex.com" is "a-foo.ex.com": the typed record of "foo.ex.com".
    reg = TxtRegistry(ME)
    typed = txt("a-foo.ex.com", ME)
    view = reg.read([rec("foo.ex.com", "A", "1.1.1.1"), rec("a-foo.ex.com", "CNAME", "x.ex.net"), typed])
    going = [e for e in view.current if e.dns_name == "a-foo.ex.com"]
    changes = reg.with_ownership(Changes(delete=going), view).changes
    assert typed not in changes.delete


def test_without_a_view_it_behaves_as_external_dns() -> None:
    reg = TxtRegistry(ME)
    old = rec("www.ex.com", "A", "1.1.1.1", owner=ME, resource="r")
    new = rec("www.ex.com", "A", "1.1.1.2", owner=ME, resource="r")
    gone = rec("old.ex.com", "A", "1.1.1.1", owner=ME)
    changes = reg.with_ownership(Changes(update_old=[old], update_new=[new], delete=[gone])).changes
    assert changes.update_old == [old, reg.ownership_record(old)]
    assert changes.update_new == [new, reg.ownership_record(new)]
    assert changes.delete == [gone, reg.ownership_record(gone)]


def test_internal_labels_stay_out_of_the_txt() -> None:
    reg = TxtRegistry(ME)
    web = rec("www.ex.com", "A", "1.1.1.1", resource="r", **{CREATED_LABEL: "2024-01-01T00:00:00Z"})
    assert reg.ownership_record(web).targets == (serialize_labels({"owner": ME, "resource": "r"}),)
    assert RESOURCE_LABEL == "resource"


# -- the pipeline, end to end ---------------------------------------------------------------------------


def apply(zone: dict[tuple[str, str, str], Endpoint], changes: Changes) -> None:
    """A strict provider: deletes and updates must match what is there, creates must be new."""
    for e in changes.delete:
        assert zone.pop(e.key).targets == e.targets, e
    for old, new in zip(changes.update_old, changes.update_new, strict=True):
        assert zone.pop(old.key).targets == old.targets, old
        zone[new.key] = new.without_labels()
    for e in changes.create:
        assert e.key not in zone, e
        zone[e.key] = e.without_labels()


NAMES = ["a.ex.com", "b.ex.com", "c.ex.com"]


@st.composite
def desired_state(draw: st.DrawFn) -> list[Endpoint]:
    out = []
    for i, name in enumerate(NAMES):
        kind = draw(st.sampled_from(["none", "cname", "a", "both"]))
        labels = {RESOURCE_LABEL: f"service/ns/s{i}"}
        if kind == "cname":
            out.append(
                Endpoint.new(name, "CNAME", [draw(st.sampled_from(["x.ex.net", "y.ex.net"]))], labels=labels)
            )
        if kind in ("a", "both"):
            out.append(
                Endpoint.new(name, "A", [draw(st.sampled_from(["10.0.0.1", "10.0.0.2"]))], labels=labels)
            )
        if kind == "both":
            out.append(Endpoint.new(name, "AAAA", ["2001:db8::1"], labels=labels))
    return out


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(desired_state(), min_size=1, max_size=4),
    foreign=st.sampled_from([*NAMES, ""]),
    legacy=st.booleans(),
    prefix=st.sampled_from(["", "txt-", "%{record_type}."]),
)
def test_reconcile_loop_converges_and_spares_others(
    steps: list[list[Endpoint]], foreign: str, legacy: bool, prefix: str
) -> None:
    """read -> plan -> with_ownership -> apply, repeatedly: converges, never touches the foreign record."""
    reg = TxtRegistry(ME, prefix=prefix)
    theirs = TxtRegistry("other", prefix=prefix)
    zone: dict[tuple[str, str, str], Endpoint] = {}
    if foreign:
        record = rec(foreign, "A", "192.0.2.1")
        ownership = theirs.ownership_record(record)
        zone[record.key] = record
        zone[ownership.key] = ownership.without_labels()
    if legacy:
        # a record of ours from before typed TXT names, no longer desired
        record = rec("old.ex.com", "A", "192.0.2.9")
        legacy_txt = Endpoint(
            reg.mapper.legacy_txt_name("old.ex.com"), "TXT", (serialize_labels({"owner": ME}),)
        )
        zone[record.key] = record
        zone[legacy_txt.key] = legacy_txt
    for desired in steps:
        view = reg.read(zone.values())
        result = plan(desired, view.current, Policy.SYNC, ME)
        apply(zone, reg.with_ownership(result.changes, view).changes)
        # one pass is enough: nothing is left to do
        view = reg.read(zone.values())
        result = plan(desired, view.current, Policy.SYNC, ME)
        assert reg.with_ownership(result.changes, view).changes.is_empty()
        current = {e.key: e for e in view.current}
        for want in desired:
            if want.dns_name == foreign:
                continue
            have = current[want.key]
            assert have.targets == want.targets
            assert have.labels[OWNER_LABEL] == ME
            assert have.labels[RESOURCE_LABEL] == want.labels[RESOURCE_LABEL]
        assert ("old.ex.com", "A", "") not in zone
        assert (
            len(zone)
            == len(desired) * 2 + (2 if foreign else 0) - sum(1 for e in desired if e.dns_name == foreign) * 2
        )
        if foreign:
            their = theirs.ownership_record(rec(foreign, "A", "192.0.2.1"))
            assert zone[(foreign, "A", "")].targets == ("192.0.2.1",)
            assert zone[their.key].targets == their.targets
