"""The aws provider's own change batches under Route53's semantics: the fake store's `route53` profile behind
a Route53 API double (tests/providers/route53_on_fake.py). moto does not enforce these rules; here a DELETE
must name the current values, a batch applies whole or not at all, and the batch limits hold.

Two replicas write one zone through two providers: once the second has swapped the fence, the first one's
batch — headed by `DELETE fence "<its token>"` — is refused whole, and the audit shows no two writers at
once. A plan too big for one batch is split so that every batch passes the profile's limits. A worker
whose calls the account bucket throttles backs off and syncs the zone all the same.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from bench.audit import overlapping_writes
from shardsync.providers.aws.batches import fence_name
from shardsync.providers.aws.errors import Start
from shardsync.providers.aws.provider import AwsProvider
from shardsync.providers.base import FencedError, FenceToken, ThrottledError
from shardsync.providers.fake.profile import ROUTE53
from shardsync.providers.fake.store import FakeStore
from shardsync.reconcile.worker import Worker, WorkerOptions
from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import OWNED_RECORD_LABEL, Changes, Endpoint
from shardsync.records.registry import TxtRegistry
from tests.providers.route53_on_fake import Route53OnFake
from tests.waits import eventually

ZONE = "ex.org"


def store() -> FakeStore:
    s = FakeStore(profile=ROUTE53.with_account(rate=1e9, burst=10**9))
    s.add_zone(ZONE)
    return s


def replica(s: FakeStore, identity: str) -> AwsProvider:
    return AwsProvider(Route53OnFake(s, identity), batch_interval=0.0)


def a(name: str, ip: str = "192.0.2.1") -> Endpoint:
    return Endpoint.new(f"{name}.{ZONE}", "A", [ip])


def test_a_stale_replicas_batch_is_refused_whole_by_the_fence_cas() -> None:
    s = store()
    first, second = replica(s, "replica-a"), replica(s, "replica-b")
    old, new = FenceToken(1, "replica-a"), FenceToken(2, "replica-b")

    async def main() -> None:
        await first.acquire_fence(ZONE, old)
        await first.apply(ZONE, Changes(create=[a("one")]), old)
        await second.acquire_fence(ZONE, new)
        before = s.peek(ZONE)
        with pytest.raises(FencedError, match="no longer holds"):
            await first.apply(ZONE, Changes(create=[a("late")], delete=[a("one")]), old)
        assert s.peek(ZONE) == before  # neither the create nor the delete applied
        with pytest.raises(FencedError):
            await first.acquire_fence(ZONE, old)
        await second.apply(ZONE, Changes(create=[a("two")]), new)
        assert {e.dns_name for e in await second.records(ZONE)} == {f"one.{ZONE}", f"two.{ZONE}"}

    anyio.run(main)
    fence = [e for e in s.peek(ZONE) if e.dns_name == fence_name(ZONE)]
    assert [e.targets for e in fence] == [(f'"{new.to_text()}"',)]
    audit = s.audit(zone=ZONE)
    assert overlapping_writes(audit) == []
    assert [(e.writer, e.outcome) for e in audit if e.op == "apply"] == [
        ("replica-a", "ok"),  # its fence's CREATE
        ("replica-a", "ok"),
        ("replica-b", "ok"),  # the swap
        ("replica-a", "error"),  # the stale batch, refused whole
        ("replica-b", "ok"),
    ]


def test_a_large_plan_is_split_into_batches_route53_accepts() -> None:
    s = store()
    provider = replica(s, "replica-a")
    token = FenceToken(1, "replica-a")
    records = [a(f"h{i:04d}", f"10.0.{i // 250}.{i % 250 + 1}") for i in range(1500)]
    txts = [
        Endpoint.new(
            f"a-h{i:04d}.{ZONE}",
            "TXT",
            ['"heritage=external-dns,external-dns/owner=x"'],
            labels={OWNED_RECORD_LABEL: f"h{i:04d}.{ZONE}"},
        )
        for i in range(1500)
    ]

    paced: list[str] = []

    async def pace(kind: str) -> None:  # the provider budget's pacer (base.MultiRequest)
        paced.append(kind)

    provider.pacer = pace

    async def main() -> None:
        await provider.acquire_fence(ZONE, token)
        await provider.apply(ZONE, Changes(create=records + txts), token)
        assert len(await provider.records(ZONE)) == 3000  # 3,001 RRsets with the fence: 11 pages of 300
        # 700 UPSERTs count 1,400 values: more than one batch, or the profile refuses it
        olds = records[:700]
        news = [Endpoint.new(e.dns_name, "A", ["192.0.2.99"]) for e in olds]
        await provider.apply(ZONE, Changes(update_old=olds, update_new=news), token)

    anyio.run(main)
    # every request after a call's first one is paced: the fence's write after its read, 3 more batches of
    # the creates, 10 more pages, 1 more batch of the upserts
    assert paced == ["fence", *["apply"] * 3, *["records"] * 10, "apply"]
    applies = [e for e in s.audit(zone=ZONE) if e.op == "apply"]
    assert all(e.outcome == "ok" for e in applies)
    assert len(applies) == 1 + 4 + 2  # the fence; 3,000 creates in 4 batches; 700 upserts in 2
    assert len(s.peek(ZONE)) == 3001
    assert sum(e.targets == ("192.0.2.99",) for e in s.peek(ZONE)) == 700


class CountingThrottles(Route53OnFake):
    """The double, counting the calls the account bucket throttled."""

    throttled = 0

    def change(self, zone_id: str, changes: list[dict[str, Any]], comment: str = "") -> None:
        try:
            super().change(zone_id, changes, comment)
        except ThrottledError:
            type(self).throttled += 1
            raise

    def rrsets(
        self, zone_id: str, start: Start | None, max_items: int
    ) -> tuple[list[dict[str, Any]], Start | None]:
        try:
            return super().rrsets(zone_id, start, max_items)
        except ThrottledError:
            type(self).throttled += 1
            raise


def test_a_worker_rides_out_the_account_bucket_and_syncs() -> None:
    # An account bucket of 3 requests refilled at 5/s: the first sync needs more calls than that, so some
    # are throttled; the worker backs off (at least the Retry-After) and the zone syncs all the same.
    s = FakeStore(profile=ROUTE53.with_account(rate=5, burst=3))
    s.add_zone(ZONE)
    desired = DesiredIndex([ZONE])
    desired.set_object("service/default/web", [a("web"), a("api", "192.0.2.2")])
    CountingThrottles.throttled = 0
    provider = AwsProvider(CountingThrottles(s, "replica-a"), batch_interval=0.0)
    worker = Worker(provider, TxtRegistry(owner_id="x"), desired, WorkerOptions(interval=60, event_delay=0))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            worker.own(ZONE, FenceToken(1, "replica-a"))
            await eventually(lambda: worker.statuses[ZONE].syncs >= 1, within=20)
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert CountingThrottles.throttled >= 1
    assert {e.dns_name for e in s.peek(ZONE)} >= {f"web.{ZONE}", f"api.{ZONE}", f"a-web.{ZONE}"}
