"""deploy/base's RBAC grants exactly the API verbs shardsync's code calls (tests/deploy/api_calls.py reads
them from the source: every call names a Resource), in the right scope, limited by name where the code
addresses one object."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from shardsync.kube.objects import CONFIGMAPS, CUSTOM_RESOURCE_DEFINITIONS
from shardsync.sharding.assignment import configmap_name
from shardsync.sharding.assignment_watch import AssignmentWatch
from shardsync.sharding.site import Site
from shardsync.sharding.timings import Timings
from shardsync.sources.table import SOURCES
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
    kube: Any = SimpleNamespace()
    watch = AssignmentWatch(Site(kube, m.NAMESPACE, "shardsync", "shardsync-0", Timings.derive(15, 5)))
    rule = next(
        r
        for r in m.find(base, "Role", "shardsync")["rules"]
        if r["resources"] == ["configmaps"] and "list" in r["verbs"]
    )
    assert rule["resourceNames"] == [configmap_name("shardsync")]
    assert watch._informer.field_selector == f"metadata.name={configmap_name('shardsync')}"


def test_crds_are_followed_by_name_and_granted_by_name(base: list[Obj]) -> None:
    """A kind waiting for its CRD watches that CRD alone (sources.served): a list or watch limited by
    resourceNames passes only with a metadata.name field selector naming the object (the API server takes
    the name from it: k8s.io/apiserver's requestinfo.go), and the rule names exactly the CRDs the source
    table waits for, nothing else of the cluster's CRDs."""
    rule = next(
        r
        for r in m.find(base, "ClusterRole", "shardsync")["rules"]
        if r["resources"] == ["customresourcedefinitions"]
    )
    waited = {crd for kind in SOURCES.values() if kind.crd is not None for crd in kind.crd.crds}
    assert sorted(rule["resourceNames"]) == sorted(waited)
    assert sorted(rule["verbs"]) == ["list", "watch"]
    uses = [u for u in api_calls.uses() if u.resource == CUSTOM_RESOURCE_DEFINITIONS]
    assert [(u.module.name, u.verb) for u in uses] == [("served.py", "informer")]
    # (that the follower lists and watches by `metadata.name=<crd>`: tests/sources/test_watcher_dispatch.py)


def test_informers_count_as_list_and_watch_and_one_shot_lists_do_not() -> None:
    seen = {(u.module.name, u.resource.plural, u.verb) for u in api_calls.uses()}
    assert ("cluster.py", "leases", "list") in seen  # `shardsync shards`: one list
    assert ("peer_view.py", "leases", "informer") in seen
    assert ("assignment_watch.py", "configmaps", "informer") in seen


@pytest.mark.parametrize(
    ("code", "match"),
    [
        ("await kube.delete(resource, 'x')", "not a module constant"),
        # a patch needs `<plural>/<subresource>`: a subresource the scan cannot read is refused too
        ("await kube.patch(CONFIGMAPS, 'x', {}, subresource=resource)", "not a string literal"),
    ],
)
def test_a_call_the_scan_cannot_resolve_is_an_error(
    code: str, match: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A resource passed as a variable would slip past the comparison above: the scan refuses it instead.
    module = tmp_path / "shardsync" / "sneaky.py"
    module.parent.mkdir()
    module.write_text(f"async def f(kube, resource):\n    {code}\n")
    monkeypatch.setattr(api_calls, "PACKAGE", module.parent)
    monkeypatch.setattr(api_calls, "EXCLUDED", ())
    monkeypatch.setattr(api_calls, "module_globals", lambda path: {"CONFIGMAPS": CONFIGMAPS})
    with pytest.raises(LookupError, match=match):
        api_calls.uses()
