"""SourceWatcher and the crd kind against the embedded API server: DNSEndpoints translated, their
status.observedGeneration written by the writer alone, invalid endpoints posted as Events once, and a
missing CRD holding up the crd kind alone."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from kubernetes import client

from shardsync.local.apiserver import ApiServer
from shardsync.manifests import load_crd
from shardsync.records.endpoint import Endpoint
from shardsync.sources.watcher import INVALID_REASON, WatchOptions

from .watching import (
    GROUP,
    HOSTNAME,
    OTHER,
    PLURAL,
    VERSION,
    ZONE,
    Harness,
    blocking,
    dnsendpoint,
    metric,
    service,
    until,
    watching,
)

pytestmark = pytest.mark.anyio


def test_shipped_crd_has_external_dns_schema_and_status_subresource() -> None:
    crd = load_crd()
    assert crd["metadata"]["name"] == f"{PLURAL}.{GROUP}"
    assert crd["spec"]["group"] == GROUP and crd["spec"]["names"]["kind"] == "DNSEndpoint"
    [version] = crd["spec"]["versions"]
    assert version["name"] == VERSION and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    item = schema["spec"]["properties"]["endpoints"]["items"]["properties"]
    assert set(item) == {
        "dnsName",
        "targets",
        "recordType",
        "recordTTL",
        "setIdentifier",
        "labels",
        "providerSpecific",
    }
    assert item["recordTTL"] == {**item["recordTTL"], "type": "integer", "format": "int64"}
    assert set(item["providerSpecific"]["items"]["properties"]) == {"name", "value"}
    assert schema["status"]["properties"]["observedGeneration"]["type"] == "integer"
    # Every field shardsync itself writes in that form is in the schema.
    full = Endpoint.new(
        "a.ex.com",
        "A",
        ["192.0.2.1"],
        ttl=5,
        set_identifier="x",
        labels={"k": "v"},
        provider_specific=[("n", "v")],
    )
    assert set(full.to_json()) <= set(item)


async def install_crd(h: Harness) -> None:
    await blocking(client.ApiextensionsV1Api(h.api).create_custom_resource_definition, load_crd())


async def observed_generation(h: Harness, name: str) -> Any:
    obj = await blocking(h.custom.get_namespaced_custom_object, GROUP, VERSION, "default", PLURAL, name)
    return (obj.get("status") or {}).get("observedGeneration")


async def test_dnsendpoint_status_and_invalid_endpoint_event(apiserver: ApiServer) -> None:
    async with watching(apiserver, WatchOptions(sources=("crd",)), wait_synced=False) as h:
        await install_crd(h)
        with anyio.fail_after(5):
            await h.watcher.synced.wait()
        invalid_before = metric("shardsync_source_invalid_endpoints_total", kind="crd")
        body = dnsendpoint(
            "records",
            {"dnsName": "a.ex.com", "recordType": "A", "targets": ["192.0.2.1"], "recordTTL": 60},
            {"dnsName": "bad.ex.com", "recordType": "A", "targets": ["not-an-address"]},
        )
        create = h.custom.create_namespaced_custom_object
        touched = await h.change(blocking(create, GROUP, VERSION, "default", PLURAL, body))
        assert touched == {ZONE}
        assert h.records() == {("a.ex.com", "A"): ("192.0.2.1",)}
        assert h.desired.desired(ZONE)[0].ttl == 60

        async def status_is(generation: int) -> None:
            async def check() -> bool:
                return bool(await observed_generation(h, "records") == generation)

            await until(check)

        await status_is(1)

        def warnings() -> list[Any]:
            events = h.core.list_namespaced_event("default", field_selector="involvedObject.name=records")
            return [e for e in events.items if e.type == "Warning" and e.reason == INVALID_REASON]

        async def posted() -> bool:
            return bool(await blocking(warnings))

        await until(posted)
        [event] = await blocking(warnings)
        assert event.involved_object.kind == "DNSEndpoint"
        assert event.involved_object.api_version == f"{GROUP}/{VERSION}"
        assert "spec.endpoints[1]" in event.message and "not-an-address" in event.message

        patch = {
            "spec": {
                "endpoints": [
                    {**body["spec"]["endpoints"][0], "targets": ["192.0.2.2"]},
                    body["spec"]["endpoints"][1],
                ]
            }
        }
        touched = await h.change(
            blocking(
                h.custom.patch_namespaced_custom_object, GROUP, VERSION, "default", PLURAL, "records", patch
            )
        )
        assert touched == {ZONE}
        assert h.records() == {("a.ex.com", "A"): ("192.0.2.2",)}
        await status_is(2)
        # The problem is the same one: reported once, though the object was translated again four times.
        assert metric("shardsync_source_invalid_endpoints_total", kind="crd") == invalid_before + 1
        assert len(await blocking(warnings)) == 1


async def test_dnsendpoint_status_is_written_only_by_the_writer(apiserver: ApiServer) -> None:
    writer = {"on": False}
    options = WatchOptions(sources=("crd",))
    async with watching(apiserver, options, write_status=lambda: writer["on"], wait_synced=False) as h:
        await install_crd(h)
        body = dnsendpoint("quiet", {"dnsName": "q.ex.com", "recordType": "A", "targets": ["192.0.2.7"]})
        create = h.custom.create_namespaced_custom_object
        await h.change(blocking(create, GROUP, VERSION, "default", PLURAL, body))
        await anyio.sleep(0.3)  # time enough for a write this replica must not make
        assert await observed_generation(h, "quiet") is None

        writer["on"] = True
        h.watcher.request_status_sweep()

        async def written() -> bool:
            return bool(await observed_generation(h, "quiet") == 1)

        await until(written)


async def test_missing_crd_holds_up_only_the_crd_source(apiserver: ApiServer) -> None:
    options = WatchOptions(sources=("service", "crd"), max_backoff=0.2)
    errors_before = metric("external_dns_source_errors_total")
    async with watching(apiserver, options, wait_synced=False) as h:
        web = service("web", {HOSTNAME: "www.ex.com"}, externalIPs=["192.0.2.1"])
        await blocking(h.core.create_namespaced_service, "default", web)
        await h.settle({("www.ex.com", "A"): ("192.0.2.1",)})
        assert not h.watcher.synced.is_set() and h.watcher.complete.is_set()
        assert h.watcher.unsynced() == []
        assert h.watcher.waiting() == [
            "dnsendpoints.externaldns.k8s.io not installed: the crd source waits for it"
        ]
        assert metric("shardsync_source_crd_missing", crd="dnsendpoints.externaldns.k8s.io") == 1
        # No request failed: the CRD is followed by name, not probed for with lists answering 404.
        assert metric("external_dns_source_errors_total") == errors_before

        await install_crd(h)
        body = dnsendpoint("late", {"dnsName": "late.ex.com", "recordType": "A", "targets": ["192.0.2.8"]})
        await blocking(h.custom.create_namespaced_custom_object, GROUP, VERSION, "default", PLURAL, body)
        await h.settle({("www.ex.com", "A"): ("192.0.2.1",), ("late.ex.com", "A"): ("192.0.2.8",)})
        with anyio.fail_after(5):
            await h.watcher.synced.wait()
        assert metric("shardsync_source_crd_missing", crd="dnsendpoints.externaldns.k8s.io") == 0


async def test_a_sharded_replica_translates_and_writes_the_statuses_of_its_own_zones_dnsendpoints(
    apiserver: ApiServer,
) -> None:
    """Not the writer, and the CRD installed after it started: the DNSEndpoint of its expected zone is
    translated and its status written by this replica (it holds the zone); the other zone's is neither
    cached nor translated nor written here until the replica gains that zone too."""
    options = WatchOptions(sources=("crd",), shard_hint_wait=5.0, max_backoff=0.2)
    async with watching(
        apiserver, options, write_status=lambda: False, restricted=True, expect=(OTHER,), wait_synced=False
    ) as h:
        await install_crd(h)
        create = h.custom.create_namespaced_custom_object
        for name, zone in (("ours", OTHER), ("theirs", ZONE)):
            body = dnsendpoint(
                name, {"dnsName": f"{name}.{zone}", "recordType": "A", "targets": ["192.0.2.7"]}
            )
            await blocking(create, GROUP, VERSION, "default", PLURAL, body)
        with anyio.fail_after(5):
            await h.watcher.synced.wait()

        async def written(name: str) -> bool:
            return bool(await observed_generation(h, name) == 1)

        await until(lambda: written("ours"))
        informer = h.watcher.informers["dnsendpoints.externaldns.k8s.io"]
        assert set(informer.cache) == {"default/ours"} and not informer.forgotten
        assert h.records(OTHER) == {("ours.other.org", "A"): ("192.0.2.7",)} and h.records() == {}
        await anyio.sleep(0.3)  # time enough for a write this replica must not make
        assert await observed_generation(h, "theirs") is None

        h.desired.keep(ZONE)  # gained: read back, translated, and its status is this replica's to write
        await until(lambda: written("theirs"))
        assert h.records() == {("theirs.ex.com", "A"): ("192.0.2.7",)}
