"""The crd kind's status writer (sources/status.py) in the generic watcher over an in-memory Kube: the
generation translated is written to status.observedGeneration, by the writer alone, once per generation;
a replica that becomes the writer catches up when asked."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from shardsync.desired import DesiredIndex
from shardsync.sources.crd import DNS_ENDPOINTS
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
