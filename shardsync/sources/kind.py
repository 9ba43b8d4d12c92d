"""What a source kind is: the description each kind's module gives of itself, for the one table of kinds.

A `SourceKind` names its `--source` value, the resources it watches (its own objects first, then the
related objects its translation reads), its flags (a FlagGroup filling its own options value), what to say
when its resources are not served (a CRD not installed), what its informers keep of each object
(`projections`, sources.projections), and how one watcher translates its objects: `start(context)`
gives that watcher's `Translator`, which holds whatever state the kind keeps between events (an index
of which owners a related object feeds, a status writer). The generic watcher
(`sources.watcher`) runs informers for the resources, calls `Translator.related` on a related object's
change to learn which of the kind's own objects to re-translate, and `Translator.translate` on them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from shardsync.flags import FlagGroup
from shardsync.kube.client import Kube
from shardsync.kube.objects import Obj, Resource, same_but_version
from shardsync.sources.options import SourceOptions
from shardsync.sources.projections import Projection, with_annotations
from shardsync.sources.result import SourceResult

OptionsT = TypeVar("OptionsT")
# The names an object's records may have or lie under, given the flags every kind shares (`SourceKind.names`).
Names = Callable[[Obj, SourceOptions], Sequence[str] | None]


@dataclass(frozen=True, slots=True)
class SourceContext(Generic[OptionsT]):
    """What one watcher gives the translator of one kind."""

    options: OptionsT  # the kind's own options (its FlagGroup's value; None for a kind without flags)
    cache: Callable[[Resource], Mapping[str, Obj]]  # the current cache of a resource the kind watches
    kube: Kube  # for writes to the kind's own objects (a status)
    may_write: Callable[[], bool]  # whether this replica writes to source objects now
    status_resync: float = 30.0  # how often lagging statuses are looked for
    max_backoff: float = 30.0  # the longest wait between two retries of a failed write
    common: SourceOptions = field(
        default_factory=SourceOptions
    )  # the flags every kind shares (sources.options)
    # Whether this replica holds a zone an object's names reach (True/False), or None when that does not
    # decide who writes to it (not sharded, or its names do not tell): see sources.problems.
    holds: Callable[[Obj], bool | None] = lambda obj: None
    # Read back the objects of a related resource (in a namespace, by a labelSelector) that its informer
    # left out (`Translator.admits`) and call `then` once they are cached and reported; False, calling
    # nothing, when the informer has left nothing out (sources.shard_cache).
    read_back: Callable[[Resource, str, str, Callable[[], None]], bool] = (
        lambda resource, namespace, selector, then: False
    )
    retranslate: Callable[[Iterable[str]], None] = lambda keys: None  # queue own objects' keys again


class Translator:
    """One watcher's translation of one kind's objects. `translate` is the one method a kind must give."""

    def translate(self, key: str, obj: Obj | None) -> SourceResult | None:
        """The endpoints of the kind's object at cache key `key`; `obj` is None when it is gone or the
        object filters leave it out (drop what is kept about it). None: no endpoints."""
        raise NotImplementedError

    def unchanged(self, key: str, old: Obj, new: Obj) -> bool:
        """Whether the kind's object at `key`, cached as `old` and now as `new`, translates as before, so
        it is not translated again. By default when the two are equal but for their resourceVersion: a
        kind's projection keeps only what its translation reads (sources.projections), so a change of
        anything else (another controller's annotation, the status of a kind that does not read it) is
        equal once projected."""
        return same_but_version(old, new)

    def related(self, resource: Resource, key: str, old: Obj | None, new: Obj | None) -> Iterable[str]:
        """A related object changed (`old` None: added, `new` None: deleted): the cache keys of the kind's
        own objects to translate again."""
        return ()

    def listed(self, key: str, obj: Obj | None) -> None:
        """An object of the kind's own resource was cached or changed (`obj` None: gone), before its
        translation; called only while a related resource is kept by `admits`."""
        return None

    def admits(self, resource: Resource, key: str, obj: Obj) -> bool:
        """Whether the translator may read this object of a related resource it reads only by key
        (`SourceKind.read_by_key`): a sharded replica keeps only those (sources.watcher). It is asked of
        objects as listed or watched, whole; once False, the kind's own objects that come to read it
        wait (`SourceContext.read_back`, answering `NOT_YET`) until it is read back."""
        return True

    def forget(self, key: str) -> None:
        """A sharded replica dropped the object at `key` from its cache (sources.shard_cache): drop what
        the translator keeps about it too; it is translated afresh when read back."""
        return None

    async def run(self) -> None:
        """Background work of the kind, if any (writing statuses); runs as long as the watcher."""
        return None

    def catch_up(self) -> None:
        """This replica has just become the one that writes to source objects: look for lagging writes."""
        return None


class Pure(Translator):
    """A kind whose translation reads nothing but the object and the kind's options."""

    def __init__(self, translate: Callable[[Obj, OptionsT], SourceResult], options: OptionsT) -> None:
        self._translate = translate
        self._options = options

    def translate(self, key: str, obj: Obj | None) -> SourceResult | None:
        return None if obj is None else self._translate(obj, self._options)


def pure(
    translate: Callable[[Obj, OptionsT], SourceResult],
) -> Callable[[SourceContext[OptionsT]], Translator]:
    """The `start` of a kind whose translation is the function `translate(object, options)`."""
    return lambda context: Pure(translate, context.options)


@dataclass(frozen=True, slots=True)
class CrdNotice:
    """A kind whose resources come from CustomResourceDefinitions: its informers start once the API serves
    them; until then the kind waits (the others run) and the log says what to install (sources.served)."""

    what: str  # "DNSEndpoint CRD", in the log line "<what> not installed; the <kind> source waits for it"
    crds: tuple[str, ...]  # the CRDs' names (`<plural>.<group>`): the resources read that wait for one
    manifest: str  # where its manifest is


@dataclass(frozen=True, slots=True)
class SourceKind(Generic[OptionsT]):
    """One source kind: one line of `sources.table.SOURCES` (see the module docstring)."""

    name: str  # the value of --source; the kind's key in the desired index and its metric label
    resource: Resource  # its own objects: Events name this kind and apiVersion
    start: Callable[[SourceContext[OptionsT]], Translator]
    related: tuple[Resource, ...] = ()  # other objects its translation reads
    flags: FlagGroup[OptionsT] | None = None  # its own flags; several kinds may share one group
    label: str = ""  # the kind in external-dns's `resource` label (default: `name`)
    crd: CrdNotice | None = None
    # What the informer keeps of each watched resource (sources.projections); a resource not named here is
    # cached whole, so a kind that declares nothing still works.
    projections: Mapping[Resource, Projection] = field(default_factory=dict)
    # Slimmer ones used instead when no --fqdn-template is set (a template may read any field).
    untemplated: Mapping[Resource, Projection] = field(default_factory=dict)
    # A sharded replica may drop its own objects from the cache while their records all fall in zones the
    # replica does not run, reading them again when it gains one (sources.refetch). A kind that writes to
    # its objects leaves them to the replica holding their zone (SourceContext.holds, sources.status).
    evictable: bool = False
    # Related resources read in every namespace whatever --namespace says (a route's Gateway lives in
    # another namespace).
    all_namespaces: tuple[Resource, ...] = ()
    # Related resources the translator reads only by key, never whole (a Service's Pods and EndpointSlices):
    # their caches keep compact JSON (shardsync.kube.packed), as the kind's own objects' do.
    read_by_key: tuple[Resource, ...] = ()
    # The names an object's records may have or lie under (a Service's hostnames: a headless one adds
    # `<pod>.<hostname>`), read from the object as listed; None when only a translation can tell (say, with
    # --fqdn-template). A sharded replica leaves an evictable kind's object untranslated while no zone
    # those names reach is its own (sources.shard_cache).
    names: Names | None = None
    # A kind whose names also depend on its own flags (the pod kind: `<pod>.<--pod-source-domain>`) gives
    # its `names` through this instead: the kind's options → its names function (`names_for`).
    names_with: Callable[[OptionsT], Names] | None = None

    def projection(self, resource: Resource, templated: bool, filtered: bool = False) -> Projection | None:
        """What its informer keeps of `resource` (`templated`: an --fqdn-template may read any field;
        `filtered`: --annotation-filter may read any annotation of the kind's own objects)."""
        projection = self.projections.get(resource)
        if not templated and resource in self.untemplated:
            projection = self.untemplated[resource]
        if filtered and projection is not None and resource == self.resource:
            return with_annotations(projection)
        return projection

    # Its objects with no names at all publish nothing (a Pod without the pod kind's annotations): a sharded
    # replica leaves them out like those of other replicas' zones. Not for a kind that writes to every object
    # it reads (the crd kind's statuses) nor whose nameless objects' problems must reach the writer replica.
    leaves_out_unnamed: bool = False

    def names_for(self, options: OptionsT) -> Names | None:
        """The kind's `names` function, given the kind's options (see `names_with`)."""
        return self.names if self.names_with is None else self.names_with(options)

    def namespace_of(self, resource: Resource, namespace: str) -> str:
        """The namespace `resource` is listed in: --namespace, unless the kind reads it everywhere."""
        return "" if not resource.namespaced or resource in self.all_namespaces else namespace

    def packs(self, resource: Resource) -> bool:
        """Whether the kind reads `resource`'s cache only by key (so it may be packed)."""
        return resource == self.resource or resource in self.read_by_key

    @property
    def watches(self) -> tuple[Resource, ...]:
        """Every resource the kind lists and watches, its own first."""
        return (self.resource, *self.related)

    @property
    def resource_kind(self) -> str:
        return self.label or self.name

    def default_options(self) -> Any:
        return self.flags.options() if self.flags is not None else None


def chosen(kinds: Sequence[SourceKind[Any]]) -> list[SourceKind[Any]]:
    """The kinds one watcher runs, as they run together: a kind's own objects that another of them reads too
    (the Services an Istio Gateway points at) are not evictable, since objects left out or forgotten for
    their own kind's zones would be missing to the other kind. Unless the other kind reads them by key
    alone (the pod kind's Pods, which the service kind reads): their one informer then keeps what either
    kind needs (sources.shard_cache's `kept_while_read`)."""
    read_by_others = {r for kind in kinds for r in kind.related if r not in kind.read_by_key}
    return [
        replace(kind, evictable=False) if kind.evictable and kind.resource in read_by_others else kind
        for kind in kinds
    ]
