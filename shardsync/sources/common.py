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

The value reaches each kind's translator as `SourceContext.common` (the watcher's `WatchOptions.common`).
Pinned against external-dns v0.22.0 (pkg/apis/externaldns/types.go, validation.go, source/wrappers).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from shardsync.endpoint import Endpoint
from shardsync.flags import ConfigError, FlagGroup, mirrored
from shardsync.sources.annotations import GA_PREFIX, PREFIXES
from shardsync.sources.fqdn import FqdnTemplate
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

    @property
    def template(self) -> FqdnTemplate | None:
        """The parsed `--fqdn-template` (None when not set); raises ConfigError when it cannot be honoured."""
        return FqdnTemplate.parse(self.fqdn_template)


def validate(options: SourceOptions) -> None:
    template = options.template
    if options.ignore_hostname_annotation and template is None:
        # external-dns: "FQDN Template must be set if ignoring annotations"
        raise ConfigError("--ignore-hostname-annotation needs --fqdn-template (as in external-dns)")
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
