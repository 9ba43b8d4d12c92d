"""The parts of `shardsync local` one by one: the objects it seeds (and what the sources make of them), the
StatefulSet it keeps, its control socket, its live table, and its StatefulSet-like process keeping."""

from __future__ import annotations

import importlib.util
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from shardsync.kube.client import BlockingKube
from shardsync.kube.objects import STATEFULSETS, object_key
from shardsync.local import children, control, seed
from shardsync.local.apiserver import ApiServer
from shardsync.local.children import Child, ChildFailed
from shardsync.local.infra import LocalOptions
from shardsync.local.launcher import Launcher
from shardsync.local.table import ReplicaSnapshot, progress, render
from shardsync.sources import gateway as gw
from shardsync.sources import istio
from shardsync.sources.crd import DNS_ENDPOINTS, dnsendpoint_endpoints
from shardsync.sources.istio_gateway import gateway_endpoints
from shardsync.sources.istio_virtualservice import virtualservice_endpoints
from shardsync.sources.node import node_endpoints
from shardsync.sources.pod import pod_endpoints
from shardsync.sources.service import NODES, PODS, SERVICES, service_endpoints
from tests.waits import eventually_sync

ZONES = ["zone-0000.example", "zone-0001.example", "zone-0002.example"]


# ---- seeding ---------------------------------------------------------------------------------------------


def test_seeded_objects_ask_for_records_in_every_zone(apiserver: ApiServer) -> None:
    kube = BlockingKube(apiserver.api_client())
    seed.install_crd(kube)
    assert seed.seed_objects(kube, ZONES, 3) == len(ZONES) * 4
    names = set()
    for obj in kube.list(SERVICES, namespace=seed.NAMESPACE)["items"]:
        names |= {e.dns_name for e in service_endpoints(obj).endpoints}
    for obj in kube.list(DNS_ENDPOINTS, namespace=seed.NAMESPACE)["items"]:
        result = dnsendpoint_endpoints(obj)
        assert result.problems == []
        names |= {e.dns_name for e in result.endpoints}
    for zone in ZONES:
        assert {f"web.{zone}", f"app-0.{zone}", f"app-1.{zone}", f"app-2.{zone}"} <= names
    assert len(names) == len(ZONES) * 4


def test_gateway_sources_seed_a_gateway_and_routes_in_every_zone(apiserver: ApiServer) -> None:
    kube = BlockingKube(apiserver.api_client())
    assert seed.seed_gateway_routes(kube, ZONES, ["service", "crd"]) == 0  # no gateway-* kind: nothing
    sources = ["gateway-httproute", "gateway-tcproute"]
    assert seed.seed_gateway_routes(kube, ZONES, sources) == 2 * len(ZONES)
    served = seed.gateway_resources()
    gateways = {object_key(o): o for o in kube.list(served["gateways"], namespace=seed.NAMESPACE)["items"]}
    view = gw.Gateways(gateways, {})
    names = set()
    for route in (gw.HTTP, gw.TCP):
        for obj in kube.list(served[route.resource.plural], namespace=seed.NAMESPACE)["items"]:
            result = gw.route_endpoints(obj, route, view)
            assert result.problems == []
            names |= {(e.dns_name, e.targets) for e in result.endpoints}
    address = seed.address((1 << 17) - 1)
    assert names == {(f"{k}.{zone}", (address,)) for k in ("httproute", "tcproute") for zone in ZONES}
    assert served["tcproutes"].version == "v1alpha2"  # what the shipped CRD serves


def test_istio_sources_seed_gateways_and_virtualservices_in_every_zone(apiserver: ApiServer) -> None:
    kube = BlockingKube(apiserver.api_client())
    assert seed.seed_istio(kube, ZONES, ["service", "gateway-httproute"]) == 0  # no istio-* kind: nothing
    assert seed.seed_istio(kube, ZONES, ["istio-gateway", "istio-virtualservice"]) == 2 * len(ZONES)

    def listed(resource: Any) -> dict[str, Any]:
        return {object_key(o): o for o in kube.list(resource, namespace=seed.NAMESPACE)["items"]}

    services, gateways = listed(SERVICES), listed(istio.GATEWAYS)
    names = set()
    for obj in gateways.values():
        result = gateway_endpoints(obj, services, {})
        assert result.problems == []
        names |= {(e.dns_name, e.targets) for e in result.endpoints}
    for obj in listed(istio.VIRTUAL_SERVICES).values():
        result = virtualservice_endpoints(obj, gateways, services, {})
        assert result.problems == []
        names |= {(e.dns_name, e.targets) for e in result.endpoints}
    address = seed.address((1 << 17) - 2)
    kinds = ("istio-gateway", "virtualservice")
    assert names == {(f"{k}.{zone}", (address,)) for k in kinds for zone in ZONES}


def test_node_and_pod_sources_seed_a_node_and_a_host_network_pod_in_every_zone(apiserver: ApiServer) -> None:
    kube = BlockingKube(apiserver.api_client())
    assert seed.seed_nodes_and_pods(kube, ZONES, ["service", "crd"]) == 0  # neither kind: nothing
    assert seed.seed_nodes_and_pods(kube, ZONES, ["node", "pod"]) == 3 * len(ZONES)
    nodes = {object_key(o): o for o in kube.list(NODES)["items"]}
    names = set()
    for obj in nodes.values():
        names |= {(e.dns_name, e.record_type) for e in node_endpoints(obj).endpoints}
    for obj in kube.list(PODS, namespace=seed.NAMESPACE)["items"]:
        result = pod_endpoints(obj, nodes)
        assert result.problems == []
        names |= {(e.dns_name, e.record_type) for e in result.endpoints}
    want = {(f"{kind}.{zone}", "A") for kind in ("node", "pod", "pod-internal") for zone in ZONES}
    want |= {(f"pod.{zone}", "AAAA") for zone in ZONES}  # a host-network Pod takes its Node's IPv6 InternalIP
    assert names == want  # the statuses were written: every record has its address


def test_statefulset_is_created_then_scaled(apiserver: ApiServer) -> None:
    kube = BlockingKube(apiserver.api_client())
    seed.set_replicas(kube, 3)
    sts = kube.get(STATEFULSETS, seed.STATEFULSET, namespace=seed.NAMESPACE)
    assert sts is not None and sts["spec"]["replicas"] == 3
    seed.set_replicas(kube, 5)
    sts = kube.get(STATEFULSETS, seed.STATEFULSET, namespace=seed.NAMESPACE)
    assert sts is not None and sts["spec"]["replicas"] == 5
    assert sts["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "shardsync"


def test_addresses_are_distinct_test_addresses() -> None:
    addresses = {seed.address(i) for i in range(5000)}
    assert len(addresses) == 5000
    assert all(a.startswith(("198.18.", "198.19.")) for a in addresses)


# ---- the control socket ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_control_round_trip_and_errors(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    async def handler(req: dict[str, Any]) -> dict[str, Any]:
        seen.append(req)
        if req.get("scale") == 99:
            return {"ok": False, "error": "too many"}
        return {"ok": True, "replicas": req.get("scale")}

    async with anyio.create_task_group() as tg:
        tg.start_soon(control.serve, tmp_path, handler)
        await anyio.to_thread.run_sync(
            lambda: eventually_sync(lambda: (tmp_path / control.ADDRESS_FILE).exists(), within=5)
        )
        reply = await anyio.to_thread.run_sync(control.request, tmp_path, {"scale": 4})
        assert reply == {"ok": True, "replicas": 4}
        with pytest.raises(control.ControlError, match="too many"):
            await anyio.to_thread.run_sync(control.request, tmp_path, {"scale": 99})
        tg.cancel_scope.cancel()
    assert seen == [{"scale": 4}, {"scale": 99}]
    assert not (tmp_path / control.ADDRESS_FILE).exists()  # removed when serving ends
    with pytest.raises(control.ControlError, match="no launcher is running"):
        control.request(tmp_path, {"scale": 1})


@pytest.mark.anyio
async def test_control_socket_with_a_long_run_dir(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)

    async def handler(req: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True}

    async with anyio.create_task_group() as tg:
        tg.start_soon(control.serve, deep, handler)
        await anyio.to_thread.run_sync(
            lambda: eventually_sync(lambda: (deep / control.ADDRESS_FILE).exists(), within=5)
        )
        assert len((deep / control.ADDRESS_FILE).read_text()) <= 100
        assert await anyio.to_thread.run_sync(control.request, deep, {"status": True}) == {"ok": True}
        tg.cancel_scope.cancel()


def test_pointer_names_the_latest_run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "pointer_path", lambda: tmp_path / "pointer")
    control.write_pointer(tmp_path)
    try:
        assert control.find_run_dir(None) == tmp_path
        control.clear_pointer(tmp_path / "other")  # not ours: kept
        assert control.find_run_dir(None) == tmp_path
    finally:
        control.clear_pointer(tmp_path)
    with pytest.raises(control.ControlError, match="no running"):
        control.find_run_dir(None)
    assert control.find_run_dir(tmp_path / "x") == tmp_path / "x"


# ---- the live table --------------------------------------------------------------------------------------


def doc(me: str, generation: int, owned: dict[str, bool], coordinator: str = "shardsync-0") -> dict[str, Any]:
    zones = [
        {
            "zone": z,
            "owner": me,
            "state": "active" if synced else "pending",
            "lastSync": "2026-03-01T12:00:00Z" if synced else None,
            "lastSyncSeconds": 0.1 if synced else None,
            "records": 4 if synced else None,
            "lastError": "" if synced else "waiting",
        }
        for z, synced in owned.items()
    ]
    return {
        "generation": generation,
        "coordinator": coordinator,
        "self": me,
        "members": [{"identity": me, "state": "ready", "weight": 1, "zones": len(zones)}],
        "zones": zones,
    }


def test_progress_counts_zones_synced_by_their_owners() -> None:
    replicas = [
        ReplicaSnapshot("shardsync-0", 10, 1000, "running", doc("shardsync-0", 5, {"a": True, "b": True})),
        ReplicaSnapshot("shardsync-1", 11, 1001, "running", doc("shardsync-1", 4, {"c": True, "d": False})),
        ReplicaSnapshot("shardsync-2", None, 1002, "restarting in 2s", None, restarts=1),
    ]
    p = progress(replicas, zone_total=5, written=40)
    assert (p.generation, p.coordinator, p.zones, p.synced, p.records, p.written, p.errors) == (
        5,
        "shardsync-0",
        5,
        3,
        12,
        40,
        1,
    )
    text = render(replicas, desired=3, zone_total=5, written=40, elapsed=75, run_dir="/r", events=["e1"])
    assert text.splitlines()[0].startswith("shardsync local   up 01:15   replicas 3")
    assert "zones synced 3/5   records 12   written 40   zones with errors 1" in text
    row0 = next(line for line in text.splitlines() if line.startswith("shardsync-0"))
    assert row0.split() == [
        "shardsync-0",
        "10",
        "1000",
        "running",
        "ready",
        "5",
        "2",
        "2",
        "8",
        "0",
        "coordinator",
    ]
    row2 = next(line for line in text.splitlines() if line.startswith("shardsync-2"))
    assert "restarting in 2s (1 restart)" in row2
    assert text.rstrip().endswith("e1")


# ---- process keeping (real children, a stand-in command instead of replicas) ----------------------------


class StandInLauncher(Launcher):
    """Runs `shardsync fake-provider --port 0` (quick to start, exits on SIGTERM) in place of replicas."""

    def __init__(self, options: LocalOptions) -> None:
        super().__init__(options, io.StringIO())

    def _start(self, slot: Any) -> None:
        slot.port = 0
        slot.child = self._child(slot.identity, ["fake-provider", "--port", "0"])
        slot.shards = None


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[StandInLauncher]:
    launcher = StandInLauncher(LocalOptions(run_dir=tmp_path, replicas=3, live=False, termination_grace=5))
    try:
        yield launcher
    finally:
        for child in launcher.all_children:
            child.stop(2)


def test_reconcile_behaves_like_a_statefulset(stand_in: StandInLauncher) -> None:
    launcher = stand_in
    launcher.reconcile()
    assert sorted(launcher.slots) == [0, 1, 2]
    first = {o: s.child for o, s in launcher.slots.items()}
    # scale down to 1: the highest ordinals get SIGTERM and leave once they have exited
    launcher.desired = 1
    launcher.reconcile()
    assert launcher.slots[2].stopping_since is not None and launcher.slots[1].stopping_since is not None
    assert launcher.slots[0].stopping_since is None

    def scaled_down() -> bool:
        launcher.reconcile()
        return sorted(launcher.slots) == [0]

    eventually_sync(scaled_down, within=15)
    assert all(not first[o].alive() for o in (1, 2)) and first[0].alive()  # type: ignore[union-attr]
    # a replica that dies on its own is restarted after a delay, with a new process
    crashed = launcher.slots[0].child
    assert crashed is not None
    crashed.kill()
    launcher.reconcile()
    slot = launcher.slots[0]
    assert slot.child is None and slot.restarts == 1 and slot.restart_at > time.monotonic()
    slot.restart_at = 0.0
    launcher.reconcile()
    # Read the slot again: mypy still has `slot.child` narrowed to None from the assert above.
    assert launcher.slots[0] is slot
    restarted = launcher.slots[0].child
    assert restarted is not None and restarted is not crashed and restarted.alive()
    assert any("exited with" in e for e in launcher.events)
    # the run file lists every pid ever started
    import orjson

    run = orjson.loads((launcher.run_dir / "run.json").read_bytes())
    assert run["pids"] == [c.pid for c in launcher.all_children] and len(run["pids"]) == 4


def test_scale_up_waits_for_the_old_process_of_an_ordinal(stand_in: StandInLauncher) -> None:
    launcher = stand_in
    launcher.reconcile()
    old = launcher.slots[2].child
    launcher.desired = 2
    launcher.reconcile()
    launcher.desired = 3  # back up before ordinal 2 has exited: no second process with its name
    launcher.reconcile()
    assert launcher.slots[2].child is old and launcher.slots[2].stopping_since is not None

    def replaced() -> bool:
        launcher.reconcile()
        return 2 in launcher.slots and launcher.slots[2].child is not old

    eventually_sync(replaced, within=15)
    assert old is not None and not old.alive()


def test_child_reports_an_early_exit_with_its_log(tmp_path: Path) -> None:
    child = Child("broken", ["no-such-command"], tmp_path / "broken.log")
    with pytest.raises(ChildFailed, match="broken exited with 2") as info:
        child.wait_for_line("never", timeout=30)
    assert "invalid choice" in str(info.value)


def test_a_child_starts_from_compiled_bytecode(tmp_path: Path) -> None:
    """The package is compiled before the first child starts, so children load bytecode (as the image's
    replicas do) even where PYTHONDONTWRITEBYTECODE=1 keeps each of them from writing it."""
    source = Path(children.__file__).resolve().parent.parent / "durations.py"
    compiled = Path(importlib.util.cache_from_source(str(source)))
    compiled.unlink(missing_ok=True)
    children.compile_package.cache_clear()
    child = Child("version", ["--version"], tmp_path / "version.log")
    child.proc.wait(timeout=30)
    assert child.returncode == 0
    header = compiled.read_bytes()[:16]
    assert header[:4] == importlib.util.MAGIC_NUMBER
    # An unchecked-timestamp pyc (flags 0) records the source's mtime and size: this one is current.
    assert int.from_bytes(header[4:8], "little") == 0
    assert int.from_bytes(header[8:12], "little") == int(source.stat().st_mtime) & 0xFFFFFFFF


def test_a_zone_reported_by_two_replicas_counts_once() -> None:
    both = [
        ReplicaSnapshot("shardsync-0", 1, 1, "running", doc("shardsync-0", 2, {"a": True})),
        ReplicaSnapshot("shardsync-1", 2, 2, "running", doc("shardsync-1", 2, {"a": True, "b": False})),
    ]
    p = progress(both, zone_total=2, written=0)
    assert (p.synced, p.records, p.errors) == (1, 4, 1)
