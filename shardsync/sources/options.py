"""The flags every source kind shares (external-dns's global source flags): one `SourceOptions` value.

- `--fqdn-template` (repeatable) and `--combine-fqdn-annotation`: names made from the object by a template
  (shardsync.sources.fqdn) when the object's own names give no endpoint, or added to them when combining
  (external-dns's template.Engine.CombineWithEndpoints);
- `--ignore-hostname-annotation`: the `hostname` (and a Service's `internal-hostname`) annotation is not
  read; as in external-dns it needs `--fqdn-template`;
- `--default-targets` (repeatable) and `--force-default-targets`: external-dns's multiSource: an endpoint
  without targets (only a DNSEndpoint's A, AAAA or CNAME can have none) gets the default targets; with
  force, every endpoint of every source is replaced by the default targets under its name (A, AAAA or
  CNAME by target, its TTL, set identifier, provider-specific properties and labels kept);
- `--create-ptr`: PTR records for the A and AAAA records of every source (sources.ptr; the `record-type`
  annotation overrides it per object); it needs PTR in `--managed-record-types`, as in external-dns;
- `--annotation-prefix`: external-dns v0.22 reads its annotations under this one prefix. shardsync reads
  both external-dns prefixes, always (sources.annotations), so it accepts either of them as the value and
  refuses any other prefix at start-up rather than read annotations the user did not mean.

shardsync's own flags for hostile or multi-tenant clusters, applied to every kind alike (sources.gate):
- `--max-annotation-bytes`, `--max-endpoints-per-object`, `--max-targets-per-object` (sources.limits);
- `--namespace-domains-annotation` turns on the namespace → domain policy (sources.namespace_policy) and
  `--namespace-domains-max-delete` bounds the deletes it may cause in one zone
  (shardsync.reconcile.delete_guard).

The value reaches each kind's translator as `SourceContext.common` (the watcher's `WatchOptions.common`).
Pinned against external-dns v0.22.0 (pkg/apis/externaldns/types.go, validation.go, source/wrappers).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from shardsync.flags import ConfigError, Flag, FlagGroup, mirrored
from shardsync.records.endpoint import Endpoint
from shardsync.sources.annotations import GA_PREFIX, PREFIXES
from shardsync.sources.fqdn import FqdnTemplate
from shardsync.sources.limits import (
    DEFAULT_MAX_ANNOTATION_BYTES,
    DEFAULT_MAX_ENDPOINTS,
    DEFAULT_MAX_TARGETS,
    ObjectLimits,
)
from shardsync.sources.result import suitable_type


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """external-dns's global source flags (see the module docstring); the defaults are external-dns's."""

    fqdn_template: tuple[str, ...] = ()
    combine_fqdn_annotation: bool = False
    ignore_hostname_annotation: bool = False
    default_targets: tuple[str, ...] = ()
    force_default_targets: bool = False
    annotation_prefix: str = GA_PREFIX
    create_ptr: bool = False
    max_annotation_bytes: int = DEFAULT_MAX_ANNOTATION_BYTES
    max_endpoints_per_object: int = DEFAULT_MAX_ENDPOINTS
    max_targets_per_object: int = DEFAULT_MAX_TARGETS
    namespace_domains_annotation: str = ""  # "": the namespace → domain policy is off
    namespace_domains_max_delete: float = 0.5

    @property
    def limits(self) -> ObjectLimits:
        return ObjectLimits(
            self.max_annotation_bytes, self.max_endpoints_per_object, self.max_targets_per_object
        )

    @property
    def template(self) -> FqdnTemplate | None:
        """The parsed `--fqdn-template` (None when not set); raises ConfigError when it cannot be honoured."""
        return FqdnTemplate.parse(self.fqdn_template)


def validate(options: SourceOptions) -> None:
    template = options.template
    if options.ignore_hostname_annotation and template is None:
        # external-dns: "FQDN Template must be set if ignoring annotations"
        raise ConfigError("--ignore-hostname-annotation needs --fqdn-template (as in external-dns)")
    for name, value in (
        ("--max-annotation-bytes", options.max_annotation_bytes),
        ("--max-endpoints-per-object", options.max_endpoints_per_object),
        ("--max-targets-per-object", options.max_targets_per_object),
    ):
        if value < 0:
            raise ConfigError(f"{name}={value}: must be 0 (no limit) or more")
    if not 0.0 <= options.namespace_domains_max_delete <= 1.0:
        raise ConfigError(
            f"--namespace-domains-max-delete={options.namespace_domains_max_delete}: a fraction from 0 to 1"
        )
    prefix = options.annotation_prefix
    if not prefix:
        raise ConfigError("--annotation-prefix cannot be empty")
    if not prefix.endswith("/"):
        raise ConfigError("--annotation-prefix must end with '/'")
    if prefix not in PREFIXES:
        raise ConfigError(
            f"--annotation-prefix {prefix}: not supported; shardsync reads the {' and '.join(PREFIXES)} "
            "annotations (both, always)"
        )


FLAGS = FlagGroup(
    "sources",
    "every source",
    SourceOptions,
    (
        mirrored(
            "fqdn_template",
            "Go template of the names of objects without names of their own, e.g. "
            "{{.Name}}.example.com (repeatable)",
            repeat=True,
        ),
        mirrored(
            "combine_fqdn_annotation",
            "publish the --fqdn-template names as well as the objects' own names",
            switch=True,
        ),
        mirrored(
            "ignore_hostname_annotation",
            "do not read the hostname annotations (needs --fqdn-template)",
            switch=True,
        ),
        mirrored(
            "default_targets", "targets of DNSEndpoint records that have none (repeatable)", repeat=True
        ),
        mirrored("force_default_targets", "replace every source's targets by --default-targets", switch=True),
        mirrored(
            "create_ptr",
            "publish PTR records for A and AAAA records (needs PTR in --managed-record-types; "
            "the record-type annotation overrides it)",
            switch=True,
        ),
        mirrored(
            "annotation_prefix",
            f"prefix of the annotations read: {' or '.join(PREFIXES)} (both are read either way)",
        ),
        Flag(
            "max_annotation_bytes",
            "annotations longer than this (bytes) are not read; an Event says so (0: no limit)",
            kind=int,
        ),
        Flag(
            "max_endpoints_per_object",
            "endpoints one object may publish; the rest are dropped with an Event (0: no limit)",
            kind=int,
        ),
        Flag(
            "max_targets_per_object",
            "targets one object may publish over all its endpoints; the rest dropped with an Event "
            "(0: no limit)",
            kind=int,
        ),
        Flag(
            "namespace_domains_annotation",
            "turns on the namespace → domain policy: the Namespace annotation (e.g. "
            "shardsync.io/allowed-domains) listing the domains its objects may publish; "
            "a namespace without it publishes nothing",
        ),
        Flag(
            "namespace_domains_max_delete",
            "largest fraction of a zone's owned records the namespace policy may delete in one sync; "
            "more is refused with an Event (1: no guard)",
            kind=float,
        ),
    ),
    validate=validate,
)


def with_default_targets(endpoints: Iterable[Endpoint], options: SourceOptions) -> list[Endpoint]:
    """external-dns's multiSource: the default targets for endpoints without targets, or for every endpoint
    with `--force-default-targets`; endpoints with targets of their own are kept otherwise."""
    defaults = options.default_targets
    if not defaults:
        return list(endpoints)
    by_type: dict[str, list[str]] = {}
    for target in defaults:
        by_type.setdefault(suitable_type(target), []).append(target)
    out: dict[tuple[str, str, str], Endpoint] = {}  # as external-dns's dedup: the first of a key stays
    for ep in endpoints:
        if ep.targets and not options.force_default_targets:
            out.setdefault(ep.key, ep)
            continue
        for record_type in ("A", "AAAA", "CNAME"):
            if record_type in by_type:
                fresh = Endpoint.new(ep.dns_name, record_type, by_type[record_type])
                made = replace(ep, record_type=record_type, targets=fresh.targets)
                out.setdefault(made.key, made)
    return list(out.values())
