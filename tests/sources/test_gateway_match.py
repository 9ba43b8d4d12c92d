"""The Gateway API attachment rules (sources.gateway_match): host intersection, protocols, allowedRoutes,
accepted parents. The cases follow external-dns's gateway_test.go (TestGatewayMatchingHost,
TestGatewayMatchingProtocol) and the Gateway API's hostname rules."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardsync.sources import gateway_match as match
from tests.sources.gateway_objects import listener, parent, route


@pytest.mark.parametrize(
    ("a", "b", "host"),
    [
        ("1.2.3.4", "", None),  # an IPv4 address is never a host
        ("2001:db8:85a3::8a2e:370:7334", "", None),
        ("", "", ""),  # both empty: overlap, with no name
        ("example.net", "", "example.net"),
        ("example.net", "example.net", "example.net"),
        ("Example.NET", "example.net", "example.net"),  # case does not matter
        ("*.example.net", "test.example.net", "test.example.net"),
        ("*.example.net", "a.example.net", "a.example.net"),  # equal length
        ("*.example.net", "foo.bar.test.example.net", "foo.bar.test.example.net"),
        ("*.example.net", "*.sub.example.net", "*.sub.example.net"),
        ("*.example.net", "example.net", None),  # a wildcard does not cover its parent
        ("*example.net", "test.example.net", None),  # the wildcard must be a whole label
        ("a.example.net", "b.example.net", None),
        ("bad_name.example.net", "", None),  # not RFC 1123
        ("-bad.example.net", "", None),
    ],
)
def test_hosts_intersect_to_the_more_specific_either_way(a: str, b: str, host: str | None) -> None:
    assert match.matching_host(a, b) == host
    assert match.matching_host(b, a) == host


@pytest.mark.parametrize(
    ("route_protocol", "listener_protocol", "ok"),
    [
        ("HTTP", "HTTP", True),
        ("HTTP", "HTTPS", True),  # an HTTPRoute attaches to an HTTPS listener
        ("HTTPS", "HTTP", True),  # a GRPCRoute (HTTPS) to an HTTP listener
        ("TLS", "TLS", True),
        ("TCP", "TLS", True),  # a TCPRoute to a TLS listener
        ("TLS", "TCP", False),
        ("TCP", "TCP", True),
        ("UDP", "UDP", True),
        ("UDP", "TCP", False),
        ("HTTP", "TLS", False),
    ],
)
def test_protocols(route_protocol: str, listener_protocol: str, ok: bool) -> None:
    assert match.protocol_matches(route_protocol, listener_protocol) is ok


SELECT_TEAM_A = {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"team": "a"}}}}
SELECT_EXPR = {
    "namespaces": {
        "from": "Selector",
        "selector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "stage"]}]},
    }
}


@pytest.mark.parametrize(
    ("allowed", "gateway_ns", "route_ns", "labels", "ok"),
    [
        (None, "gw", "gw", {}, True),  # Same by default
        (None, "gw", "apps", {}, False),
        ({"namespaces": {"from": "Same"}}, "gw", "apps", {}, False),
        ({"namespaces": {"from": "All"}}, "gw", "apps", {}, True),
        (SELECT_TEAM_A, "gw", "apps", {"team": "a"}, True),
        (SELECT_TEAM_A, "gw", "apps", {"team": "b"}, False),
        (SELECT_TEAM_A, "gw", "apps", None, False),  # the route's Namespace is unknown
        (SELECT_EXPR, "gw", "apps", {"env": "stage"}, True),
        (SELECT_EXPR, "gw", "apps", {"env": "dev"}, False),
        ({"namespaces": {"from": "Selector"}}, "gw", "apps", {"team": "a"}, False),  # no selector: nothing
        ({"namespaces": {"from": "Nowhere"}}, "gw", "gw", {}, False),
    ],
)
def test_allowed_routes_namespaces(
    allowed: dict[str, Any] | None, gateway_ns: str, route_ns: str, labels: Any, ok: bool
) -> None:
    lis = listener(allowed=allowed)
    assert match.namespace_allowed(lis, gateway_ns, route_ns, labels) is ok


def test_allowed_routes_kinds() -> None:
    assert match.kind_allowed(listener(allowed={}), "HTTPRoute")
    only_grpc = listener(allowed={"kinds": [{"kind": "GRPCRoute"}]})
    assert not match.kind_allowed(only_grpc, "HTTPRoute")
    assert match.kind_allowed(only_grpc, "GRPCRoute")
    other_group = listener(allowed={"kinds": [{"group": "example.com", "kind": "HTTPRoute"}]})
    assert not match.kind_allowed(other_group, "HTTPRoute")


def test_accepted_parents_need_accepted_true_and_a_matching_spec_ref() -> None:
    ok = route("r", parents=(parent("gw"),))
    assert [p.key for p in match.accepted_parents(ok)] == ["default/gw"]
    assert match.accepted_parents(route("r", parents=(parent("gw"),), accepted_status="False")) == []
    # A status left over from a parentRef the spec no longer names does not count.
    stale = route("r", parents=(parent("gw"),), accepted=(parent("old"),))
    assert match.accepted_parents(stale) == []
    assert match.referenced_gateways(stale) == {"default/old"}
    # The namespace defaults to the route's, in the spec and in the status alike.
    bare = {"name": "gw"}
    assert [p.key for p in match.accepted_parents(route("r", "apps", parents=(bare,)))] == ["apps/gw"]
    # A parent of another kind (a Service, GAMMA) is not a Gateway.
    svc = {"group": "", "kind": "Service", "name": "svc"}
    assert match.accepted_parents(route("r", parents=(svc,))) == []


def test_section_name_and_port_pick_listeners() -> None:
    gw = {
        "spec": {
            "listeners": [
                listener("foo", port=80),
                listener("bar", port=80),
                listener("qux", port=8080),
            ]
        }
    }

    def names(ref: match.ParentRef) -> list[str]:
        return [x["name"] for x in match.listeners_for(gw, ref)]

    assert names(match.ParentRef.of(parent("gw"), "default")) == ["foo", "bar", "qux"]
    assert names(match.ParentRef.of(parent("gw", section="bar"), "default")) == ["bar"]
    assert names(match.ParentRef.of(parent("gw", port=80), "default")) == ["foo", "bar"]
    assert names(match.ParentRef.of(parent("gw", section="qux", port=80), "default")) == []
    assert names(match.ParentRef.of(parent("gw", section="nope"), "default")) == []


def test_targets_prefer_the_annotation() -> None:
    gw = {"status": {"addresses": [{"value": "1.2.3.4"}, {"value": "lb.example.net"}, {}]}}
    assert match.gateway_targets(gw, ()) == ["1.2.3.4", "lb.example.net"]
    assert match.gateway_targets(gw, ("5.6.7.8",)) == ["5.6.7.8"]


def test_hosts_through_a_listener() -> None:
    assert match.hosts_through(["", "a.example.net"], listener(hostname="*.example.net")) == [
        "*.example.net",
        "a.example.net",
    ]
    assert match.hosts_through([""], listener()) == []  # no name on either side
    assert match.hosts_through(["a.other.org"], listener(hostname="*.example.net")) == []


_KEYS = st.sampled_from(
    [
        "namespaces",
        "from",
        "selector",
        "matchLabels",
        "matchExpressions",
        "key",
        "operator",
        "values",
        "kinds",
        "group",
        "kind",
        "name",
        "namespace",
        "hostname",
        "protocol",
        "port",
        "allowedRoutes",
        "sectionName",
        "parentRef",
        "conditions",
        "type",
        "status",
        "value",
        "All",
        "Selector",
        "In",
    ]
)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-2, 70000)
    | st.sampled_from(["", "All", "HTTP", "Accepted", "True", "gw", "*.a.b", "a=b"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(listeners=_JSON, parents=_JSON, addresses=_JSON, hostnames=_JSON)
def test_any_shape_of_gateway_or_route_never_raises(
    listeners: Any, parents: Any, addresses: Any, hostnames: Any
) -> None:
    from shardsync.sources import gateway as gw

    gateway = {
        "metadata": {"name": "gw", "namespace": "default"},
        "spec": {"listeners": listeners},
        "status": {"addresses": addresses},
    }
    bad = route("r", parents=(parent("gw"),))
    bad["spec"]["hostnames"] = hostnames
    if isinstance(parents, list):
        bad["status"]["parents"] += parents
    view = gw.Gateways({"default/gw": gateway}, {"default": {"metadata": {"labels": {"a": "b"}}}})
    gw.route_endpoints(bad, gw.HTTP, view)
    gw.RouteIndex().register("default/r", bad)
