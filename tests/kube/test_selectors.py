"""Label selectors (shardsync/kube/selectors.py), checked against apimachinery's labels.Parse behaviour.

One implementation serves the sources' filters and the embedded API server's `labelSelector=`, so these
cases are the union of what both used to pin. Field selectors (API server only) are tested in
tests/apiserver/test_field_selectors.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardsync.kube.selectors import (
    Op,
    SelectorError,
    format_label_selector,
    parse_selector,
    selector_from_labels,
)

LABELS = {
    "app": "web",
    "tier": "front",
    "env": "",
    "n": "10",
    "example.com/team": "dns",
    "app.kubernetes.io/name": "shardsync",
}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("", True),
        ("   ", True),
        ("app=web", True),
        ("app==web", True),
        ("app = web", True),
        ("app=db", False),
        ("app!=db", True),
        ("app!=web", False),
        ("missing!=x", True),
        ("app", True),
        ("tier", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("!tier", False),
        ("app in (web, db)", True),
        ("app in (web,db)", True),
        ("app in (db)", False),
        ("app notin (db)", True),
        ("app notin (web)", False),
        ("app notin (web, db)", False),
        ("missing notin (web)", True),
        ("missing notin (a)", True),
        ("missing in (web)", False),
        ("missing in (a)", False),
        ("env=", True),
        ("env==", True),
        ("app=", False),
        ("missing=", False),
        ("env in ()", True),
        ("env in (,x)", True),
        ("tier in (x,)", False),
        ("n>5", True),
        ("n<5", False),
        ("n>10", False),
        ("app>5", False),
        ("app>1", False),
        ("missing<5", False),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("app=web, tier=back", False),
        (" app = web , !missing ", True),
        ("example.com/team=dns", True),
        ("app.kubernetes.io/name=shardsync", True),
        ("app in (in, notin, web)", True),
    ],
)
def test_parse_and_match(text: str, matches: bool) -> None:
    assert parse_selector(text).matches(LABELS) is matches


def test_empty_value_matches_an_empty_label() -> None:
    assert parse_selector("k=").matches({"k": ""})
    assert parse_selector("k in (a,)").matches({"k": ""})


@pytest.mark.parametrize(
    "text",
    [
        "app=web,",
        ",app",
        "app=web tier=front",
        "a b",
        "a=b c",
        "app in web",
        "app in (web",
        "app in (a",
        "app in (web db)",
        "=web",
        "=x",
        "app=(web)",
        "app ~ b",
        "!",
        "n>x",
        "n>",
        "!app=web",
        "a/b/c=x",
        "-app=x",
        "-bad=x",
        "app=-x",
        "k=-v-",
        "app=" + "x" * 64,
        "x" * 64,
        "Example.com/team=x",
        "app notin ()x",
        "app in",
        # Where the two former parsers disagreed, apimachinery decides (pkg/labels/selector.go):
        # NewRequirement validates a '>'/'<' bound as a label value too, so a negative bound is refused,
        "n>-1",
        "n<-1",
        # and parseIdentifiersList has no case for ')' right after ',,'.
        "app in (a,,)",
    ],
)
def test_rejected(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)


def test_requirement_errors_carry_the_api_servers_prefix() -> None:
    with pytest.raises(SelectorError, match=r"^unable to parse requirement: "):
        parse_selector("app=web,-bad=x")


def test_gt_lt_read_label_values_as_go_int64() -> None:
    # Requirement.Matches uses strconv.ParseInt(value, 10, 64): a sign is fine, underscores and values
    # outside int64 are not numbers at all.
    assert parse_selector("n>1").matches({"n": "+5"})
    assert not parse_selector("n>1").matches({"n": "1_0"})
    assert not parse_selector("n>1").matches({"n": "9223372036854775808"})
    assert parse_selector("n<1").matches({"n": "-9223372036854775808"})


def test_annotation_mode_refuses_gt_lt_and_keeps_last_equality() -> None:
    with pytest.raises(SelectorError):
        parse_selector("n>5", for_annotations=True)
    sel = parse_selector("app=db,app=web", for_annotations=True)
    assert sel.matches({"app": "web"})
    assert not parse_selector("app=db,app=web").matches({"app": "web"})


def test_requirements_sorted_and_keys() -> None:
    sel = parse_selector("tier=front,app in (a,b),!z")
    assert [r.key for r in sel.requirements] == ["app", "tier", "z"]
    assert sel.requirements[0].op is Op.IN and sel.requirements[0].values == {"a", "b"}
    assert sel.keys() == {"app", "tier", "z"}


def test_selector_from_labels() -> None:
    assert selector_from_labels({"app": "web"}).matches(LABELS)
    assert not selector_from_labels({"app": "db"}).matches(LABELS)
    assert selector_from_labels({}).matches({})


def test_format_label_selector_round_trips_through_the_parser() -> None:
    obj = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["front", "back"]},
            {"key": "zone", "operator": "NotIn", "values": ["a"]},
            {"key": "n", "operator": "Exists"},
            {"key": "gone", "operator": "DoesNotExist"},
        ],
    }
    text = format_label_selector(obj)
    assert text == "app=web,tier in (back,front),zone notin (a),n,!gone"
    assert parse_selector(text).matches(LABELS)
    assert format_label_selector(None) == format_label_selector({}) == ""


@given(st.text(alphabet=st.sampled_from(list("ab=!(),<> in\t/.-_01")), max_size=30))
def test_parser_raises_only_selector_error(text: str) -> None:
    try:
        sel = parse_selector(text)
    except SelectorError:
        return
    sel.matches({"a": "b", "b": "1"})


_names = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)


@given(st.dictionaries(_names, _names, max_size=4), st.dictionaries(_names, _names, max_size=4))
def test_match_labels_selector_means_subset(selector: dict[str, str], labels: dict[str, str]) -> None:
    parsed = parse_selector(format_label_selector({"matchLabels": selector}))
    assert parsed.matches(labels) == all(labels.get(k) == v for k, v in selector.items())


@given(_names, st.lists(_names, min_size=1, max_size=3), st.one_of(st.none(), _names))
def test_in_and_notin_are_complements(key: str, values: list[str], value: str | None) -> None:
    labels = {} if value is None else {key: value}
    inside = parse_selector(f"{key} in ({','.join(values)})").matches(labels)
    outside = parse_selector(f"{key} notin ({','.join(values)})").matches(labels)
    assert inside != outside
