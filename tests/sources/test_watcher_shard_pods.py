"""The pod kind on a sharded replica, against the embedded API server: it keeps only the Pods whose names
reach the zones it holds (none of those that publish nothing), and with the service kind one informer of
Pods serves both (sources.watcher, sources.shard_cache): a Pod either kind needs stays, what neither needs
goes, and a Pod read back for one kind is seen by the other.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from shardsync.local.apiserver import ApiServer
from shardsync.sources.watcher import WatchOptions
from tests.waits import eventually

from .watching import HOSTNAME, OTHER, ZONE, blocking, endpoint_slice, pod, service, watching

pytestmark = pytest.mark.anyio

TARGET = "external-dns.kubernetes.io/target"
SHARDED = WatchOptions(sources=("pod",), shard_hint_wait=5.0)
BOTH = WatchOptions(sources=("service", "pod"), shard_hint_wait=5.0)


def named(name: str, app: str, zone: str, address: str) -> dict[str, Any]:
    """A Pod publishing `<name>.<zone>` → `address` (its target annotation: no Node needed)."""
    return pod(name, app, **{HOSTNAME: f"{name}.{zone}", TARGET: address})


def headless(name: str, zone: str) -> dict[str, Any]:
    return service(name, {HOSTNAME: f"{name}.{zone}"}, type_="ClusterIP", clusterIP="None")


async def create(h: Any, *bodies: dict[str, Any]) -> None:
    for body in bodies:
        if body["kind"] == "Pod":
            await blocking(h.core.create_namespaced_pod, "default", body)
        elif body["kind"] == "Service":
            await blocking(h.core.create_namespaced_service, "default", body)
        else:
            await blocking(h.discovery.create_namespaced_endpoint_slice, "default", body)


async def test_a_sharded_replica_keeps_the_pods_of_its_zones_and_none_that_publish_nothing(
    apiserver: ApiServer,
) -> None:
    async with watching(apiserver, WatchOptions(sources=("pod",)), wait_synced=False) as seeding:
        await create(
            seeding,
            named("p", "x", OTHER, "192.0.2.1"),
            named("q", "x", ZONE, "192.0.2.2"),
            pod("plain", "x"),  # no names: publishes nothing
        )
    async with watching(apiserver, SHARDED, restricted=True, expect=(OTHER,)) as h:
        cache = h.watcher.informers["pods"].cache
        assert set(cache) == {"default/p"}
        assert h.records(OTHER) == {("p.other.org", "A"): ("192.0.2.1",)}

        h.desired.keep(ZONE)  # a sweep reads back the Pods whose names reach it
        await eventually(lambda: h.desired.ready(ZONE))
        assert h.records(ZONE) == {("q.ex.com", "A"): ("192.0.2.2",)}
        assert set(cache) == {"default/p", "default/q"}

        h.desired.expect((ZONE,))  # OTHER released: its Pod is forgotten
        await eventually(lambda: set(cache) == {"default/q"})
        # A Pod annotated later arrives by the watch once its names reach a zone held here.
        patch = {"metadata": {"annotations": {HOSTNAME: "plain.ex.com", TARGET: "192.0.2.3"}}}
        await blocking(h.core.patch_namespaced_pod, "plain", "default", patch)
        await h.settle({("q.ex.com", "A"): ("192.0.2.2",), ("plain.ex.com", "A"): ("192.0.2.3",)})


async def test_one_pod_informer_keeps_what_either_kind_needs_and_shows_the_service_kind_what_it_reads_back(
    apiserver: ApiServer,
) -> None:
    async with watching(apiserver, WatchOptions(sources=("pod",)), wait_synced=False) as seeding:
        await create(
            seeding,
            pod("a-0", "a"),
            named("q", "a", ZONE, "192.0.2.2"),  # a Pod of Service a (OTHER) whose own name is in ZONE
            named("p", "x", OTHER, "192.0.2.1"),
            named("t", "d", ZONE, "192.0.2.4"),  # of Service d, created later in OTHER
            pod("s", "nobody"),
            endpoint_slice("a-x", "a", ("a-0", "10.0.0.1", True), ("q", "10.0.0.2", True)),
            headless("a", OTHER),
        )
    async with watching(apiserver, BOTH, restricted=True, expect=(OTHER,)) as h:
        cache = h.watcher.informers["pods"].cache
        # Service a's Pods (q too, though its own name is another replica's) and the Pod placed here.
        assert set(cache) == {"default/a-0", "default/q", "default/p"}
        assert h.records(OTHER) == {
            ("a.other.org", "A"): ("10.0.0.1", "192.0.2.2"),  # a headless Service's Pods' target wins
            ("p.other.org", "A"): ("192.0.2.1",),
        }
        h.desired.keep(ZONE)  # q is translated again from the cache; t is swept back
        await eventually(lambda: h.desired.ready(ZONE))
        assert h.records(ZONE) == {("q.ex.com", "A"): ("192.0.2.2",), ("t.ex.com", "A"): ("192.0.2.4",)}
        assert "default/s" not in cache

        # Service d, created here, reads t: swept back for the pod kind, it is seen by the service kind too.
        await create(h, endpoint_slice("d-x", "d", ("t", "10.0.0.4", True)), headless("d", OTHER))
        await h.settle({**h.records(OTHER), ("d.other.org", "A"): ("192.0.2.4",)}, zone=OTHER)

        h.desired.expect((ZONE,))  # OTHER released: what only its Services and Pods needed goes
        await eventually(lambda: set(cache) == {"default/q", "default/t"})
        assert h.records(ZONE) == {("q.ex.com", "A"): ("192.0.2.2",), ("t.ex.com", "A"): ("192.0.2.4",)}


@pytest.mark.parametrize("seed", [1, 2])
async def test_after_any_churn_both_kinds_records_are_those_of_a_replica_keeping_everything(
    apiserver: ApiServer, seed: int
) -> None:
    """Services and Pods (some placed by their own names) created, relabelled, renamed and deleted while
    the held zones change: once quiet, a sharded watcher running both kinds agrees with an unsharded one."""
    rng = random.Random(seed)
    apps = ("a0", "a1")
    async with watching(apiserver, BOTH, restricted=True, expect=(OTHER,)) as h:
        pods: set[str] = set()
        held = {OTHER}
        for step in range(50):
            op = rng.choice(("service", "pod", "pod", "rename", "relabel", "unpod", "zones"))
            if op == "service":
                name = f"s{step}"
                body = headless(name, rng.choice((ZONE, OTHER)))
                body["spec"]["selector"] = {"app": rng.choice(apps)}
                addresses = [(p, f"10.1.{step}.{i + 1}", True) for i, p in enumerate(sorted(pods)[:3])]
                await create(h, endpoint_slice(f"{name}-x", name, *addresses), body)
            elif op == "pod":
                name = f"p{step}"
                body = (
                    named(name, rng.choice(apps), rng.choice((ZONE, OTHER)), f"192.0.2.{step}")
                    if rng.random() < 0.6
                    else pod(name, rng.choice(apps))
                )
                await create(h, body)
                pods.add(name)
            elif op == "rename" and pods:
                zone = rng.choice((ZONE, OTHER))
                patch = {"metadata": {"annotations": {HOSTNAME: f"r{step}.{zone}", TARGET: "192.0.2.200"}}}
                await blocking(h.core.patch_namespaced_pod, rng.choice(sorted(pods)), "default", patch)
            elif op in ("relabel", "unpod"):
                await h.churn_pod(op, pods, rng, apps)
            elif op == "zones":
                held = set(rng.choice(([ZONE], [OTHER], [ZONE, OTHER])))
                h.hold(held)
        async with watching(apiserver, WatchOptions(sources=("service", "pod"))) as everything:
            await h.agrees_with(everything, held)
            firsts = {name[0] for z in held for name, _ in h.records(z)}
            assert "s" in firsts and firsts & {"p", "r"}  # records of Services and of Pods
