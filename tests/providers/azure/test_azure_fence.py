"""The azure provider's fence, tested as the README states it, through the SDK against the contract fake
(tests/cloudfakes/azure.py): Azure DNS has no transaction across record sets, so the fence record set
`_shardsync-fence` guards only itself. Every batch of record-set writes begins with a bump of the fence on
the etag of our last write of it; a peer that took the fence changed that etag.

Proved here, by the fake's audit of every write: a stale writer whose fence etag is gone is refused before
it writes anything of its batch, and cannot take the fence back; two first acquisitions cannot both win;
and the window the README states exists: a writer that bumped the fence before a peer took it still writes
the rest of that batch (at most a batch of record sets, fewer when it stalled past FENCE_MAX_AGE, after
which it bumps again before its next write), and nothing after it.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from shardsync.providers.azure.provider import AzureProvider
from shardsync.providers.base import FencedError, FenceToken
from shardsync.providers.fence_record import fence_value
from shardsync.records.endpoint import Changes, Endpoint
from tests.cloudfakes.azure import AzureFake, Entry
from tests.cloudfakes.tls import LoopbackCert
from tests.providers.azure.helpers import ZONE, provider, stored
from tests.providers.fake_helpers import FakeClock

FENCE = "_shardsync-fence"
OLD, NEW = FenceToken(1, "replica-a"), FenceToken(2, "replica-b")


def records(*names: str) -> Changes:
    return Changes(create=[Endpoint.new(f"{n}.{ZONE}", "A", ["192.0.2.1"]) for n in names])


def after_takeover(fake: AzureFake) -> list[Entry]:
    """The writes of replica a (client-1) after replica b (client-2) took the fence."""
    taken = next(i for i, e in enumerate(fake.audit) if e.client == "client-2" and e.name == FENCE and e.ok)
    return [e for e in fake.audit[taken + 1 :] if e.client == "client-1"]


def test_a_stale_writer_is_refused_before_it_writes_anything(
    fake: AzureFake, cert: LoopbackCert, tmp_path: Path
) -> None:
    async def main() -> None:
        a = provider(tmp_path, fake, cert, "client-1")
        b = provider(tmp_path, fake, cert, "client-2")
        await a.acquire_fence(ZONE, OLD)
        await a.apply(ZONE, records("one"), OLD)
        await b.acquire_fence(ZONE, NEW)  # the takeover: a's etag of the fence is gone
        with pytest.raises(FencedError):
            await a.apply(ZONE, records("two", "three"), OLD)
        with pytest.raises(FencedError):
            await a.acquire_fence(ZONE, OLD)  # and it cannot take the fence back
        await b.apply(ZONE, records("four"), NEW)
        await a.close()
        await b.close()

    anyio.run(main)
    assert {name for _, name in stored(fake)} == {"one", "four"}
    late = after_takeover(fake)
    assert [(e.name, e.status) for e in late if e.method == "PUT"] == [(FENCE, 412)]  # the bump, refused
    fence = fake.record_sets(ZONE)[("TXT", FENCE)]["properties"]["TXTRecords"]
    assert fence == [{"value": [fence_value(NEW)]}]


def test_two_first_acquisitions_cannot_both_win(fake: AzureFake, cert: LoopbackCert, tmp_path: Path) -> None:
    # Both read no fence; each creates it with If-None-Match: *, and the second create is refused (412).
    t1, t2 = FenceToken(1, "replica-a"), FenceToken(1, "replica-b")

    async def main() -> list[bool]:
        p1 = provider(tmp_path, fake, cert, "client-1")
        p2 = provider(tmp_path, fake, cert, "client-2")
        outcomes: list[bool] = []

        async def take(p: AzureProvider, token: FenceToken) -> None:
            try:
                await p.acquire_fence(ZONE, token)
                outcomes.append(True)
            except FencedError:
                outcomes.append(False)

        async with anyio.create_task_group() as tg:
            tg.start_soon(take, p1, t1)
            tg.start_soon(take, p2, t2)
        await p1.close()
        await p2.close()
        return outcomes

    assert sorted(anyio.run(main)) == [False, True]
    creates = [e for e in fake.writes() if e.name == FENCE and e.if_none_match == "*"]
    assert len([e for e in creates if e.ok]) == 1


@pytest.mark.parametrize(("stall", "landed"), [(0.0, 2), (10.0, 1)])
def test_the_stated_window_the_rest_of_a_bumped_batch_lands_and_nothing_after(
    fake: AzureFake, cert: LoopbackCert, tmp_path: Path, stall: float, landed: int
) -> None:
    # Replica a bumps the fence for a batch of two record sets; b takes the fence before a's first record
    # write. The rest of a's batch lands (the window), its next batch is refused at its bump. Stalled past
    # FENCE_MAX_AGE (stall=10 s on its clock), a bumps again before its second write: one write lands.
    clock = FakeClock()

    async def main() -> None:
        a = provider(tmp_path, fake, cert, "client-1")
        a.batch_writes, a.fence_max_age, a._clock = 2, 3.0, clock
        b = provider(tmp_path, fake, cert, "client-2")
        await a.acquire_fence(ZONE, OLD)
        taken = False

        async def takeover_then_go_on(kind: str) -> None:
            nonlocal taken
            if kind == "apply" and not taken:
                taken = True
                await b.acquire_fence(ZONE, NEW)
                clock.now += stall

        a.pacer = takeover_then_go_on
        with pytest.raises(FencedError):
            await a.apply(ZONE, records("r1", "r2", "r3", "r4"), OLD)
        await a.close()
        await b.close()

    anyio.run(main)
    late = after_takeover(fake)
    assert [e.name for e in late if e.ok] == ["r1", "r2"][:landed]  # the window: the rest of one batch
    assert (late[-1].name, late[-1].status) == (FENCE, 412)  # then refused before anything more
    assert {name for _, name in stored(fake)} == set(["r1", "r2"][:landed])
