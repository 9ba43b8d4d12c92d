"""The fake provider's parts on their own: the gate, the injected faults, the audit log, the seed layout."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from shardsync.providers.base import BatchRejectedError, FencedError, FenceToken, ProviderError
from shardsync.providers.fake.audit import AuditLog
from shardsync.providers.fake.faults import Faults, InjectedError, InjectedFaults, InjectedRecordError
from shardsync.providers.fake.limits import FakeThrottledError, Gate, Limits
from shardsync.providers.fake.seed import seeded_records, zone_name
from shardsync.records.endpoint import Changes, Endpoint
from tests.providers.fake_helpers import FakeClock


def enter(gate: Gate, client: str) -> None:
    with gate.call(client):
        pass


async def enter_async(gate: Gate, client: str) -> None:
    async with gate.call_async(client):
        pass


# ---- the gate ----


def test_gate_yields_the_start_before_the_latency() -> None:
    clock = FakeClock()
    gate = Gate(Limits(latency=0.25), clock=clock, wall_clock=lambda: 1e9 + clock.now, sleep=clock.sleep)
    with gate.call("a") as started:
        assert started == (100.0, 1e9 + 100.0)
        assert clock.now == 100.25
    assert clock.slept == [0.25]


@pytest.mark.anyio
async def test_gate_latency_runs_on_the_slot_schedule_not_on_the_servers_lateness() -> None:
    clock = FakeClock()

    async def sleep_async(seconds: float) -> None:
        clock.sleep(seconds)
        await asyncio.sleep(0)

    gate = Gate(Limits(latency=0.25, concurrency=1), clock=clock, sleep_async=sleep_async)

    async def first() -> None:
        async with gate.call_async("a"):
            clock.now += 0.1  # the server was busy after the latency: the slot is freed 0.1 s late

    # Both arrive at 100.0; the second waits for the slot, which was due free at 100.25 but freed at 100.35:
    # its latency began at 100.25, so it sleeps only what is left of it (the lateness is not added).
    await asyncio.gather(first(), enter_async(gate, "a"))
    assert clock.slept == [0.25, pytest.approx(0.15)]
    assert clock.now == pytest.approx(100.5)
    clock.now += 5.0  # idle: a call arriving later begins its latency on arrival
    await enter_async(gate, "a")
    assert clock.slept[-1] == 0.25


def test_gate_without_a_concurrency_limit_sleeps_the_whole_latency_each_time() -> None:
    clock = FakeClock()
    gate = Gate(Limits(latency=0.25), clock=clock, sleep=clock.sleep)
    for _ in range(3):
        with gate.call("a"):
            clock.now += 0.1
    assert clock.slept == [0.25, 0.25, 0.25]


def test_gate_asks_the_injected_faults_first_and_spends_no_token_on_them() -> None:
    reasons = ["throttled (injected)"]
    clock = FakeClock()
    gate = Gate(Limits(rate=1, burst=1), injected=lambda: reasons.pop() if reasons else None, clock=clock)
    with pytest.raises(FakeThrottledError, match=r"throttled \(injected\)") as info:
        enter(gate, "a")
    assert info.value.retry_after == 1.0
    enter(gate, "a")  # the bucket's one token was still there
    with pytest.raises(FakeThrottledError, match="rate limit of 1 calls/s"):
        enter(gate, "a")


def test_gate_token_bucket_refills_at_the_rate_up_to_the_burst() -> None:
    clock = FakeClock()
    gate = Gate(Limits(rate=4, burst=2), clock=clock)
    enter(gate, "a")
    enter(gate, "a")
    with pytest.raises(FakeThrottledError) as info:
        enter(gate, "a")
    assert info.value.retry_after == pytest.approx(0.25)
    clock.now += 10  # a long pause refills no more than the burst
    enter(gate, "a")
    enter(gate, "a")
    with pytest.raises(FakeThrottledError):
        enter(gate, "a")


def test_gate_new_limits_refill_the_buckets_to_their_size() -> None:
    clock = FakeClock()
    gate = Gate(Limits(rate=1, burst=1), clock=clock)
    enter(gate, "a")
    gate.set_limits(Limits(rate=1, burst=3))
    for _ in range(3):
        enter(gate, "a")
    with pytest.raises(FakeThrottledError):
        enter(gate, "a")


def test_gate_concurrency_slots_are_per_client() -> None:
    gate = Gate(Limits(concurrency=1, queue_timeout=0))
    with gate.call("a"):
        with pytest.raises(FakeThrottledError, match=r"client a: 1 calls in flight \(limit 1\)") as info:
            enter(gate, "a")
        assert info.value.retry_after == 0.1
        enter(gate, "b")
    enter(gate, "a")  # the slot is free again


def test_gate_raised_concurrency_limit_lets_a_waiting_call_in() -> None:
    calls = 0
    second_call_admitted = threading.Event()

    def injected() -> None:
        # Runs under the gate's lock, which the call holds until it waits for a slot: once this is set,
        # set_limits below can only take the lock when the waiter is waiting.
        nonlocal calls
        calls += 1
        if calls == 2:
            second_call_admitted.set()

    gate = Gate(Limits(concurrency=1, queue_timeout=30), injected=injected)
    waited: list[float] = []

    def waiter() -> None:
        began = time.monotonic()
        enter(gate, "a")
        waited.append(time.monotonic() - began)

    with gate.call("a"):
        thread = threading.Thread(target=waiter)
        thread.start()
        assert second_call_admitted.wait(timeout=10)
        gate.set_limits(Limits(concurrency=2, queue_timeout=30))
        thread.join(timeout=10)
    assert waited and waited[0] < 10  # let in by the new limit, not by the 30 s queue timeout


@pytest.mark.anyio
async def test_gate_on_an_event_loop_queues_per_client_then_throttles() -> None:
    gate = Gate(Limits(concurrency=1, queue_timeout=0.05))
    async with gate.call_async("a"):
        began = time.monotonic()
        with pytest.raises(FakeThrottledError, match=r"client a: 1 calls in flight \(limit 1\)") as info:
            await enter_async(gate, "a")
        assert time.monotonic() - began >= 0.05  # it waited out the queue timeout first
        assert info.value.retry_after == 0.1
        await enter_async(gate, "b")
    await enter_async(gate, "a")  # the slot is free again


@pytest.mark.anyio
async def test_gate_on_an_event_loop_sleeps_the_latency_without_a_thread() -> None:
    gate = Gate(Limits(latency=0.25))
    began = time.monotonic()
    # Twenty calls of one client at once on one loop: they overlap, so together they take one latency
    # (in turn they would take 5 s; the bound leaves a loaded machine room).
    await asyncio.gather(*(enter_async(gate, "a") for _ in range(20)))
    assert 0.25 <= time.monotonic() - began < 2.5


@pytest.mark.anyio
async def test_gate_a_slot_freed_by_a_thread_lets_a_waiting_event_loop_call_in() -> None:
    gate = Gate(Limits(concurrency=1, queue_timeout=30))
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with gate.call("a"):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(10)
        waiter = asyncio.create_task(enter_async(gate, "a"))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        release.set()
        await asyncio.wait_for(waiter, 10)  # woken by the thread's release, not the 30 s queue timeout
    finally:
        release.set()
        thread.join(10)


@pytest.mark.anyio
async def test_gate_a_slot_freed_on_the_event_loop_lets_a_waiting_thread_in() -> None:
    gate = Gate(Limits(concurrency=1, queue_timeout=30))
    began = time.monotonic()
    async with gate.call_async("a"):
        waiter = asyncio.create_task(asyncio.to_thread(enter, gate, "a"))
        await asyncio.sleep(0.05)
        assert not waiter.done()
    await asyncio.wait_for(waiter, 10)
    assert time.monotonic() - began < 10


@pytest.mark.anyio
async def test_gate_raised_concurrency_limit_lets_a_waiting_event_loop_call_in() -> None:
    gate = Gate(Limits(concurrency=1, queue_timeout=30))
    async with gate.call_async("a"):
        waiter = asyncio.create_task(enter_async(gate, "a"))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        gate.set_limits(Limits(concurrency=2, queue_timeout=30))
        await asyncio.wait_for(waiter, 10)  # in while the first call still holds its slot


@pytest.mark.anyio
async def test_gate_a_cancelled_waiter_passes_its_wake_up_on() -> None:
    gate = Gate(Limits(concurrency=1, queue_timeout=30))
    async with gate.call_async("a"):
        first = asyncio.create_task(enter_async(gate, "a"))
        second = asyncio.create_task(enter_async(gate, "a"))
        await asyncio.sleep(0.05)
    first.cancel()  # woken by the release above, but cancelled before it ran: the slot goes to `second`
    await asyncio.wait_for(second, 10)
    assert first.cancelled() or first.done()


# ---- injected faults ----


def test_injected_throttling_counts_down_then_stops() -> None:
    injected = InjectedFaults(Faults(throttle_next=2))
    assert [injected.throttle() for _ in range(3)] == ["throttled (injected)", "throttled (injected)", None]
    assert injected.current == Faults(throttle_next=0)
    injected.set(Faults(throttle_next=1))
    assert injected.current.throttle_next == 1


def test_injected_random_throttling_replays_with_its_seed() -> None:
    def draws(injected: InjectedFaults) -> list[bool]:
        return [injected.throttle() is not None for _ in range(64)]

    faults = Faults(throttle_ratio=0.5, seed=7)
    first = draws(InjectedFaults(faults))
    assert 0 < sum(first) < 64
    again = InjectedFaults(Faults())
    again.set(faults)
    assert draws(again) == first
    assert not any(draws(InjectedFaults(Faults(throttle_ratio=0.0))))


def test_injected_failures_of_zones_and_records() -> None:
    injected = InjectedFaults(Faults(fail_zones=frozenset({"z.example"}), fail_records=frozenset({"b.y"})))
    injected.check_zone("y")
    with pytest.raises(InjectedError, match=r"zone z\.example"):
        injected.check_zone("z.example")
    ok = Endpoint.new("a.y", "A", ["192.0.2.1"])
    bad = Endpoint.new("b.y", "A", ["192.0.2.2"])
    injected.check_records(Changes(create=[ok]))
    with pytest.raises(InjectedRecordError, match=r"record b\.y") as info:
        injected.check_records(Changes(update_old=[bad], update_new=[bad]))
    assert isinstance(info.value, BatchRejectedError)


# ---- the audit log ----


def test_audit_log_outcomes_come_from_what_the_write_did() -> None:
    clock = FakeClock()
    log = AuditLog(clock=clock, wall_clock=lambda: 5.0)
    token = FenceToken(2, "r")
    log.record("apply", "z", "r", 2, token, (99.0, 4.0), 3)
    log.record("apply", "z", "r", 2, token, (99.0, 4.0), FencedError("moved"))
    log.record("fence", "z", "r", 2, None, (99.0, 4.0), ProviderError("boom"))
    ok, fenced, failed = log.since()
    assert (ok.outcome, ok.changes, ok.message, ok.fence) == ("ok", 3, "", "identity=r,generation=2")
    assert (fenced.outcome, fenced.changes, fenced.message) == ("fenced", 0, "moved")
    assert (failed.op, failed.outcome, failed.fence) == ("fence", "error", None)
    assert (ok.start, ok.end, ok.start_wall, ok.end_wall) == (99.0, 100.0, 4.0, 5.0)
    assert [e.seq for e in (ok, fenced, failed)] == [0, 1, 2]


def test_audit_log_is_bounded_and_counts_what_fell_off() -> None:
    log = AuditLog(2)
    assert log.dropped() == 0
    for changes in range(3):
        log.record("apply", "z", "r", None, None, (0.0, 0.0), changes)
    assert [e.seq for e in log.since()] == [1, 2]
    assert [e.seq for e in log.since(2)] == [2]
    assert log.dropped() == 1
    log.clear()
    assert (log.since(), log.dropped()) == ([], 0)
    log.record("apply", "z", "r", None, None, (0.0, 0.0), 1)
    assert log.since()[0].seq == 0


# ---- the seed layout ----


def test_seed_names_widen_past_ten_thousand_zones() -> None:
    assert zone_name(7, 10_000) == "zone-0007.example"
    assert zone_name(7, 10_001) == "zone-00007.example"


def test_seeded_targets_follow_the_zone_and_record_index() -> None:
    records = seeded_records(258, "zone-0258.example", 256)
    assert records[0].dns_name == "host-0000.zone-0258.example"
    assert [r.targets for r in (records[0], records[253], records[254])] == [
        ("10.1.2.1",),
        ("10.1.2.254",),
        ("10.1.2.1",),
    ]
