"""The crd kind's status writer (sources/status.py) in the generic watcher over an in-memory Kube: the
generation translated is written to status.observedGeneration, by the writer alone, once per generation,
once every kind has listed; a replica that becomes the writer catches up when asked; a status change alone
is not translated again."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from shardsync.desired import DesiredIndex
from shardsync.sources import crd
from shardsync.sources.common import SourceOptions
from shardsync.sources.crd import DNS_ENDPOINTS
from shardsync.sources.result import SourceResult
from shardsync.sources.service import SERVICES
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


async def test_statuses_are_written_once_every_kind_has_listed() -> None:
    """Status writes share the client's token bucket (--kube-api-qps) with the lists; written while the
    Services still list, thousands of them took half the tokens and doubled a large cluster's first sync."""
    kube = FakeKube()
    kube.put(DNS_ENDPOINTS, dnsendpoint("lagging", 2, observed=1))
    kube.held[SERVICES] = anyio.Event()
    options = WatchOptions(sources=("crd", "service"), status_resync=3600, max_backoff=0.05)
    watcher = SourceWatcher(
        kube, options, DesiredIndex(["ex.com"]), lambda zones: None, write_status=lambda: True
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        await eventually(lambda: watcher.informers["dnsendpoints"].synced.is_set())
        await anyio.sleep(0.1)
        assert kube.status_patches == []
        assert not watcher.complete.is_set()

        kube.held[SERVICES].set()
        await eventually(lambda: len(kube.status_patches) == 1)
        assert kube.status_patches == [("dns", "lagging", {"status": {"observedGeneration": 2}})]
        tg.cancel_scope.cancel()
