"""The API server counts each client's requests (by verb and resource, and by object name) and the watch
events its streams were sent, in process and over the admin endpoint of a child process."""

from __future__ import annotations

import pytest
from kubernetes import client

from shardsync.local.apiserver import ApiServer, ApiServerProcess
from shardsync.local.apiserver.clients import NAMED_KEPT, ClientCounts, client_of
from tests.kubeclient import Watch, raw_body, version_of


def cm(name: str, data: str = "1") -> client.V1ConfigMap:
    return raw_body(client.V1ConfigMap, {"metadata": {"name": name}, "data": {"v": data}})


def exercise(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", cm("a"))
    core.read_namespaced_config_map("a", "default")
    core.read_namespaced_config_map("a", "default")
    core.patch_namespaced_config_map("a", "default", {"data": {"v": "2"}})
    core.replace_namespaced_config_map("a", "default", cm("a", "3"))
    core.list_namespaced_config_map("default")
    core.delete_namespaced_config_map("a", "default")


def test_requests_and_watch_events_are_counted_per_user_agent(apiserver: ApiServer) -> None:
    one = client.CoreV1Api(apiserver.api_client(user_agent="tester/1 (one)"))
    two = client.CoreV1Api(apiserver.api_client(user_agent="tester/1 (two)"))
    exercise(one)
    w = Watch()
    start = version_of(one.list_namespaced_config_map("default"))
    two.create_namespaced_config_map("default", cm("b"))
    two.patch_namespaced_config_map("b", "default", {"data": {"v": "2"}})
    events = []
    for event in w.stream(
        two.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=2
    ):
        events.append(event)
        if len(events) == 2:
            w.stop()
    assert len(events) == 2

    state = apiserver.clients.state()
    first, second = client_of(state, "(one)"), client_of(state, "(two)")
    assert first["byRequest"] == {
        "create configmaps": 1,
        "delete configmaps": 1,
        "delete configmaps/a": 1,
        "get configmaps": 2,
        "get configmaps/a": 2,
        "list configmaps": 2,
        "patch configmaps": 1,
        "patch configmaps/a": 1,
        "update configmaps": 1,
        "update configmaps/a": 1,
    }
    assert first["requests"] == 8 and first["watchEvents"] == 0
    assert second["byRequest"]["watch configmaps"] == 1
    assert second["watchEvents"] == 2 and second["byWatch"] == {"configmaps": 2}
    assert client_of(state, "(nobody)") == {"requests": 0, "watchEvents": 0, "byRequest": {}, "byWatch": {}}
    with pytest.raises(ValueError):
        client_of(state, "tester/1")


def test_names_beyond_the_limit_share_one_key() -> None:
    counts = ClientCounts()
    for i in range(NAMED_KEPT + 5):
        counts.request("ua", "get", "leases", f"l{i}")
    counts.request("ua", "get", "leases", "l0")
    by_request = counts.state()["clients"]["ua"]["byRequest"]
    assert by_request["get leases"] == NAMED_KEPT + 6
    assert by_request["get leases/l0"] == 2
    assert by_request["get leases/(others)"] == 5


def test_the_counts_are_read_over_the_admin_endpoint(apiserver_process: ApiServerProcess) -> None:
    core = client.CoreV1Api(apiserver_process.api_client(user_agent="tester/1 (remote)"))
    core.create_namespaced_config_map("default", cm("c"))
    core.read_namespaced_config_map("c", "default")
    remote = client_of(apiserver_process.faults.clients(), "(remote)")
    assert remote["byRequest"]["get configmaps/c"] == 1
    assert remote["requests"] == 2
