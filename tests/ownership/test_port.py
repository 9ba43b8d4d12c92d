"""The ownership port: the worker and the replica implement it, every mode drives only it, and the
protocol library (shardsync/sharding) sits below both; SoleOwner against a fake worker."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from shardsync.ownership.active_passive import ActivePassiveOwnership
from shardsync.ownership.port import Host, Ownership, ZoneStatus, ZoneWorker
from shardsync.ownership.sharded import ShardedOwnership
from shardsync.ownership.sole import SoleOwner
from shardsync.pacing.notify import Notifier
from shardsync.providers.base import FenceToken
from shardsync.providers.fake.provider import FakeProvider
from shardsync.providers.fake.store import FakeStore
from shardsync.reconcile.worker import Worker, WorkerOptions
from shardsync.records.desired import DesiredIndex
from shardsync.records.registry import TxtRegistry
from shardsync.replica.wiring import Replica
from tests.waits import eventually

PACKAGE = Path(__file__).resolve().parents[2] / "shardsync"


class FakeWorker:
    """A ZoneWorker that records what it was asked."""

    def __init__(self) -> None:
        self.statuses: dict[str, ZoneStatus] = {}
        self.calls: list[tuple[str, str]] = []
        self.dirty: list[str] = []

    def own(self, zone: str, fence: FenceToken | None = None) -> None:
        self.calls.append(("own", zone))
        self.statuses.setdefault(zone, ZoneStatus(fence=fence))

    async def release(self, zone: str) -> None:
        self.calls.append(("release", zone))
        self.statuses.pop(zone, None)
        await anyio.lowlevel.checkpoint()

    def owned(self) -> list[str]:
        return list(self.statuses)

    def mark_dirty(self, zones: Iterable[str]) -> None:
        self.dirty.extend(zones)

    def status(self, zone: str) -> ZoneStatus | None:
        return self.statuses.get(zone)


class FakeHost:
    def __init__(self, zones: set[str]) -> None:
        self.worker = FakeWorker()
        self.zones = set(zones)
        self.zones_changed = Notifier()

    def set_zones(self, zones: set[str]) -> None:
        self.zones = set(zones)
        self.zones_changed.notify()


# -- what implements the port (checked by mypy as much as by running) -------------------------------


def as_zone_worker(worker: Worker) -> ZoneWorker:
    return worker


def as_host(replica: Replica) -> Host:
    return replica


def as_ownership(a: SoleOwner, b: ActivePassiveOwnership, c: ShardedOwnership) -> list[Ownership]:
    return [a, b, c]


def test_the_worker_answers_the_status_of_owned_zones_only() -> None:
    worker: ZoneWorker = Worker(
        FakeProvider(FakeStore(), "r0"), TxtRegistry(), DesiredIndex(), WorkerOptions()
    )
    assert worker.status("ex.com") is None and worker.owned() == []
    worker.own("ex.com", FenceToken(3, "r0"))
    status = worker.status("ex.com")
    assert status is not None and status.fence == FenceToken(3, "r0") and status.syncs == 0
    assert worker.owned() == ["ex.com"]


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("sharding", ("shardsync.reconcile", "shardsync.replica", "shardsync.ownership")),
        ("ownership", ("shardsync.reconcile", "shardsync.replica")),
    ],
)
def test_layers(package: str, forbidden: tuple[str, ...]) -> None:
    for path in sorted((PACKAGE / package).glob("*.py")):
        bad = {m for m in imports_of(path) if any(m == f or m.startswith(f + ".") for f in forbidden)}
        assert not bad, f"{path.name} imports {sorted(bad)}"


def test_every_module_of_the_control_path_stays_short() -> None:
    for path in [*(PACKAGE / "ownership").glob("*.py"), *(PACKAGE / "sharding").glob("*.py")]:
        assert len(path.read_text().splitlines()) <= 450, path.name


# -- SoleOwner ---------------------------------------------------------------------------------------


def test_sole_owner_is_always_ready_unfenced_and_the_coordinator() -> None:
    sole = SoleOwner("r0")
    assert sole.may_write() and sole.ready() == (True, "") and sole.is_coordinator()
    sole.on_fenced("ex.com", FenceToken(1, "r0"))  # nothing to drop: its writes carry no fence
    assert sole.may_write()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_sole_owner_follows_the_zone_list_and_releases_everything_on_stop(anyio_backend: str) -> None:
    host = FakeHost({"a.com", "b.com"})
    sole = SoleOwner("r0", weight=3)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sole.run, host)
        await eventually(lambda: set(host.worker.owned()) == {"a.com", "b.com"})
        assert all(s.fence is None for s in host.worker.statuses.values())  # unfenced
        host.set_zones({"b.com", "c.com"})
        await eventually(lambda: set(host.worker.owned()) == {"b.com", "c.com"})
        assert ("release", "a.com") in host.worker.calls
        tg.cancel_scope.cancel()
    await sole.stop(host)
    assert host.worker.owned() == []


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_sole_owner_snapshot(anyio_backend: str) -> None:
    host = FakeHost({"a.com", "b.com"})
    host.worker.own("a.com")
    doc = await SoleOwner("r0", weight=3).snapshot(host)
    assert doc["generation"] == 0 and doc["coordinator"] == doc["self"] == "r0"
    assert doc["members"] == [
        {
            "identity": "r0",
            "state": "ready",
            "weight": 3,
            "zones": 1,
            "observedGeneration": 0,
            "lastRenewSeen": None,
        }
    ]
    assert [(z["zone"], z["owner"], z["state"]) for z in doc["zones"]] == [
        ("a.com", "r0", "active"),
        ("b.com", None, "orphaned"),
    ]
    assert doc["zones"][0]["lastSync"] is None and doc["zones"][0]["lastError"] == ""
