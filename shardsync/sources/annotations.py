"""external-dns's object annotations, read under both prefixes and parsed the way external-dns parses them.

external-dns up to v0.21 reads `external-dns.alpha.kubernetes.io/<name>`; v0.22 moved to
`external-dns.kubernetes.io/<name>` and can still accept the old prefix, the new one winning when an
object carries both. shardsync reads both, always, with the same precedence, so manifests written for
either version keep working. Nothing here raises on bad input: every value that external-dns would warn
about (and ignore) comes back as an `AnnotationProblem`.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import durationpy

GA_PREFIX = "external-dns.kubernetes.io/"
ALPHA_PREFIX = "external-dns.alpha.kubernetes.io/"
PREFIXES = (GA_PREFIX, ALPHA_PREFIX)  # earlier wins

# Annotation names (after the prefix).
HOSTNAME = "hostname"
INTERNAL_HOSTNAME = "internal-hostname"
TARGET = "target"
TTL = "ttl"
CONTROLLER = "controller"
SET_IDENTIFIER = "set-identifier"
ACCESS = "access"
ENDPOINTS_TYPE = "endpoints-type"
INGRESS_HOSTNAME_SOURCE = "ingress-hostname-source"
GATEWAY_HOSTNAME_SOURCE = "gateway-hostname-source"  # on a Gateway API route, same values as the Ingress's
INGRESS = "ingress"  # on an Istio Gateway: the Ingress (`name` or `namespace/name`) whose addresses it takes
ALIAS = "alias"
RECORD_TYPE = "record-type"  # `ptr` or not: the provider-specific property `record-type` (sources.ptr)

CONTROLLER_VALUE = "dns-controller"  # the only `controller` value external-dns accepts as its own
ACCESS_VALUES = ("public", "private")
ENDPOINTS_TYPE_NODE_EXTERNAL_IP = "NodeExternalIP"
ENDPOINTS_TYPE_HOST_IP = "HostIP"
HOSTNAME_SOURCE_DEFINED_HOSTS_ONLY = "defined-hosts-only"
HOSTNAME_SOURCE_ANNOTATION_ONLY = "annotation-only"

TTL_MIN = 1
TTL_MAX = 2**31 - 1

# Provider-specific annotation families, mapped to external-dns's providerSpecific property names.
_PROVIDER_PREFIXES = (("aws-", "aws/"), ("scw-", "scw/"), ("webhook-", "webhook/"))
_CLOUDFLARE_KEYS = (
    "cloudflare-proxied",
    "cloudflare-custom-hostname",
    "cloudflare-region-key",
    "cloudflare-record-comment",
)

# Go's time.ParseDuration grammar: one or more "<decimal><unit>", optional sign, or a bare "0".
_GO_DURATION_RE = re.compile(r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+")
_GO_INT_RE = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class AnnotationProblem:
    """A value external-dns would warn about; `key` is the annotation as the object spells it."""

    key: str
    message: str

    @property
    def field(self) -> str:
        return f"metadata.annotations[{self.key}]"


def resolve(raw: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str], list[AnnotationProblem]]:
    """external-dns annotations by name, the new prefix winning over the old.

    Returns (values by name, the full key each value came from, conflicts between the two prefixes).
    """
    values: dict[str, str] = {}
    keys: dict[str, str] = {}
    problems: list[AnnotationProblem] = []
    for prefix in PREFIXES:
        for key, value in raw.items():
            if not key.startswith(prefix) or not isinstance(value, str):
                continue
            name = key[len(prefix) :]
            if name not in values:
                values[name], keys[name] = value, key
            elif values[name] != value:
                message = f"ignored: {keys[name]}={values[name]!r} is set and takes precedence"
                problems.append(AnnotationProblem(key, message))
    return values, keys, problems


def with_both_prefixes(raw: Mapping[str, str]) -> dict[str, str]:
    """The annotations with every external-dns key present under both prefixes (resolved value).

    `--annotation-filter` is matched against this, so a filter written with either prefix sees an
    annotation written with either prefix.
    """
    out = {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}
    values, _, _ = resolve(out)
    for name, value in values.items():
        for prefix in PREFIXES:
            out[prefix + name] = value
    return out


def split_list(value: str) -> list[str]:
    """external-dns's comma-list split: spaces removed, surrounding blanks trimmed, trailing dots kept."""
    return value.replace(" ", "").strip().split(",")


def parse_go_duration_seconds(text: str) -> int:
    """Seconds in a Go duration (`90s`, `1m30s`, `1.5h`), truncated toward zero; ValueError if none."""
    if text in ("0", "+0", "-0"):
        return 0
    if not _GO_DURATION_RE.fullmatch(text):
        raise ValueError(f"invalid duration {text!r}")
    try:
        delta = durationpy.from_str(text)
    except durationpy.DurationError as exc:
        raise ValueError(str(exc)) from exc
    whole = abs(delta) // datetime.timedelta(seconds=1)
    return -whole if delta < datetime.timedelta(0) else whole


def parse_ttl(text: str) -> int:
    """external-dns's parseTTL: a Go duration, else an integer of seconds; ValueError if neither."""
    try:
        return parse_go_duration_seconds(text)
    except ValueError:
        if _GO_INT_RE.fullmatch(text):
            return int(text)
        raise


@dataclass(frozen=True, slots=True)
class Annotations:
    """What external-dns reads from one object's annotations."""

    hostnames: tuple[str, ...] = ()
    internal_hostnames: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()  # replace the targets derived from the object when non-empty
    ttl: int = 0  # 0: not configured
    controller: str | None = None
    set_identifier: str = ""
    access: str = ""  # "", "public" or "private"
    endpoints_type: str = ""  # "", NodeExternalIP or HostIP
    hostname_source: str | None = None  # Ingress: None (both), defined-hosts-only, annotation-only, or other
    provider_specific: tuple[tuple[str, str], ...] = ()
    keys: Mapping[str, str] | None = None  # name -> the annotation key as written, for problem reports
    problems: tuple[AnnotationProblem, ...] = ()

    @property
    def controller_mismatch(self) -> bool:
        """external-dns skips an object whose `controller` annotation names another controller."""
        return self.controller is not None and self.controller != CONTROLLER_VALUE

    def key(self, name: str) -> str:
        """The annotation key as the object spells it (the new prefix when absent)."""
        return (self.keys or {}).get(name, GA_PREFIX + name)

    def field(self, name: str) -> str:
        return f"metadata.annotations[{self.key(name)}]"


def _names(
    values: dict[str, str], keys: dict[str, str], name: str, problems: list[AnnotationProblem]
) -> tuple[str, ...]:
    if name not in values:
        return ()
    out: list[str] = []
    for item in split_list(values[name]):
        item = item.rstrip(".") if name == TARGET else item
        if item:
            out.append(item)
        else:
            problems.append(AnnotationProblem(keys[name], "empty entry in comma-separated list ignored"))
    return tuple(out)


def _ttl(values: dict[str, str], keys: dict[str, str], problems: list[AnnotationProblem]) -> int:
    if TTL not in values:
        return 0
    text = values[TTL]
    try:
        seconds = parse_ttl(text)
    except ValueError:
        message = f"{text!r} is not a valid TTL value; TTL not configured"
        problems.append(AnnotationProblem(keys[TTL], message))
        return 0
    if not TTL_MIN <= seconds <= TTL_MAX:
        problems.append(
            AnnotationProblem(
                keys[TTL], f"TTL {seconds} must be between {TTL_MIN} and {TTL_MAX}; TTL not configured"
            )
        )
        return 0
    return seconds


def _provider_specific(values: dict[str, str]) -> tuple[tuple[str, str], ...]:
    props: dict[str, str] = {}
    if values.get(ALIAS) == "true":
        props["alias"] = "true"
    if RECORD_TYPE in values:
        props[RECORD_TYPE] = values[RECORD_TYPE]
    for name, value in values.items():
        for ann_prefix, prop_prefix in _PROVIDER_PREFIXES:
            if name.startswith(ann_prefix):
                props[prop_prefix + name[len(ann_prefix) :]] = value
        if name in _CLOUDFLARE_KEYS:
            # external-dns names these properties by the full annotation key (new prefix in v0.22).
            props[GA_PREFIX + name] = value
    return tuple(sorted(props.items()))


def parse(raw: Mapping[str, str] | None) -> Annotations:
    """Read external-dns's annotations from an object's metadata.annotations (a plain dict)."""
    if not raw:
        return Annotations()
    values, keys, conflicts = resolve(raw)
    if not values:
        return Annotations()
    problems = list(conflicts)
    access = values.get(ACCESS, "")
    if access and access not in ACCESS_VALUES:
        problems.append(AnnotationProblem(keys[ACCESS], f"{access!r} is not one of public, private; ignored"))
    endpoints_type = values.get(ENDPOINTS_TYPE, "")
    if endpoints_type and endpoints_type not in (ENDPOINTS_TYPE_NODE_EXTERNAL_IP, ENDPOINTS_TYPE_HOST_IP):
        problems.append(
            AnnotationProblem(
                keys[ENDPOINTS_TYPE], f"{endpoints_type!r} is not one of NodeExternalIP, HostIP; ignored"
            )
        )
    return Annotations(
        hostnames=_names(values, keys, HOSTNAME, problems),
        internal_hostnames=_names(values, keys, INTERNAL_HOSTNAME, problems),
        targets=_names(values, keys, TARGET, problems) if values.get(TARGET) else (),
        ttl=_ttl(values, keys, problems),
        controller=values.get(CONTROLLER),
        set_identifier=values.get(SET_IDENTIFIER, ""),
        access=access,
        endpoints_type=endpoints_type,
        hostname_source=values.get(INGRESS_HOSTNAME_SOURCE),
        provider_specific=_provider_specific(values),
        keys=keys,
        problems=tuple(problems),
    )


def hostnames_of(raw: Any, internal: bool = False) -> list[str]:
    """Only the names of the `hostname` annotation (and of `internal-hostname` with `internal`), as `parse`
    reads them: what a sharded replica asks of every object it lists to place it, most of them objects of
    other replicas' zones, so it looks up these few keys instead of parsing every annotation. `raw` is an
    object's `metadata.annotations` as decoded, whatever it holds (not a mapping: no names; values that are
    not strings are ignored, as `parse` ignores them)."""
    if not raw or not isinstance(raw, Mapping):
        return []
    out: list[str] = []
    for name in (HOSTNAME, INTERNAL_HOSTNAME) if internal else (HOSTNAME,):
        for prefix in PREFIXES:
            value = raw.get(prefix + name)
            if isinstance(value, str):
                out += [item for item in split_list(value) if item]
                break
    return out


def targets_of(raw: Mapping[str, str] | None) -> tuple[str, ...]:
    """Only the `target` annotation (what external-dns reads from the pods of a headless Service)."""
    if not raw:
        return ()
    values, keys, _ = resolve(raw)
    if not values.get(TARGET):
        return ()
    return _names(values, keys, TARGET, [])
