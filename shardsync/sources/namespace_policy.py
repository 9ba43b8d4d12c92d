"""The namespace → domain policy: which DNS names the objects of each namespace may publish (off by default).

With `--namespace-domains-annotation=KEY` (e.g. `shardsync.io/allowed-domains`) the cluster admin lists on
each Namespace, in annotation KEY, the domains its objects may publish, comma-separated:
`team-a.example.com` admits that name and every name under it, `*.apps.example.com` only the names under
`apps.example.com`. A namespace without the annotation (or with an empty one) publishes nothing while the
policy is on; objects of no namespace (Nodes: the node source) are the cluster admin's and pass. The watcher
applies `filter` to every kind's result (sources.gate), so a new kind is covered without a line of its own.

An endpoint outside its namespace's domains is dropped and becomes a problem of the object (a Warning Event
`DomainNotAllowed`); the gauge counts the endpoints refused now. The refused names are remembered (`refused`),
so the worker's delete guard (shardsync.reconcile.delete_guard) can tell a delete the policy causes from an
ordinary one and refuse a policy typo that would empty a zone. A Namespace change re-translates that
namespace's objects (`on_change`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import anyio
from prometheus_client import Gauge

from shardsync.kube.client import Kube
from shardsync.kube.informer import Informer
from shardsync.kube.objects import NAMESPACES, ObjectRef, get_str_map
from shardsync.records.domain_filter import DomainFilter
from shardsync.records.endpoint import Endpoint
from shardsync.sources.result import Problem

REASON = "DomainNotAllowed"

REFUSED = Gauge(
    "shardsync_namespace_policy_refused_endpoints",
    "Endpoints refused now by the namespace → domain policy (--namespace-domains-annotation)",
)

# A namespace's allowed domains: None publishes nothing.
Allowed = DomainFilter | None


def parse_allowed(text: str | None) -> Allowed:
    """The annotation's value as a filter: `x` admits x and its subdomains, `*.x` only the subdomains."""
    if text is None:
        return None
    entries = [e.strip() for e in text.split(",")]
    domains = ["." + e[2:] if e.startswith("*.") else e for e in entries if e]
    domains = [d for d in domains if d.strip(".")]
    return DomainFilter.parse(domains) if domains else None


def describe(text: str | None) -> str:
    """The allowed domains for a message: what the annotation says, or that it is missing."""
    if text is None:
        return "the namespace has no allowed-domains annotation"
    return f"allowed: {text.strip()[:200] or '(none)'}"


class NamespacePolicy:
    """Follows the Namespaces' annotation and filters each object's endpoints by it (module docstring)."""

    def __init__(self, kube: Kube, annotation: str, on_change: Callable[[str], None] | None = None) -> None:
        self.annotation = annotation
        self.on_change = on_change  # set by the watcher: a namespace's policy changed
        self._texts: dict[str, str | None] = {}  # namespace → its annotation (None: absent)
        self._allowed: dict[str, Allowed] = {}
        self._by_object: dict[str, tuple[tuple[str, str], ...]] = {}  # desired key → refused (name, type)
        self._names: Counter[tuple[str, str]] = Counter()
        self._informer = Informer(kube, NAMESPACES, on_change=self._changed, name="namespaces")

    @classmethod
    def configured(cls, kube: Kube, annotation: str) -> NamespacePolicy | None:
        """The policy `--namespace-domains-annotation` asks for; None when it is off (the flag unset)."""
        return cls(kube, annotation) if annotation else None

    @property
    def synced(self) -> anyio.Event:
        return self._informer.synced

    async def run(self) -> None:
        await self._informer.run()

    def _changed(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        self.set_namespace(key, None if new is None else get_str_map(new, "metadata", "annotations"))

    def set_namespace(self, namespace: str, annotations: dict[str, str] | None) -> None:
        """A Namespace's annotations (None: it is gone); re-translates its objects when its policy moved."""
        text = None if annotations is None else annotations.get(self.annotation)
        if namespace in self._texts and self._texts[namespace] == text:
            return
        self._texts[namespace] = text
        self._allowed[namespace] = parse_allowed(text)
        if self.on_change is not None:
            self.on_change(namespace)

    def filter(
        self, desired_key: str, ref: ObjectRef | None, endpoints: Iterable[Endpoint]
    ) -> tuple[list[Endpoint], list[Problem]]:
        """The endpoints the object's namespace may publish, and a problem per name refused; `ref` None
        (the object is gone) forgets what was refused for it."""
        kept: list[Endpoint] = []
        refused: dict[tuple[str, str], None] = {}
        problems: list[Problem] = []
        if ref is not None and not ref.namespace:
            kept = list(endpoints)  # a cluster-scoped object (a Node) is the cluster admin's: no tenant's
        elif ref is not None:
            allowed = self._allowed.get(ref.namespace)
            for ep in endpoints:
                if allowed is not None and allowed.match(ep.dns_name):
                    kept.append(ep)
                    continue
                refused[(ep.dns_name, ep.record_type)] = None
                message = (
                    f"{ep.dns_name} {ep.record_type} not published: outside the domains namespace "
                    f"{ref.namespace} may publish ({describe(self._texts.get(ref.namespace))})"
                )
                problems.append(Problem(ref, "metadata.namespace", message, reason=REASON))
        self._remember(desired_key, tuple(refused))
        return kept, problems

    def _remember(self, desired_key: str, refused: tuple[tuple[str, str], ...]) -> None:
        before = self._by_object.pop(desired_key, ())
        self._names.subtract(before)
        if refused:
            self._by_object[desired_key] = refused
            self._names.update(refused)
        for key in before:
            if self._names[key] <= 0:
                del self._names[key]
        REFUSED.inc(len(refused) - len(before))

    def refused(self, name: str, record_type: str) -> bool:
        """Whether some object asks for (name, type) and the policy refuses it."""
        return self._names.get((name, record_type), 0) > 0
