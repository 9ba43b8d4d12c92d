"""Object and record-type filters with external-dns's semantics (the domain filter's own tests:
tests/records/test_domain_filter.py)."""

from __future__ import annotations

import pytest

from shardsync.kube.selectors import SelectorError
from shardsync.records.domain_filter import DomainFilter
from shardsync.records.endpoint import Endpoint
from shardsync.sources.filters import ObjectFilter, RecordTypeFilter, filter_endpoints

from .objects import ALPHA, GA, service


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
