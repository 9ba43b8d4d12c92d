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
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

import anyio
import anyio.lowlevel

from shardsync.desired import DesiredIndex
from shardsync.informer import Informer
from shardsync.kube import Kube
from shardsync.objects import Obj
from shardsync.sources.common import SourceOptions
from shardsync.sources.kind import SourceKind
from shardsync.sources.refetch import Refetcher

SWEEP_EVERY = 1.0  # seconds between looks for cached objects held nowhere


class ShardCaches:
    """See the module docstring. `kinds`: kind name → (kind, the informer of its own objects); `queue(name,
    keys)` marks cache keys of that kind for translation."""

    def __init__(
        self,
        kube: Kube,
        desired: DesiredIndex,
        kinds: Mapping[str, tuple[SourceKind[Any], Informer]],
        queue: Callable[[str, Iterable[str]], None],
        on_forget: Callable[[str, str], None] = lambda name, key: None,
    ) -> None:
        self.desired = desired
        self._on_forget = on_forget
        self._kinds = kinds
        self._queue = queue
        self._names = {informer: name for name, (_, informer) in kinds.items()}
        self._refetch = Refetcher(kube, self._refetched, self._swept)
        self._inputs: list[Informer] = []  # related objects kept only while read (`keep_read`)
        desired.on_rebuild = self._rebuild
        desired.on_freed = self._freed
        desired.on_sweep = self._refetch.sweep
        desired.pinned = lambda key: key.partition("/")[0] not in kinds

    def keep_read(self, informer: Informer, reads: Callable[[str, Obj], bool]) -> None:
        """Keep only the related objects the translator reads (`Translator.admits`); those it stops
        reading are dropped at the next sweep of the caches."""
        informer.admit = reads
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
        names_of = kind.names
        if not kind.evictable or names_of is None:
            return None
        desired = self.desired

        def admit(key: str, obj: Obj) -> bool:
            names = names_of(obj, common)
            return names is None or not desired.defer(f"{name}/{key}", names)

        def reaches(obj: Obj, zones: Collection[str]) -> bool:
            names = names_of(obj, common)
            reached = None if names is None else desired.reached(names)
            return reached is None or not reached.isdisjoint(zones)

        self._refetch.sweeper(informer, reaches)
        return admit

    def holds_reach(self, kind: SourceKind[Any], obj: Obj, common: SourceOptions) -> bool | None:
        """Whether a zone `obj`'s names reach is held here; None when its names do not tell (unnamed, a
        name in no zone, a kind that cannot say) or this replica holds every zone (not sharded)."""
        if not self.desired.restricted or kind.names is None:
            return None
        names = kind.names(obj, common)
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
        if key in informer.cache:
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
        self._queue(self._names[informer], keys)

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
