"""Any Service, however malformed, translates without an exception into valid, sorted endpoints (property
tests of the service translation; the cases: test_service.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shardsync.records.endpoint import RESOURCE_LABEL, normalize_name
from shardsync.sources.options import SourceOptions
from shardsync.sources.service import ServiceOptions, service_dependencies, service_endpoints, service_names

from .objects import ALPHA, ANNOTATION_NAMES, GA, endpoint_slice, node, pod, service

NODES = {
    "n1": node("n1", ("InternalIP", "10.0.0.1"), ("ExternalIP", "203.0.113.1"), ("InternalIP", "fd00::1")),
    "n2": node("n2", ("InternalIP", "10.0.0.2"), ("ExternalIP", "203.0.113.2"), ("Hostname", "n2")),
}

ANN_VALUES = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        [
            "web.example.com",
            "a.example.com,b.example.com",
            "*.example.com",
            "1m",
            "-5",
            "1.2.3.4",
            "::1",
            "public",
            "private",
            "HostIP",
            "NodeExternalIP",
            "dns-controller",
            "x..example.com",
            "",
        ]
    ),
)
ANNOTATIONS = st.dictionaries(
    st.builds(lambda p, n: p + n, st.sampled_from([ALPHA, GA]), st.sampled_from(ANNOTATION_NAMES)),
    ANN_VALUES,
    max_size=6,
)
ANYTHING = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
ADDRESS = st.sampled_from(
    ["1.2.3.4", "10.0.0.1", "fd00::1", "lb.example.net", "", "not an address", "::ffff:1.2.3.4"]
)


@st.composite
def services(draw: st.DrawFn) -> dict[str, Any]:
    svc = service(
        type_=draw(st.sampled_from(["LoadBalancer", "ClusterIP", "NodePort", "ExternalName", "Weird"])),
        annotations=draw(ANNOTATIONS),
        cluster_ip=draw(st.sampled_from(["None", "10.96.0.1", ""])),
        lb=draw(
            st.lists(st.fixed_dictionaries({}, optional={"ip": ADDRESS, "hostname": ADDRESS}), max_size=3)
        ),
        externalIPs=draw(st.lists(ADDRESS, max_size=2)),
        externalName=draw(ADDRESS),
        externalTrafficPolicy=draw(st.sampled_from(["Cluster", "Local"])),
        publishNotReadyAddresses=draw(st.booleans()),
        ports=draw(
            st.lists(st.fixed_dictionaries({"nodePort": st.integers(-1, 65535) | ANYTHING}), max_size=2)
        ),
    )
    if draw(st.booleans()):
        # Garbage where structure is expected must not crash the translation either.
        svc[draw(st.sampled_from(["spec", "status", "metadata"]))] = draw(ANYTHING)
    return svc


@settings(max_examples=300, deadline=None)
@given(services(), st.booleans(), st.booleans())
def test_any_service_translates_without_exception(svc: dict[str, Any], internal: bool, host_ip: bool) -> None:
    opts = ServiceOptions(publish_internal=internal, publish_host_ip=host_ip)
    pods = {f"default/{p}": pod(p, hostname=p, node_name=n) for p, n in [("web-0", "n1"), ("web-1", "gone")]}
    slices = [endpoint_slice("web", [("172.16.0.1", "web-0", True), ("fd00::2", "web-1", None)])]
    result = service_endpoints(svc, nodes=NODES, slices=slices, pods=pods, opts=opts)
    for ep in result.endpoints:
        ep.validate()
        assert ep.labels[RESOURCE_LABEL].startswith("service/")
    keys = [ep.key for ep in result.endpoints]
    assert keys == sorted(set(keys))
    service_dependencies(svc, opts)
    # What a sharded replica decides from without translating (SourceKind.names): every record is named
    # at or under one of the Service's names.
    names = [normalize_name(n) for n in service_names(svc, SourceOptions()) or ()]
    for ep in result.endpoints:
        assert any(ep.dns_name == n or ep.dns_name.endswith("." + n) for n in names), (ep.dns_name, names)
