"""What a watcher keeps of the objects it lists: Services slimmer without --fqdn-template; on a sharded
replica, an evictable kind's objects listed once the zones it is about to run are known, page by page, so
the objects of other replicas' zones are never all held (sources.watcher's `_stream`)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from kubernetes import client

from shardsync.local.apiserver import ApiServer
from shardsync.sources import projections
from shardsync.sources import service as service_module
from shardsync.sources.common import SourceOptions
from shardsync.sources.watcher import WatchOptions
from tests.kubeclient import raw_body

from .watching import HOSTNAME, OTHER, ZONE, watching
from .watching import service as service_object

pytestmark = pytest.mark.anyio


def _seed(apiserver: ApiServer, count: int) -> None:
    api = apiserver.api_client()
    try:
        core = client.CoreV1Api(api)
        for i in range(count):
            zone = ZONE if i % 2 else OTHER
            body = service_object(f"s{i}", {HOSTNAME: f"s{i}.{zone}"}, externalIPs=[f"192.0.2.{i + 1}"])
            core.create_namespaced_service("default", raw_body(client.V1Service, body))
    finally:
        api.close()


async def test_objects_of_zones_not_expected_are_forgotten_page_by_page_and_translated_once(
    apiserver: ApiServer, monkeypatch: Any
) -> None:
    _seed(apiserver, 12)
    translated: list[str] = []
    real = service_module.service_endpoints

    def counting(svc: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        translated.append(svc["metadata"]["name"])
        return real(svc, *args, **kwargs)

    monkeypatch.setattr(service_module, "service_endpoints", counting)
    most = 0

    options = WatchOptions(shard_hint_wait=5.0)
    async with watching(apiserver, options, restricted=True, expect=(OTHER,), wait_synced=False) as h:
        services = h.watcher.informers["services"]
        services.page_size = 2
        flush = h.watcher.flush

        async def after_page() -> None:
            nonlocal most
            await flush()
            most = max(most, len(services.cache))

        h.watcher.flush = after_page  # type: ignore[method-assign] # what the informer awaits per page
        with anyio.fail_after(5):
            await h.watcher.synced.wait()
        ours = {f"default/s{i}" for i in range(0, 12, 2)}
        assert set(services.cache) == ours
        assert services.forgotten == {f"default/s{i}" for i in range(1, 12, 2)}
        assert 0 < most <= len(ours)  # the other zone's objects left at each page, never all held
        assert sorted(translated) == sorted(f"s{i}" for i in range(12))  # each once
        assert len(h.records(OTHER)) == 6 and h.records() == {}

        translated.clear()
        h.desired.keep(OTHER)  # the worker gains the expected zone: nothing to translate again
        assert h.desired.ready(OTHER) and translated == []


async def test_without_a_hint_the_objects_are_listed_after_the_bounded_wait(apiserver: ApiServer) -> None:
    _seed(apiserver, 2)
    options = WatchOptions(shard_hint_wait=0.3)
    async with watching(apiserver, options, restricted=True, wait_synced=False) as h:
        with anyio.fail_after(5):
            await h.watcher.synced.wait()
        assert set(h.watcher.informers["services"].cache) == {"default/s0", "default/s1"}


async def test_services_are_kept_slimmer_unless_a_fqdn_template_may_read_any_field(
    apiserver: ApiServer,
) -> None:
    async with watching(apiserver) as h:
        assert h.watcher.informers["services"].project is projections.service
    templated = WatchOptions(common=SourceOptions(fqdn_template=("{{.Name}}.ex.com",)))
    async with watching(apiserver, templated) as h:
        assert h.watcher.informers["services"].project is projections.without_bookkeeping
