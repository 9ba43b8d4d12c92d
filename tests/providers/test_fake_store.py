"""FakeStore in process: records, fence compare-and-set, audit, limits and faults."""

from __future__ import annotations

import threading
import time

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardsync.providers.base import (
    BatchRejectedError,
    FencedError,
    FenceToken,
    Provider,
    ProviderError,
    ThrottledError,
)
from shardsync.providers.fake.audit import AuditEntry
from shardsync.providers.fake.faults import Faults, InjectedError
from shardsync.providers.fake.limits import Limits
from shardsync.providers.fake.provider import FakeProvider
from shardsync.providers.fake.seed import zone_name
from shardsync.providers.fake.store import FakeStore, InvalidChangesError, UnknownZoneError
from shardsync.records.endpoint import Changes, Endpoint
from tests.providers.fake_helpers import FakeClock, Latency

Z0 = "zone-0000.example"
Z1 = "zone-0001.example"


@pytest.fixture
def store() -> FakeStore:
    store = FakeStore()
    store.seed(3, 2)
    return store


def a(name: str, *targets: str) -> Endpoint:
    return Endpoint.new(name, "A", targets or ["192.0.2.1"])


# ---- seeding and records ----


def test_seed_names_and_records(store: FakeStore) -> None:
    assert store.zones() == ["zone-0000.example", "zone-0001.example", "zone-0002.example"]
    records = store.records(Z1)
    assert [(r.dns_name, r.targets) for r in records] == [
        ("host-0000.zone-0001.example", ("10.0.1.1",)),
        ("host-0001.zone-0001.example", ("10.0.1.2",)),
    ]
    assert zone_name(3, 20_000) == "zone-00003.example"


def test_apply_create_update_delete(store: FakeStore) -> None:
    old = store.records(Z0)[0]
    new = Endpoint.new(old.dns_name, "A", ["10.9.9.9"])
    store.apply(
        Z0,
        Changes(
            create=[a("www.zone-0000.example")],
            update_old=[old],
            update_new=[new],
            delete=[store.records(Z0)[1]],
        ),
        writer="r1",
    )
    assert {(r.dns_name, r.targets) for r in store.records(Z0)} == {
        ("www.zone-0000.example", ("192.0.2.1",)),
        (old.dns_name, ("10.9.9.9",)),
    }


@pytest.mark.parametrize(
    "changes",
    [
        Changes(create=[a("host-0000.zone-0000.example")]),  # exists
        Changes(delete=[a("nope.zone-0000.example")]),  # missing
        Changes(update_old=[a("nope.zone-0000.example")], update_new=[a("nope.zone-0000.example")]),
        Changes(create=[a("www.zone-0001.example")]),  # another zone
        Changes(create=[a("x.zone-0000.example"), a("x.zone-0000.example", "192.0.2.9")]),  # twice
    ],
)
def test_invalid_changes_apply_nothing(store: FakeStore, changes: Changes) -> None:
    batch = Changes(create=[a("fine.zone-0000.example"), *changes.create], delete=changes.delete)
    batch.update_old, batch.update_new = changes.update_old, changes.update_new
    before = store.records(Z0)
    with pytest.raises(InvalidChangesError) as info:
        store.apply(Z0, batch, writer="r1")
    assert isinstance(info.value, BatchRejectedError)  # the worker splits such a batch
    assert store.records(Z0) == before
    assert store.audit()[-1].outcome == "error"


def test_delete_then_create_same_rrset_in_one_batch(store: FakeStore) -> None:
    old = store.records(Z0)[0]
    store.apply(
        Z0, Changes(delete=[old], create=[Endpoint.new(old.dns_name, "A", ["10.7.7.7"])]), writer="r1"
    )
    assert store.records(Z0)[0].targets == ("10.7.7.7",)


def test_a_conditional_read_answers_unchanged_until_any_write_to_the_zone(store: FakeStore) -> None:
    version, records = store.records_if_changed(Z0)
    assert records == store.peek(Z0)
    assert store.records_if_changed(Z0, seen=version) == (version, None)
    store.acquire_fence(Z0, FenceToken(1, "r0"))  # the fence is not among the records: same version
    assert store.records_if_changed(Z0, seen=version) == (version, None)
    store.apply(Z1, Changes(create=[a("new.zone-0001.example")]), writer="r0")  # another zone
    assert store.records_if_changed(Z0, seen=version) == (version, None)
    store.apply(Z0, Changes(delete=[store.peek(Z0)[0]]), writer="someone")
    changed, records = store.records_if_changed(Z0, seen=version)
    assert changed != version and records == store.peek(Z0)
    store.add_zone(Z0, records)  # replaced, even with the same records: a new version
    assert store.records_if_changed(Z0, seen=changed)[1] == records
    other = FakeStore()  # another store (a restarted server) never matches this one's versions
    other.seed(1, 2)
    assert other.records_if_changed(Z0, seen=store.records_if_changed(Z0)[0])[1] == other.peek(Z0)


def test_a_conditional_read_is_a_gated_call(store: FakeStore) -> None:
    version, _ = store.records_if_changed(Z0)
    store.set_faults(Faults(throttle_next=1))
    with pytest.raises(ThrottledError):
        store.records_if_changed(Z0, seen=version)
    store.set_faults(Faults(fail_zones=frozenset({Z0})))
    with pytest.raises(InjectedError):
        store.records_if_changed(Z0, seen=version)


def test_unknown_zone(store: FakeStore) -> None:
    with pytest.raises(UnknownZoneError):
        store.records("nope.example")
    with pytest.raises(UnknownZoneError):
        store.acquire_fence("nope.example", FenceToken(1, "r1"))


def test_nested_zones_place_names_in_the_most_specific(store: FakeStore) -> None:
    store.add_zone("sub.zone-0000.example")
    with pytest.raises(InvalidChangesError, match="not in zone"):
        store.apply(Z0, Changes(create=[a("x.sub.zone-0000.example")]), writer="r1")
    store.apply("sub.zone-0000.example", Changes(create=[a("x.sub.zone-0000.example")]), writer="w")
    store.apply(Z0, Changes(create=[a("y.zone-0000.example")]), writer="w")
    assert [r.dns_name for r in store.records("sub.zone-0000.example")] == ["x.sub.zone-0000.example"]
    assert "y.zone-0000.example" in {r.dns_name for r in store.records(Z0)}
    assert {e.zone for e in store.audit()[-2:]} == {Z0, "sub.zone-0000.example"}


# ---- fences ----


def test_fence_compare_and_set(store: FakeStore) -> None:
    g1a, g1b, g2b = FenceToken(1, "a"), FenceToken(1, "b"), FenceToken(2, "b")
    store.acquire_fence(Z0, g1a)
    store.acquire_fence(Z0, g1a)  # same token: no-op
    with pytest.raises(FencedError):
        store.acquire_fence(Z0, g1b)  # another writer, same generation
    store.acquire_fence(Z0, g2b)  # newer generation supersedes
    with pytest.raises(FencedError):
        store.acquire_fence(Z0, g1a)  # older generation never comes back
    with pytest.raises(FencedError):
        store.acquire_fence(Z0, FenceToken(1, "b"))  # not even for the same writer
    assert store.fence_of(Z0) == g2b


def test_apply_is_conditional_on_the_exact_fence(store: FakeStore) -> None:
    create = Changes(create=[a("www.zone-0000.example")])
    with pytest.raises(FencedError):
        store.apply(Z0, create, FenceToken(1, "a"), writer="a")  # no fence yet
    store.acquire_fence(Z0, FenceToken(1, "a"))
    store.apply(Z0, create, FenceToken(1, "a"), writer="a")
    store.acquire_fence(Z0, FenceToken(2, "b"))
    with pytest.raises(FencedError):
        store.apply(Z0, Changes(delete=[a("www.zone-0000.example")]), FenceToken(1, "a"), writer="a")
    assert "www.zone-0000.example" in {r.dns_name for r in store.records(Z0)}
    entry = store.audit()[-1]
    assert (entry.op, entry.writer, entry.generation, entry.outcome) == ("apply", "a", 1, "fenced")
    assert entry.fence == "identity=a,generation=1"
    # The fence is no record.
    assert all("fence" not in r.dns_name for r in store.records(Z0))
    assert len(store.records(Z0)) == 3


def test_racing_acquires_let_exactly_one_win() -> None:
    for _ in range(20):
        store = FakeStore()
        store.add_zone("race.example")
        barrier = threading.Barrier(4)
        wins: list[str] = []

        def race(
            who: str,
            store: FakeStore = store,
            barrier: threading.Barrier = barrier,
            wins: list[str] = wins,
        ) -> None:
            barrier.wait(timeout=5)
            try:
                store.acquire_fence("race.example", FenceToken(7, who))
                wins.append(who)
            except FencedError:
                pass

        threads = [threading.Thread(target=race, args=(f"r{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=5)
        assert len(wins) == 1
        assert store.fence_of("race.example") == FenceToken(7, wins[0])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.sampled_from("abc"), st.booleans()), max_size=30))
def test_fence_never_goes_back_and_applies_need_the_current_token(
    ops: list[tuple[int, str, bool]],
) -> None:
    store = FakeStore()
    store.add_zone("p.example")
    current: FenceToken | None = None
    for generation, who, is_apply in ops:
        token = FenceToken(generation, who)
        if is_apply:
            try:
                store.apply("p.example", Changes(), token, writer=who)
                assert token == current
            except FencedError:
                assert token != current
        else:
            try:
                store.acquire_fence("p.example", token)
                assert current is None or token == current or token.generation > current.generation
                current = token
            except FencedError:
                assert current is not None and token != current and token.generation <= current.generation
        assert store.fence_of("p.example") == current


# ---- audit ----


def test_audit_records_store_writes_with_clocks() -> None:
    clock = FakeClock()
    store = FakeStore(
        limits=Limits(latency=0.5), clock=clock, wall_clock=lambda: 1e9 + clock.now, sleep=clock.sleep
    )
    store.add_zone("z.example")
    store.acquire_fence("z.example", FenceToken(3, "a"))
    store.apply("z.example", Changes(create=[a("w.z.example")]), FenceToken(3, "a"), writer="a")
    fence, write = store.audit()
    assert (fence.op, fence.outcome, write.op, write.outcome, write.changes) == (
        "fence",
        "ok",
        "apply",
        "ok",
        1,
    )
    assert (write.start, write.end, write.end_wall) == (100.5, 101.0, 1e9 + 101.0)
    assert store.audit(since=1) == [write]
    assert AuditEntry.from_json(write.to_json()) == write


# ---- faults ----


def test_injected_throttling_next_n_calls(store: FakeStore) -> None:
    store.set_faults(Faults(throttle_next=2))
    for _ in range(2):
        with pytest.raises(ThrottledError):
            store.records(Z0)
    assert store.faults.throttle_next == 0
    store.records(Z0)
    store.set_faults(Faults(throttle_ratio=1.0))
    with pytest.raises(ThrottledError):
        store.zones()


def test_injected_failure_of_one_record(store: FakeStore) -> None:
    store.set_faults(Faults(fail_records=frozenset({"bad.zone-0000.example"})))
    with pytest.raises(BatchRejectedError, match=r"bad\.zone-0000\.example"):
        store.apply(Z0, Changes(create=[a("good.zone-0000.example"), a("bad.zone-0000.example")]), writer="r")
    store.apply(Z0, Changes(create=[a("good.zone-0000.example")]), writer="r")
    assert store.audit()[-2].outcome == "error"
    assert "good.zone-0000.example" in {r.dns_name for r in store.records(Z0)}


def test_injected_failure_of_a_zone(store: FakeStore) -> None:
    store.set_faults(Faults.from_json({"failZones": [Z1]}))
    with pytest.raises(InjectedError):
        store.records(Z1)
    with pytest.raises(InjectedError):
        store.apply(Z1, Changes(create=[a("x.zone-0001.example")]), writer="r")
    with pytest.raises(ProviderError):
        store.all_records()
    assert len(store.records(Z0)) == 2


def test_faults_and_limits_json() -> None:
    faults = Faults(throttle_next=1, throttle_ratio=0.5, fail_records=frozenset({"x.example"}), seed=4)
    assert Faults.from_json(faults.to_json()) == faults
    with pytest.raises(ValueError):
        Faults.from_json({"nope": 1})
    limits = Limits().merged({"latency": 0.02, "rateLimit": 10, "concurrency": 4})
    assert limits == Limits(latency=0.02, rate=10, concurrency=4)
    assert limits.merged({"rateLimit": None}).rate is None
    with pytest.raises(ValueError):
        Limits().merged({"concurrency": 0})


# ---- limits ----


def test_rate_limit_token_bucket_per_client() -> None:
    clock = FakeClock()
    store = FakeStore(limits=Limits(rate=2, burst=2), clock=clock, sleep=clock.sleep)
    store.add_zone("z.example")
    store.zones("a")
    store.zones("a")
    with pytest.raises(ThrottledError) as info:
        store.zones("a")
    assert info.value.retry_after == pytest.approx(0.5)
    store.zones("b")  # another client has its own bucket
    clock.now += 0.5
    store.zones("a")
    with pytest.raises(ThrottledError):
        store.zones("a")


def test_latency_is_slept_per_call() -> None:
    clock = FakeClock()
    store = FakeStore(limits=Limits(latency=0.02), clock=clock, sleep=clock.sleep)
    store.add_zone("z.example")
    store.zones("a")
    store.records("z.example", "a")
    assert clock.slept == [0.02, 0.02]


def _in_threads(store: FakeStore, clients: list[str]) -> float:
    """Call zones() once per client, all at once; re-raise the first error; return the elapsed time."""
    errors: list[BaseException] = []

    def call(client: str) -> None:
        try:
            store.zones(client)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(c,)) for c in clients]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    if errors:
        raise errors[0]
    return time.monotonic() - began


def test_concurrency_limit_serialises_one_client() -> None:
    latency = Latency()
    store = FakeStore(limits=Limits(latency=0.02, concurrency=1), sleep=latency)
    assert _in_threads(store, ["a", "a", "a"]) >= 0.06
    assert latency.most == 1


def test_concurrency_limit_lets_clients_run_together() -> None:
    latency = Latency()
    latency.meet = threading.Barrier(3)
    store = FakeStore(limits=Limits(latency=0.001, concurrency=1), sleep=latency)
    _in_threads(store, ["a", "b", "c"])
    assert latency.most == 3


def test_concurrency_limit_throttles_after_queue_timeout() -> None:
    latency = Latency()
    latency.hold = 1
    store = FakeStore(limits=Limits(latency=0.001, concurrency=1, queue_timeout=0.05), sleep=latency)
    holder = threading.Thread(target=store.zones, args=("a",))
    holder.start()
    try:
        assert latency.entered.wait(timeout=5)
        with pytest.raises(ThrottledError, match="in flight"):
            store.zones("a")
        store.zones("b")  # another client is not held up
    finally:
        latency.release.set()
        holder.join(timeout=5)


# ---- the in-process provider ----


@pytest.mark.anyio
async def test_fake_provider_speaks_the_protocol(store: FakeStore) -> None:
    provider = FakeProvider(store, identity="replica-0")
    assert isinstance(provider, Provider)
    assert await provider.zones() == store.zones()
    token = FenceToken(5, "replica-0")
    await provider.acquire_fence(Z0, token)
    await provider.apply(Z0, Changes(create=[a("www.zone-0000.example")]), token)
    assert "www.zone-0000.example" in {r.dns_name for r in await provider.records(Z0)}
    other = FakeProvider(store, identity="replica-1")
    with pytest.raises(FencedError):
        await other.acquire_fence(Z0, FenceToken(5, "replica-1"))
    write = store.audit()[-1]
    assert (write.writer, write.generation, write.outcome) == ("replica-1", 5, "fenced")
    with anyio.fail_after(2):
        await provider.close()
