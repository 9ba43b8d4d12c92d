"""Reads forgotten objects back from the API server, for the zones a sharded replica gains.

A sharded replica drops from its caches the objects of evictable kinds whose records all fall in zones it
does not run (`Informer.forget`, decided by the watcher). When it gains such a zone, the objects it needs
are read again with one paged list of their resource (the informers' own permission: no `get` on source
objects), keeping only those wanted; zones gained while a list runs wait for the next one. Each object
read is put back in its informer's cache (`Informer.restore`; an object the watch delivered meanwhile is
left as the watch has it, one gone is reported as gone) and handed to `arrived` to be translated. A failed
read is retried with backoff.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from shardsync.backoff import Backoff
from shardsync.informer import Informer
from shardsync.kube import Kube, KubeError
from shardsync.logs import get_logger
from shardsync.notify import Notifier
from shardsync.objects import object_key

log = get_logger(__name__)


class Refetcher:
    """See the module docstring."""

    def __init__(self, kube: Kube, arrived: Callable[[Informer, set[str]], None]) -> None:
        self.kube = kube
        self._arrived = arrived
        self._wanted: dict[Informer, set[str]] = {}
        self._wake = Notifier()

    def want(self, informer: Informer, key: str) -> None:
        self._wanted.setdefault(informer, set()).add(key)
        self._wake.notify()

    async def run(self) -> None:
        backoff = Backoff(initial=0.5, maximum=30.0)
        while True:
            ticket = self._wake.ticket()
            if not self._wanted:
                await self._wake.wait(ticket)
                continue
            batch, self._wanted = self._wanted, {}
            try:
                for informer, keys in batch.items():
                    found = await self._read(informer, keys)
                    for key in keys:
                        informer.restore(key, found.get(key))
                    self._arrived(informer, keys - informer.forgotten)
                backoff.reset()
            except KubeError as exc:
                for informer, keys in batch.items():  # whatever is still forgotten is wanted again
                    self._wanted.setdefault(informer, set()).update(keys & informer.forgotten)
                delay = backoff.next()
                log.warning("reading objects again failed", status=exc.status, retry_in=f"{delay:.2f}s")
                await anyio.sleep(delay)

    async def _read(self, informer: Informer, keys: set[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        token = ""
        while True:
            body = await self.kube.list(
                informer.resource,
                namespace=informer.namespace,
                label_selector=informer.label_selector,
                field_selector=informer.field_selector,
                limit=informer.page_size or None,  # pages as its informer lists them
                continue_token=token,
            )
            for item in body.get("items") or []:
                key = object_key(item)
                if key in keys:
                    found[key] = item
            token = str((body.get("metadata") or {}).get("continue") or "") if informer.page_size else ""
            del body
            if not token:
                return found
