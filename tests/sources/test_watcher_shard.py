"""What a watcher keeps of the objects it lists: Services slimmer without --fqdn-template; on a sharded
replica, an evictable kind's objects listed once the zones it is about to run are known, page by page, so
the objects of other replicas' zones are never all held (sources.watcher's `_stream`)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import anyio
import pytest
from kubernetes import client

from shardsync.local.apiserver import ApiServer
from shardsync.sources import projections
from shardsync.sources import service as service_module
from shardsync.sources.options import SourceOptions
from shardsync.sources.result import INVALID_REASON
from shardsync.sources.watcher import WatchOptions
from tests.kubeclient import raw_body
from tests.waits import eventually

from .watching import HOSTNAME, OTHER, TARGET, ZONE, blocking, until, watching
from .watching import service as service_object

pytestmark = pytest.mark.anyio

TTL = "external-dns.alpha.kubernetes.io/ttl"


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


async def test_objects_of_zones_not_expected_are_left_untranslated_and_read_back_when_one_is_gained(
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
        theirs = {f"default/s{i}" for i in range(1, 12, 2)}
        assert set(services.cache) == ours and not services.forgotten & theirs  # not even tracked
        assert 0 < most <= len(ours)  # never more than this replica's own
        # the other zone's Services are never translated here: their names say where their records fall
        assert sorted(translated) == sorted(f"s{i}" for i in range(0, 12, 2))
        assert len(h.records(OTHER)) == 6 and h.records() == {}

        translated.clear()
        h.desired.keep(OTHER)  # the worker gains the expected zone: nothing to translate again
        assert h.desired.ready(OTHER) and translated == []

        h.desired.keep(ZONE)  # gaining another zone reads its Services back and translates them
        assert not h.desired.ready(ZONE)
        await eventually(lambda: h.desired.ready(ZONE))
        assert sorted(translated) == sorted(f"s{i}" for i in range(1, 12, 2))
        assert len(h.records()) == 6 and set(services.cache) == ours | theirs


async def test_objects_left_out_change_come_and_go_by_the_watch_and_a_gained_zone_is_swept_for_them(
    apiserver: ApiServer,
) -> None:
    _seed(apiserver, 4)  # s0, s2 in OTHER (expected here); s1, s3 in ZONE
    options = WatchOptions(shard_hint_wait=5.0)
    async with watching(apiserver, options, restricted=True, expect=(OTHER,)) as h:
        services = h.watcher.informers["services"]
        assert set(services.cache) == {"default/s0", "default/s2"}
        added = service_object("late", {HOSTNAME: f"late.{ZONE}"}, externalIPs=["192.0.2.50"])
        await blocking(h.core.create_namespaced_service, "default", raw_body(client.V1Service, added))
        patch = {"metadata": {"annotations": {TARGET: "192.0.2.77"}}}
        await blocking(h.core.patch_namespaced_service, "s1", "default", patch)
        await blocking(h.core.delete_namespaced_service, "s3", "default")
        marker = service_object("marker", {HOSTNAME: f"marker.{OTHER}"}, externalIPs=["192.0.2.60"])
        await blocking(h.core.create_namespaced_service, "default", raw_body(client.V1Service, marker))
        await eventually(lambda: "default/marker" in services.cache)  # the watch delivered all before it
        assert set(services.cache) == {"default/s0", "default/s2", "default/marker"} and h.records() == {}

        h.desired.keep(ZONE)  # a sweep reads back what now reaches it: the changed one as it is now
        assert not h.desired.ready(ZONE)
        await eventually(lambda: h.desired.ready(ZONE))
        assert h.records() == {
            ("s1.ex.com", "A"): ("192.0.2.77",),
            ("late.ex.com", "A"): ("192.0.2.50",),
        }
        assert {"default/s1", "default/late"} <= set(services.cache) and "default/s3" not in services.cache


async def test_problems_are_posted_by_the_replica_holding_the_zone_the_names_reach(
    apiserver: ApiServer,
) -> None:
    api = apiserver.api_client()
    core = client.CoreV1Api(api)
    try:
        for name, zone in (("held", OTHER), ("elsewhere", ZONE)):
            body = service_object(name, {HOSTNAME: f"{name}.{zone}", TTL: "soon"}, externalIPs=["192.0.2.1"])
            core.create_namespaced_service("default", raw_body(client.V1Service, body))

        async def warned() -> set[str]:
            events = await blocking(core.list_namespaced_event, "default")
            return {e.involved_object.name for e in events.items if e.reason == INVALID_REASON}

        options = WatchOptions(shard_hint_wait=5.0)
        # Not the writer (the coordinator is another replica): the Service of its own zone is its to report.
        async with watching(
            apiserver, options, write_status=lambda: False, restricted=True, expect=(OTHER,)
        ) as h:
            await until(lambda: _equals(warned(), {"held"}))
            h.desired.keep(ZONE)  # gained: read back, translated, and now its problem is this replica's
            await until(lambda: _equals(warned(), {"held", "elsewhere"}))
    finally:
        api.close()


async def _equals(found: Awaitable[set[str]], expected: set[str]) -> bool:
    return await found == expected


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
