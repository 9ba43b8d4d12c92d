"""`--create-ptr` and the `record-type` annotation (sources.ptr).

Rows name the external-dns v0.22.0 test they mirror (source/wrappers/ptr_test.go TestPTRSource,
TestPTRSource_AnnotationOverride, TestPTRSource_IPv6).
"""

from __future__ import annotations

import argparse

import pytest

from shardsync.records.endpoint import Endpoint
from shardsync.replica.config import ConfigError, configure, settings_from_args
from shardsync.sources import options
from shardsync.sources.ptr import PtrIndex
from shardsync.sources.service import service_endpoints

from .objects import GA, service

WEB = Endpoint.new("web.example.com", "A", ["192.168.49.2"])
PTR_NAME = "2.49.168.192.in-addr.arpa"


def ptrs(index: PtrIndex, addresses: set[str]) -> set[tuple[str, tuple[str, ...], int]]:
    return {(e.dns_name, e.targets, e.ttl) for a in addresses for e in index.endpoints(a)}


def opted(ep: Endpoint, value: str) -> Endpoint:
    return Endpoint.new(
        ep.dns_name, ep.record_type, ep.targets, ttl=ep.ttl, provider_specific=[("record-type", value)]
    )


@pytest.mark.parametrize(
    ("default", "endpoints", "want"),
    [
        # "A record produces PTR"
        (True, [WEB], {(PTR_NAME, ("web.example.com",), 0)}),
        # "disabled by default, no PTR"
        (False, [WEB], set()),
        # "CNAME skipped"
        (True, [Endpoint.new("web.example.com", "CNAME", ["lb.example.net"])], set()),
        # "wildcard skipped"
        (True, [Endpoint.new("*.example.com", "A", ["192.168.49.2"])], set()),
        # "same IP merges into single PTR"
        (
            True,
            [WEB, Endpoint.new("api.example.com", "A", ["192.168.49.2"])],
            {(PTR_NAME, ("api.example.com", "web.example.com"), 0)},
        ),
        # "conflicting TTLs use minimum"
        (
            True,
            [
                Endpoint.new("web.example.com", "A", ["192.168.49.2"], ttl=300),
                Endpoint.new("api.example.com", "A", ["192.168.49.2"], ttl=60),
            ],
            {(PTR_NAME, ("api.example.com", "web.example.com"), 60)},
        ),
        # TestPTRSource_AnnotationOverride "annotation opts in when flag is off" / "opts out when flag is on"
        (False, [opted(WEB, "ptr")], {(PTR_NAME, ("web.example.com",), 0)}),
        (True, [opted(WEB, "")], set()),
        # TestPTRSource_IPv6
        (
            True,
            [Endpoint.new("v6.example.com", "AAAA", ["2001:db8::1"])],
            {
                (
                    "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa",
                    ("v6.example.com",),
                    0,
                )
            },
        ),
    ],
)
def test_ptr_records(default: bool, endpoints: list[Endpoint], want: set[object]) -> None:
    index = PtrIndex(default)
    kept, addresses = index.update("service/default/web", endpoints)
    assert ptrs(index, addresses) == want
    assert all(dict(e.provider_specific).get("record-type") is None for e in kept)


def test_names_of_several_objects_share_one_ptr_and_leave_it_when_they_go() -> None:
    index = PtrIndex(True)
    index.update("ingress/default/a", [WEB])
    _, changed = index.update("ingress/default/b", [Endpoint.new("api.example.com", "A", ["192.168.49.2"])])
    assert ptrs(index, changed) == {(PTR_NAME, ("api.example.com", "web.example.com"), 0)}
    _, changed = index.update("ingress/default/a", [])
    assert ptrs(index, changed) == {(PTR_NAME, ("api.example.com",), 0)}
    _, changed = index.update("ingress/default/b", [])
    assert changed == {"192.168.49.2"} and index.endpoints("192.168.49.2") == []
    _, unchanged = index.update("ingress/default/b", [])
    assert unchanged == set()


def test_record_type_annotation_reaches_the_endpoints() -> None:
    svc = service(
        annotations={GA + "hostname": "web.example.com", GA + "record-type": "ptr"}, lb=[{"ip": "1.2.3.4"}]
    )
    [ep] = service_endpoints(svc).endpoints
    assert ("record-type", "ptr") in ep.provider_specific


def test_create_ptr_flag_needs_ptr_managed() -> None:
    env = {"POD_NAME": "p"}
    parser = argparse.ArgumentParser()
    configure(parser, env)
    fake = ["--fake-zone", "example.com"]
    with pytest.raises(ConfigError, match="--create-ptr requires PTR in --managed-record-types"):
        settings_from_args(parser.parse_args(["--create-ptr", *fake]), env)
    managed = ["--managed-record-types=A", "--managed-record-types=PTR"]
    s = settings_from_args(parser.parse_args(["--create-ptr", *managed, *fake]), env)
    assert s.options(options.FLAGS).create_ptr is True
