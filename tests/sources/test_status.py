"""The crd kind's status writer (sources/status.py) in the generic watcher over an in-memory Kube: the
generation translated is written to status.observedGeneration, by the writer alone, once per generation,
a few writes at once; a replica that becomes the writer catches up when asked; a status change alone is
not translated again; writes failing in an outage stop and resume as soon as the API server answers."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread
import pytest

from shardsync.kube.client import KubeError
from shardsync.kube.health import ApiHealth
from shardsync.kube.objects import Obj, Resource
from shardsync.records.desired import DesiredIndex
from shardsync.sources import crd
from shardsync.sources.crd import DNS_ENDPOINTS
from shardsync.sources.options import SourceOptions
from shardsync.sources.result import SourceResult
from shardsync.sources.status import WRITES_AT_ONCE
from shardsync.sources.watcher import SourceWatcher, WatchOptions
from tests.waits import eventually

from .fake_kube import FakeKube

pytestmark = pytest.mark.anyio


def dnsendpoint(name: str, generation: int, observed: int | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "externaldns.k8s.io/v1alpha1",
        "kind": "DNSEndpoint",
        "metadata": {"name": name, "namespace": "dns", "generation": generation},
        "spec": {"endpoints": [{"dnsName": f"{name}.ex.com", "recordType": "A", "targets": ["192.0.2.1"]}]},
    }
    if observed is not None:
        obj["status"] = {"observedGeneration": observed}
    return obj


async def test_the_writer_writes_each_translated_generation_once() -> None:
    kube = FakeKube()
    kube.put(DNS_ENDPOINTS, dnsendpoint("lagging", 2, observed=1))
    kube.put(DNS_ENDPOINTS, dnsendpoint("current", 3, observed=3))
    writer = {"on": False}
    options = WatchOptions(sources=("crd",), status_resync=3600, max_backoff=0.05)
    watcher = SourceWatcher(
        kube, options, DesiredIndex(["ex.com"]), lambda zones: None, write_status=lambda: writer["on"]
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        with anyio.fail_after(5):
            await watcher.synced.wait()
        await anyio.sleep(0.05)
        assert kube.status_patches == []  # not the writer

        writer["on"] = True
        watcher.request_status_sweep()
        await eventually(lambda: len(kube.status_patches) == 1)
        assert kube.status_patches == [("dns", "lagging", {"status": {"observedGeneration": 2}})]

        kube.emit(DNS_ENDPOINTS, "MODIFIED", dnsendpoint("current", 4, observed=3))
        await eventually(lambda: len(kube.status_patches) == 2)
        assert kube.status_patches[1] == ("dns", "current", {"status": {"observedGeneration": 4}})
        # The status the write produced is an event too; it is current, so nothing more is written.
        kube.emit(DNS_ENDPOINTS, "MODIFIED", dnsendpoint("current", 4, observed=4))
        await anyio.sleep(0.05)
        assert len(kube.status_patches) == 2
        tg.cancel_scope.cancel()


def translations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the DNSEndpoints the crd kind translates from now on, in order."""
    seen: list[str] = []
    real = crd.dnsendpoint_endpoints

    def counting(obj: dict[str, Any], common: SourceOptions) -> SourceResult:
        seen.append(obj["metadata"]["name"])
        return real(obj, common)

    monkeypatch.setattr(crd, "dnsendpoint_endpoints", counting)
    return seen


async def test_a_status_change_alone_is_not_translated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every replica watches every DNSEndpoint, so each status write reaches all of them: translating each
    again cost every replica the whole CRD source's parsing once per sync (the translation reads no
    status). A status someone reset is still written back."""
    seen = translations(monkeypatch)
    kube = FakeKube()
    kube.put(DNS_ENDPOINTS, dnsendpoint("a", 1, observed=1))
    options = WatchOptions(sources=("crd",), status_resync=3600, max_backoff=0.05)
    desired = DesiredIndex(["ex.com"])
    watcher = SourceWatcher(kube, options, desired, lambda zones: None, write_status=lambda: True)
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        with anyio.fail_after(5):
            await watcher.synced.wait()
        assert seen == ["a"]

        kube.emit(DNS_ENDPOINTS, "MODIFIED", dnsendpoint("a", 1, observed=1))  # a new resourceVersion only
        kube.emit(DNS_ENDPOINTS, "MODIFIED", dnsendpoint("a", 1))  # its status reset
        await eventually(lambda: len(kube.status_patches) == 1)
        assert kube.status_patches == [("dns", "a", {"status": {"observedGeneration": 1}})]
        assert seen == ["a"]

        changed = dnsendpoint("a", 2, observed=1)
        changed["spec"]["endpoints"][0]["targets"] = ["192.0.2.9"]
        kube.emit(DNS_ENDPOINTS, "MODIFIED", changed)
        await eventually(lambda: len(kube.status_patches) == 2)
        assert seen == ["a", "a"]
        assert [e.targets for e in desired.desired("ex.com")] == [("192.0.2.9",)]
        tg.cancel_scope.cancel()


class SlowStatus(FakeKube):
    """Status writes take a while and may fail as an unreachable API server's do (reported to the health
    as the transport would); `in_flight_max` is how many were ever in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self._health = ApiHealth(first_step=0.05)
        self.down = False
        self.attempts = 0
        self.in_flight = self.in_flight_max = 0

    async def patch(self, resource: Resource, name: str, body: Any, **query: Any) -> Obj:
        self.attempts += 1
        if self.down:
            self.health.failed(0, "refused")
            raise KubeError(0, "refused")
        self.in_flight += 1
        self.in_flight_max = max(self.in_flight_max, self.in_flight)
        try:
            await anyio.sleep(0.01)
        finally:
            self.in_flight -= 1
        return await super().patch(resource, name, body, **query)


def lagging(kube: FakeKube, count: int) -> None:
    for i in range(count):
        kube.put(DNS_ENDPOINTS, dnsendpoint(f"e{i}", 2, observed=1))


async def test_lagging_statuses_are_written_a_few_at_once() -> None:
    """At start-up a replica may find thousands lagging (1,000 took 75 s one by one in the lists' bucket):
    they are written WRITES_AT_ONCE at a time, each from the status writes' own bucket (kube.limits)."""
    kube = SlowStatus()
    lagging(kube, 100)
    options = WatchOptions(sources=("crd",), status_resync=3600)
    watcher = SourceWatcher(kube, options, DesiredIndex(["ex.com"]), lambda zones: None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        started = anyio.current_time()
        await eventually(lambda: len(kube.status_patches) == 100)
        took = anyio.current_time() - started
        tg.cancel_scope.cancel()
    assert kube.in_flight_max == WRITES_AT_ONCE
    assert took < 100 * 0.01  # not one round trip after another
    assert sorted(name for _, name, _ in kube.status_patches) == sorted(f"e{i}" for i in range(100))


async def test_writes_failing_in_an_outage_stop_and_resume_as_soon_as_the_api_answers() -> None:
    kube = SlowStatus()
    kube.down = True
    lagging(kube, 20)
    options = WatchOptions(sources=("crd",), status_resync=3600, max_backoff=30)
    watcher = SourceWatcher(kube, options, DesiredIndex(["ex.com"]), lambda zones: None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        await anyio.sleep(1.6)  # retries after 0.1-0.2 s, 0.2-0.4, 0.4-0.8: the next wait is 0.8-1.6 s
        rounds = kube.attempts
        # Each round stops at the first failures (at most the writes already in flight), not 20 each.
        assert rounds <= 4 * WRITES_AT_ONCE, rounds
        kube.down = False
        await anyio.to_thread.run_sync(kube.health.succeeded)  # a lease renewal got through
        with anyio.fail_after(0.5):
            await eventually(lambda: len(kube.status_patches) == 20, within=0.5)
        tg.cancel_scope.cancel()
