"""Label and field selectors: the query syntax the real API accepts, and what each operator matches."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardsync.local.apiserver.selectors import (
    SelectorError,
    field_values,
    format_label_selector,
    parse_field_selector,
    parse_label_selector,
)

LABELS = {"app": "web", "tier": "front", "n": "7", "app.kubernetes.io/name": "shardsync"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app=db", False),
        ("app!=db", True),
        ("app!=web", False),
        ("missing!=x", True),
        ("app in (web,db)", True),
        ("app in (db)", False),
        ("missing in (a)", False),
        ("app notin (db)", True),
        ("app notin (web, db)", False),
        ("missing notin (a)", True),
        ("tier", True),
        ("missing", False),
        ("!missing", True),
        ("!tier", False),
        ("n>5", True),
        ("n<5", False),
        ("app>1", False),
        ("app=web,tier=front", True),
        ("app=web, tier=back", False),
        (" app = web , !missing ", True),
        ("app.kubernetes.io/name=shardsync", True),
        ("missing=", False),
    ],
)
def test_label_selector_matches_like_the_api(selector: str, expected: bool) -> None:
    assert parse_label_selector(selector).matches(LABELS) is expected


def test_empty_value_matches_an_empty_label() -> None:
    assert parse_label_selector("k=").matches({"k": ""})
    assert parse_label_selector("k in (a,)").matches({"k": ""})


@pytest.mark.parametrize(
    "bad",
    ["=x", "app=web,", "app in web", "app in (a", "app ~ b", "!", "a b", "-bad=x", "a=b c", "n>x", "k=-v-"],
)
def test_malformed_label_selectors_are_refused(bad: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(bad)


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
    assert parse_label_selector(text).matches(LABELS)


_names = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)


@given(st.dictionaries(_names, _names, max_size=4), st.dictionaries(_names, _names, max_size=4))
def test_match_labels_selector_means_subset(selector: dict[str, str], labels: dict[str, str]) -> None:
    parsed = parse_label_selector(format_label_selector({"matchLabels": selector}))
    assert parsed.matches(labels) == all(labels.get(k) == v for k, v in selector.items())


@given(_names, st.lists(_names, min_size=1, max_size=3), st.one_of(st.none(), _names))
def test_in_and_notin_are_complements(key: str, values: list[str], value: str | None) -> None:
    labels = {} if value is None else {key: value}
    inside = parse_label_selector(f"{key} in ({','.join(values)})").matches(labels)
    outside = parse_label_selector(f"{key} notin ({','.join(values)})").matches(labels)
    assert inside != outside


FIELDS = frozenset({"metadata.name", "metadata.namespace", "spec.nodeName"})
POD = {"metadata": {"name": "p1", "namespace": "ns"}, "spec": {"nodeName": "n1"}}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("metadata.name=p1", True),
        ("metadata.name==p1", True),
        ("metadata.name!=p1", False),
        ("metadata.name=p1,metadata.namespace=ns", True),
        ("metadata.name=p1,metadata.namespace!=ns", False),
        ("spec.nodeName=n1", True),
        ("spec.nodeName=", False),
    ],
)
def test_field_selector_matches(selector: str, expected: bool) -> None:
    parsed = parse_field_selector(selector, FIELDS)
    assert parsed.matches(field_values(POD, parsed.fields)) is expected


def test_field_selector_absent_field_reads_as_empty() -> None:
    parsed = parse_field_selector("spec.nodeName=", FIELDS)
    assert parsed.matches(field_values({"metadata": {"name": "x"}}, parsed.fields))


def test_field_selector_escapes_and_unsupported_fields() -> None:
    parsed = parse_field_selector(r"metadata.name=a\,b", FIELDS)
    assert parsed.requirements[0].value == "a,b"
    with pytest.raises(SelectorError, match=r"field label not supported: spec\.other"):
        parse_field_selector("spec.other=x", FIELDS)
    with pytest.raises(SelectorError):
        parse_field_selector("metadata.name", FIELDS)
