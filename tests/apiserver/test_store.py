"""The store without HTTP: resourceVersion, conflicts, generation, status isolation, finalizers, namespaces,
CRD registration, the event window, paging and snapshots."""

from __future__ import annotations

from typing import Any

import pytest

from shardsync.kube.selectors import parse_selector
from shardsync.local.apiserver.errors import ApiError
from shardsync.local.apiserver.field_selectors import parse_field_selector
from shardsync.local.apiserver.pages import ListResult
from shardsync.local.apiserver.resources import Resource, ResourceTable
from shardsync.local.apiserver.store import Expired, Store
from shardsync.local.apiserver.watch import WatchSpec, translate

TABLE = ResourceTable()


def res(group: str, plural: str, version: str = "v1") -> Resource:
    found = TABLE.lookup(group, version, plural)
    assert found is not None
    return found


CM = res("", "configmaps")
LEASE = res("coordination.k8s.io", "leases")
SVC = res("", "services")
NS = res("", "namespaces")
CRD = res("apiextensions.k8s.io", "customresourcedefinitions")
STS = res("apps", "statefulsets")


def cm(name: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **extra}, "data": {"k": "v"}}


def crd(plural: str = "widgets", group: str = "example.com", scope: str = "Namespaced") -> dict[str, Any]:
    return {
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "kind": "Widget"},
            "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}}],
        },
    }


@pytest.fixture
def store() -> Store:
    return Store(ResourceTable())


def test_every_write_bumps_one_global_resource_version(store: Store) -> None:
    start = store.resource_version
    a = store.create(CM, "default", cm("a"))
    b = store.create(LEASE, "default", {"metadata": {"name": "b"}, "spec": {}})
    assert (a["metadata"]["resourceVersion"], b["metadata"]["resourceVersion"]) == (
        str(start + 1),
        str(start + 2),
    )
    updated = store.update(CM, "default", "a", {**a, "data": {"k": "w"}})
    assert updated["metadata"]["resourceVersion"] == str(start + 3)
    assert store.resource_version == start + 3


def test_noop_update_keeps_the_resource_version(store: Store) -> None:
    a = store.create(CM, "default", cm("a"))
    rv = store.resource_version
    again = store.update(CM, "default", "a", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    assert again is a and store.resource_version == rv
    assert store.events_after(rv)[0] == []


def test_stale_resource_version_conflicts_and_empty_one_is_unconditional(store: Store) -> None:
    a = store.create(CM, "default", cm("a"))
    store.update(CM, "default", "a", {**a, "data": {"k": "2"}})
    with pytest.raises(ApiError) as exc:
        store.update(CM, "default", "a", {**a, "data": {"k": "3"}})
    assert (exc.value.code, exc.value.reason) == (409, "Conflict")
    forced = store.update(CM, "default", "a", {"metadata": {"name": "a"}, "data": {"k": "3"}})
    assert forced["data"] == {"k": "3"}


def test_create_rules(store: Store) -> None:
    made = store.create(CM, "default", {"metadata": {"generateName": "x-"}})
    assert made["metadata"]["name"].startswith("x-") and len(made["metadata"]["name"]) == 7
    assert made["metadata"]["uid"] and made["metadata"]["creationTimestamp"].endswith("Z")
    with pytest.raises(ApiError) as dup:
        store.create(CM, "default", {"metadata": {"name": made["metadata"]["name"]}})
    assert (dup.value.code, dup.value.reason) == (409, "AlreadyExists")
    with pytest.raises(ApiError) as nameless:
        store.create(CM, "default", {"metadata": {}})
    assert (nameless.value.code, nameless.value.reason) == (422, "Invalid")
    with pytest.raises(ApiError) as bad_name:
        store.create(CM, "default", {"metadata": {"name": "Not_Valid"}})
    assert bad_name.value.code == 422
    with pytest.raises(ApiError) as no_ns:
        store.create(CM, "nowhere", cm("a"))
    assert (no_ns.value.code, no_ns.value.message) == (404, 'namespaces "nowhere" not found')


def test_immutable_metadata_survives_updates(store: Store) -> None:
    a = store.create(CM, "default", cm("a"))
    b = store.update(
        CM,
        "default",
        "a",
        {"metadata": {"name": "a", "creationTimestamp": "1999-01-01T00:00:00Z"}, "data": {}},
    )
    assert b["metadata"]["uid"] == a["metadata"]["uid"]
    assert b["metadata"]["creationTimestamp"] == a["metadata"]["creationTimestamp"]
    with pytest.raises(ApiError) as exc:
        store.update(CM, "default", "a", {"metadata": {"name": "other"}})
    assert exc.value.code == 400


def test_status_subresource_isolation(store: Store) -> None:
    svc = store.create(
        SVC,
        "default",
        {
            "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 80}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.1.1.1"}]}},
        },
    )
    assert svc["status"] == {"loadBalancer": {}}, "create ignores status"
    assert svc["spec"]["clusterIP"] and svc["spec"]["type"] == "ClusterIP"
    lb = {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}
    with_status = store.update(SVC, "default", "s", {**svc, "status": lb, "spec": {"ports": []}}, "status")
    assert with_status["status"] == lb and with_status["spec"] == svc["spec"], "/status changes only status"
    main = store.update(SVC, "default", "s", {**with_status, "status": {}, "metadata": {"name": "s"}})
    assert main["status"] == lb, "the main resource does not change status"


def test_generation_tracks_spec_only(store: Store) -> None:
    sts = store.create(STS, "default", {"metadata": {"name": "w"}, "spec": {"replicas": 1}})
    assert sts["metadata"]["generation"] == 1
    labelled = store.update(STS, "default", "w", {**sts, "metadata": {"name": "w", "labels": {"a": "b"}}})
    assert labelled["metadata"]["generation"] == 1
    status = store.update(STS, "default", "w", {**labelled, "status": {"replicas": 1}}, "status")
    assert status["metadata"]["generation"] == 1
    scaled = store.update(STS, "default", "w", {**status, "spec": {"replicas": 3}})
    assert scaled["metadata"]["generation"] == 2
    assert "generation" not in store.create(CM, "default", cm("c"))["metadata"]


def test_finalizers_hold_deletion_until_removed(store: Store) -> None:
    store.create(CM, "default", cm("f", finalizers=["example.com/hold"]))
    obj, deleted = store.delete(CM, "default", "f")
    assert not deleted and obj["metadata"]["deletionTimestamp"]
    assert store.get(CM, "default", "f")["metadata"]["deletionTimestamp"]
    with pytest.raises(ApiError) as adding:
        store.update(CM, "default", "f", {**obj, "metadata": {**obj["metadata"], "finalizers": ["a", "b"]}})
    assert adding.value.code == 422
    gone = store.update(CM, "default", "f", {**obj, "metadata": {**obj["metadata"], "finalizers": []}})
    assert gone["metadata"]["name"] == "f"
    with pytest.raises(ApiError):
        store.get(CM, "default", "f")
    events, _ = store.events_after(int(obj["metadata"]["resourceVersion"]))
    assert [e.type for e in events] == ["DELETED"]


def test_update_emptying_finalizers_deletes_the_stored_object_not_the_update(store: Store) -> None:
    # The real registry never stores such an update (errEmptiedFinalizers → deleteWithoutFinalizers): the
    # DELETED event is the object as last stored, and a selected watch decides on its labels.
    store.create(CM, "default", cm("f", labels={"team": "red"}, finalizers=["x/hold"]))
    held, _ = store.delete(CM, "default", "f")
    relabelled = store.update(CM, "default", "f", cm("f", labels={"team": "blue"}))
    assert relabelled["metadata"]["labels"] == {"team": "blue"} and not relabelled["metadata"].get(
        "finalizers"
    )
    with pytest.raises(ApiError):
        store.get(CM, "default", "f")
    events, rv = store.events_after(int(held["metadata"]["resourceVersion"]))
    assert [(e.type, e.rv) for e in events] == [("DELETED", rv)]
    gone = events[0].obj
    assert gone["metadata"]["labels"] == {"team": "red"} and gone["metadata"]["finalizers"] == ["x/hold"]
    assert gone["metadata"]["resourceVersion"] == str(rv)
    red = WatchSpec(CM, "default", parse_selector("team=red"))
    blue = WatchSpec(CM, "default", parse_selector("team=blue"))
    assert (translate(events[0], red) or {}).get("type") == "DELETED"
    assert translate(events[0], blue) is None


def test_delete_preconditions(store: Store) -> None:
    a = store.create(CM, "default", cm("a"))
    for pre in ({"uid": "nope"}, {"resourceVersion": "1"}):
        with pytest.raises(ApiError) as exc:
            store.delete(CM, "default", "a", pre)
        assert (exc.value.code, exc.value.reason) == (409, "Conflict")
        assert "Precondition failed" in exc.value.message
    _, deleted = store.delete(
        CM, "default", "a", {"uid": a["metadata"]["uid"], "resourceVersion": a["metadata"]["resourceVersion"]}
    )
    assert deleted


def test_namespace_deletion_cascades_and_waits_for_finalizers(store: Store) -> None:
    store.create(NS, None, {"metadata": {"name": "team"}})
    store.create(CM, "team", cm("a"))
    store.create(CM, "team", cm("b", finalizers=["x/y"]))
    ns, deleted = store.delete(NS, None, "team")
    assert not deleted and ns["status"]["phase"] == "Terminating"
    with pytest.raises(ApiError) as closed:
        store.create(CM, "team", cm("c"))
    assert closed.value.code == 403
    assert [o["metadata"]["name"] for o in store.list(CM, "team").items] == ["b"]
    b = store.get(CM, "team", "b")
    store.update(CM, "team", "b", {**b, "metadata": {**b["metadata"], "finalizers": []}})
    with pytest.raises(ApiError):
        store.get(NS, None, "team")


def test_list_selectors_and_paging(store: Store) -> None:
    for i in range(5):
        store.create(CM, "default", cm(f"c{i}", labels={"i": str(i), "even": str(i % 2 == 0).lower()}))
    even = store.list(CM, "default", parse_selector("even=true"))
    assert [o["metadata"]["name"] for o in even.items] == ["c0", "c2", "c4"]
    named = store.list(CM, None, fields=parse_field_selector("metadata.name=c3", CM.fields))
    assert [o["metadata"]["name"] for o in named.items] == ["c3"]
    first = store.list(CM, "default", limit=2)
    assert [o["metadata"]["name"] for o in first.items] == ["c0", "c1"] and first.remaining == 3
    rest = store.list(CM, "default", limit=10, continue_token=first.continue_token)
    assert [o["metadata"]["name"] for o in rest.items] == ["c2", "c3", "c4"] and not rest.continue_token
    assert rest.resource_version == first.resource_version


def test_paging_keeps_to_its_namespace_and_sees_objects_added_and_removed_between_pages(store: Store) -> None:
    # Namespaces whose names extend one another ("team" < "team-a" < "teamb") sort next to each other.
    for namespace in ("team", "team-a", "teamb"):
        store.create(NS, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        for i in range(3):
            store.create(CM, namespace, cm(f"c{i}"))

    def names(result: ListResult) -> list[str]:
        return [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in result.items]

    first = store.list(CM, "team", limit=2)
    assert names(first) == ["team/c0", "team/c1"] and first.remaining == 1
    store.create(CM, "team", cm("c15"))  # after the token's key: the next page shows it
    store.delete(CM, "team", "c0")  # before it: nothing changes
    rest = store.list(CM, "team", limit=2, continue_token=first.continue_token)
    assert names(rest) == ["team/c15", "team/c2"] and not rest.continue_token
    every = store.list(CM, None, limit=4)
    assert names(every) == ["team/c1", "team/c15", "team/c2", "team-a/c0"] and every.remaining == 5
    assert names(store.list(CM, "teamb")) == ["teamb/c0", "teamb/c1", "teamb/c2"]
    assert names(store.list(CM, "nowhere")) == []


def test_event_window_and_expiry() -> None:
    store = Store(ResourceTable(), window=3)
    base = store.resource_version
    for i in range(5):
        store.create(CM, "default", cm(f"c{i}"))
    events, current = store.events_after(base + 2)
    assert [e.rv for e in events] == [base + 3, base + 4, base + 5] and current == base + 5
    with pytest.raises(Expired, match=f"too old resource version: {base + 1}"):
        store.events_after(base + 1)
    assert store.events_after(current) == ([], current)


def test_crd_registers_and_unregisters_resources(store: Store) -> None:
    store.create(CRD, None, crd())
    widgets = store.table.lookup("example.com", "v1", "widgets")
    assert widgets is not None and widgets.custom and widgets.status and widgets.namespaced
    w = store.create(
        widgets,
        "default",
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"a": 1},
            "status": {"x": 1},
        },
    )
    assert "status" not in w and w["metadata"]["generation"] == 1
    crd_obj = store.get(CRD, None, "widgets.example.com")
    assert {c["type"] for c in crd_obj["status"]["conditions"]} == {"Established", "NamesAccepted"}
    with pytest.raises(ApiError) as clash:
        store.create(CRD, None, crd("leases", "coordination.k8s.io"))
    assert clash.value.code == 422 and "already served" in clash.value.message
    store.delete(CRD, None, "widgets.example.com")
    assert store.table.lookup("example.com", "v1", "widgets") is None
    assert store.list(widgets, None).items == []


def test_dump_and_load_keep_objects_and_version_but_not_the_window(store: Store) -> None:
    store.create(CRD, None, crd())
    widgets = store.table.lookup("example.com", "v1", "widgets")
    assert widgets is not None
    store.create(widgets, "default", {"metadata": {"name": "w"}, "spec": {}})
    rv = store.resource_version
    fresh = Store(ResourceTable())
    fresh.load(store.dump())
    assert fresh.resource_version == rv
    loaded = fresh.table.lookup("example.com", "v1", "widgets")
    assert loaded is not None and fresh.get(loaded, "default", "w")["metadata"]["resourceVersion"] == str(rv)
    assert fresh.events_after(rv) == ([], rv)
    with pytest.raises(Expired):
        fresh.events_after(rv - 1)
