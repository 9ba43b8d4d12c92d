"""external-dns's DomainFilter (endpoint/domain_filter.go): which DNS names, and which zones, are ours.

One class for every user: the sources keep only the endpoints whose name it admits (`--domain-filter`,
`--exclude-domains`), the replica keeps the provider's zones it admits or that are parents of an admitted
domain, and the webhook provider reads the filter its server sends on negotiation (`from_json`) and takes
its zones from it (`zones()`).

The matching rules are external-dns's: names and filters are compared lower-case without a trailing dot; a
filter `example.com` admits `example.com` and its subdomains, `.example.com` only the subdomains; an
exclusion wins over an inclusion; a regular expression (searched, not anchored, as Go's MatchString)
replaces both name lists when one is given. Bad input raises `DomainFilterError` (a ValueError).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class DomainFilterError(ValueError):
    """A filter that cannot be used: not the JSON form, or a regular expression that does not compile."""


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


def _compile(pattern: str) -> re.Pattern[str] | None:
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise DomainFilterError(f"bad regular expression {pattern!r}: {exc}") from None


@dataclass(frozen=True, slots=True)
class DomainFilter:
    """external-dns's DomainFilter (see the module docstring); the empty filter admits every name."""

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
        """From the flags' values (`--domain-filter`, `--exclude-domains`, `--regex-domain-filter`,
        `--regex-domain-exclusion`)."""
        return cls(
            include=_prepare(domain_filter),
            exclude=_prepare(exclude_domains),
            regex=_compile(regex_domain_filter),
            regex_exclusion=_compile(regex_domain_exclusion),
        )

    @classmethod
    def from_json(cls, data: Any) -> DomainFilter:
        """From external-dns's JSON form (`{"include", "exclude", "regexInclude", "regexExclude"}`), as a
        webhook provider sends it on negotiation."""
        if not isinstance(data, Mapping):
            raise DomainFilterError(f"domain filter is not an object: {data!r}")

        def names(key: str) -> list[str]:
            items = data.get(key) or []
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise DomainFilterError(f"{key} must be a list of names")
            return items

        return cls.parse(
            names("include"),
            names("exclude"),
            str(data.get("regexInclude") or ""),
            str(data.get("regexExclude") or ""),
        )

    @property
    def configured(self) -> bool:
        return bool(self.include or self.exclude or self.regex or self.regex_exclusion)

    def match(self, domain: str) -> bool:
        """Whether the filter admits the name `domain`."""
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

    def zones(self) -> list[str]:
        """The zones the filter names: its includes that are whole domains (no leading dot) it admits."""
        return sorted({z for z in self.include if not z.startswith(".") and self.match(z)})
