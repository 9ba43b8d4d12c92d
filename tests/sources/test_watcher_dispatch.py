"""The generic watcher's dispatch, with recording kinds and a Kube that serves from memory (fake_kube.py):
which translator is called for which event, with which object and options, and what reaches the desired
index, the caller's zones, the metrics and the Events. Deterministic: the test delivers every event."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from shardsync.kube.events import EventRecorder
from shardsync.kube.objects import ObjectRef, Resource, get_str, get_str_list, same_but_version
from shardsync.records.desired import DesiredIndex
from shardsync.sources import service as service_module
from shardsync.sources.filters import ObjectFilter
from shardsync.sources.kind import CrdNotice, SourceContext, SourceKind, Translator
from shardsync.sources.result import EndpointSet, SourceResult
from shardsync.sources.served import PROBE_CAP
from shardsync.sources.service import SERVICES
from shardsync.sources.watcher import INVALID_REASON, SourceWatcher, WatchOptions
from tests.waits import eventually

from .fake_kube import FakeKube
from .watching import metric

pytestmark = pytest.mark.anyio

ZONE = "ex.com"
WIDGETS = Resource("example.test", "v1", "widgets", "Widget")
GADGETS = Resource("example.test", "v1", "gadgets", "Gadget")
FEEDS = Resource("", "v1", "configmaps", "ConfigMap")  # related objects naming the widgets/gadgets they feed

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Opts:
    prefix: str = "default"


@dataclass
class Log:
    """What the translators were asked, in order."""

    translated: list[tuple[str, str, Obj | None]] = field(default_factory=list)  # (kind, key, object)
    related: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, resource plural, key)
    options: dict[str, Any] = field(default_factory=dict)
    caught_up: list[str] = field(default_factory=list)


LOG = Log()


class Recorder(Translator):
    """A host `<spec.host>` → `spec.ip`; `spec.bad` adds a problem; a feed re-triggers the objects its
    `data.owners` name as `<kind>:<key>`."""

    def __init__(self, name: str, resource: Resource, context: SourceContext[Any]) -> None:
        self.name, self.resource = name, resource
        LOG.options[name] = context.options

    def translate(self, key: str, obj: Obj | None) -> SourceResult | None:
        LOG.translated.append((self.name, key, obj))
        if obj is None:
            return None
        out = EndpointSet(ObjectRef.of(obj, self.resource, self.name), created="")
        out.add_targets(get_str(obj, "spec", "host"), [get_str(obj, "spec", "ip")], "spec.host")
        if get_str(obj, "spec", "bad"):
            out.problem("spec.bad", get_str(obj, "spec", "bad"))
        return out.result()

    def related(self, resource: Resource, key: str, old: Obj | None, new: Obj | None) -> Iterable[str]:
        LOG.related.append((self.name, resource.plural, key))
        owners = {owner for obj in (old, new) for owner in get_str_list(obj, "data", "owners")}
        return {owner.partition(":")[2] for owner in owners if owner.startswith(self.name + ":")}

    def catch_up(self) -> None:
        LOG.caught_up.append(self.name)


def kind(name: str, resource: Resource, crd: CrdNotice | None = None) -> SourceKind[Any]:
    return SourceKind(name, resource, lambda c: Recorder(name, resource, c), related=(FEEDS,), crd=crd)


NOTICE = CrdNotice("Gadget CRD", ("gadgets.example.test",), "nowhere.yaml")
TABLE = {"widget": kind("widget", WIDGETS), "gadget": kind("gadget", GADGETS)}
WAITING = {**TABLE, "gadget": kind("gadget", GADGETS, NOTICE)}  # gadgets come from a CRD


def thing(name: str, host: str, ip: str = "192.0.2.1", **spec: str) -> Obj:
    labels = {"team": "dns"} if name != "unlabelled" else {}
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"host": host, "ip": ip, **spec},
    }


def feed(name: str, *owners: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "default"}, "data": {"owners": list(owners)}}


@dataclass
class Run:
    watcher: SourceWatcher
    kube: FakeKube
    desired: DesiredIndex
    dirty: list[set[str]]
    events: list[tuple[ObjectRef, str]]

    def translated(self) -> list[tuple[str, str, bool]]:
        """(kind, key, object present) since the last call."""
        out = [(k, key, obj is not None) for k, key, obj in LOG.translated]
        LOG.translated.clear()
        return out


class Events(EventRecorder):
    def __init__(self, into: list[tuple[ObjectRef, str]]) -> None:
        super().__init__(None, "test")
        self.into = into

    def record(self, ref: ObjectRef, reason: str, message: str, etype: str = "Warning") -> None:
        self.into.append((ref, reason))


@asynccontextmanager
async def running(
    kube: FakeKube,
    options: WatchOptions,
    writer: bool = True,
    synced: bool = True,
    table: Mapping[str, SourceKind[Any]] = TABLE,
) -> AsyncIterator[Run]:
    global LOG
    LOG = Log()
    desired = DesiredIndex([ZONE])
    dirty: list[set[str]] = []
    events: list[tuple[ObjectRef, str]] = []
    watcher = SourceWatcher(
        kube, options, desired, dirty.append, Events(events), write_status=lambda: writer, table=table
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        if synced:
            with anyio.fail_after(5):
                await watcher.synced.wait()
        yield Run(watcher, kube, desired, dirty, events)
        tg.cancel_scope.cancel()


async def test_own_events_translate_the_object_and_related_events_the_owners_the_kind_names() -> None:
    kube = FakeKube()
    kube.put(WIDGETS, thing("w1", "w1.ex.com"))
    kube.put(WIDGETS, thing("w2", "w2.ex.com"))
    async with running(kube, WatchOptions(sources=("widget",), source_options={"widget": Opts("p")})) as run:
        assert sorted(run.translated()) == [("widget", "default/w1", True), ("widget", "default/w2", True)]
        assert LOG.options == {"widget": Opts("p")}
        assert {ep.labels["resource"] for ep in run.desired.desired(ZONE)} == {
            "widget/default/w1",
            "widget/default/w2",
        }

        kube.emit(WIDGETS, "MODIFIED", thing("w1", "w1.ex.com", "192.0.2.9"))
        await eventually(lambda: bool(LOG.translated))
        assert run.translated() == [("widget", "default/w1", True)]
        await eventually(lambda: run.dirty[-1:] == [{ZONE}])

        kube.emit(FEEDS, "ADDED", feed("f", "widget:default/w2", "gadget:default/w2"))
        await eventually(lambda: bool(LOG.translated))
        assert LOG.related == [("widget", "configmaps", "default/f")]
        assert run.translated() == [("widget", "default/w2", True)]

        kube.emit(WIDGETS, "DELETED", thing("w1", "w1.ex.com"))
        await eventually(lambda: bool(LOG.translated))
        assert run.translated() == [("widget", "default/w1", False)]
        assert [ep.dns_name for ep in run.desired.desired(ZONE)] == ["w2.ex.com"]


async def test_an_object_the_filters_leave_out_is_translated_as_gone() -> None:
    kube = FakeKube()
    kube.put(WIDGETS, thing("unlabelled", "u.ex.com"))
    kube.put(WIDGETS, thing("w1", "w1.ex.com"))
    options = WatchOptions(sources=("widget",), objects=ObjectFilter.parse(label_filter="team=dns"))
    async with running(kube, options) as run:
        assert sorted(run.translated()) == [
            ("widget", "default/unlabelled", False),
            ("widget", "default/w1", True),
        ]
        assert [ep.dns_name for ep in run.desired.desired(ZONE)] == ["w1.ex.com"]


async def test_kinds_reading_one_resource_share_its_informer_and_each_hears_its_events() -> None:
    kube = FakeKube()
    kube.put(WIDGETS, thing("x", "w.ex.com"))
    kube.put(GADGETS, thing("x", "g.ex.com", "192.0.2.2"))
    async with running(kube, WatchOptions(sources=("widget", "gadget", "widget"))) as run:
        assert kube.lists[FEEDS] == 1 and list(run.watcher.informers) == [
            "widgets.example.test",
            "configmaps",
            "gadgets.example.test",
        ]
        assert LOG.options == {"widget": None, "gadget": None}  # no flags: no options
        run.translated()
        kube.emit(FEEDS, "ADDED", feed("f", "widget:default/x", "gadget:default/x"))
        await eventually(lambda: len(LOG.translated) == 2)
        assert sorted(run.translated()) == [("gadget", "default/x", True), ("widget", "default/x", True)]
        assert sorted(LOG.related) == [
            ("gadget", "configmaps", "default/f"),
            ("widget", "configmaps", "default/f"),
        ]
        # The desired index keys the objects by kind: same name, two objects.
        assert sorted(ep.labels["resource"] for ep in run.desired.desired(ZONE)) == [
            "gadget/default/x",
            "widget/default/x",
        ]
        # The writer from the start: every kind was asked to catch up as the watcher saw it take office.
        await eventually(lambda: LOG.caught_up == ["widget", "gadget"])
        LOG.caught_up.clear()
        run.watcher.request_status_sweep()
        assert LOG.caught_up == ["widget", "gadget"]


async def test_a_kind_whose_resource_is_not_served_waits_alone_and_translates_once_served() -> None:
    kube = FakeKube()
    kube.missing.add(GADGETS)
    kube.put(WIDGETS, thing("w", "w.ex.com"))
    kube.put(GADGETS, thing("g", "g.ex.com"))
    options = WatchOptions(sources=("widget", "gadget"), max_backoff=0.05)
    async with running(kube, options, synced=False, table=WAITING) as run:
        await eventually(lambda: bool(run.watcher.waiting()))
        # Its CRD is followed by name (a list, then a watch: RBAC grants them by resourceNames); the
        # resource itself is not probed.
        await eventually(lambda: len(kube.crd_selectors) == 2)
        assert kube.crd_selectors == ["metadata.name=gadgets.example.test"] * 2
        assert kube.lists[GADGETS] == 0
        assert run.watcher.waiting() == ["gadgets.example.test not installed: the gadget source waits for it"]
        assert run.watcher.unsynced() == [] and not run.watcher.synced.is_set()
        assert metric("shardsync_source_crd_missing", crd="gadgets.example.test") == 1
        await eventually(lambda: bool(LOG.translated))
        assert run.translated() == [("widget", "default/w", True)]  # the other kind runs meanwhile
        # A kind with no CRD has no objects: the desired state is whole without it (the worker plans).
        with anyio.fail_after(5):
            await run.watcher.complete.wait()
        kube.emit(FEEDS, "ADDED", feed("f", "gadget:default/g"))  # marks a gadget: still not translated
        kube.serve(GADGETS)
        with anyio.fail_after(5):
            await run.watcher.synced.wait()
        assert run.translated() == [("gadget", "default/g", True)]  # once, though marked twice
        assert metric("shardsync_source_crd_missing", crd="gadgets.example.test") == 0


async def test_without_read_access_to_the_crds_the_resource_is_probed_instead(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # An install whose ClusterRole lacks the customresourcedefinitions rule: one warning saying what to
    # grant, then the resource itself is listed (a backoff capped at PROBE_CAP) until it is served.
    kube = FakeKube()
    kube.crds_denied = True
    kube.missing.add(GADGETS)
    kube.put(GADGETS, thing("g", "g.ex.com"))
    async with running(kube, WatchOptions(sources=("gadget",)), synced=False, table=WAITING) as run:
        await eventually(lambda: kube.lists[GADGETS] >= 2, within=5)
        assert run.watcher.waiting() == ["gadgets.example.test not installed: the gadget source waits for it"]
        kube.missing.clear()
        probes = kube.lists[GADGETS]
        with anyio.fail_after(PROBE_CAP + 2):
            await run.watcher.synced.wait()
        assert kube.lists[GADGETS] <= probes + 2  # the probe that found it, then the informer's list
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert sum("cannot read CustomResourceDefinitions" in m for m in said) == 1, said
    assert sum("Gadget CRD not installed" in m for m in said) == 1, said


async def test_the_translation_is_complete_only_once_every_kind_has_listed_and_translated() -> None:
    # The worker plans nothing before `complete`: a zone planned while a kind is still listing would lose
    # (under --policy=sync, delete) the records of that kind's objects.
    kube = FakeKube()
    kube.put(WIDGETS, thing("w", "w.ex.com"))
    kube.put(GADGETS, thing("g", "g.ex.com"))
    kube.held[GADGETS] = anyio.Event()
    async with running(kube, WatchOptions(sources=("widget", "gadget")), synced=False) as run:
        await eventually(lambda: bool(LOG.translated))
        assert run.translated() == [("widget", "default/w", True)]
        # The flush that translated the widget looked at completeness too, and found the gadgets unlisted.
        assert not run.watcher.complete.is_set() and not run.watcher.synced.is_set()
        kube.held[GADGETS].set()
        with anyio.fail_after(5):
            await run.watcher.complete.wait()
        assert run.watcher.synced.is_set()
        assert run.translated() == [("gadget", "default/g", True)]


async def test_problems_are_counted_once_and_posted_by_the_writer_alone() -> None:
    kube = FakeKube()
    kube.put(WIDGETS, thing("w", "w.ex.com", bad="no good"))
    before = metric("shardsync_source_invalid_endpoints_total", kind="widget")
    async with running(kube, WatchOptions(sources=("widget",)), writer=False) as run:
        assert metric("shardsync_source_invalid_endpoints_total", kind="widget") == before + 1
        assert run.events == []  # not the writer
        kube.emit(WIDGETS, "MODIFIED", thing("w", "w.ex.com", "192.0.2.7", bad="no good"))
        await eventually(lambda: bool(LOG.translated))  # problems are reported in the same step
        assert metric("shardsync_source_invalid_endpoints_total", kind="widget") == before + 1
    async with running(kube, WatchOptions(sources=("widget",)), writer=True) as run:
        [(ref, reason)] = run.events
        assert (ref.kind, ref.api_version, ref.name, reason) == (
            "Widget",
            "example.test/v1",
            "w",
            INVALID_REASON,
        )


def test_a_source_not_in_the_table_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown source nothing"):
        SourceWatcher(
            FakeKube(), WatchOptions(sources=("widget", "nothing")), DesiredIndex(), print, table=TABLE
        )


def test_same_but_version_ignores_the_resource_version_and_the_fields_named() -> None:
    base: dict[str, Any] = {
        "metadata": {"name": "a", "resourceVersion": "1", "labels": {"k": "v"}},
        "spec": {"x": 1},
    }
    assert same_but_version(base, {**base, "metadata": {**base["metadata"], "resourceVersion": "2"}})
    assert not same_but_version(base, {**base, "metadata": {**base["metadata"], "labels": {}}})
    assert not same_but_version(base, {**base, "spec": {"x": 2}})
    assert not same_but_version(base, {**base, "status": {"o": 1}})
    assert same_but_version(base, {**base, "status": {"o": 1}}, "status")
    assert not same_but_version(base, {"metadata": base["metadata"]}, "status")


async def test_a_change_the_projection_drops_is_not_translated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Service's projection keeps what its translation reads; a change of anything else (here
    `spec.sessionAffinity`, or a resync's new resourceVersion) is equal once projected and is not
    translated again, while a change of what it reads is."""
    seen: list[str] = []
    real = service_module.service_endpoints

    def counting(obj: dict[str, Any], **kwargs: Any) -> SourceResult:
        seen.append(obj["status"]["loadBalancer"]["ingress"][0]["ip"])
        return real(obj, **kwargs)

    monkeypatch.setattr(service_module, "service_endpoints", counting)

    def svc(address: str, affinity: str) -> dict[str, Any]:
        return {
            "metadata": {
                "name": "web",
                "namespace": "default",
                "annotations": {"external-dns.alpha.kubernetes.io/hostname": "web.ex.com"},
            },
            "spec": {"type": "LoadBalancer", "sessionAffinity": affinity},
            "status": {"loadBalancer": {"ingress": [{"ip": address}]}},
        }

    kube = FakeKube()
    kube.put(SERVICES, svc("192.0.2.1", "None"))
    desired = DesiredIndex(["ex.com"])
    watcher = SourceWatcher(kube, WatchOptions(sources=("service",)), desired, lambda zones: None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        with anyio.fail_after(5):
            await watcher.synced.wait()
        assert seen == ["192.0.2.1"]
        kube.emit(SERVICES, "MODIFIED", svc("192.0.2.1", "ClientIP"))
        await anyio.sleep(0.1)  # a translation, were there one, runs meanwhile
        assert seen == ["192.0.2.1"]
        kube.emit(SERVICES, "MODIFIED", svc("192.0.2.2", "ClientIP"))
        await eventually(lambda: [e.targets for e in desired.desired("ex.com")] == [("192.0.2.2",)])
        assert seen == ["192.0.2.1", "192.0.2.2"]
        tg.cancel_scope.cancel()
