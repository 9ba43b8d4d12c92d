"""Watch semantics through the official client's Watch: resume from a resourceVersion, synthetic ADDED
from "" and "0", selectors (leaving one is a DELETED), BOOKMARKs, timeoutSeconds and 410 Expired."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from shardsync.local.apiserver import ApiServer
from tests.kubeclient import Watch, raw_body, version_of

MakeApiServer = Callable[..., Any]


def cm(name: str, labels: dict[str, str] | None = None, data: str = "1") -> client.V1ConfigMap:
    return raw_body(
        client.V1ConfigMap, {"metadata": {"name": name, "labels": labels or {}}, "data": {"v": data}}
    )


def collect(
    stream_fn: Callable[..., Any], *args: Any, count: int, timeout: int = 5, **kwargs: Any
) -> list[Any]:
    """Reads `count` events (or until the server-side timeout) with the client's Watch."""
    w = Watch()
    events = []
    for event in w.stream(stream_fn, *args, timeout_seconds=timeout, **kwargs):
        events.append(event)
        if len(events) >= count:
            w.stop()
    return events


@pytest.fixture
def core(apiserver: ApiServer) -> client.CoreV1Api:
    return client.CoreV1Api(apiserver.api_client())


def test_watch_from_resource_version_sees_only_later_events(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", cm("before"))
    start = version_of(core.list_namespaced_config_map("default"))
    core.create_namespaced_config_map("default", cm("a"))
    core.patch_namespaced_config_map("a", "default", {"data": {"v": "2"}})
    core.delete_namespaced_config_map("a", "default")
    events = collect(core.list_namespaced_config_map, "default", count=3, resource_version=start)
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),
    ]
    rvs = [int(e["object"].metadata.resource_version) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(start)


@pytest.mark.parametrize("rv", ["", "0"])
def test_watch_without_version_starts_with_synthetic_added(core: client.CoreV1Api, rv: str) -> None:
    core.create_namespaced_config_map("default", cm("x"))
    core.create_namespaced_config_map("default", cm("y"))
    events = collect(core.list_namespaced_config_map, "default", count=2, resource_version=rv)
    assert sorted((e["type"], e["object"].metadata.name) for e in events) == [("ADDED", "x"), ("ADDED", "y")]


def test_watch_with_a_selector_sees_objects_enter_and_leave(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", cm("o", {"team": "a"}))
    start = version_of(core.list_namespaced_config_map("default"))
    core.patch_namespaced_config_map("o", "default", {"metadata": {"labels": {"team": "b"}}})
    core.create_namespaced_config_map("default", cm("other", {"team": "b"}))
    core.patch_namespaced_config_map("o", "default", {"metadata": {"labels": {"team": "a"}}})
    events = collect(
        core.list_namespaced_config_map, "default", count=2, resource_version=start, label_selector="team=a"
    )
    assert [(e["type"], e["object"].metadata.name, e["object"].metadata.labels["team"]) for e in events] == [
        ("DELETED", "o", "a"),
        ("ADDED", "o", "a"),
    ]


def test_watch_one_object_by_field_selector_across_namespaces(core: client.CoreV1Api) -> None:
    core.create_namespace(raw_body(client.V1Namespace, {"metadata": {"name": "n2"}}))
    start = version_of(core.list_namespace())
    core.create_namespaced_config_map("n2", cm("skip"))
    core.create_namespaced_config_map("n2", cm("want"))
    events = collect(
        core.list_config_map_for_all_namespaces,
        count=1,
        resource_version=start,
        field_selector="metadata.name=want",
    )
    assert [(e["type"], e["object"].metadata.namespace) for e in events] == [("ADDED", "n2")]


def test_bookmarks_carry_the_current_version(make_apiserver: MakeApiServer) -> None:
    server: ApiServer = make_apiserver(bookmark_interval=0.2)
    core = client.CoreV1Api(server.api_client())
    core.create_namespaced_config_map("default", cm("a"))
    start = version_of(core.list_namespaced_config_map("default"))
    core.create_namespace(raw_body(client.V1Namespace, {"metadata": {"name": "elsewhere"}}))
    events = collect(
        core.list_namespaced_config_map,
        "default",
        count=1,
        resource_version=start,
        allow_watch_bookmarks=True,
    )
    assert events[0]["type"] == "BOOKMARK"
    assert int(events[0]["raw_object"]["metadata"]["resourceVersion"]) == int(start) + 1


def test_send_initial_events_ends_with_a_marked_bookmark(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", cm("a"))
    events = collect(
        core.list_namespaced_config_map,
        "default",
        count=2,
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
    )
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[1]["raw_object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_timeout_seconds_ends_the_stream(core: client.CoreV1Api) -> None:
    began = time.monotonic()
    events = collect(core.list_namespaced_config_map, "default", count=1, timeout=1, resource_version="")
    assert events == []
    assert 0.9 <= time.monotonic() - began < 3


def test_too_old_version_is_410_expired(make_apiserver: MakeApiServer) -> None:
    server: ApiServer = make_apiserver(window=3)
    core = client.CoreV1Api(server.api_client())
    start = version_of(core.list_namespaced_config_map("default"))
    for i in range(5):
        core.create_namespaced_config_map("default", cm(f"c{i}"))
    with pytest.raises(ApiException) as exc:
        collect(core.list_namespaced_config_map, "default", count=1, resource_version=start)
    assert exc.value.status == 410
    assert "Expired" in str(exc.value.reason) and "too old resource version" in str(exc.value.reason)
    recent = str(int(version_of(core.list_namespaced_config_map("default"))) - 2)
    assert len(collect(core.list_namespaced_config_map, "default", count=2, resource_version=recent)) == 2


def test_watches_do_not_block_other_requests(apiserver: ApiServer, core: client.CoreV1Api) -> None:
    seen: list[str] = []

    def watcher() -> None:
        api = client.CoreV1Api(apiserver.api_client())
        w = Watch()
        for event in w.stream(
            api.list_namespaced_config_map, "default", resource_version="", timeout_seconds=10
        ):
            seen.append(event["object"].metadata.name)
            if event["object"].metadata.name == "last":
                w.stop()

    threads = [threading.Thread(target=watcher) for _ in range(8)]
    for t in threads:
        t.start()
    began = time.monotonic()
    for i in range(20):
        core.create_namespaced_config_map("default", cm(f"x{i}"))
    assert time.monotonic() - began < 5
    core.create_namespaced_config_map("default", cm("last"))
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    assert seen.count("last") == 8


def test_stopping_the_server_ends_open_watches(make_apiserver: MakeApiServer) -> None:
    server: ApiServer = make_apiserver()
    ended = threading.Event()
    errors: list[BaseException] = []

    def watcher() -> None:
        api = client.CoreV1Api(server.api_client())
        try:
            for _ in Watch().stream(
                api.list_namespaced_config_map, "default", resource_version="", timeout_seconds=30
            ):
                pass
        except Exception as exc:  # the client may see the reconnect refused; either way the stream ends
            errors.append(exc)
        ended.set()

    thread = threading.Thread(target=watcher)
    thread.start()
    time.sleep(0.3)
    began = time.monotonic()
    server.stop()
    assert time.monotonic() - began < 3
    assert ended.wait(5)
    thread.join(5)


def test_a_watch_the_client_abandons_frees_its_connection(apiserver: ApiServer) -> None:
    api = client.CoreV1Api(apiserver.api_client())
    before = apiserver.open_connections
    w = Watch()
    for _ in w.stream(api.list_namespace, resource_version="", timeout_seconds=30):
        w.stop()
        break
    deadline = time.monotonic() + 3
    while apiserver.open_connections > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert apiserver.open_connections <= before
