"""Label selector parsing and matching, checked against apimachinery's labels.Parse behaviour."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardsync.sources.selectors import Op, SelectorError, parse_selector, selector_from_labels

LABELS = {"app": "web", "tier": "front", "env": "", "n": "10", "example.com/team": "dns"}


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
        ("missing!=x", True),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app in (web, db)", True),
        ("app in (db)", False),
        ("app notin (db)", True),
        ("app notin (web)", False),
        ("missing notin (web)", True),
        ("missing in (web)", False),
        ("env=", True),
        ("env==", True),
        ("app=", False),
        ("env in ()", True),
        ("env in (,x)", True),
        ("tier in (x,)", False),
        ("n>5", True),
        ("n<5", False),
        ("n>10", False),
        ("app>5", False),
        ("missing<5", False),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("example.com/team=dns", True),
        ("app in (in, notin, web)", True),
    ],
)
def test_parse_and_match(text: str, matches: bool) -> None:
    assert parse_selector(text).matches(LABELS) is matches


@pytest.mark.parametrize(
    "text",
    [
        "app=web,",
        ",app",
        "app=web tier=front",
        "app in web",
        "app in (web",
        "app in (web db)",
        "=web",
        "app=(web)",
        "n>x",
        "n>",
        "!app=web",
        "a/b/c=x",
        "-app=x",
        "app=-x",
        "app=" + "x" * 64,
        "x" * 64,
        "Example.com/team=x",
        "app notin ()x",
        "app in",
    ],
)
def test_rejected(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)


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


@given(st.text(alphabet=st.sampled_from(list("ab=!(),<> in\t/.-_01")), max_size=30))
def test_parser_raises_only_selector_error(text: str) -> None:
    try:
        sel = parse_selector(text)
    except SelectorError:
        return
    sel.matches({"a": "b", "b": "1"})
