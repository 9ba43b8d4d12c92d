"""A new source kind is one module plus one table line: the test-only kind of example_kind.py, registered in
a copy of the source table, runs in the generic watcher against the embedded API server next to the
service kind: it waits for its CRD, translates with its own options, a change of a related object (a Node)
re-translates exactly the objects attached to it, and its problems become Events on its own objects."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from kubernetes import client

from shardsync.local.apiserver import ApiServer
from shardsync.manifests import load_crd
from shardsync.records.endpoint import RESOURCE_LABEL
from shardsync.replica import config
from shardsync.sources import table as source_table
from shardsync.sources.table import SOURCES
from shardsync.sources.watcher import INVALID_REASON, WatchOptions

from . import example_kind
from .example_kind import DnsRecordOptions
from .watching import HOSTNAME, ZONE, Harness, blocking, metric, node_status, service, until, watching

pytestmark = pytest.mark.anyio

TABLE = {**SOURCES, example_kind.KIND.name: example_kind.KIND}  # the one line
GROUP, VERSION, PLURAL = "example.test", "v1", "dnsrecords"


def dnsrecord_crd() -> dict[str, Any]:
    """The shipped DNSEndpoint CRD renamed to DNSRecords of example.test/v1 (the embedded API server does not
    validate against the schema)."""
    crd = load_crd()
    crd["metadata"]["name"] = f"{PLURAL}.{GROUP}"
    names = {"plural": PLURAL, "singular": "dnsrecord", "kind": "DNSRecord", "listKind": "DNSRecordList"}
    crd["spec"].update(group=GROUP, names=names)
    crd["spec"]["versions"][0]["name"] = VERSION
    return crd


def dnsrecord(name: str, hostname: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DNSRecord",
        "metadata": {"name": name},
        "spec": {"hostname": hostname, "nodeName": node},
    }


async def make_node(h: Harness, name: str, address: str) -> None:
    await blocking(h.core.create_node, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    await blocking(h.core.patch_node_status, name, node_status(("ExternalIP", address)))


async def create_record(h: Harness, body: dict[str, Any]) -> None:
    await blocking(h.custom.create_namespaced_custom_object, GROUP, VERSION, "default", PLURAL, body)


async def test_a_kind_of_one_module_and_one_table_line_runs_in_the_generic_watcher(
    apiserver: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = WatchOptions(
        sources=("service", "dnsrecord"),
        source_options={"dnsrecord": DnsRecordOptions(ttl=30)},
        max_backoff=0.2,
    )
    async with watching(apiserver, options, wait_synced=False, table=TABLE) as h:
        web = service("web", {HOSTNAME: "www.ex.com"}, externalIPs=["192.0.2.1"])
        await blocking(h.core.create_namespaced_service, "default", web)
        await h.settle({("www.ex.com", "A"): ("192.0.2.1",)})
        # Its CRD is not installed: the kind waits, the service kind runs.
        assert h.watcher.unsynced() == []  # every informer that can list has
        assert h.watcher.waiting() == [
            "dnsrecords.example.test not installed: the dnsrecord source waits for it"
        ]
        assert metric("shardsync_source_crd_missing", crd="dnsrecords.example.test") == 1

        await blocking(client.ApiextensionsV1Api(h.api).create_custom_resource_definition, dnsrecord_crd())
        await make_node(h, "n1", "203.0.113.1")
        await make_node(h, "n2", "203.0.113.2")
        await create_record(h, dnsrecord("r1", "r1.ex.com", "n1"))
        await create_record(h, dnsrecord("r2", "r2.ex.com", "n2"))
        await h.settle(
            {
                ("www.ex.com", "A"): ("192.0.2.1",),
                ("r1.ex.com", "A"): ("203.0.113.1",),
                ("r2.ex.com", "A"): ("203.0.113.2",),
            }
        )
        r1 = next(ep for ep in h.desired.desired(ZONE) if ep.dns_name == "r1.ex.com")
        assert r1.ttl == 30 and r1.labels[RESOURCE_LABEL] == "dnsrecord/default/r1"
        assert metric("shardsync_source_crd_missing", crd="dnsrecords.example.test") == 0

        translated: list[str] = []
        real = example_kind.dnsrecord_endpoints

        def counting(obj: Any, *args: Any) -> Any:
            translated.append(obj["metadata"]["name"])
            return real(obj, *args)

        monkeypatch.setattr(example_kind, "dnsrecord_endpoints", counting)
        touched = await h.change(
            blocking(h.core.patch_node_status, "n2", node_status(("ExternalIP", "203.0.113.9")))
        )
        assert touched == {ZONE} and translated == ["r2"]  # only the record attached to n2
        assert h.records()[("r2.ex.com", "A")] == ("203.0.113.9",)

        # A problem in the kind's object is an Event on that object, with the kind's kind and apiVersion.
        await create_record(h, dnsrecord("r3", "r3.ex.com", "gone"))

        def warnings() -> list[Any]:
            events = h.core.list_namespaced_event("default", field_selector="involvedObject.name=r3")
            return [e for e in events.items if e.reason == INVALID_REASON]

        async def posted() -> bool:
            return bool(await blocking(warnings))

        await until(posted)
        [event] = await blocking(warnings)
        assert (event.involved_object.kind, event.involved_object.api_version) == (
            "DNSRecord",
            "example.test/v1",
        )
        assert "spec.nodeName" in event.message


def test_the_kinds_flags_reach_its_options_through_the_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(source_table.SOURCES, example_kind.KIND.name, example_kind.KIND)
    parser = argparse.ArgumentParser()
    env = {"POD_NAME": "shardsync-0", "SHARDSYNC_FAKE_ZONE": "ex.com"}
    config.configure(parser, env)
    settings = config.settings_from_args(parser.parse_args(["--dnsrecord-ttl=45"]), env)
    assert settings.options(example_kind.FLAGS) == DnsRecordOptions(ttl=45)
    assert example_kind.FLAGS in config.flag_groups()
