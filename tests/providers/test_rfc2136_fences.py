"""The rfc2136 provider's fence against a real BIND 9: the token TXT record, compare-and-set, stale writers.

As in test_rfc2136.py, every assertion about the zone is checked against the server itself.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import dns.update
import pytest

from shardsync.endpoint import Changes, Endpoint
from shardsync.providers.base import FencedError, FenceToken, RecordsRejectedError
from shardsync.providers.rfc2136.provider import Rfc2136Provider
from tests.bind import BindServer
from tests.providers.rfc2136_helpers import make_provider, serial, zone_dump

pytestmark = [pytest.mark.bind, pytest.mark.anyio]


@pytest.fixture
def provider(bind_server: BindServer) -> Iterator[Rfc2136Provider]:
    yield make_provider(bind_server)


async def test_acquire_fence_writes_the_token_and_hides_it(
    provider: Rfc2136Provider, bind_server: BindServer, fresh_zone: str
) -> None:
    zone = fresh_zone
    token = FenceToken(generation=3, identity="replica-0")
    assert await provider.read_fence(zone) is None
    await provider.acquire_fence(zone, token)
    assert bind_server.texts(f"_shardsync-fence.{zone}", "TXT") == {'"identity=replica-0,generation=3"'}
    assert await provider.read_fence(zone) == token
    assert all(not e.dns_name.startswith("_shardsync-fence") for e in await provider.records(zone))
    # Acquiring what we already hold writes nothing.
    before = serial(bind_server, zone)
    await provider.acquire_fence(zone, token)
    assert serial(bind_server, zone) == before
    # A fenced write goes through while the token holds.
    await provider.apply(zone, Changes(create=[Endpoint.new(f"w.{zone}", "A", ["10.0.0.1"])]), token)
    assert bind_server.texts(f"w.{zone}", "A") == {"10.0.0.1"}
    # The fence name is off limits to apply().
    with pytest.raises(RecordsRejectedError, match="fence"):
        await provider.apply(zone, Changes(create=[Endpoint.new(f"_shardsync-fence.{zone}", "TXT", ["x"])]))


async def test_fence_prefix_is_configurable(bind_server: BindServer, fresh_zone: str) -> None:
    custom = make_provider(bind_server, fence_prefix="_owner-lock")
    await custom.acquire_fence(fresh_zone, FenceToken(1, "r"))
    assert bind_server.texts(f"_owner-lock.{fresh_zone}", "TXT") == {'"identity=r,generation=1"'}
    assert bind_server.rrset(f"_shardsync-fence.{fresh_zone}", "TXT") is None


async def test_acquire_refuses_same_or_newer_generation_of_another_writer(
    provider: Rfc2136Provider, fresh_zone: str
) -> None:
    zone = fresh_zone
    await provider.acquire_fence(zone, FenceToken(5, "a"))
    with pytest.raises(FencedError, match="held by a at generation 5"):
        await provider.acquire_fence(zone, FenceToken(5, "b"))
    with pytest.raises(FencedError):
        await provider.acquire_fence(zone, FenceToken(4, "b"))
    with pytest.raises(FencedError):
        await provider.acquire_fence(zone, FenceToken(4, "a"))  # our own older incarnation
    await provider.acquire_fence(zone, FenceToken(6, "b"))
    assert await provider.read_fence(zone) == FenceToken(6, "b")


async def test_stale_owner_write_is_refused_and_changes_nothing(
    bind_server: BindServer, fresh_zone: str
) -> None:
    zone = fresh_zone
    old_owner, new_owner = make_provider(bind_server), make_provider(bind_server)
    old_token, new_token = FenceToken(1, "replica-0"), FenceToken(2, "replica-1")
    await old_owner.acquire_fence(zone, old_token)
    await old_owner.apply(zone, Changes(create=[Endpoint.new(f"www.{zone}", "A", ["10.0.0.1"])]), old_token)
    await new_owner.acquire_fence(zone, new_token)

    before = zone_dump(bind_server, zone)
    stale = Changes(
        create=[Endpoint.new(f"n{i}.{zone}", "A", ["10.9.9.9"]) for i in range(120)],
        delete=[Endpoint.new(f"www.{zone}", "A", ["10.0.0.1"])],
    )
    with pytest.raises(FencedError, match="no longer holds identity=replica-0,generation=1"):
        await old_owner.apply(zone, stale, old_token)
    assert zone_dump(bind_server, zone) == before  # not one record (nor the serial) changed
    assert bind_server.texts(f"www.{zone}", "A") == {"10.0.0.1"}

    await new_owner.apply(zone, stale, new_token)
    assert bind_server.rrset(f"www.{zone}", "A") is None
    assert bind_server.texts(f"n119.{zone}", "A") == {"10.9.9.9"}


async def test_fence_taken_between_batches_stops_the_rest(
    bind_server: BindServer, fresh_zone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    zone = fresh_zone
    old_owner = make_provider(bind_server, batch_change_size=10)
    new_owner = make_provider(bind_server)
    old_token = FenceToken(1, "replica-0")
    await old_owner.acquire_fence(zone, old_token)
    send = old_owner._send_batch

    async def send_then_lose_the_zone(*args: object) -> None:
        await send(*args)  # type: ignore[arg-type]
        if args[3] == 0:  # the new owner takes the zone right after our first message
            await new_owner.acquire_fence(zone, FenceToken(2, "replica-1"))

    monkeypatch.setattr(old_owner, "_send_batch", send_then_lose_the_zone)
    eps = [Endpoint.new(f"n{i:02d}.{zone}", "A", ["10.0.0.1"]) for i in range(30)]
    with pytest.raises(FencedError, match="1 of 3 message"):
        await old_owner.apply(zone, Changes(create=eps), old_token)
    written = {e.dns_name for e in await new_owner.records(zone) if e.record_type == "A"}
    assert written == {e.dns_name for e in eps[:10]}


async def test_fenced_write_without_a_fence_in_the_zone_is_refused(
    provider: Rfc2136Provider, bind_server: BindServer, fresh_zone: str
) -> None:
    with pytest.raises(FencedError):
        await provider.apply(
            fresh_zone,
            Changes(create=[Endpoint.new(f"x.{fresh_zone}", "A", ["10.0.0.1"])]),
            FenceToken(1, "nobody-acquired"),
        )
    assert bind_server.rrset(f"x.{fresh_zone}", "A") is None


async def test_cas_race_from_the_same_read_has_exactly_one_winner(
    bind_server: BindServer, fresh_zone: str
) -> None:
    zone = fresh_zone
    racers = [make_provider(bind_server) for _ in range(2)]
    expected: FenceToken | None = None  # both read "no fence", then both try to take it
    for generation in range(1, 11):
        tokens = [FenceToken(generation, f"r{i}") for i in range(len(racers))]
        outcomes: dict[str, str] = {}

        async def race(
            p: Rfc2136Provider, token: FenceToken, seen: FenceToken | None, outcomes: dict[str, str]
        ) -> None:
            try:
                await p.compare_and_set_fence(zone, seen, token)
                outcomes[token.identity] = "won"
            except FencedError:
                outcomes[token.identity] = "fenced"

        async with anyio.create_task_group() as tg:
            for p, token in zip(racers, tokens, strict=True):
                tg.start_soon(race, p, token, expected, outcomes)
        assert sorted(outcomes.values()) == ["fenced", "won"], outcomes
        winner = next(t for t in tokens if outcomes[t.identity] == "won")
        assert await racers[0].read_fence(zone) == winner
        assert bind_server.texts(f"_shardsync-fence.{zone}", "TXT") == {f'"{winner.to_text()}"'}
        expected = winner


async def test_concurrent_acquires_of_one_generation_have_exactly_one_winner(
    bind_server: BindServer, fresh_zone: str
) -> None:
    zone = fresh_zone
    racers = [make_provider(bind_server) for _ in range(4)]
    won: list[str] = []

    async def acquire(p: Rfc2136Provider, identity: str) -> None:
        try:
            await p.acquire_fence(zone, FenceToken(7, identity))
            won.append(identity)
        except FencedError:
            pass

    async with anyio.create_task_group() as tg:
        for i, p in enumerate(racers):
            tg.start_soon(acquire, p, f"r{i}")
    assert len(won) == 1
    assert await racers[0].read_fence(zone) == FenceToken(7, won[0])


async def test_garbage_in_the_fence_is_replaced(
    provider: Rfc2136Provider, bind_server: BindServer, fresh_zone: str
) -> None:
    zone = fresh_zone
    msg = dns.update.UpdateMessage(zone + ".")
    msg.use_tsig(bind_server.tsig_key())
    msg.add(f"_shardsync-fence.{zone}.", 60, "TXT", '"not a token"')
    assert (await anyio.to_thread.run_sync(provider._exchange, "update", zone, msg)).rcode() == 0
    await provider.acquire_fence(zone, FenceToken(1, "r"))
    assert bind_server.texts(f"_shardsync-fence.{zone}", "TXT") == {'"identity=r,generation=1"'}
