"""Taking office against the embedded API server: two replicas' watchers and coordinator candidates, an
invalid DNSEndpoint that exists before they start (so both have synced their sources before any coordinator
exists), its Warning Event posted and its status.observedGeneration written as soon as one is elected, and
again by the other replica after a failover, without waiting for the periodic status sweep."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from kubernetes import client

from shardsync.kube.client import Kube
from shardsync.kube.events import EventRecorder
from shardsync.local.apiserver import ApiServer
from shardsync.manifests import load_crd
from shardsync.records.desired import DesiredIndex
from shardsync.sharding.candidate import Candidate
from shardsync.sharding.site import Site
from shardsync.sharding.timings import Timings
from shardsync.sources.watcher import INVALID_REASON, SourceWatcher, WatchOptions

from .watching import GROUP, OTHER, PLURAL, VERSION, ZONE, blocking, dnsendpoint

pytestmark = pytest.mark.anyio

# The periodic sweep is far off: only taking office can explain a prompt write.
OPTIONS = WatchOptions(sources=("crd",), status_resync=300.0)
TIMINGS = Timings.derive(3, 0.5, 0.3)


@dataclass(eq=False)
class Replica:
    identity: str
    kube: Kube
    watcher: SourceWatcher
    recorder: EventRecorder
    candidate: Candidate
    scope: anyio.CancelScope
    elect: anyio.Event  # shared: set to start the candidates
    office: float | None = None  # when is_leader() was first seen true


@asynccontextmanager
async def replicas(apiserver: ApiServer, *identities: str) -> AsyncIterator[list[Replica]]:
    """Watchers and recorders running; candidates built but not started (`elect` starts them)."""
    made: list[Replica] = []
    elect = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            for identity in identities:
                kube = Kube(apiserver.api_client(user_agent=f"shardsync ({identity})"))
                site = Site(kube, "default", "dns", identity, TIMINGS)
                candidate = Candidate(site)
                recorder = EventRecorder(kube, identity)
                watcher = SourceWatcher(
                    kube, OPTIONS, DesiredIndex([ZONE, OTHER]), lambda _: None, recorder, candidate.is_leader
                )
                replica = Replica(identity, kube, watcher, recorder, candidate, anyio.CancelScope(), elect)
                made.append(replica)
                tg.start_soon(run_replica, replica)
            try:
                yield made
            finally:
                tg.cancel_scope.cancel()
    finally:
        for replica in made:
            replica.kube.api_client.close()  # type: ignore[no-untyped-call]


async def run_replica(replica: Replica) -> None:
    with replica.scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(replica.watcher.run)
            tg.start_soon(replica.recorder.run)
            await replica.watcher.synced.wait()
            await replica.elect.wait()
            tg.start_soon(replica.candidate.run)
            while True:
                if replica.office is None and replica.candidate.is_leader():
                    replica.office = time.monotonic()
                await anyio.sleep(0.02)


def warnings(api: Any, name: str) -> list[Any]:
    events = client.CoreV1Api(api).list_namespaced_event(
        "default", field_selector=f"involvedObject.name={name}"
    )
    return [e for e in events.items if e.type == "Warning" and e.reason == INVALID_REASON]


async def observed(api: Any, name: str) -> Any:
    custom = client.CustomObjectsApi(api)
    obj = await blocking(custom.get_namespaced_custom_object, GROUP, VERSION, "default", PLURAL, name)
    return (obj.get("status") or {}).get("observedGeneration")


async def wait_for(check: Any, within: float) -> float:
    """Seconds until `check()` (async) is true; fails after `within`."""
    start = time.monotonic()
    with anyio.fail_after(within):
        while not await check():  # noqa: ASYNC110 - polling the API server
            await anyio.sleep(0.05)
    return time.monotonic() - start


async def leader(made: list[Replica], within: float = 10.0) -> Replica:
    with anyio.fail_after(within):
        while True:
            for replica in made:
                if replica.office is not None and replica.candidate.is_leader():
                    return replica
            await anyio.sleep(0.02)


async def test_a_new_coordinator_posts_old_problems_and_writes_statuses_at_once(apiserver: ApiServer) -> None:
    api = apiserver.api_client()
    custom = client.CustomObjectsApi(api)
    try:
        await blocking(client.ApiextensionsV1Api(api).create_custom_resource_definition, load_crd())
        body = dnsendpoint(
            "stale",
            {"dnsName": "a.ex.com", "recordType": "A", "targets": ["192.0.2.1"]},
            {"dnsName": "bad.ex.com", "recordType": "A", "targets": ["not-an-address"]},
        )
        for _ in range(50):  # the CRD is served a moment after it is created
            try:
                await blocking(
                    custom.create_namespaced_custom_object, GROUP, VERSION, "default", PLURAL, body
                )
                break
            except client.ApiException:
                await anyio.sleep(0.1)
        started = time.monotonic()
        async with replicas(apiserver, "r0", "r1") as made:
            with anyio.fail_after(5):
                for replica in made:
                    await replica.watcher.synced.wait()
            await anyio.sleep(0.3)
            assert await blocking(warnings, api, "stale") == []  # no coordinator yet: nobody posts
            made[0].elect.set()
            first = await leader(made)
            assert first.office is not None

            async def posted() -> bool:
                return len(await blocking(warnings, api, "stale")) == 1

            async def written(generation: int) -> bool:
                return bool(await observed(api, "stale") == generation)

            await wait_for(posted, 10.0)
            assert time.monotonic() - started < 10.0
            await wait_for(lambda: written(1), 5.0)
            assert time.monotonic() - first.office < 5.0
            [event] = await blocking(warnings, api, "stale")
            assert "not-an-address" in event.message

            # Failover: the coordinator stops; meanwhile the object changes (a new generation, a new
            # problem) and only the other replica sees it, as a non-writer.
            first.scope.cancel()
            [second] = [r for r in made if r is not first]
            patch = {"spec": {"endpoints": [{"dnsName": "b.ex.com", "recordType": "A", "targets": ["nope"]}]}}
            patch_object = custom.patch_namespaced_custom_object
            await blocking(patch_object, GROUP, VERSION, "default", PLURAL, "stale", patch)

            async def translated() -> bool:
                problems = second.watcher.problems.found.values()  # what the non-writer found
                return any("nope" in p.message for found in problems for p in found)

            await wait_for(translated, 5.0)
            await first.candidate.release()  # the stopped coordinator gives its lease back
            new = await leader([second])
            assert new.office is not None
            await wait_for(lambda: written(2), 5.0)
            assert time.monotonic() - new.office < 5.0

            async def reposted() -> bool:
                return any("nope" in e.message for e in await blocking(warnings, api, "stale"))

            await wait_for(reposted, 5.0)
    finally:
        api.close()
