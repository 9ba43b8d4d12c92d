"""Change logs: each change applied (or, under --dry-run, planned) is one info line with action, name, type,
targets and zone, as external-dns logs its changes; one summary line per zone and sync; a big batch is
listed up to change_log.LISTED lines at info, the rest at debug. The worker runs against the in-process fake
provider; the lines are the log records it wrote, rendered by the real formatters."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from shardsync import logs
from shardsync.providers.base import FenceToken
from shardsync.providers.fake.faults import Faults
from shardsync.providers.fake.store import FakeStore
from shardsync.reconcile.change_log import LISTED, change_fields
from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import RESOURCE_LABEL, Endpoint
from tests.reconcile.test_worker import ZONE, make, names, running, svc
from tests.waits import eventually

pytestmark = pytest.mark.anyio

OWNER_TXT = '"heritage=external-dns,external-dns/owner=shard,external-dns/resource=service/default/web"'


@pytest.fixture
def captured(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="shardsync")
    return caplog


def events(caplog: pytest.LogCaptureFixture, *wanted: str, level: int = logging.INFO) -> list[dict[str, Any]]:
    """The worker's records whose event is one of `wanted`, at `level` exactly, as event + fields."""
    return [
        {"event": r.getMessage(), **getattr(r, "kv", {})}
        for r in caplog.records
        if r.name == "shardsync.reconcile.worker" and r.getMessage() in wanted and r.levelno == level
    ]


def applied(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return events(caplog, "change applied")


async def test_create_update_delete_are_one_line_each_with_the_ownership_record_beside(
    captured: pytest.LogCaptureFixture,
) -> None:
    store = FakeStore()
    store.add_zone(ZONE)
    desired = DesiredIndex([ZONE])
    worker = make(store, desired)
    async with running(worker):
        web = Endpoint.new(
            "www.ex.com",
            "A",
            ["192.0.2.1", "192.0.2.2"],
            ttl=300,
            labels={RESOURCE_LABEL: "service/default/web"},
        )
        desired.set_object("service/default/web", [web])
        worker.own(ZONE, FenceToken(generation=4, identity="r0"))
        await eventually(lambda: ("www.ex.com", "A") in names(store))
        await eventually(lambda: len(events(captured, "zone changes applied")) == 1)
        assert applied(captured) == [
            {
                "event": "change applied",
                "action": "CREATE",
                "name": "www.ex.com",
                "type": "A",
                "targets": "192.0.2.1;192.0.2.2",
                "ttl": 300,
                "zone": ZONE,
            },
            {
                "event": "change applied",
                "action": "CREATE",
                "name": "a-www.ex.com",
                "type": "TXT",
                "targets": OWNER_TXT,
                "zone": ZONE,
                "ownership": True,
            },
        ]
        assert events(captured, "zone changes applied") == [
            {
                "event": "zone changes applied",
                "zone": ZONE,
                "generation": 4,
                "create": 2,
                "update": 0,
                "delete": 0,
            }
        ]
        captured.clear()

        worker.mark_dirty(desired.set_object("service/default/web", [svc("web", "www.ex.com", "192.0.2.9")]))
        await eventually(lambda: len(events(captured, "zone changes applied")) == 1)
        (update,) = applied(captured)
        assert update == {
            "event": "change applied",
            "action": "UPDATE",
            "name": "www.ex.com",
            "type": "A",
            "targets": "192.0.2.9",
            "zone": ZONE,
            "old_targets": "192.0.2.1;192.0.2.2",
            "old_ttl": 300,
        }
        captured.clear()

        worker.mark_dirty(desired.set_object("service/default/web", []))
        await eventually(lambda: len(events(captured, "zone changes applied")) == 1)
        assert [(c["action"], c["name"], c["type"]) for c in applied(captured)] == [
            ("DELETE", "www.ex.com", "A"),
            ("DELETE", "a-www.ex.com", "TXT"),
        ]
        assert events(captured, "zone changes applied")[0]["delete"] == 2


async def sync_once(*services: str, store: FakeStore | None = None, dry_run: bool = False) -> FakeStore:
    """A worker's first sync of ZONE, wanting `<name>.ex.com A 192.0.2.1` for each Service name given."""
    store = store or FakeStore()
    store.add_zone(ZONE)
    desired = DesiredIndex([ZONE])
    for name in services:
        desired.set_object(f"service/default/{name}", [svc(name, f"{name}.ex.com", "192.0.2.1")])
    worker = make(store, desired, dry_run=dry_run)
    async with running(worker):
        worker.own(ZONE)
        await eventually(lambda: worker.statuses[ZONE].syncs >= 1)
    return store


async def test_dry_run_prints_one_line_per_planned_change_with_name_type_and_targets(
    captured: pytest.LogCaptureFixture,
) -> None:
    store = await sync_once("www", "api", dry_run=True)
    planned = events(captured, "dry run: change planned")
    assert [(p["action"], p["name"], p["type"], p["targets"], p["zone"]) for p in planned] == [
        ("CREATE", "api.ex.com", "A", "192.0.2.1", ZONE),
        ("CREATE", "a-api.ex.com", "TXT", OWNER_TXT.replace("/web", "/api"), ZONE),
        ("CREATE", "www.ex.com", "A", "192.0.2.1", ZONE),
        ("CREATE", "a-www.ex.com", "TXT", OWNER_TXT.replace("/web", "/www"), ZONE),
    ]
    assert events(captured, "dry run: changes not applied") == [
        {
            "event": "dry run: changes not applied",
            "zone": ZONE,
            "generation": "",
            "create": 4,
            "update": 0,
            "delete": 0,
        }
    ]
    assert applied(captured) == [] and store.audit() == []


async def test_a_big_batch_lists_the_first_lines_at_info_and_the_rest_at_debug(
    captured: pytest.LogCaptureFixture,
) -> None:
    await sync_once(*(f"s{i:02d}" for i in range(30)))
    assert len(applied(captured)) == LISTED == 20
    assert len(events(captured, "change applied", level=logging.DEBUG)) == 60 - LISTED
    (summary,) = events(captured, "zone changes applied")
    assert summary["create"] == 60 and summary["unlisted"] == 40


async def test_a_rejected_record_is_not_logged_as_applied(captured: pytest.LogCaptureFixture) -> None:
    store = FakeStore(faults=Faults(fail_records=frozenset({"bad.ex.com"})))
    await sync_once("bad", "good", "fine", store=store)
    lines = applied(captured)
    assert {c["name"] for c in lines} == {"good.ex.com", "a-good.ex.com", "fine.ex.com", "a-fine.ex.com"}
    assert events(captured, "zone changes applied")[0]["create"] == 4
    assert ("bad.ex.com", "A") not in names(store)


async def test_json_format_is_one_object_per_change(captured: pytest.LogCaptureFixture) -> None:
    await sync_once("www", dry_run=True)
    formatter = logs.JsonFormatter()
    rendered = [formatter.format(r) for r in captured.records if r.getMessage() == "dry run: change planned"]
    first = json.loads(rendered[0])
    assert "\n" not in rendered[0]
    assert {k: first[k] for k in ("level", "event", "action", "name", "type", "targets", "zone")} == {
        "level": "info",
        "event": "dry run: change planned",
        "action": "CREATE",
        "name": "www.ex.com",
        "type": "A",
        "targets": "192.0.2.1",
        "zone": ZONE,
    }
    assert json.loads(rendered[1])["ownership"] is True
    text = logs.LogfmtFormatter().format(
        next(r for r in captured.records if r.getMessage() == "dry run: change planned")
    )
    assert (
        ' event="dry run: change planned" action=CREATE name=www.ex.com type=A targets=192.0.2.1 zone=ex.com'
        in text
    )


def test_set_identifier_and_ttl_appear_only_when_set() -> None:
    weighted = Endpoint.new("www.ex.com", "CNAME", ["lb-1.ex.net"], ttl=60, set_identifier="eu")
    plain = Endpoint.new("www.ex.com", "A", ["192.0.2.1"])
    assert change_fields("DELETE", weighted, ZONE) == {
        "action": "DELETE",
        "name": "www.ex.com",
        "type": "CNAME",
        "targets": "lb-1.ex.net",
        "ttl": 60,
        "set_identifier": "eu",
        "zone": ZONE,
    }
    assert change_fields("UPDATE", plain, ZONE, plain) == {
        "action": "UPDATE",
        "name": "www.ex.com",
        "type": "A",
        "targets": "192.0.2.1",
        "zone": ZONE,
    }
