"""The shared provider budget (shardsync.providers.budget): each replica's share, its token bucket's
conservative start, halving on a throttling answer and linear recovery, all on a fake clock; and the
wrapper that paces, counts and retries provider calls."""

from __future__ import annotations

import time
from email.utils import formatdate

import httpx
import pytest
from prometheus_client import REGISTRY

from shardsync.providers.base import FenceToken, Pacer, ProviderError, ThrottledError, unpaced
from shardsync.providers.budget import (
    MAX_NAP,
    MIN_FRACTION,
    RECOVERY_SECONDS,
    RETRIES,
    Budget,
    BudgetedProvider,
    share,
)
from shardsync.providers.cache import CachedProvider
from shardsync.providers.fake.faults import Faults
from shardsync.providers.fake.provider import FakeProvider
from shardsync.providers.fake.store import FakeStore
from shardsync.providers.httpclient import retry_after
from shardsync.records.endpoint import Changes, Endpoint
from shardsync.replica.config import ConfigError
from shardsync.replica.wiring import provider_for
from tests.providers.fake_helpers import FakeClock
from tests.replica.test_config import FAKE, parse

pytestmark = pytest.mark.anyio


def drain(budget: Budget, clock: FakeClock, calls: int) -> list[float]:
    """How long each of `calls` calls made back to back waited for its token (asking again when due)."""
    waits = []
    for _ in range(calls):
        waited = 0.0
        while (wait := budget.try_take()) > 0:
            clock.now += wait
            waited += wait
        waits.append(round(waited, 6))
    return waits


def test_shares_are_owned_zones_plus_one_and_sum_to_one() -> None:
    owners = {"a.test": "r0", "b.test": "r0", "c.test": "r1", "d.test": "r0"}
    zones = list(owners)
    shares = {r: share(r, zones, owners.get, members=3) for r in ("r0", "r1", "r2")}
    assert shares == {"r0": 4 / 7, "r1": 2 / 7, "r2": 1 / 7}  # r2 owns nothing but still lists zones
    assert sum(shares.values()) == pytest.approx(1.0)


def test_starts_with_one_token_at_half_its_share_then_rises_to_the_share() -> None:
    clock = FakeClock()
    budget = Budget(10, 50, share=0.5, clock=clock)
    assert budget.bucket.burst == 25  # its share of the account's burst
    assert budget.rate() == pytest.approx(2.5)  # half of 10 x 0.5 at first
    assert budget.try_take() == 0.0  # one token, not 25: replicas starting together spend no burst twice
    assert budget.try_take() == pytest.approx(1 / 2.5)  # nothing taken: the next token is due then
    clock.now += RECOVERY_SECONDS / 2
    assert budget.rate() == pytest.approx(5.0)  # linear: the full share after RECOVERY_SECONDS/2 more
    clock.now += 100
    assert budget.rate() == pytest.approx(5.0)  # never beyond the share


def test_steady_pace_is_the_share_of_the_rate() -> None:
    clock = FakeClock()
    budget = Budget(10, 10, share=0.25, clock=clock)
    clock.now += RECOVERY_SECONDS  # past the start
    drain(budget, clock, 10)  # spend what was saved up
    waits = drain(budget, clock, 5)
    assert waits == [pytest.approx(1 / 2.5)] * 5  # 10 calls/s x 0.25


def test_a_throttling_answer_halves_the_rate_pauses_for_retry_after_and_recovers() -> None:
    clock = FakeClock()
    budget = Budget(10, 10, share=1.0, clock=clock)
    clock.now += RECOVERY_SECONDS
    assert budget.rate() == pytest.approx(10.0)
    assert budget.throttled(retry_after=2.0) == pytest.approx(5.0)
    assert budget.try_take() == pytest.approx(2.0 + 1 / 5.0, abs=1e-6)  # the pause, then a token's worth
    clock.now += 2.0 + 0.2
    assert budget.rate() == pytest.approx(5.0 + 10.0 * 2.2 / RECOVERY_SECONDS)  # rising linearly
    clock.now += RECOVERY_SECONDS
    assert budget.rate() == pytest.approx(10.0)  # recovered, without a restart


def test_repeated_throttling_never_goes_below_the_floor_or_fails() -> None:
    clock = FakeClock()
    budget = Budget(10, 10, share=0.5, clock=clock)
    for _ in range(20):
        budget.throttled(retry_after=None)
    assert budget.rate() == pytest.approx(10 * 0.5 * MIN_FRACTION)
    assert budget.try_take() > 0  # paused (1 s without a Retry-After), still answering


def test_a_new_share_applies_to_the_rate_and_the_burst() -> None:
    clock = FakeClock()
    budget = Budget(10, 40, share=1.0, clock=clock)
    clock.now += RECOVERY_SECONDS
    budget.set_share(0.25)
    assert budget.rate() == pytest.approx(2.5)
    assert budget.bucket.burst == 10
    clock.now += 60  # idle: the bucket fills to its share of the burst, no more
    assert drain(budget, clock, 11)[:10] == [0.0] * 10
    assert budget.try_take() > 0


async def test_a_call_waiting_at_a_low_share_goes_at_once_when_the_share_rises() -> None:
    """A replica joins with the smallest share (no assignment yet); a call waiting for a token then must
    not sleep out a wait computed at that rate once the assignment gives it half the account."""
    clock = FakeClock()
    budget = Budget(10, 10, share=0.01, clock=clock)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds
        budget.set_share(0.5)  # the assignment arrives while the call waits

    provider = BudgetedProvider(Throttling(times=0), budget, sleep=sleep)
    await provider.zones()  # the one token it starts with
    await provider.zones()  # 20 s away at the first share; 0.4 s at the new one
    assert sum(slept) <= MAX_NAP + 1 / 2.5


def test_retry_after_seconds_and_http_date() -> None:
    def answer(value: str) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": value} if value else {})

    assert retry_after(answer("3")) == 3.0
    assert retry_after(answer("")) is None
    assert retry_after(answer("soon")) is None
    now = time.time()
    assert retry_after(answer(formatdate(now + 30, usegmt=True)), now=now) == pytest.approx(30, abs=1)


class Throttling:
    """A provider that answers "throttled" `times` times, then succeeds (the wrapper's input)."""

    name = "throttling"

    def __init__(self, times: int, retry: float | None = 0.5) -> None:
        self.times, self.retry, self.calls = times, retry, 0

    async def _answer(self) -> None:
        self.calls += 1
        if self.calls <= self.times:
            raise ThrottledError("slow down", self.retry)

    async def zones(self) -> list[str]:
        await self._answer()
        return ["a.test"]

    async def records(self, zone: str) -> list[Endpoint]:
        await self._answer()
        return []

    async def apply(self, zone: str, changes: Changes, fence: FenceToken | None = None) -> None:
        await self._answer()

    async def acquire_fence(self, zone: str, token: FenceToken) -> None:
        await self._answer()

    async def close(self) -> None:
        return None


def counted(metric: str, kind: str) -> float:
    return REGISTRY.get_sample_value(metric, {"kind": kind}) or 0.0


async def test_the_wrapper_waits_out_the_throttle_and_retries_through_the_bucket() -> None:
    clock = FakeClock()
    budget = Budget(10, 10, share=1.0, clock=clock)
    clock.now += RECOVERY_SECONDS
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    inner = Throttling(times=2, retry=0.5)
    provider = BudgetedProvider(inner, budget, sleep=sleep)
    calls, throttled = (
        counted("shardsync_provider_calls_total", "apply"),
        counted("shardsync_provider_throttled_total", "apply"),
    )
    await provider.apply("a.test", Changes())
    assert inner.calls == 3
    assert counted("shardsync_provider_calls_total", "apply") - calls == 3
    assert counted("shardsync_provider_throttled_total", "apply") - throttled == 2
    assert sum(slept) >= 2 * 0.5  # each retry after the Retry-After
    assert budget.rate() < 10.0  # slowed down, recovering


async def test_the_wrapper_gives_up_after_its_retries_and_without_a_budget_at_once() -> None:
    async def sleep(seconds: float) -> None:
        return None

    budgeted = BudgetedProvider(Throttling(times=99), Budget(10, 10), sleep=sleep)
    with pytest.raises(ThrottledError):
        await budgeted.records("a.test")
    assert isinstance(budgeted.inner, Throttling) and budgeted.inner.calls == RETRIES + 1
    counting = BudgetedProvider(Throttling(times=99), None, sleep=sleep)
    with pytest.raises(ProviderError):
        await counting.zones()
    assert isinstance(counting.inner, Throttling) and counting.inner.calls == 1  # the worker backs off
    assert await BudgetedProvider(Throttling(times=0), None).zones() == ["a.test"]


def test_flags_build_the_wrappers_and_refuse_negative_values() -> None:
    s = parse(["--provider-rate-limit=10", "--provider-burst=50", "--provider-cache-time=1h", *FAKE])
    provider, budget = provider_for(s, FakeProvider(FakeStore()))
    assert isinstance(provider, CachedProvider) and provider.cache_time == 3600
    assert isinstance(provider.inner, BudgetedProvider) and provider.inner.budget is budget
    assert budget is not None and (budget.rate_limit, budget.burst) == (10.0, 50)
    plain, none = provider_for(parse(FAKE), FakeProvider(FakeStore()))
    assert isinstance(plain, BudgetedProvider) and none is None  # counted, neither paced nor cached
    for flag in ("--provider-rate-limit=-1", "--provider-burst=-1"):  # a duration is never negative
        with pytest.raises(ConfigError, match=flag.split("=")[0]):
            parse([flag, *FAKE])


class Paged(Throttling):
    """A provider whose listing takes three API requests: it paces the two after the first through its
    pacer (base.MultiRequest)."""

    def __init__(self) -> None:
        super().__init__(times=0)
        self.pacer: Pacer = unpaced

    async def records(self, zone: str) -> list[Endpoint]:
        for _ in range(2):
            await self.pacer("records")
        return []


async def test_every_request_of_a_multi_request_call_is_paced_and_counted() -> None:
    clock = FakeClock()
    budget = Budget(10, 10, share=1.0, clock=clock)
    clock.now += RECOVERY_SECONDS

    async def sleep(seconds: float) -> None:
        clock.now += seconds

    provider = BudgetedProvider(Paged(), budget, sleep=sleep)
    listed = counted("shardsync_provider_calls_total", "records")
    await provider.records("a.test")
    assert counted("shardsync_provider_calls_total", "records") - listed == 3  # the call and its two pages


async def test_the_wrapper_lists_zones_with_versions_when_the_provider_can_and_counts_one_call() -> None:
    store = FakeStore()
    store.add_zone("a.example")
    before = REGISTRY.get_sample_value("shardsync_provider_calls_total", {"kind": "zones"}) or 0.0
    zones, versions = await BudgetedProvider(FakeProvider(store, "r0"), None).zones_and_versions()
    assert zones == ["a.example"] and versions == {"a.example": store.records_if_changed("a.example")[0]}
    # The record cache (--provider-cache-time) names no versions: its zones are read from the cache.
    unversioned = CachedProvider(FakeProvider(store, "r0"), 60.0)
    assert await BudgetedProvider(unversioned, None).zones_and_versions() == (["a.example"], None)
    after = REGISTRY.get_sample_value("shardsync_provider_calls_total", {"kind": "zones"})
    assert after == before + 2


async def test_a_zone_with_an_injected_failure_has_no_version_in_the_listing() -> None:
    store = FakeStore()
    store.add_zone("a.example")
    store.add_zone("b.example")
    store.set_faults(Faults(fail_zones=frozenset({"b.example"})))
    zones, versions = await FakeProvider(store, "r0").zones_and_versions()
    assert zones == ["a.example", "b.example"] and versions is not None and set(versions) == {"a.example"}
