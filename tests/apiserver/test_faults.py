"""Fault injection (pause, refusing one client, dropping its connections) and restarts that keep state:
in-process through the Python API, and in a child process through the admin endpoint over plain HTTP."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client import ApiException

from shardsync.local.apiserver import ApiServer, ApiServerProcess
from tests.kubeclient import Watch, meta, name_of, present, raw_body, version_of

MakeApiServer = Callable[..., Any]


def leases_for(server: ApiServer | ApiServerProcess, agent: str | None = None) -> client.CoordinationV1Api:
    api = server.api_client(user_agent=agent)
    api.configuration.retries = False
    return client.CoordinationV1Api(api)


def lease(name: str) -> client.V1Lease:
    return raw_body(client.V1Lease, {"metadata": {"name": name}, "spec": {"holderIdentity": "x"}})


def listing_in_a_thread(leases: client.CoordinationV1Api) -> tuple[threading.Thread, threading.Event]:
    """A thread listing the Leases, and the event it sets once the list is answered."""
    done = threading.Event()

    def list_then_signal() -> None:
        leases.list_namespaced_lease("default")
        done.set()

    thread = threading.Thread(target=list_then_signal)
    thread.start()
    return thread, done


def test_pause_answers_503_until_resumed_or_expired(apiserver: ApiServer) -> None:
    leases = leases_for(apiserver)
    apiserver.faults.pause()
    with pytest.raises(ApiException) as exc:
        leases.list_namespaced_lease("default")
    assert exc.value.status == 503 and json.loads(present(exc.value.body))["reason"] == "ServiceUnavailable"
    apiserver.faults.resume()
    leases.list_namespaced_lease("default")
    apiserver.faults.pause(seconds=0.3)
    with pytest.raises(ApiException):
        leases.list_namespaced_lease("default")
    time.sleep(0.4)
    leases.list_namespaced_lease("default")


def test_pause_in_hang_mode_holds_requests_until_resumed(apiserver: ApiServer) -> None:
    leases = leases_for(apiserver)
    apiserver.faults.pause(mode="hang")
    thread, done = listing_in_a_thread(leases)
    assert not done.wait(0.5)
    apiserver.faults.resume()
    assert done.wait(5)
    thread.join(5)


def test_refusing_one_client_leaves_the_others_alone(apiserver: ApiServer) -> None:
    cut = leases_for(apiserver, "shardsync/replica-1")
    other = leases_for(apiserver, "shardsync/replica-2")
    other.create_namespaced_lease("default", lease("l"))
    apiserver.faults.refuse(user_agent="replica-1")
    with pytest.raises(ApiException) as exc:
        cut.read_namespaced_lease("l", "default")
    assert exc.value.status == 503
    assert name_of(other.read_namespaced_lease("l", "default")) == "l"
    apiserver.faults.refuse(user_agent="replica-1", mode="drop")
    with pytest.raises(urllib3.exceptions.HTTPError):
        cut.read_namespaced_lease("l", "default")
    apiserver.faults.allow(user_agent="replica-1")
    assert name_of(cut.read_namespaced_lease("l", "default")) == "l"


def test_refusing_by_header(apiserver: ApiServer) -> None:
    api = apiserver.api_client()
    api.set_default_header("X-Replica", "r7")
    leases = client.CoordinationV1Api(api)
    apiserver.faults.refuse(header=("X-Replica", "r7"), seconds=5)
    with pytest.raises(ApiException):
        leases.list_namespaced_lease("default")
    assert leases_for(apiserver).list_namespaced_lease("default").items == []
    apiserver.faults.clear()
    leases.list_namespaced_lease("default")


def test_refusing_by_path_holds_one_resource_and_leaves_the_others_alone(apiserver: ApiServer) -> None:
    leases = leases_for(apiserver)
    core = client.CoreV1Api(apiserver.api_client())
    apiserver.faults.refuse(path="/leases", mode="hang")
    thread, done = listing_in_a_thread(leases)
    assert core.list_namespaced_config_map("default").items == []  # another resource: served at once
    assert not done.wait(0.5)
    assert apiserver.faults.state()["refusals"][0]["path"] == "/leases"
    apiserver.faults.allow(path="/leases")
    assert done.wait(5)
    thread.join(5)


def test_a_refused_clients_watch_is_cut(apiserver: ApiServer) -> None:
    leases = leases_for(apiserver, "replica-9")
    outcome: list[BaseException | None] = []

    def watcher() -> None:
        try:
            for _ in Watch().stream(leases.list_namespaced_lease, "default", timeout_seconds=20):
                pass
            outcome.append(None)
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=watcher)
    thread.start()
    time.sleep(0.3)
    apiserver.faults.refuse(user_agent="replica-9", mode="drop")
    thread.join(5)
    assert not thread.is_alive() and outcome and outcome[0] is not None


def test_in_process_restart_keeps_objects_and_version(apiserver: ApiServer) -> None:
    leases = leases_for(apiserver)
    made = leases.create_namespaced_lease("default", lease("keep"))
    port = apiserver.port
    apiserver.restart()
    assert apiserver.port == port
    again = leases_for(apiserver).read_namespaced_lease("keep", "default")
    assert version_of(again) == version_of(made)
    assert meta(again).uid == meta(made).uid
    with pytest.raises(ApiException) as exc:
        for _ in Watch().stream(
            leases.list_namespaced_lease,
            "default",
            timeout_seconds=2,
            resource_version=str(int(version_of(made)) - 1),
        ):
            pass
    assert exc.value.status == 410


def test_data_dir_snapshot_survives_a_new_server(make_apiserver: MakeApiServer, tmp_path: Path) -> None:
    first: ApiServer = make_apiserver(data_dir=tmp_path / "data")
    leases_for(first).create_namespaced_lease("default", lease("persisted"))
    rv = first.store.resource_version
    first.stop()
    second: ApiServer = make_apiserver(data_dir=tmp_path / "data", port=first.port)
    assert second.store.resource_version == rv
    assert name_of(leases_for(second).read_namespaced_lease("persisted", "default")) == "persisted"


def _admin(url: str, action: str, method: str = "POST") -> dict[str, Any]:
    req = urllib.request.Request(
        f"{url}/_shardsync/{action}", method=method, data=b"" if method == "POST" else None
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        body: dict[str, Any] = json.loads(resp.read())
        return body


@pytest.mark.multiprocess
def test_child_process_faults_over_http_and_restart_with_data_dir(
    make_apiserver: MakeApiServer, tmp_path: Path
) -> None:
    proc: ApiServerProcess = make_apiserver(process=True, data_dir=tmp_path / "state")
    leases = leases_for(proc, "replica-3")
    leases.create_namespaced_lease("default", lease("p"))
    state = _admin(proc.url, "refuse?userAgent=replica-3&mode=503")
    assert state["refusals"][0]["userAgent"] == "replica-3"
    with pytest.raises(ApiException) as exc:
        leases.read_namespaced_lease("p", "default")
    assert exc.value.status == 503
    _admin(proc.url, "clear")
    proc.faults.pause(seconds=10)
    assert proc.faults.state()["pause"]["mode"] == "503"
    proc.faults.resume()
    assert _admin(proc.url, "faults", "GET") == {"pause": None, "refusals": []}
    rv = _admin(proc.url, "state", "GET")["resourceVersion"]
    port = proc.port
    proc.restart()
    assert proc.port == port
    assert _admin(proc.url, "state", "GET")["resourceVersion"] == rv
    assert name_of(leases_for(proc).read_namespaced_lease("p", "default")) == "p"


def test_stop_does_not_wait_for_requests_held_by_a_hang(make_apiserver: MakeApiServer) -> None:
    server: ApiServer = make_apiserver()
    leases = leases_for(server)
    server.faults.pause(mode="hang")
    failed = threading.Event()

    def held() -> None:
        try:
            leases.list_namespaced_lease("default")
        except Exception:
            failed.set()

    thread = threading.Thread(target=held)
    thread.start()
    time.sleep(0.3)
    began = time.monotonic()
    server.stop()
    assert time.monotonic() - began < 3
    assert failed.wait(5)
    thread.join(5)
