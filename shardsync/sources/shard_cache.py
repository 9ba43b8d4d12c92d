"""Per-shard caches: what a sharded replica's watcher keeps only for the zones it runs (design: slim caches,
per-shard state).

The DesiredIndex (restricted) holds endpoints only for the zones the worker runs and says which objects a
newly held zone needs translated again (`on_rebuild`) and which a dropped zone no longer needs
(`on_freed`). This glue answers both for the watcher: an object still cached is queued for translation;
an object of an evictable kind (`SourceKind.evictable`) that was forgotten is read back first
(sources.refetch). After each translation, and in a sweep once the held zones changed (objects translated
before this replica ran any zone), an evictable kind's object whose records all fall in zones not held is
forgotten (`Informer.forget`: its changes still arrive by the watch), and its translator drops what it
keeps about it (`Translator.forget`). Before translating, an object of such a kind that the informer does
not hold is asked for its names (`admitter`, `SourceKind.names`): when the zones they reach are known and
none is held, it is left out untranslated (`DesiredIndex.defer`; the informer keeps nothing of it), and a
zone held later is swept for such objects (`on_sweep` → sources.refetch's sweep → `DesiredIndex.swept`).
Keys no kind here can translate again
(the PTR records the watcher derives) are kept whole by the index (`pinned`).

One informer may serve an evictable kind's own objects and another kind reading them (the pod kind's Pods,
which the service kind reads by key): an object another kind still reads is never forgotten for its own
kind's zones, nor left out (the watcher sets no `admitter` on such an informer), unless the reading kind
says which objects it reads (`kept_while_read`: then the informer keeps what either kind wants,
`keep_read` with `own`). Objects read back are reported to every kind reading them (`report`), so the
other kind's index of them (sources.service_inputs) holds what the cache holds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel

from shardsync.kube.client import Kube
from shardsync.kube.informer import Informer
from shardsync.kube.objects import Obj, Resource
from shardsync.records.desired import DesiredIndex
from shardsync.sources.kind import Names, SourceKind
from shardsync.sources.options import SourceOptions
from shardsync.sources.refetch import Refetcher

SWEEP_EVERY = 1.0  # seconds between looks for cached objects held nowhere


def _always(key: str, obj: Obj) -> bool:
    return True


def kept_while_read(readers: Mapping[Resource, Sequence[SourceKind[Any]]]) -> dict[Resource, str]:
    """Of the resources the chosen kinds read (resource → its readers), those one evictable kind reads only
    by key (the service kind's Pods and EndpointSlices) and others read only as their own evictable objects
    (the pod kind's Pods): resource → the kind whose translator says what is kept (`keep_read`). For a
    sharded replica without PTR records (those need every object's addresses)."""
    out: dict[Resource, str] = {}
    for resource, kinds in readers.items():
        by_key = [k for k in kinds if resource in k.read_by_key]
        own = [k for k in kinds if k.resource == resource]
        if len(by_key) == 1 and len(by_key) + len(own) == len(kinds) and all(k.evictable for k in kinds):
            out[resource] = by_key[0].name
    return out


class ShardCaches:
    """See the module docstring. `kinds`: kind name → (kind, the informer of its own objects); `queue(name,
    keys)` marks cache keys of that kind for translation; `report(resource, key, old, new)` reports an
    object read back (None: gone) to every kind reading the resource, as a watch event; `names`: kind
    name → its names function (`SourceKind.names_for`; default: `SourceKind.names`)."""

    def __init__(
        self,
        kube: Kube,
        desired: DesiredIndex,
        kinds: Mapping[str, tuple[SourceKind[Any], Informer]],
        queue: Callable[[str, Iterable[str]], None],
        on_forget: Callable[[str, str], None] = lambda name, key: None,
        *,
        report: Callable[[Resource, str, Obj | None, Obj | None], None] | None = None,
        names: Mapping[str, Names | None] | None = None,
    ) -> None:
        self.desired = desired
        self._on_forget = on_forget
        self._kinds = kinds
        self._queue = queue
        self._report = report
        self._names_of = {n: (names or {}).get(n, kind.names) for n, (kind, _) in kinds.items()}
        self._names = {informer: name for name, (_, informer) in kinds.items()}
        self._refetch = Refetcher(kube, self._refetched, self._swept)
        self._inputs: list[Informer] = []  # related objects kept only while read (`keep_read`)
        # Informers of evictable kinds' own objects that another kind reads: whether it still reads one
        # (until `keep_read` says which, all of them).
        related = {r for kind, _ in kinds.values() for r in kind.related}
        self._still_read: dict[Informer, Callable[[str, Obj], bool]] = {
            informer: _always
            for kind, informer in kinds.values()
            if kind.evictable and kind.resource in related
        }
        desired.on_rebuild = self._rebuild
        desired.on_freed = self._freed
        desired.on_sweep = self._refetch.sweep
        desired.pinned = lambda key: key.partition("/")[0] not in kinds

    def keep_read(
        self,
        informer: Informer,
        reads: Callable[[str, Obj], bool],
        own: Callable[[str, Obj], bool] | None = None,
    ) -> None:
        """Keep only the related objects the translator reads (`Translator.admits`), and those `own`
        admits when they are also an evictable kind's own objects (its `admitter`); those neither wants
        any more are dropped at the next sweep of the caches."""
        informer.admit = reads if own is None else (lambda key, obj: reads(key, obj) or own(key, obj))
        if informer in self._still_read:
            self._still_read[informer] = reads
        self._inputs.append(informer)

    def read_back(self, informer: Informer, namespace: str, selector: str, then: Callable[[], None]) -> bool:
        """`SourceContext.read_back` for the informer: False when it has left nothing out."""
        if not informer.left_out:
            return False
        self._refetch.load(informer, namespace, selector, then)
        return True

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._refetch.run)
            tg.start_soon(self._sweep_loop)

    def admitter(self, name: str, common: SourceOptions) -> Callable[[str, Obj], bool] | None:
        """What the informer of kind `name`'s own objects asks of an object it lists or watches and does
        not cache (`Informer.admit`): False, leaving it out untranslated, when the zones its names reach
        (`SourceKind.names`) are known and none is held (`DesiredIndex.defer`)."""
        kind, informer = self._kinds[name]
        names_of = self._names_of[name]
        if not kind.evictable or names_of is None:
            return None
        desired = self.desired
        unnamed = kind.leaves_out_unnamed

        def admit(key: str, obj: Obj) -> bool:
            names = names_of(obj, common)
            return names is None or not desired.defer(f"{name}/{key}", names, unnamed=unnamed)

        def reaches(obj: Obj, zones: Collection[str]) -> bool:
            names = names_of(obj, common)
            reached = None if names is None else desired.reached(names)
            return reached is None or not reached.isdisjoint(zones)

        self._refetch.sweeper(informer, reaches)
        return admit

    def holds_reach(self, kind: SourceKind[Any], obj: Obj, common: SourceOptions) -> bool | None:
        """Whether a zone `obj`'s names reach is held here; None when its names do not tell (unnamed, a
        name in no zone, a kind that cannot say) or this replica holds every zone (not sharded)."""
        names_of = self._names_of.get(kind.name, kind.names)
        if not self.desired.restricted or names_of is None:
            return None
        names = names_of(obj, common)
        zones = None if names is None else self.desired.reached(names)
        return self.desired.holds_any(zones) if zones else None

    def forgotten(self, name: str, key: str) -> bool:
        """The object at `key` is not cached because it was forgotten (not because it is gone)."""
        return key in self._kinds[name][1].forgotten

    def translated(self, name: str, key: str) -> None:
        """After a translation: forget the object if it is evictable and held nowhere."""
        kind, informer = self._kinds[name]
        if kind.evictable and self.desired.holds_nothing_of(f"{name}/{key}"):
            self._forget(name, informer, key)

    def _forget(self, name: str, informer: Informer, key: str) -> None:
        if key not in informer.cache:
            return
        still_read = self._still_read.get(informer)
        if still_read is not None and still_read(key, informer.cache[key]):
            return  # another kind reads it: it stays (translated again when a zone of it is gained)
        informer.forget(key)
        self._on_forget(name, key)

    def _rebuild(self, keys: set[str]) -> None:
        for key in keys:
            name, _, cache_key = key.partition("/")
            informer = self._kinds[name][1]
            if cache_key in informer.forgotten:
                self._refetch.want(informer, cache_key)  # read it again first
            else:
                self._queue(name, (cache_key,))

    def _refetched(self, informer: Informer, keys: set[str]) -> None:
        if self._report is None:
            self._queue(self._names[informer], keys)
            return
        for key in keys:
            self._report(informer.resource, key, None, informer.cache.get(key))

    def _swept(self, zones: dict[str, int], found: dict[Informer, set[str]]) -> None:
        keys = [f"{self._names[informer]}/{key}" for informer, cached in found.items() for key in cached]
        self.desired.swept(zones, keys)

    def _freed(self, keys: set[str]) -> None:
        for key in keys:
            name, _, cache_key = key.partition("/")
            if name in self._kinds:
                self.translated(name, cache_key)

    async def _sweep_loop(self) -> None:
        swept = -1
        while True:
            await anyio.sleep(SWEEP_EVERY)
            if not self.desired.restricted or swept == self.desired.epoch:
                continue
            swept = self.desired.epoch
            for name, (kind, informer) in self._kinds.items():
                if kind.evictable:
                    for key in [k for k in informer.cache if self.desired.holds_nothing_of(f"{name}/{k}")]:
                        self._forget(name, informer, key)
                    await anyio.lowlevel.checkpoint()
            for informer in self._inputs:
                reads = informer.admit
                assert reads is not None
                for key in [k for k, obj in informer.cache.items() if not reads(k, obj)]:
                    informer.drop(key)
                await anyio.lowlevel.checkpoint()
