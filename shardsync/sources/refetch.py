"""Reads forgotten objects back from the API server, for the zones a sharded replica gains.

A sharded replica drops from its caches the objects of evictable kinds whose records all fall in zones it
does not run (`Informer.forget`, decided by the watcher). When it gains such a zone, the objects it needs
are read again with one paged list of their resource (the informers' own permission: no `get` on source
objects), keeping only those wanted; zones gained while a list runs wait for the next one. Each object
read is put back in its informer's cache (`Informer.restore`; an object the watch delivered meanwhile is
left as the watch has it, one gone is reported as gone) and handed to `arrived` to be translated. A failed
read is retried with backoff, at once when the API server answers again after an outage
(`ApiHealth.pause`).

Objects left out untranslated as they were listed (`DesiredIndex.defer`: their names reached no zone held
then) are not in the desired index at all: a sweep reads each such kind's objects once for the zones newly
held (`sweep`), puts back those whose names reach them (`Reaches`) and reports them with the zones'
tickets (`swept`).

Related objects an informer left out (`Informer.admit`: the Pods of Services another replica runs) are
read back on request (`load`: a namespace and a labelSelector, the Pods of one Service): by one list per
request, or by one paged list of the whole resource when many are asked at once (a gained zone's
Services). What the informer now admits is put back and reported as added, then each request's `then`
is called."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection
from typing import Any

from shardsync.kube.client import Kube, KubeError
from shardsync.kube.informer import Informer
from shardsync.kube.objects import Obj, object_key
from shardsync.logs import get_logger
from shardsync.pacing.backoff import Backoff
from shardsync.pacing.notify import Notifier

log = get_logger(__name__)


Reaches = Callable[[Obj, Collection[str]], bool]  # whether an object's names reach one of the zones
Swept = Callable[[dict[str, int], dict[Informer, set[str]]], None]
Loads = dict[Informer, dict[tuple[str, str], list[Callable[[], None]]]]  # (namespace, selector) → thens

LOAD_BATCH = 8  # more requests than this for one resource at once: one list of all its objects instead


def _no_sweeps(zones: dict[str, int], found: dict[Informer, set[str]]) -> None:
    return None


class Refetcher:
    """See the module docstring."""

    def __init__(
        self, kube: Kube, arrived: Callable[[Informer, set[str]], None], swept: Swept = _no_sweeps
    ) -> None:
        self.kube = kube
        self._arrived = arrived
        self._swept = swept
        self._wanted: dict[Informer, set[str]] = {}
        self._sweepers: dict[Informer, Reaches] = {}
        self._sweeps: dict[str, int] = {}  # zone → ticket
        self._loads: Loads = {}
        self._wake = Notifier()

    def want(self, informer: Informer, key: str) -> None:
        self._wanted.setdefault(informer, set()).add(key)
        self._wake.notify()

    def sweeper(self, informer: Informer, reaches: Reaches) -> None:
        """The informer's objects may be left out untranslated: sweeps read them back (`reaches`)."""
        self._sweepers[informer] = reaches

    def load(self, informer: Informer, namespace: str, selector: str, then: Callable[[], None]) -> None:
        """Read back what the informer now admits of the objects in `namespace` matching `selector`; call
        `then` once they are cached (later, never from within this call)."""
        self._loads.setdefault(informer, {}).setdefault((namespace, selector), []).append(then)
        self._wake.notify()

    def sweep(self, zones: dict[str, int]) -> None:
        """Read back the left-out objects whose names reach these zones (zone → ticket, for `swept`)."""
        self._sweeps.update(zones)
        self._wake.notify()

    async def run(self) -> None:
        backoff = Backoff(initial=0.5, maximum=30.0)
        health = self.kube.health
        while True:
            recoveries = health.recoveries  # an outage ending from now on cuts a retry's wait short
            ticket = self._wake.ticket()
            if not self._wanted and not self._sweeps and not self._loads:
                await self._wake.wait(ticket)
                continue
            batch, self._wanted = self._wanted, {}
            sweeps, self._sweeps = self._sweeps, {}
            loads, self._loads = self._loads, {}
            try:
                for informer, asked in loads.items():
                    await self._load(informer, asked)
                for informer, keys in batch.items():
                    found = await self._read(informer, keys)
                    for key in keys:
                        informer.restore(key, found.get(key))
                    self._arrived(informer, keys - informer.forgotten)
                if sweeps:
                    await self._sweep(sweeps)
                backoff.reset()
            except KubeError as exc:
                for informer, keys in batch.items():  # whatever is still forgotten is wanted again
                    self._wanted.setdefault(informer, set()).update(keys & informer.forgotten)
                self._sweeps = {**sweeps, **self._sweeps}  # a newer ticket for a zone wins
                for informer, asked in loads.items():
                    for request, thens in asked.items():
                        if thens:  # not yet read (each read's requests are emptied once done)
                            self._loads.setdefault(informer, {}).setdefault(request, []).extend(thens)
                delay = backoff.next()
                log.warning("reading objects again failed", status=exc.status, retry_in=f"{delay:.2f}s")
                if await health.pause(delay, recoveries):
                    backoff.reset()

    async def _sweep(self, sweeps: dict[str, int]) -> None:
        """One paged list of each sweeper's resource: the objects left out whose names reach the zones go
        back in its cache as they are read; at the end, every object read that reaches them and is cached
        (put back now, or delivered by the watch meanwhile) is handed to `arrived` and `swept` together,
        so the zones wait for its translation (which may not begin before)."""
        zones = set(sweeps)
        reached: dict[Informer, set[str]] = {}
        for informer, reaches in self._sweepers.items():
            keys = reached[informer] = set()
            with informer.sweeping():
                async for item in self._items(informer):
                    if reaches(item, zones):
                        key = object_key(item)
                        informer.put_back(key, item)
                        keys.add(key)
        present = {informer: {k for k in keys if k in informer.cache} for informer, keys in reached.items()}
        for informer, keys in present.items():
            self._arrived(informer, keys)
        self._swept(sweeps, present)

    async def _load(self, informer: Informer, asked: dict[tuple[str, str], list[Callable[[], None]]]) -> None:
        """Put back what the informer admits of the objects `asked` names, then call their `then`s."""
        admit = informer.admit
        whole = len(asked) > LOAD_BATCH
        requests = [("", "")] if whole else list(asked)
        with informer.sweeping():
            for namespace, selector in requests:
                async for item in self._items(informer, namespace, selector):
                    key = object_key(item)
                    if key not in informer.cache and (admit is None or admit(key, item)):
                        informer.put_back(key, item, report=True)
                if not whole:
                    for then in asked.pop((namespace, selector)):
                        then()
        for thens in asked.values():
            for then in thens:
                then()
        asked.clear()

    async def _items(
        self, informer: Informer, namespace: str = "", selector: str = ""
    ) -> AsyncIterator[dict[str, Any]]:
        """Every object of the informer's resource (within `namespace`, matching `selector` as well), by
        one paged list as its informer pages it: a page's objects are dropped once the next page is asked
        for."""
        token = ""
        while True:
            body = await self.kube.list(
                informer.resource,
                namespace=namespace or informer.namespace,
                label_selector=",".join(s for s in (informer.label_selector, selector) if s),
                field_selector=informer.field_selector,
                limit=informer.page_size or None,
                continue_token=token,
            )
            token = str((body.get("metadata") or {}).get("continue") or "") if informer.page_size else ""
            items = body.get("items") or []
            del body
            for item in items:
                yield item
            if not token:
                return

    async def _read(self, informer: Informer, keys: set[str]) -> dict[str, dict[str, Any]]:
        return {key: item async for item in self._items(informer) if (key := object_key(item)) in keys}
