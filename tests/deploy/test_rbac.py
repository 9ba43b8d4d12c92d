"""deploy/base's RBAC grants exactly the API verbs shardsync's code calls (tests/deploy/api_calls.py reads
them from the source), in the right scope, limited by name where the code addresses one object."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from shardsync.sharding.assignment import configmap_name
from shardsync.sharding.assignment_watch import AssignmentWatch
from shardsync.sharding.timings import Timings
from tests.deploy import api_calls
from tests.deploy import manifests as m
from tests.deploy.api_calls import Access
from tests.deploy.kustomize import Obj

# The objects design §2 keeps in the controller's own namespace (so a Role, not a ClusterRole).
OWN_NAMESPACE = {("coordination.k8s.io", "leases"), ("", "configmaps"), ("apps", "statefulsets")}


@pytest.fixture(scope="module")
def base() -> list[Obj]:
    return m.rendered(m.BASE)


@pytest.fixture(scope="module")
def required() -> set[Access]:
    return api_calls.required_access()


def granted(role: Obj) -> set[Access]:
    return {
        Access(group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_scan_sees_the_calls_we_know_of(required: set[Access]) -> None:
    # If the scan broke (client layout, a rename), it would find nothing and the comparisons below pass
    # vacuously; these calls are in the code for sure.
    assert {
        Access("coordination.k8s.io", "leases", "update"),
        Access("coordination.k8s.io", "leases", "watch"),
        Access("", "configmaps", "create"),
        Access("apps", "statefulsets", "get"),
        Access("externaldns.k8s.io", "dnsendpoints/status", "patch"),
        Access("", "events", "create"),
        Access("discovery.k8s.io", "endpointslices", "watch"),
    } <= required


def test_rbac_grants_exactly_what_the_code_calls(base: list[Obj], required: set[Access]) -> None:
    given = granted(m.find(base, "Role", "shardsync")) | granted(m.find(base, "ClusterRole", "shardsync"))
    missing, extra = sorted(map(str, required - given)), sorted(map(str, given - required))
    assert (missing, extra) == ([], []), f"not granted: {missing}; granted but never called: {extra}"


def test_the_role_holds_the_coordination_objects_and_the_clusterrole_the_rest(
    base: list[Obj], required: set[Access]
) -> None:
    role = {(a.group, a.resource) for a in granted(m.find(base, "Role", "shardsync"))}
    cluster = {(a.group, a.resource) for a in granted(m.find(base, "ClusterRole", "shardsync"))}
    assert role == OWN_NAMESPACE
    assert not cluster & OWN_NAMESPACE
    assert role | cluster == {(a.group, a.resource) for a in required}


def test_named_rules_never_hold_create(base: list[Obj]) -> None:
    # RBAC cannot check a name on create (the object does not exist yet): such a rule would grant nothing.
    for role in (m.find(base, "Role", "shardsync"), m.find(base, "ClusterRole", "shardsync")):
        for rule in role["rules"]:
            if rule.get("resourceNames"):
                assert not {"create", "deletecollection"} & set(rule["verbs"]), rule


def test_the_assignment_is_listed_by_name(base: list[Obj]) -> None:
    # list/watch limited by resourceNames only pass with a metadata.name field selector naming the object.
    kube: Any = SimpleNamespace(core=SimpleNamespace(list_namespaced_config_map=object()))
    watch = AssignmentWatch(kube, m.NAMESPACE, "shardsync", Timings.derive(15, 5))
    rule = next(
        r
        for r in m.find(base, "Role", "shardsync")["rules"]
        if r["resources"] == ["configmaps"] and "list" in r["verbs"]
    )
    assert rule["resourceNames"] == [configmap_name("shardsync")]
    assert watch._informer._kwargs["field_selector"] == f"metadata.name={configmap_name('shardsync')}"


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/api/v1/namespaces/{namespace}/services", ("", "services", "", False)),
        ("GET", "/api/v1/nodes", ("", "nodes", "", False)),
        (
            "GET",
            "/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}",
            ("apps", "statefulsets", "", True),
        ),
        (
            "PATCH",
            "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}/status",
            ("{group}", "{plural}", "status", True),
        ),
        ("GET", "/api/v1/namespaces/{name}", ("", "namespaces", "", True)),
        ("PUT", "/api/v1/namespaces/{name}/status", ("", "namespaces", "status", True)),
    ],
)
def test_parse_path(method: str, path: str, expected: tuple[str, str, str, bool]) -> None:
    ep = api_calls.parse_path(method, path)
    assert (ep.group, ep.resource, ep.subresource, ep.named) == expected


def test_client_methods_resolve_to_their_paths() -> None:
    assert api_calls.endpoint("CoordinationV1Api", "replace_namespaced_lease") == api_calls.Endpoint(
        "PUT", "coordination.k8s.io", "leases", "", True
    )
    assert api_calls.endpoint("CoreV1Api", "list_service_for_all_namespaces") == api_calls.Endpoint(
        "GET", "", "services", "", False
    )


def test_informer_lists_count_as_watches_and_one_shot_lists_do_not() -> None:
    seen = {(u.module.name, u.name): u.one_shot for u in api_calls.uses() if u.name.startswith("list_")}
    assert seen[("cluster.py", "list_namespaced_lease")] is True  # `shardsync shards`: fetch(...)
    assert seen[("member_loop.py", "list_namespaced_lease")] is False  # an Informer
    assert seen[("assignment_watch.py", "list_namespaced_config_map")] is False
