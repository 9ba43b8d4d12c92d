"""Which Istio objects read which others, indexed both ways (pure, no I/O): the Services and Ingresses each
Gateway's targets come from (`GatewayFeeds`), and which VirtualServices name which Gateway (`RefIndex`).

An event on a Service or an Ingress asks `GatewayFeeds` which Gateways' targets it may have changed, and an
event on a Gateway asks a VirtualService kind's `RefIndex` which VirtualServices name it, so each event
re-translates exactly what reads it. A translation asks `GatewayFeeds.select` which Services a Gateway's
selector may pick: the Services holding one of the selector's labels, indexed for the labels some Gateway
selects by (a label first selected by is looked up once in the whole Services cache, then kept up to date
from the Service events), so it costs what the Gateway picks rather than every Service of the cluster.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from shardsync.kube.objects import get
from shardsync.sources.istio import feed_of, load_balancer, selects, service_inputs

Obj = Mapping[str, Any]
Label = tuple[str, str]


class RefIndex:
    """Which objects refer to which others (cache keys both), both ways."""

    def __init__(self) -> None:
        self._refs: dict[str, frozenset[str]] = {}
        self._owners: defaultdict[str, set[str]] = defaultdict(set)

    def register(self, key: str, refs: Iterable[str]) -> None:
        self.unregister(key)
        kept = frozenset(refs)
        if kept:
            self._refs[key] = kept
        for ref in kept:
            self._owners[ref].add(key)

    def unregister(self, key: str) -> None:
        for ref in self._refs.pop(key, ()):
            owners = self._owners[ref]
            owners.discard(key)
            if not owners:
                del self._owners[ref]

    def owners(self, refs: Iterable[str]) -> set[str]:
        """The objects referring to any of `refs`."""
        return {key for ref in refs for key in self._owners.get(ref, ())}

    def __len__(self) -> int:
        return len(self._refs)


def _labels(service: Obj | None) -> Mapping[str, Any]:
    labels = get(service, "spec", "selector")
    return labels if isinstance(labels, Mapping) else {}


class GatewayFeeds:
    """What each registered Gateway's targets are read from; `services()` gives the Services cache."""

    def __init__(self, services: Callable[[], Mapping[str, Obj]]) -> None:
        self._services = services
        self._selectors: dict[str, Mapping[str, str]] = {}  # Gateway key → selector (reading Services)
        self._ingresses = RefIndex()
        self._picked: dict[
            Label, set[str]
        ] = {}  # a label some selector holds → Services whose selector has it
        self._users: defaultdict[Label, int] = defaultdict(int)  # how many registered selectors hold it

    def register(self, key: str, gateway: Obj) -> None:
        feed = feed_of(gateway)
        if feed.selector is not None:
            for label in feed.selector.items():  # before the old ones go: a label kept is not read again
                self._users[label] += 1
                if label not in self._picked:
                    services = self._services().items()
                    self._picked[label] = {k for k, s in services if _labels(s).get(label[0]) == label[1]}
        self._drop(self._selectors.pop(key, None))
        if feed.selector is not None:
            self._selectors[key] = feed.selector
        self._ingresses.register(key, (feed.ingress,) if feed.ingress else ())

    def unregister(self, key: str) -> None:
        self._drop(self._selectors.pop(key, None))
        self._ingresses.unregister(key)

    def _drop(self, selector: Mapping[str, str] | None) -> None:
        for label in (selector or {}).items():
            self._users[label] -= 1
            if not self._users[label]:
                del self._users[label], self._picked[label]

    def select(self, selector: Mapping[str, str]) -> Iterable[str]:
        """Keys of the Services a registered selector may pick (each to be checked with `istio.selects`)."""
        postings = [self._picked.get(label) for label in selector.items()]
        if not postings:
            return self._services().keys()  # an empty selector picks every Service
        if any(p is None for p in postings):  # not registered: look at every Service
            return self._services().keys()
        return min((p for p in postings if p is not None), key=len)

    def service_changed(self, key: str, old: Obj | None, new: Obj | None) -> set[str]:
        """A Service changed (`old` None: added, `new` None: deleted): the Gateways whose targets it may
        have changed (their selector picks it, before or after)."""
        if old is not None and new is not None and service_inputs(old) == service_inputs(new):
            return set()
        before, after = _labels(old), _labels(new)
        for label, picked in self._picked.items():
            if after.get(label[0]) == label[1]:
                picked.add(key)
            elif before.get(label[0]) == label[1]:
                picked.discard(key)
        services = [s for s in (old, new) if s is not None]
        return {gw for gw, sel in self._selectors.items() if any(selects(sel, s) for s in services)}

    def ingress_changed(self, key: str, old: Obj | None, new: Obj | None) -> set[str]:
        """An Ingress changed: the Gateways whose `ingress` annotation names it, if its addresses changed."""
        if old is not None and new is not None and load_balancer(old) == load_balancer(new):
            return set()
        return self._ingresses.owners((key,))
