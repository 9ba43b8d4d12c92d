"""Checks of single flag values for `replica.config`: domain names, selectors, the metrics address, names.

Each raises ConfigError naming the flag and showing a value that would work.
"""

from __future__ import annotations

import re

from shardsync.flags import ConfigError
from shardsync.kube.selectors import SelectorError, parse_selector
from shardsync.replica.server import parse_address

DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_LABEL = re.compile(r"^(\*|[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)$")


def validate_domain(name: str, domain: str) -> None:
    """A --domain-filter/--exclude-domains value: a DNS name, a leading `.` allowed (external-dns's
    "subdomains only" form)."""
    text = domain.strip().lower().rstrip(".")
    text = text[1:] if text.startswith(".") else text
    labels = text.split(".")
    bad = not text or len(text) > 253 or not all(_LABEL.match(label) for label in labels)
    if bad:
        raise ConfigError(
            f"{name}={domain}: not a domain name (dot-separated labels of letters, digits and '-', "
            "none empty, e.g. example.com)"
        )


def validate_selectors(label_filter: str, annotation_filter: str) -> None:
    for name, text, for_annotations in (
        ("--label-filter", label_filter, False),
        ("--annotation-filter", annotation_filter, True),
    ):
        try:
            parse_selector(text, for_annotations=for_annotations)
        except SelectorError as exc:
            raise ConfigError(
                f"{name}={text}: not a valid selector ({exc}); write it as a kubectl -l selector, "
                "e.g. app=web,tier in (a,b)"
            ) from None


def validate_address(address: str) -> None:
    try:
        _, port = parse_address(address)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ConfigError(
            f"--metrics-address={address}: not HOST:PORT or :PORT with a port from 0 to 65535, e.g. :7979"
        )
