"""A self-fenced replica logs a bounded number of lines: the ownership says it stopped writing once, and
its zones' refused reconciles are one digest line, not one per zone and retry (issue 36: 44-57 `self-fenced`
warnings per replica in a 35 s API outage). One replica against the embedded API server, in this process
(so every captured line is its own), with the API paused well past its lease."""

from __future__ import annotations

import logging
import time

import anyio
import pytest

from shardsync.local.apiserver import ApiServer
from shardsync.ownership.sharded import ShardedOwnership
from tests.sharding.cluster import LEASE, cluster, describe, wait_for

pytestmark = pytest.mark.anyio

OURS = ("shardsync.reconcile.worker", "shardsync.ownership.sharded")
SELF_FENCED = "self-fenced: member lease not renewed in time, writes stopped"


def warnings_since(caplog: pytest.LogCaptureFixture, since: float) -> list[str]:
    return [
        f"{r.name} {r.getMessage()} {getattr(r, 'kv', {})}"
        for r in caplog.records
        if r.name in OURS and r.levelno >= logging.WARNING and r.created >= since
    ]


async def test_an_api_outage_past_the_lease_logs_a_few_lines_not_one_per_zone(
    apiserver: ApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="shardsync")
    async with cluster(apiserver, zones=40) as c:  # the churn keeps every zone wanting a write
        node = await c.add("r0")
        await wait_for(c.settled, 20, f"settle: {describe(c)}")
        paused = time.time()
        apiserver.faults.pause()
        await wait_for(lambda: not node.ownership.may_write(), LEASE + 1, "self-fenced")
        await anyio.sleep(3 * LEASE)  # fenced for a while: every zone is refused again and again
        apiserver.faults.resume()
        await wait_for(c.settled, 20, f"settle after the outage: {describe(c)}")
    lines = warnings_since(caplog, paused)
    print("\n".join(lines))
    refused = [r for r in caplog.records if r.getMessage() == "zone reconcile failed" and r.created >= paused]
    assert len({getattr(r, "kv", {})["zone"] for r in refused}) > 20  # many zones were refused ...
    assert len(refused) > 40  # ... again and again, each at debug at least
    assert sum(SELF_FENCED in line for line in lines) == 1
    # ... in a few lines (559 before the digest): self-fenced once, the zones' refusals at once and once
    # per 10 s window (the outage can straddle two window ends), room for one more.
    assert len(lines) <= 5, lines


class _Members:
    """The member loop's answer to `may_write` (its lease is fresh), set by the test."""

    def __init__(self, fresh: bool) -> None:
        self.fresh = fresh

    def may_write(self) -> bool:
        return self.fresh


async def test_a_flapping_lease_logs_self_fenced_once_then_a_count(
    apiserver: ApiServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lease lapsing and coming back ten times within the window: the first stop is logged at once,
    # the others are counted in one line when the window ends.
    caplog.set_level(logging.DEBUG, logger="shardsync")
    async with cluster(apiserver, zones=4, churn=False) as c:
        node = await c.add("r0")
        await wait_for(c.settled, 20, f"settle: {describe(c)}")
        ownership = node.ownership
        assert isinstance(ownership, ShardedOwnership)
        members = _Members(fresh=False)
        monkeypatch.setattr(ownership.members, "may_write", members.may_write)
        since = time.time()
        for _ in range(10):
            ownership.state.writing = True  # what a renewed lease's pass leaves behind
            await ownership._pass(node)
        assert [line for line in warnings_since(caplog, since) if SELF_FENCED in line] == [
            f"shardsync.ownership.sharded {SELF_FENCED} {{'generation': "
            f"{ownership.view.generation if ownership.view else ''}, 'zones': 4}}"
        ]
        ownership.digest.flush()
        summary = [line for line in warnings_since(caplog, since) if SELF_FENCED in line][1:]
        assert summary == [f"shardsync.ownership.sharded {SELF_FENCED} {{'count': 10, 'window': '60s'}}"]
