"""The shared source flags in the watcher: `--force-default-targets` and `--create-ptr` apply to every kind's
endpoints before the filters (external-dns v0.22.0 source/wrappers: multiSource, then the PTR wrapper)."""

from __future__ import annotations

import pytest

from shardsync.sources.filters import RecordTypeFilter
from shardsync.sources.options import SourceOptions
from shardsync.sources.watcher import WatchOptions
from tests.waits import eventually

from .fake_kube import FakeKube
from .test_watcher_dispatch import WIDGETS, ZONE, running, thing

pytestmark = pytest.mark.anyio

WITH_PTR = RecordTypeFilter.parse(("A", "AAAA", "CNAME", "PTR"))


async def test_force_default_targets_replace_every_kinds_targets() -> None:
    kube = FakeKube()
    kube.put(WIDGETS, thing("w1", "w1.ex.com", "192.0.2.1"))
    common = SourceOptions(default_targets=("198.51.100.7",), force_default_targets=True)
    async with running(kube, WatchOptions(sources=("widget",), common=common)) as run:
        assert [(e.dns_name, e.targets) for e in run.desired.desired(ZONE)] == [
            ("w1.ex.com", ("198.51.100.7",))
        ]


async def test_create_ptr_keeps_one_ptr_per_address_across_objects() -> None:
    kube = FakeKube()
    kube.put(WIDGETS, thing("w1", "w1.ex.com", "192.0.2.1"))
    kube.put(WIDGETS, thing("w2", "w2.ex.com", "192.0.2.1"))
    options = WatchOptions(sources=("widget",), record_types=WITH_PTR, common=SourceOptions(create_ptr=True))
    async with running(kube, options) as run:

        def ptr() -> tuple[str, ...] | None:
            found = run.desired.unplaced().get("ptr/192.0.2.1", ())  # no reverse zone known here
            return found[0].targets if found else None

        assert run.desired.unplaced()["ptr/192.0.2.1"][0].dns_name == "1.2.0.192.in-addr.arpa"
        assert ptr() == ("w1.ex.com", "w2.ex.com")
        kube.emit(WIDGETS, "DELETED", thing("w1", "w1.ex.com", "192.0.2.1"))
        await eventually(lambda: ptr() == ("w2.ex.com",))


async def test_without_ptr_managed_no_ptr_is_made() -> None:
    kube = FakeKube()
    kube.put(WIDGETS, thing("w1", "w1.ex.com", "192.0.2.1"))
    async with running(kube, WatchOptions(sources=("widget",), common=SourceOptions(create_ptr=True))) as run:
        assert run.desired.unplaced() == {}
