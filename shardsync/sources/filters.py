"""The filters external-dns applies around its sources: which objects are read, which endpoints are kept.

- `ObjectFilter`: `--namespace`, `--label-filter` (label selector on the object's labels) and
  `--annotation-filter` (label-selector syntax on the object's annotations). external-dns-prefixed
  annotations are matched under both prefixes, so a filter written for either version of external-dns sees
  annotations written for either.
- `DomainFilter`: `--domain-filter`, `--exclude-domains`, `--regex-domain-filter` and
  `--regex-domain-exclusion`, with external-dns's matching rules.
- `RecordTypeFilter`: `--managed-record-types` (default A, AAAA, CNAME) and `--exclude-record-types`.

Bad filter syntax is a configuration error: the constructors raise ValueError (SelectorError for
selectors, re.error for regular expressions), to be reported at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shardsync.endpoint import DEFAULT_MANAGED_TYPES, Endpoint
from shardsync.objects import get_str, get_str_map
from shardsync.selectors import Selector, parse_selector
from shardsync.sources.annotations import with_both_prefixes


@dataclass(frozen=True, slots=True)
class ObjectFilter:
    """Which source objects are read at all."""

    namespace: str = ""  # "" means every namespace
    labels: Selector = field(default_factory=Selector)
    annotations: Selector = field(default_factory=Selector)

    @classmethod
    def parse(cls, namespace: str = "", label_filter: str = "", annotation_filter: str = "") -> ObjectFilter:
        return cls(
            namespace=namespace,
            labels=parse_selector(label_filter),
            annotations=parse_selector(annotation_filter, for_annotations=True),
        )

    def matches(self, obj: Mapping[str, Any]) -> bool:
        if self.namespace and get_str(obj, "metadata", "namespace") != self.namespace:
            return False
        if not self.labels.empty() and not self.labels.matches(get_str_map(obj, "metadata", "labels")):
            return False
        if self.annotations.empty():
            return True
        return self.annotations.matches(with_both_prefixes(get_str_map(obj, "metadata", "annotations")))


def _prepare(domains: Iterable[str]) -> tuple[str, ...]:
    """external-dns's prepareFilters: trimmed, lower-cased, trailing dot dropped, empties removed."""
    out = (d.strip().removesuffix(".").lower() for d in domains)
    return tuple(d for d in out if d)


def _strip(domain: str) -> str:
    return domain.removesuffix(".").lower()


def _match_any(filters: tuple[str, ...], domain: str) -> bool:
    """external-dns's matchFilter for a non-empty filter list."""
    name = _strip(domain)
    for f in filters:
        if f.startswith("."):
            if name.endswith(f):
                return True
        elif name.count(".") == f.count("."):
            if name == f:
                return True
        elif name.endswith("." + f):
            return True
    return False


@dataclass(frozen=True, slots=True)
class DomainFilter:
    """external-dns's DomainFilter.

    A filter `example.com` matches `example.com` and its subdomains; `.example.com` only the subdomains.
    Exclusions win over inclusions. When a regular expression is given, the lists are not used: a name
    must match `regex` (searched, not anchored, as Go's MatchString) and must not match `regex_exclusion`.
    """

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    regex: re.Pattern[str] | None = None
    regex_exclusion: re.Pattern[str] | None = None

    @classmethod
    def parse(
        cls,
        domain_filter: Iterable[str] = (),
        exclude_domains: Iterable[str] = (),
        regex_domain_filter: str = "",
        regex_domain_exclusion: str = "",
    ) -> DomainFilter:
        return cls(
            include=_prepare(domain_filter),
            exclude=_prepare(exclude_domains),
            regex=re.compile(regex_domain_filter) if regex_domain_filter else None,
            regex_exclusion=re.compile(regex_domain_exclusion) if regex_domain_exclusion else None,
        )

    @property
    def configured(self) -> bool:
        return bool(self.include or self.exclude or self.regex or self.regex_exclusion)

    def match(self, domain: str) -> bool:
        if self.regex is not None or self.regex_exclusion is not None:
            name = _strip(domain)
            if self.regex_exclusion is not None and self.regex_exclusion.search(name):
                return False
            return self.regex is None or self.regex.search(name) is not None
        if self.include and not _match_any(self.include, domain):
            return False
        return not (self.exclude and _match_any(self.exclude, domain))

    def match_parent(self, domain: str) -> bool:
        """Whether `domain` is a parent of some included domain (external-dns's MatchParent, for zones)."""
        if self.exclude and _match_any(self.exclude, domain):
            return False
        if not self.include:
            return True
        name = _strip(domain)
        return any(not f.startswith(".") and f.endswith("." + name) for f in self.include)


@dataclass(frozen=True, slots=True)
class RecordTypeFilter:
    """--managed-record-types and --exclude-record-types."""

    managed: frozenset[str] = frozenset(DEFAULT_MANAGED_TYPES)
    excluded: frozenset[str] = frozenset()

    @classmethod
    def parse(
        cls, managed: Iterable[str] = DEFAULT_MANAGED_TYPES, excluded: Iterable[str] = ()
    ) -> RecordTypeFilter:
        return cls(
            frozenset(t.strip().upper() for t in managed), frozenset(t.strip().upper() for t in excluded)
        )

    def match(self, record_type: str) -> bool:
        return record_type in self.managed and record_type not in self.excluded


def filter_endpoints(
    endpoints: Iterable[Endpoint], domains: DomainFilter, types: RecordTypeFilter
) -> list[Endpoint]:
    """The endpoints whose name the domain filter accepts and whose type is managed."""
    return [ep for ep in endpoints if types.match(ep.record_type) and domains.match(ep.dns_name)]
