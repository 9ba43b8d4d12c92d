"""Field selectors: the `fieldSelector=` syntax the real API accepts, and what each term matches.

Label selectors are tested with their shared implementation, in tests/kube/test_selectors.py."""

from __future__ import annotations

import pytest

from shardsync.kube.selectors import SelectorError
from shardsync.local.apiserver.field_selectors import field_values, parse_field_selector

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
