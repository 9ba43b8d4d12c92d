"""shardsync.kube.client (the one Kubernetes access layer) and the list+watch informer on the embedded API
server."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from shardsync.kube.client import Kube, KubeError, load_api_client
from shardsync.kube.health import ApiHealth
from shardsync.kube.informer import Informer
from shardsync.kube.objects import CONFIGMAPS, LEASES, resource_version
from shardsync.kube.packed import PackedCache
from shardsync.local.apiserver import ApiServer
from shardsync.sources.service import SERVICES
from tests.waits import eventually

pytestmark = pytest.mark.anyio


def lease(name: str, holder: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"app": "x"}}, "spec": {"holderIdentity": holder}}


@pytest.mark.parametrize("packed", [False, True])
async def test_cache_follows_creates_updates_deletes(apiserver: ApiServer, packed: bool) -> None:
    kube = Kube(load_api_client(str(apiserver.kubeconfig)))
    await kube.create(LEASES, lease("before", "a"), namespace="default")
    changes: list[tuple[str, str | None, str | None]] = []

    def on_change(key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        def holder(o: dict[str, Any] | None) -> str | None:
            return o["spec"]["holderIdentity"] if o else None

        changes.append((key, holder(old), holder(new)))

    informer = Informer(
        kube, LEASES, namespace="default", on_change=on_change, label_selector="app=x", packed=packed
    )
    assert isinstance(informer.cache, PackedCache) == packed
    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        with anyio.fail_after(5):
            await informer.synced.wait()
        assert changes == [("default/before", None, "a")]
        await kube.create(LEASES, lease("after", "b"), namespace="default")
        await kube.patch(LEASES, "after", {"spec": {"holderIdentity": "c"}}, namespace="default")
        await kube.delete(LEASES, "before", namespace="default")
        await kube.create(LEASES, {"metadata": {"name": "unlabelled"}}, namespace="default")
        await eventually(lambda: len(changes) == 4)
        assert changes[1:] == [
            ("default/after", None, "b"),
            ("default/after", "b", "c"),
            ("default/before", "a", None),
        ]
        assert set(informer.cache) == {"default/after"}
        assert informer.cache["default/after"]["spec"]["holderIdentity"] == "c"
        informer.forget("default/after")
        assert "default/after" not in informer.cache and informer.forgotten == {"default/after"}
        started = time.monotonic()
        tg.cancel_scope.cancel()
    # cancelling a quiet watch must not wait for the server's next byte
    assert time.monotonic() - started < 2.0


async def test_objects_not_admitted_are_left_out_unreported_and_untracked(
    apiserver: ApiServer,
) -> None:
    kube = Kube(load_api_client(str(apiserver.kubeconfig)))
    await kube.create(LEASES, lease("theirs", "other"), namespace="default")
    await kube.create(LEASES, lease("ours", "me"), namespace="default")
    asked: list[str] = []
    changes: list[tuple[str, bool, bool]] = []

    def admit(key: str, obj: dict[str, Any]) -> bool:
        asked.append(key)
        return bool(obj["spec"]["holderIdentity"] == "me")

    informer = Informer(
        kube,
        LEASES,
        namespace="default",
        admit=admit,
        on_change=lambda key, old, new: changes.append((key, old is not None, new is not None)),
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        with anyio.fail_after(5):
            await informer.synced.wait()
        assert set(informer.cache) == {"default/ours"} and not informer.forgotten
        assert changes == [("default/ours", False, True)]  # the one left out is not reported
        await kube.patch(LEASES, "theirs", {"metadata": {"labels": {"v": "2"}}}, namespace="default")
        await kube.patch(LEASES, "ours", {"spec": {"holderIdentity": "other"}}, namespace="default")
        await eventually(lambda: len(changes) == 2)
        # a cached object is no longer asked: only a translation may take its records away
        assert changes[1] == ("default/ours", True, True) and asked.count("default/ours") == 1
        assert asked.count("default/theirs") == 2 and "default/theirs" not in informer.cache
        await kube.patch(LEASES, "theirs", {"spec": {"holderIdentity": "me"}}, namespace="default")
        await eventually(lambda: len(changes) == 3)
        assert changes[2] == ("default/theirs", False, True) and "default/theirs" in informer.cache
        informer.forget("default/theirs")  # forgotten (not left out): its deletion is still reported
        await kube.delete(LEASES, "theirs", namespace="default")
        await eventually(lambda: len(changes) == 4)
        assert changes[3] == ("default/theirs", False, False) and not informer.forgotten
        tg.cancel_scope.cancel()


async def test_changes_made_while_the_server_was_down_are_seen(apiserver: ApiServer) -> None:
    kube = Kube(load_api_client(str(apiserver.kubeconfig)))
    informer = Informer(kube, LEASES, namespace="default")
    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        with anyio.fail_after(5):
            await informer.synced.wait()
        await anyio.to_thread.run_sync(apiserver.stop)
        await anyio.to_thread.run_sync(apiserver.start)
        await kube.create(LEASES, lease("later", "z"), namespace="default")
        await eventually(lambda: "default/later" in informer.cache, within=20)
        tg.cancel_scope.cancel()


async def test_errors_are_kube_errors_with_status(apiserver: ApiServer) -> None:
    kube = Kube(load_api_client(str(apiserver.kubeconfig)))
    assert await kube.get(LEASES, "missing", namespace="default") is None
    with pytest.raises(KubeError) as err:
        await kube.delete(LEASES, "missing", namespace="default")
    assert err.value.not_found
    await kube.create(LEASES, lease("dup", "a"), namespace="default")
    with pytest.raises(KubeError) as err:
        await kube.create(LEASES, lease("dup", "a"), namespace="default")
    assert err.value.status == 409 and err.value.conflict
    assert err.value.message == 'leases.coordination.k8s.io "dup" already exists'
    apiserver.stop()
    with pytest.raises(KubeError) as err:
        await kube.get(LEASES, "dup", namespace="default")
    assert err.value.status == 0


async def test_verbs_patch_kinds_status_and_preconditions(apiserver: ApiServer) -> None:
    kube = Kube(load_api_client(str(apiserver.kubeconfig)))
    created = await kube.create(
        CONFIGMAPS, {"metadata": {"name": "c"}, "data": {"a": "1"}}, namespace="default"
    )
    merged = await kube.patch(CONFIGMAPS, "c", {"data": {"b": "2"}}, namespace="default")
    assert merged["data"] == {"a": "1", "b": "2"}
    ops = [{"op": "remove", "path": "/data/a"}]
    removed = await kube.patch(CONFIGMAPS, "c", ops, namespace="default", patch_type="json")
    assert removed["data"] == {"b": "2"}
    with pytest.raises(ValueError, match="list of operations"):
        await kube.patch(CONFIGMAPS, "c", {"data": {}}, namespace="default", patch_type="json")
    # A replace carrying an old resourceVersion is refused: the precondition every lease write relies on.
    stale = {**created, "data": {"x": "y"}}
    with pytest.raises(KubeError) as err:
        await kube.replace(CONFIGMAPS, "c", stale, namespace="default")
    assert err.value.conflict
    listed = await kube.list(CONFIGMAPS, namespace="default", field_selector="metadata.name=c")
    assert [resource_version(i) for i in listed["items"]] == [resource_version(removed)]
    assert int(resource_version(listed)) >= int(resource_version(removed))
    svc = {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}
    await kube.create(SERVICES, svc, namespace="default")
    status = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}}
    patched = await kube.patch(SERVICES, "s", status, namespace="default", subresource="status")
    assert patched["status"] == status["status"]
    assert patched["spec"]["ports"][0]["port"] == 80


class _CountingKube:
    """Answers list calls with one empty page after a pause, counting how many are read at once."""

    def __init__(self) -> None:
        self.now = self.most = 0

    async def list(self, resource: Any, **_: Any) -> dict[str, Any]:
        self.now += 1
        self.most = max(self.most, self.now)
        await anyio.sleep(0.01)
        self.now -= 1
        return {"metadata": {"resourceVersion": "1"}, "items": []}


@pytest.mark.parametrize("shared", [False, True])
async def test_informers_sharing_list_slots_read_one_page_at_a_time(shared: bool) -> None:
    kube = _CountingKube()
    slots = anyio.CapacityLimiter(1) if shared else None
    informers = [Informer(kube, r, list_slots=slots) for r in (LEASES, CONFIGMAPS, SERVICES)]  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        for informer in informers:
            tg.start_soon(informer.relist)
    assert all(i.synced.is_set() for i in informers)
    assert kube.most == (1 if shared else 3)


def test_a_sweep_puts_back_nothing_the_watch_changed_while_it_read() -> None:
    """What a sweep read may be older than what the watch delivered meanwhile: an object left out again,
    or gone, is not put back from the sweep's copy; once the sweep is over, putting back works again."""
    informer = Informer(None, LEASES, admit=lambda key, obj: obj["spec"]["holderIdentity"] == "me")  # type: ignore[arg-type]
    old = {
        "metadata": {"name": "x", "namespace": "default", "resourceVersion": "1"},
        "spec": {"holderIdentity": "me"},
    }
    new = {
        "metadata": {"name": "x", "namespace": "default", "resourceVersion": "2"},
        "spec": {"holderIdentity": "b"},
    }
    informer._handle("ADDED", new)  # left out
    assert not informer.cache and not informer.forgotten
    with informer.sweeping():
        informer._handle("MODIFIED", new)  # delivered while the sweep read an older copy
        assert not informer.put_back("default/x", old)
    assert not informer.cache
    with informer.sweeping():
        assert informer.put_back("default/x", new)
        assert not informer.put_back("default/x", old)  # cached already
    assert informer.cache["default/x"]["spec"]["holderIdentity"] == "b"


def _informer(changes: list[tuple[str, Any, Any]], admit: bool) -> Informer:
    return Informer(
        None,  # type: ignore[arg-type]
        LEASES,
        admit=(lambda key, obj: obj["spec"]["holderIdentity"] == "me") if admit else None,
        on_change=lambda key, old, new: changes.append((key, old, new)),
    )


def _lease(name: str, holder: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "1"},
        "spec": {"holderIdentity": holder},
    }


def test_left_out_says_whether_admit_ever_refused_and_a_reported_put_back_is_an_add() -> None:
    changes: list[tuple[str, Any, Any]] = []
    informer = _informer(changes, admit=True)
    mine, other = _lease("a", "me"), _lease("b", "b")
    informer._handle("ADDED", mine)
    left_out = [informer.left_out]
    informer._handle("ADDED", other)
    left_out.append(informer.left_out)
    assert left_out == [False, True] and changes == [("default/a", None, mine)]
    assert "default/b" not in informer.cache
    assert informer.put_back("default/b", other, report=True)  # read back (sources.refetch's load)
    assert changes[-1] == ("default/b", None, other) and informer.cache["default/b"] == other


def test_drop_reports_a_deletion_keeps_nothing_and_counts_as_left_out() -> None:
    changes: list[tuple[str, Any, Any]] = []
    informer = _informer(changes, admit=False)
    mine = _lease("a", "me")
    informer._handle("ADDED", mine)
    before = informer.left_out
    informer.drop("default/a")
    assert changes[-1] == ("default/a", mine, None) and not informer.cache and not informer.forgotten
    assert (before, informer.left_out) == (
        False,
        True,
    )  # what was dropped may be wanted again: read backs are needed from now on
    informer.drop("default/a")  # not kept: nothing to say
    informer._handle("DELETED", mine)  # nor tracked: its deletion says nothing either
    assert len(changes) == 2


class _Unreachable(Kube):
    """Lists answer; watches fail as an unreachable API server's do while `down`, as the transport
    reports them to the client's ApiHealth."""

    def __init__(self) -> None:  # no client
        self._health = ApiHealth(first_step=0.05)
        self.down = True
        self.watches: list[float] = []

    async def list(self, resource: Any, **query: Any) -> dict[str, Any]:
        return {"metadata": {"resourceVersion": "1"}, "items": []}

    async def watch(self, resource: Any, **query: Any) -> None:
        self.watches.append(time.monotonic())
        if self.down:
            self.health.failed(0, "refused")
            raise KubeError(0, "refused")
        await anyio.sleep_forever()


async def test_a_backing_off_watch_retries_as_soon_as_the_api_server_answers_again() -> None:
    kube = _Unreachable()
    informer = Informer(kube, LEASES, namespace="default")
    async with anyio.create_task_group() as tg:
        tg.start_soon(informer.run)
        await anyio.sleep(2.0)  # backing off: 0.1-0.2 s, then 0.2-0.4, 0.4-0.8, 0.8-1.6 ...
        tried = len(kube.watches)
        assert 3 <= tried <= 6, kube.watches
        kube.down = False
        back = time.monotonic()
        await anyio.to_thread.run_sync(kube.health.succeeded)  # another call got through (a renewal)
        await eventually(lambda: len(kube.watches) > tried, within=0.3)  # not the rest of a 0.8+ s wait
        assert kube.watches[-1] - back < 0.3
        tg.cancel_scope.cancel()
