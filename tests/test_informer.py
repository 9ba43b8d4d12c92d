"""The list+watch informer over the official client against the embedded API server."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from shardsync.informer import Informer
from shardsync.kube import Kube, KubeError, load_api_client
from shardsync.local.apiserver import ApiServer
from tests.waits import eventually

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def lease(name: str, holder: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app": "x"}}, "spec": {"holderIdentity": holder}}


async def test_cache_follows_creates_updates_deletes(apiserver: ApiServer) -> None:
    kube = Kube(load_api_client(str(apiserver.kubeconfig)))
    coord = kube.coordination
    await kube.call(coord.create_namespaced_lease, "default", lease("before", "a"))
    changes: list[tuple[str, str | None, str | None]] = []

    def on_change(key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        def holder(o: dict[str, Any] | None) -> str | None:
            return o["spec"]["holderIdentity"] if o else None

        changes.append((key, holder(old), holder(new)))

    informer = Informer(
        kube, "leases", coord.list_namespaced_lease, "default", on_change=on_change, label_selector="app=x"
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        with anyio.fail_after(5):
            await informer.synced.wait()
        assert changes == [("default/before", None, "a")]
        await kube.call(coord.create_namespaced_lease, "default", lease("after", "b"))
        await kube.call(coord.patch_namespaced_lease, "after", "default", {"spec": {"holderIdentity": "c"}})
        await kube.call(coord.delete_namespaced_lease, "before", "default")
        await kube.call(coord.create_namespaced_lease, "default", {"metadata": {"name": "unlabelled"}})
        await eventually(lambda: len(changes) == 4)
        assert changes[1:] == [
            ("default/after", None, "b"),
            ("default/after", "b", "c"),
            ("default/before", "a", None),
        ]
        assert set(informer.cache) == {"default/after"}
        started = time.monotonic()
        tg.cancel_scope.cancel()
    # cancelling a quiet watch must not wait for the server's next byte
    assert time.monotonic() - started < 2.0


async def test_changes_made_while_the_server_was_down_are_seen(apiserver: ApiServer) -> None:
    kube = Kube(load_api_client(str(apiserver.kubeconfig)))
    coord = kube.coordination
    informer = Informer(kube, "leases", coord.list_namespaced_lease, "default")
    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        with anyio.fail_after(5):
            await informer.synced.wait()
        await anyio.to_thread.run_sync(apiserver.stop)
        await anyio.to_thread.run_sync(apiserver.start)
        await kube.call(coord.create_namespaced_lease, "default", lease("later", "z"))
        await eventually(lambda: "default/later" in informer.cache, within=20)
        tg.cancel_scope.cancel()


async def test_errors_are_kube_errors_with_status(apiserver: ApiServer) -> None:
    kube = Kube(load_api_client(str(apiserver.kubeconfig)))
    with pytest.raises(KubeError) as err:
        await kube.call(kube.coordination.read_namespaced_lease, "missing", "default")
    assert err.value.not_found
    assert await kube.read(kube.coordination.read_namespaced_lease, "missing", "default") is None
    await kube.call(kube.coordination.create_namespaced_lease, "default", lease("dup", "a"))
    with pytest.raises(KubeError) as err:
        await kube.call(kube.coordination.create_namespaced_lease, "default", lease("dup", "a"))
    assert err.value.status == 409
    apiserver.stop()
    with pytest.raises(KubeError) as err:
        await kube.call(kube.coordination.read_namespaced_lease, "dup", "default")
    assert err.value.status == 0
