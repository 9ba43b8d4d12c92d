"""An in-process cluster for the sharding loop tests: the embedded API server, one shared FakeStore, and
several replicas ("nodes") in this one process, each with its own Kube client (User-Agent carrying its
identity, so the API server can cut it off alone), its own FakeProvider and Worker, and an ownership layer.

A churn task keeps changing one record per zone, so owners keep writing and the store's audit shows who
wrote what when; a sampler records, every few milliseconds, which nodes could write which zone.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from shardsync import __version__
from shardsync.kube.client import Kube
from shardsync.local.apiserver import ApiServer
from shardsync.ownership.active_passive import ActivePassiveOwnership
from shardsync.ownership.sharded import ShardedOwnership
from shardsync.pacing.notify import Notifier
from shardsync.providers.fake.limits import Limits
from shardsync.providers.fake.provider import FakeProvider
from shardsync.providers.fake.store import FakeStore
from shardsync.reconcile.worker import Worker, WorkerOptions
from shardsync.records.desired import DesiredIndex
from shardsync.records.endpoint import RESOURCE_LABEL, Endpoint
from shardsync.records.registry import TxtRegistry
from shardsync.sharding.site import Site
from shardsync.sharding.timings import Timings

NAMESPACE = "default"
INSTANCE = "dns"
LEASE = 3
RENEW = 0.5
SETTLE = 0.3
OWNER_ID = "shard"


def user_agent(identity: str) -> str:
    return f"shardsync/{__version__} ({identity})"


def site(kube: Kube, identity: str, weight: int = 1, restart_grace: float = 30.0) -> Site:
    timings = Timings.derive(LEASE, RENEW, SETTLE, restart_grace)
    return Site(kube, NAMESPACE, INSTANCE, identity, timings, weight=weight)


@dataclass(eq=False)
class Node:
    """One replica: what the ownership port's `Host` asks for (worker, zones, zones_changed), plus its
    handles."""

    identity: str
    kube: Kube
    worker: Worker
    ownership: ShardedOwnership | ActivePassiveOwnership
    zones: set[str]
    zones_changed: Notifier = field(default_factory=Notifier)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)

    @property
    def sharded(self) -> ShardedOwnership:
        assert isinstance(self.ownership, ShardedOwnership)
        return self.ownership

    def writing(self) -> set[str]:
        """Zones this node would write now."""
        if not self.ownership.may_write():
            return set()
        return set(self.worker.statuses)

    def set_zones(self, zones: set[str]) -> None:
        self.zones = set(zones)
        self.zones_changed.notify()


@dataclass
class Cluster:
    apiserver: ApiServer
    store: FakeStore
    desired: DesiredIndex
    zones: list[str]
    tg: anyio.abc.TaskGroup
    nodes: dict[str, Node] = field(default_factory=dict)
    admin: Kube | None = None
    # (monotonic time, identity, frozenset of zones it could write), appended by the sampler
    samples: list[tuple[float, dict[str, frozenset[str]]]] = field(default_factory=list)

    async def add(
        self,
        identity: str,
        *,
        weight: int = 1,
        restart_grace: float = 30.0,
        sharding: bool = True,
    ) -> Node:
        kube = Kube(self.apiserver.api_client(user_agent=user_agent(identity)))
        where = site(kube, identity, weight, restart_grace)
        ownership: ShardedOwnership | ActivePassiveOwnership
        ownership = ShardedOwnership(where) if sharding else ActivePassiveOwnership(where)
        worker = Worker(
            FakeProvider(self.store, identity),
            TxtRegistry(owner_id=OWNER_ID),
            self.desired,
            WorkerOptions(interval=1.0, event_delay=0.0, concurrency=4, max_backoff=2.0),
            may_write=ownership.may_write,
            on_fenced=ownership.on_fenced,
        )
        node = Node(identity, kube, worker, ownership, set(self.zones))
        self.nodes[identity] = node
        self.tg.start_soon(self._run, node)
        return node

    async def _run(self, node: Node) -> None:
        try:
            with node.scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(node.worker.run)
                    await node.ownership.run(node)
                    tg.cancel_scope.cancel()
        finally:
            node.kube.api_client.close()  # type: ignore[no-untyped-call]
            node.done.set()

    async def stop(self, node: Node, within: float = 15.0) -> None:
        """A graceful stop (SIGTERM): the ownership's stop, then the node's tasks end."""
        with anyio.fail_after(within):
            await node.ownership.stop(node)
            node.scope.cancel()
            await node.done.wait()
        del self.nodes[node.identity]

    async def crash(self, node: Node) -> None:
        """kill -9, as far as one process can: every task of the node ends at once, nothing released."""
        node.scope.cancel()
        with anyio.fail_after(10):
            await node.done.wait()
        del self.nodes[node.identity]

    def sharded(self) -> list[ShardedOwnership]:
        return [n.sharded for n in self.nodes.values()]

    def writers(self) -> dict[str, list[str]]:
        """zone -> nodes that would write it now."""
        out: dict[str, list[str]] = {zone: [] for zone in self.zones}
        for node in self.nodes.values():
            for zone in node.writing():
                out.setdefault(zone, []).append(node.identity)
        return out

    def settled(self) -> bool:
        """Every node on the same generation, listing exactly the live nodes, and every zone written by
        exactly its owner in that generation."""
        views = [o.view for o in self.sharded()]
        if not views or any(v is None for v in views):
            return False
        generations = {v.generation for v in views if v is not None}
        view = views[0]
        if len(generations) != 1 or view is None or view.identities != set(self.nodes):
            return False
        return all(writers == [view.owner_of(zone)] for zone, writers in self.writers().items())

    def owners(self) -> dict[str, str]:
        view = self.sharded()[0].view
        assert view is not None
        return {zone: str(view.owner_of(zone)) for zone in self.zones}

    async def churn(self, period: float = 0.02, seed: int = 1) -> None:
        """Change one zone's record every `period`, so its owner writes."""
        rng = random.Random(seed)
        n = 0
        while True:
            zone = rng.choice(self.zones)
            n += 1
            self.set_record(zone, f"10.0.{n // 250 % 250}.{n % 250 + 1}")
            await anyio.sleep(period)

    def set_record(self, zone: str, ip: str) -> None:
        key = f"service/default/{zone}"
        ep = Endpoint.new(f"www.{zone}", "A", [ip], labels={RESOURCE_LABEL: key})
        touched = self.desired.set_object(key, [ep])
        for node in list(self.nodes.values()):
            node.worker.mark_dirty(touched)

    async def sample(self, period: float = 0.01) -> None:
        while True:
            snap = {i: frozenset(n.writing()) for i, n in self.nodes.items()}
            self.samples.append((time.monotonic(), snap))
            await anyio.sleep(period)

    def sampled_overlaps(self) -> list[tuple[float, str, list[str]]]:
        found = []
        for at, snap in self.samples:
            by_zone: dict[str, list[str]] = {}
            for identity, zones in snap.items():
                for zone in zones:
                    by_zone.setdefault(zone, []).append(identity)
            found += [(at, zone, ids) for zone, ids in by_zone.items() if len(ids) > 1]
        return found

    def longest_unowned(self, since: float = -math.inf) -> float:
        """The longest stretch (seconds) any zone had no writer, from the samples after `since`."""
        gap_start: dict[str, float] = {}
        longest = 0.0
        for at, snap in self.samples:
            if at < since:
                continue
            covered = set().union(*snap.values()) if snap else set()
            for zone in self.zones:
                if zone in covered:
                    start = gap_start.pop(zone, None)
                    if start is not None:
                        longest = max(longest, at - start)
                else:
                    gap_start.setdefault(zone, at)
        return longest


@asynccontextmanager
async def cluster(
    apiserver: ApiServer, zones: int = 60, latency: float = 0.002, churn: bool = True
) -> AsyncIterator[Cluster]:
    store = FakeStore(limits=Limits(latency=latency))
    names = store.seed(zones, 0)
    desired = DesiredIndex(names)
    async with anyio.create_task_group() as tg:
        c = Cluster(apiserver, store, desired, names, tg)
        admin = c.admin = Kube(apiserver.api_client(user_agent="test-admin"))
        for zone in names:
            c.set_record(zone, "10.255.0.1")
        if churn:
            tg.start_soon(c.churn)
        tg.start_soon(c.sample)
        try:
            yield c
        finally:
            for node in list(c.nodes.values()):
                node.scope.cancel()
            tg.cancel_scope.cancel()
    admin.api_client.close()  # type: ignore[no-untyped-call]


async def wait_for(cond: Callable[[], bool], within: float, what: str = "", poll: float = 0.02) -> float:
    """Wait until `cond()`; returns the seconds it took; fails after `within` seconds."""
    start = time.monotonic()
    try:
        with anyio.fail_after(within):
            while not cond():  # noqa: ASYNC110 - polling state owned by other tasks and threads
                await anyio.sleep(poll)
    except TimeoutError:
        raise AssertionError(f"not within {within}s: {what}") from None
    return time.monotonic() - start


def describe(c: Cluster) -> dict[str, Any]:
    """For assertion messages."""
    return {
        i: {
            "gen": n.sharded.view.generation
            if isinstance(n.ownership, ShardedOwnership) and n.sharded.view
            else None,
            "writing": len(n.writing()),
            "may_write": n.ownership.may_write(),
        }
        for i, n in c.nodes.items()
    }
