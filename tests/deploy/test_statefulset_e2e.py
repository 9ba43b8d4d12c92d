"""End to end: three `shardsync run` processes started exactly as deploy/base's StatefulSet starts its pods
(the container's args and env, the downward API filled in as the kubelet would), against the embedded API
server holding everything deploy/base installs and a shared fake DNS provider.

Only what a pod cannot have here is swapped: the in-process fake provider's `--fake-zone` becomes
`--fake-provider-url` (one provider the three share, as a real DNS server is shared), each replica gets its
own loopback metrics port instead of :7979, and a kubeconfig stands in for the service account.

It checks the README's story: every zone gets exactly one owner and is synced by it; `shardsync shards`
shows, explains and plans; `kubectl scale statefulset shardsync --replicas=2` plus the pod's SIGTERM drains
shardsync-2 and its zones move to the others; a restart of shardsync-0 gets its zones back.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import dynamic

from shardsync.local.apiserver import ApiServer
from shardsync.providers.fake.server import FakeServer
from shardsync.providers.fake.store import FakeStore
from tests.deploy import manifests as m
from tests.deploy.kustomize import Obj
from tests.processes import Processes, ShardsyncProcess, free_port, get_json, wait_ready

pytestmark = pytest.mark.multiprocess

ZONES = [f"z{i:02d}.shardsync.test" for i in range(18)]
REPLICAS = 3
WITHIN = 60.0  # seconds for any convergence below; a healthy run needs a few


@pytest.fixture
def provider() -> Iterator[FakeServer]:
    store = FakeStore()
    for zone in ZONES:
        store.add_zone(zone)
    with FakeServer(store, port=0) as server:
        yield server


def install(api: k8s.ApiClient, objects: list[Obj]) -> None:
    """What `kubectl apply -k deploy/base` creates, through the official client (kubectl may be absent)."""
    dyn = dynamic.DynamicClient(api)  # type: ignore[no-untyped-call]
    for obj in objects:
        resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        resource.create(body=obj, namespace=obj["metadata"].get("namespace"))


def services(api: k8s.ApiClient) -> None:
    """One LoadBalancer Service per zone, so every zone has records to write."""
    core = k8s.CoreV1Api(api)
    for i, zone in enumerate(ZONES):
        name = f"web-{i:02d}"
        body: Any = {
            "metadata": {
                "name": name,
                "annotations": {"external-dns.alpha.kubernetes.io/hostname": f"web.{zone}"},
            },
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        }
        core.create_namespaced_service("default", body)
        core.patch_namespaced_service_status(
            name, "default", {"status": {"loadBalancer": {"ingress": [{"ip": f"192.0.2.{i + 1}"}]}}}
        )


def pod_env(container: Obj, pod: str) -> dict[str, str]:
    """The container's env as the kubelet resolves it for pod `pod` (downward API fields only)."""
    env = {}
    for entry in container.get("env") or []:
        if "value" in entry:
            env[entry["name"]] = entry["value"]
            continue
        field = entry["valueFrom"]["fieldRef"]["fieldPath"]
        env[entry["name"]] = {"metadata.name": pod, "metadata.namespace": m.NAMESPACE}[field]
    return env


def pod_args(container: Obj, provider_url: str, port: int, kubeconfig: Path) -> list[str]:
    args = list(container["args"])
    assert "--provider=fake" in args and f"--metrics-address=:{7979}" in args
    args = [a for a in args if not a.startswith("--fake-zone=")]
    args[args.index("--metrics-address=:7979")] = f"--metrics-address=127.0.0.1:{port}"
    return [*args, f"--fake-provider-url={provider_url}", f"--kubeconfig={kubeconfig}"]


class Pods:
    """The StatefulSet's pods as processes: `start(ordinal)`, `url(ordinal)`, `shards(ordinal)`."""

    def __init__(self, procs: Processes, container: Obj, provider: FakeServer, kubeconfig: Path) -> None:
        self.procs, self.container, self.provider, self.kubeconfig = procs, container, provider, kubeconfig
        self.ports = {i: free_port() for i in range(REPLICAS)}
        self.running: dict[int, ShardsyncProcess] = {}

    def start(self, ordinal: int) -> ShardsyncProcess:
        pod = f"{m.STATEFULSET}-{ordinal}"
        args = pod_args(self.container, self.provider.url, self.ports[ordinal], self.kubeconfig)
        proc = self.procs.start(f"{pod}-{time.monotonic_ns()}", args, pod_env(self.container, pod))
        self.running[ordinal] = proc
        return proc

    def url(self, ordinal: int) -> str:
        return f"http://127.0.0.1:{self.ports[ordinal]}"

    def shards(self, ordinal: int) -> dict[str, Any] | None:
        view = get_json(self.url(ordinal) + "/shards")
        return view if isinstance(view, dict) else None


def runs(view: dict[str, Any]) -> set[str]:
    """The zones a replica says it runs itself: owner, active, synced."""
    me = view["self"]
    return {z["zone"] for z in view["zones"] if z["owner"] == me and z["state"] == "active" and z["lastSync"]}


def converged(pods: Pods, ordinals: list[int]) -> dict[int, set[str]] | None:
    """Each live pod's zones once they partition ZONES under one generation with exactly these members."""
    views = {o: pods.shards(o) for o in ordinals}
    if any(v is None for v in views.values()):
        return None
    generations = {v["generation"] for v in views.values() if v is not None}
    members = {
        tuple(sorted(x["identity"] for x in v["members"] if x["state"] == "ready"))
        for v in views.values()
        if v
    }
    wanted = (tuple(sorted(f"{m.STATEFULSET}-{o}" for o in ordinals)),)
    if len(generations) != 1 or 0 in generations or tuple(members) != wanted:
        return None
    owned = {o: runs(v) for o, v in views.items() if v is not None}
    if sorted(z for zones in owned.values() for z in zones) != sorted(ZONES):
        return None  # a zone unowned, not synced yet, or (never expected) run twice
    return owned


def wait_converged(pods: Pods, ordinals: list[int]) -> dict[int, set[str]]:
    deadline = time.monotonic() + WITHIN
    while time.monotonic() < deadline:
        for o in ordinals:
            proc = pods.running[o]
            assert proc.alive(), f"{m.STATEFULSET}-{o} exited:\n{proc.log()[-4000:]}"
        owned = converged(pods, ordinals)
        if owned is not None:
            return owned
        time.sleep(0.2)
    views = {o: pods.shards(o) for o in ordinals}
    raise AssertionError(f"no convergence within {WITHIN}s: {views}")


def shardsync_cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "shardsync", *args], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def scale(apiserver: ApiServer, replicas: int) -> None:
    """The README's `kubectl scale statefulset shardsync --replicas=N` (without kubectl: the same patch)."""
    kubectl = shutil.which("kubectl")
    if kubectl is not None:
        command = ["scale", "statefulset", m.STATEFULSET, f"--replicas={replicas}", "-n", m.NAMESPACE]
        subprocess.run(
            [kubectl, "--kubeconfig", str(apiserver.kubeconfig), *command],
            check=True,
            capture_output=True,
            timeout=30,
        )
    else:
        k8s.AppsV1Api(apiserver.api_client()).patch_namespaced_stateful_set_scale(
            m.STATEFULSET, m.NAMESPACE, {"spec": {"replicas": replicas}}
        )


def apply_writers(provider: FakeServer) -> dict[str, set[str]]:
    """Zone → every identity whose record write reached the provider."""
    writers: dict[str, set[str]] = {}
    for entry in provider.store.audit():
        if entry.op == "apply" and entry.outcome == "ok":
            writers.setdefault(entry.zone, set()).add(entry.writer)
    return writers


def test_three_statefulset_pods_share_the_zones(
    apiserver: ApiServer, provider: FakeServer, procs: Processes
) -> None:
    objects = m.rendered(m.BASE)
    api = apiserver.api_client()
    install(api, objects)
    services(api)
    container = m.container(objects)
    assert m.statefulset(objects)["spec"]["replicas"] == REPLICAS
    assert apiserver.kubeconfig is not None
    pods = Pods(procs, container, provider, apiserver.kubeconfig)
    for ordinal in range(REPLICAS):
        pods.start(ordinal)
    for ordinal in range(REPLICAS):
        wait_ready(pods.url(ordinal), pods.running[ordinal], within=WITHIN)

    owned = wait_converged(pods, [0, 1, 2])
    assert all(owned.values()), f"a replica got no zone: {owned}"
    owner_of = {zone: f"{m.STATEFULSET}-{o}" for o, zones in owned.items() for zone in zones}
    assert apply_writers(provider) == {zone: {owner} for zone, owner in owner_of.items()}
    for i, zone in enumerate(ZONES):
        a_records = [e.targets for e in provider.store.records(zone) if e.record_type == "A"]
        assert a_records == [(f"192.0.2.{i + 1}",)], (zone, a_records)

    # The README's inspection commands.
    table = shardsync_cli("shards", "--url", pods.url(0))
    assert all(f"{m.STATEFULSET}-{o}" in table for o in range(REPLICAS)), table
    cluster = ["--kubeconfig", str(apiserver.kubeconfig), "--namespace", m.NAMESPACE]
    zone = ZONES[0]
    explained = shardsync_cli("shards", *cluster, "--explain", zone)
    assert owner_of[zone] in explained, explained
    plain = shardsync_cli("shards", *cluster)
    assert all(f"{m.STATEFULSET}-{o}" in plain for o in range(REPLICAS)), plain
    what_if = shardsync_cli("shards", *cluster, "--what-if-replicas", "4")
    assert "3 -> 4 replicas" in what_if, what_if
    zones_from = ["--zones-from-url", pods.url(0) + "/shards"]
    what_if = shardsync_cli("shards", *cluster, *zones_from, "--what-if-replicas", "4")
    assert f"3 -> 4 replicas, over {len(ZONES)} zones" in what_if, what_if

    # Scale down: the StatefulSet first, then the controller's SIGTERM to the highest ordinal, which drains.
    scale(apiserver, 2)
    leaving = pods.running[2]
    leaving.signal(signal.SIGTERM)
    assert leaving.wait(timeout=m.pod_spec(objects)["terminationGracePeriodSeconds"]) == 0, leaving.log()[
        -4000:
    ]
    assert "leaving=True" in leaving.log(), leaving.log()[-4000:]
    after = wait_converged(pods, [0, 1])
    for o in (0, 1):
        assert owned[o] <= after[o], "a scale-down moved zones between the replicas that stay"
    generation = pods.shards(0)["generation"]  # type: ignore[index]

    # A restart (rolling update, eviction): the zones are parked for shardsync-0 and come back to it.
    restarting = pods.running[0]
    restarting.signal(signal.SIGTERM)
    assert restarting.wait(timeout=m.pod_spec(objects)["terminationGracePeriodSeconds"]) == 0
    assert "leaving=False" in restarting.log(), restarting.log()[-4000:]
    pods.start(0)
    back = wait_converged(pods, [0, 1])
    assert back == after
    assert pods.shards(1)["generation"] == generation  # type: ignore[index]
    refused = [e for e in provider.store.audit() if e.outcome == "fenced"]
    assert not refused, f"a stale owner tried to write: {refused}"
