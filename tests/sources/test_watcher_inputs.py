"""ServiceInputs, the watcher's reverse dependency index: which Services an event on a Node, EndpointSlice or
Pod re-translates, and which pods and slices a translation reads."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shardsync.kube.selectors import selector_from_labels
from shardsync.sources.service_inputs import (
    _SMALL,
    Keys,
    ServiceDependencies,
    ServiceInputs,
    _add,
    _discard,
    _members,
)

NODES = ServiceDependencies(nodes=True)
HEADLESS = ServiceDependencies(endpoint_slices=True, pods=True)
LOCAL = ServiceDependencies(nodes=True, pods=True)


def svc(name: str, namespace: str = "default", **selector: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"selector": selector}}


def pod(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels}}


def node(*addresses: str, heartbeat: str = "t0") -> dict[str, Any]:
    return {
        "metadata": {"name": "n"},
        "status": {
            "addresses": [{"type": "ExternalIP", "address": a} for a in addresses],
            "conditions": [{"type": "Ready", "lastHeartbeatTime": heartbeat}],
        },
    }


def slice_of(service: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "labels": {"kubernetes.io/service-name": service}},
        "endpoints": [],
    }


def test_node_events_reach_only_node_readers_and_ignore_heartbeats() -> None:
    idx = ServiceInputs()
    idx.register("default/np", svc("np"), NODES)
    idx.register("default/lb", svc("lb"), ServiceDependencies())
    assert idx.set_node("n", None, node("203.0.113.1")) == {"default/np"}
    assert idx.set_node("n", node("203.0.113.1"), node("203.0.113.1", heartbeat="t1")) == set()
    assert idx.set_node("n", node("203.0.113.1"), node("203.0.113.2")) == {"default/np"}
    assert idx.set_node("n", node("203.0.113.2"), None) == {"default/np"}
    cordoned = {**node("203.0.113.1"), "spec": {"unschedulable": True}}
    assert idx.set_node("n", node("203.0.113.1"), cordoned) == {"default/np"}  # --exclude-unschedulable
    idx.unregister("default/np")
    assert idx.set_node("n", None, node("203.0.113.1")) == set()


def test_pod_events_reach_the_services_selecting_the_pod_before_or_after() -> None:
    idx = ServiceInputs()
    idx.register("default/db", svc("db", app="db"), HEADLESS)
    idx.register("default/web", svc("web", app="web", tier="front"), LOCAL)
    idx.register("default/all", svc("all"), HEADLESS)  # empty selector: every pod of the namespace
    idx.register("default/lb", svc("lb", app="db"), ServiceDependencies())  # reads no pods
    idx.register("other/db", svc("db", "other", app="db"), HEADLESS)

    db0 = pod("db-0", app="db")
    assert idx.set_pod("default/db-0", None, db0) == {"default/db", "default/all"}
    # Relabelled: the Service that selected it and the one that selects it now.
    web0 = pod("db-0", app="web", tier="front")
    assert idx.set_pod("default/db-0", db0, web0) == {"default/db", "default/web", "default/all"}
    half = pod("db-0", app="web")  # no longer matches web's whole selector
    assert idx.set_pod("default/db-0", web0, half) == {"default/web", "default/all"}
    assert idx.set_pod("default/db-0", half, None) == {"default/all"}
    assert idx.pods_for("default/all") == {}


def test_pods_for_gives_the_selected_pods_of_the_namespace_only() -> None:
    idx = ServiceInputs()
    idx.register("default/web", svc("web", app="web", tier="front"), LOCAL)
    idx.register("default/all", svc("all"), HEADLESS)
    pods = {
        "default/a": pod("a", app="web", tier="front"),
        "default/b": pod("b", app="web"),
        "default/c": pod("c", app="web", tier="front", extra="x"),
        "other/d": pod("d", "other", app="web", tier="front"),
    }
    for key, obj in pods.items():
        idx.set_pod(key, None, obj)
    assert set(idx.pods_for("default/web")) == {"default/a", "default/c"}
    assert set(idx.pods_for("default/all")) == {"default/a", "default/b", "default/c"}
    assert idx.pods_for("default/unknown") == {}


def test_slices_follow_their_service_label() -> None:
    idx = ServiceInputs()
    idx.register("default/a", svc("a"), HEADLESS)
    idx.register("default/b", svc("b"), HEADLESS)
    idx.register("default/np", svc("np"), NODES)  # reads no slices
    first = slice_of("a")
    assert idx.set_slice("default/s1", None, first) == {"default/a"}
    assert idx.slices_for("default/a") == [first]
    moved = slice_of("b")
    assert idx.set_slice("default/s1", first, moved) == {"default/a", "default/b"}
    assert idx.slices_for("default/a") == [] and idx.slices_for("default/b") == [moved]
    assert idx.set_slice("default/s2", None, slice_of("np")) == set()
    assert idx.set_slice("default/s3", None, {"metadata": {"namespace": "default"}}) == set()
    assert idx.set_slice("default/s1", moved, None) == {"default/b"}
    assert idx.slices_for("default/b") == []


labels = st.dictionaries(st.sampled_from("abc"), st.sampled_from("xy"), max_size=3)


@given(
    selector=labels,
    pods=st.lists(st.tuples(st.sampled_from(["default", "other"]), labels), max_size=12),
    churn=st.lists(st.tuples(st.integers(0, 11), labels), max_size=8),
)
def test_index_agrees_with_a_scan_of_every_pod(
    selector: dict[str, str],
    pods: list[tuple[str, dict[str, str]]],
    churn: list[tuple[int, dict[str, str]]],
) -> None:
    """After any sequence of pod adds and relabels, pods_for equals a brute-force selector scan, and each
    event named exactly the Services whose selection it changed or touched."""
    idx = ServiceInputs()
    idx.register("default/s", svc("s", **selector), HEADLESS)
    matcher = selector_from_labels(selector)
    live: dict[str, dict[str, Any]] = {}

    def apply(key: str, new: dict[str, Any]) -> None:
        old = live.get(key)
        affected = idx.set_pod(key, old, new)
        namespace = key.split("/")[0]
        selected = namespace == "default" and any(
            matcher.matches(o["metadata"]["labels"]) for o in (old, new) if o is not None
        )
        assert affected == ({"default/s"} if selected else set())
        live[key] = new

    for i, (namespace, pod_labels) in enumerate(pods):
        apply(f"{namespace}/p{i}", pod(f"p{i}", namespace, **pod_labels))
    for index, pod_labels in churn:
        if index < len(pods):
            namespace = pods[index][0]
            apply(f"{namespace}/p{index}", pod(f"p{index}", namespace, **pod_labels))
    expected = {
        k for k, o in live.items() if k.startswith("default/") and matcher.matches(o["metadata"]["labels"])
    }
    assert set(idx.pods_for("default/s")) == expected


def test_objects_are_read_from_the_watchers_caches_and_only_for_services_that_read_them() -> None:
    """Given the caches, the index keeps keys only and reads the objects there; a Service that reads no
    pods (a LoadBalancer) reads nothing, whatever its selector (a packed cache decodes what is read)."""
    pods = {"default/a": pod("a", app="db"), "default/b": pod("b", app="web")}
    slices = {"default/s": slice_of("db")}
    reads: list[str] = []

    def pod_cache() -> dict[str, dict[str, Any]]:
        reads.append("pods")
        return pods

    idx = ServiceInputs(pods=pod_cache, slices=lambda: slices)
    idx.register("default/db", svc("db", app="db"), HEADLESS)
    idx.register("default/lb", svc("lb"), ServiceDependencies())
    for key, obj in pods.items():
        idx.set_pod(key, None, obj)
    idx.set_slice("default/s", None, slices["default/s"])
    assert idx.pods_for("default/lb") == {} and reads == []
    assert idx.pods_for("default/db") == {"default/a": pods["default/a"]} and reads == ["pods"]
    assert idx.slices_for("default/db") == [slices["default/s"]]
    pods["default/a"] = pod("a", app="db", changed="yes")  # the cache holds the newest object
    assert idx.pods_for("default/db") == {"default/a": pods["default/a"]}
    assert idx._own_pods == {} and idx._own_slices == {}  # nothing kept a second time


@given(st.lists(st.tuples(st.booleans(), st.sampled_from("ab"), st.sampled_from("pqrstuvw")), max_size=60))
def test_small_key_sets_agree_with_plain_sets(ops: list[tuple[bool, str, str]]) -> None:
    """The index's compact key sets (a bare key, a tuple of a few, a set beyond) hold exactly what plain
    sets would, in the cheapest form for their size."""
    index: dict[str, Keys] = {}
    plain: dict[str, set[str]] = {}
    for add, slot, key in ops:
        if add:
            _add(index, slot, key)
            plain.setdefault(slot, set()).add(key)
        else:
            _discard(index, slot, key)
            plain.get(slot, set()).discard(key)
            if not plain.get(slot, True):
                del plain[slot]
        assert {s: set(_members(k)) for s, k in index.items()} == plain
        for keys in index.values():
            size = len(_members(keys))
            assert type(keys) is (str if size == 1 else tuple if size <= _SMALL else set)


def test_register_says_when_a_service_comes_to_read_pods_or_slices_it_did_not_read() -> None:
    idx = ServiceInputs()
    assert idx.register("default/db", svc("db", app="db"), HEADLESS)  # new: all it reads may be missing
    assert not idx.register("default/db", svc("db", app="db"), HEADLESS)  # the same: nothing new
    assert idx.label_selector("default/db") == "app=db"
    assert idx.register("default/db", svc("db", app="db2", tier="x"), HEADLESS)  # a new selector
    assert idx.label_selector("default/db") == "app=db2,tier=x"
    assert not idx.register("default/db", svc("db", app="db2", tier="x"), NODES)  # reads less
    assert idx.register("default/db", svc("db", app="db2", tier="x"), LOCAL)  # pods again
    assert idx.register("default/db", svc("db", app="db2", tier="x"), HEADLESS)  # slices again
    assert not idx.register("default/lb", svc("lb"), ServiceDependencies())  # reads nothing else
    assert idx.label_selector("default/none") == ""


def test_reads_pod_and_reads_slice_say_what_a_registered_service_reads() -> None:
    idx = ServiceInputs()
    idx.register("default/db", svc("db", app="db", tier="x"), HEADLESS)
    idx.register("default/np", svc("np", app="np"), NODES)  # reads nodes only: not its pods
    assert idx.reads_pod("default/p", pod("p", app="db", tier="x", extra="y"))
    assert not idx.reads_pod("default/p", pod("p", app="db"))  # the selector's every label
    assert not idx.reads_pod("other/p", pod("p", "other", app="db", tier="x"))  # its namespace only
    assert not idx.reads_pod("default/q", pod("q", app="np"))
    assert idx.reads_slice(slice_of("db")) and not idx.reads_slice(slice_of("db", "other"))
    assert not idx.reads_slice(slice_of("np")) and not idx.reads_slice({"metadata": {}})
    idx.unregister("default/db")
    assert not idx.reads_pod("default/p", pod("p", app="db", tier="x"))
    assert not idx.reads_slice(slice_of("db"))
