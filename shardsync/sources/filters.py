"""The filters external-dns applies around its sources: which objects are read, which endpoints are kept.

- `ObjectFilter`: `--namespace`, `--label-filter` (label selector on the object's labels) and
  `--annotation-filter` (label-selector syntax on the object's annotations). external-dns-prefixed
  annotations are matched under both prefixes, so a filter written for either version of external-dns sees
  annotations written for either.
- `DomainFilter` (shardsync.records.domain_filter): `--domain-filter`, `--exclude-domains`,
  `--regex-domain-filter` and `--regex-domain-exclusion` (`regex` checks the last two at start-up).
- `RecordTypeFilter`: `--managed-record-types` (default A, AAAA, CNAME) and `--exclude-record-types`.

Bad filter syntax is a configuration error: the constructors raise ValueError (SelectorError for
selectors, DomainFilterError for regular expressions), to be reported at start-up.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shardsync.kube.objects import get_str, get_str_map
from shardsync.kube.selectors import Selector, parse_selector
from shardsync.records.domain_filter import DomainFilter
from shardsync.records.endpoint import DEFAULT_MANAGED_TYPES, Endpoint
from shardsync.sources.annotations import with_both_prefixes


def regex(text: str) -> str:
    """A flag's regular expression (`--regex-domain-filter`, `--regex-domain-exclusion`), as argparse's
    `type=`: kept as written, refused at start-up when it does not compile. Python's `re` syntax, which
    agrees with Go's RE2 for the expressions domain filters use (no backreferences or lookarounds in RE2)."""
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"bad regular expression {text!r}: {exc}") from None
    return text


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
