"""Zone failures through the worker's digest: many zones failing alike is one warning, however often they
retry; each failure is still at debug and in each zone's status. The fake provider fails the zones on
purpose (Faults.fail_zones); tests/e2e/test_failure_logs.py does the same with a real BIND stopped."""

from __future__ import annotations

import logging

import pytest

from shardsync.providers.fake.faults import Faults
from shardsync.providers.fake.store import FakeStore
from shardsync.records.desired import DesiredIndex
from tests.reconcile.test_worker import make, running
from tests.waits import eventually

pytestmark = pytest.mark.anyio


async def test_thirty_zones_failing_and_retrying_log_one_warning_and_a_summary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="shardsync")
    zones = [f"z{i}.ex.com" for i in range(30)]
    store = FakeStore(faults=Faults(fail_zones=frozenset(zones)))
    for zone in zones:
        store.add_zone(zone)
    worker = make(store, DesiredIndex(zones), max_backoff=0.1)
    async with running(worker):
        for zone in zones:
            worker.own(zone)
        # every zone fails again and again (backoff capped at 0.1 s)
        await eventually(lambda: all(worker._schedule.failures(z) >= 4 for z in zones))
    failed = [r for r in caplog.records if r.getMessage() == "zone reconcile failed"]
    warnings = [getattr(r, "kv", {}) for r in failed if r.levelno >= logging.WARNING]
    # one line when the first zone failed; the stop says the rest in one more (within the 60 s window)
    assert len(warnings) == 2, warnings
    assert warnings[0]["kind"] == "injected" and warnings[0]["zone"] in zones
    assert warnings[1]["kind"] == "injected" and warnings[1]["zones"] == len(zones)
    details = [getattr(r, "kv", {}) for r in failed if r.levelno == logging.DEBUG]
    assert len(details) >= 4 * len(zones) - 1  # the rest at debug: the per-zone detail
    assert warnings[1]["count"] >= 4 * len(
        zones
    )  # every failure before the stop counted (not those racing it)
    assert {d["zone"] for d in details} | {warnings[0]["zone"]} == set(zones)
    assert all(worker.statuses[z].last_error.startswith("injected") for z in zones)
