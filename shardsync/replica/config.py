"""Flags and environment variables of `shardsync run` → one frozen Settings object.

Flag names follow external-dns where they mean the same thing, so an external-dns manifest's args carry
over. Every flag can also come from the environment (`SHARDSYNC_<FLAG>`, or external-dns's own
`EXTERNAL_DNS_<FLAG>`; shardsync.flag_args declares and reads them), and a check that refuses a value that
came from the environment names the variable. Identity and namespace come from the downward API
(`POD_NAME`, `POD_NAMESPACE`), as in a StatefulSet.

The core flags fill `Settings` itself; each provider and source kind declares its own `FlagGroup`
(shardsync.flags) in its module, and its options value is kept in `Settings.groups` under the group's name;
only the chosen provider's and sources' groups are validated. Only the command line (`replica.command`) and
`replica.wiring` read Settings; each part gets its own options value.
"""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from shardsync import flag_args
from shardsync.durations import format_duration
from shardsync.flags import ConfigError, Flag, FlagGroup, boolean, duration, mirrored
from shardsync.kube.limits import DEFAULT_BURST, DEFAULT_QPS, DEFAULT_REQUEST_TIMEOUT, DEFAULT_STATUS_QPS
from shardsync.logs import LOG_FORMATS, LOG_LEVELS
from shardsync.providers.budget import DEFAULT_BURST as DEFAULT_PROVIDER_BURST
from shardsync.providers.budget import DEFAULT_RATE_LIMIT
from shardsync.providers.cache import DEFAULT_CACHE_TIME
from shardsync.providers.table import PROVIDERS
from shardsync.reconcile.worker import DEFAULT_CONCURRENCY, DEFAULT_INTERVAL
from shardsync.records.endpoint import DEFAULT_MANAGED_TYPES, SUPPORTED_TYPES
from shardsync.records.plan import DEFAULT_OWNER_ID, Policy
from shardsync.replica.config_checks import DNS_LABEL, validate_address, validate_domain, validate_selectors
from shardsync.sharding.publisher import DEFAULT_RESTART_GRACE
from shardsync.sharding.timings import FENCED, UNFENCED, Timings
from shardsync.sources import table as source_table
from shardsync.sources.filters import regex

SOURCES = tuple(source_table.SOURCES)
POLICIES = tuple(p.value for p in Policy)
T = TypeVar("T")

__all__ = ["FLAGS", "ConfigError", "Flag", "FlagGroup", "Settings", "configure", "settings_from_args"]


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything one replica needs to know, parsed and validated once at start-up."""

    # what to read and where to write
    sources: tuple[str, ...] = ("service",)
    provider: str = "fake"
    policy: str = Policy.SYNC.value
    registry: str = "txt"
    txt_owner_id: str = DEFAULT_OWNER_ID
    txt_prefix: str = ""
    txt_suffix: str = ""
    txt_wildcard_replacement: str = ""
    migrate_from_txt_owner: str = ""
    dry_run: bool = False
    once: bool = False
    interval: float = DEFAULT_INTERVAL
    events: bool = False
    concurrency: int = DEFAULT_CONCURRENCY
    # the provider's budget and record cache
    provider_rate_limit: float = DEFAULT_RATE_LIMIT
    provider_burst: int = DEFAULT_PROVIDER_BURST
    provider_cache_time: float = DEFAULT_CACHE_TIME
    # source filters
    namespace: str = ""
    label_filter: str = ""
    annotation_filter: str = ""
    domain_filter: tuple[str, ...] = ()
    exclude_domains: tuple[str, ...] = ()
    regex_domain_filter: str = ""
    regex_domain_exclusion: str = ""
    managed_record_types: tuple[str, ...] = DEFAULT_MANAGED_TYPES
    exclude_record_types: tuple[str, ...] = ()
    # the cluster and this replica
    kubeconfig: str = ""
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    kube_api_qps: int = DEFAULT_QPS
    kube_api_burst: int = DEFAULT_BURST
    kube_api_status_qps: float = DEFAULT_STATUS_QPS
    identity: str = ""
    lease_namespace: str = "default"
    instance: str = "shardsync"
    metrics_address: str = ":7979"
    log_level: str = "info"
    log_format: str = "text"
    # sharding
    sharding: bool = True
    # None: the default for the provider's kind (shardsync.sharding.timings: fenced or not)
    lease_duration: float | None = None
    renew_interval: float | None = None
    settle_delay: float | None = None
    restart_grace: float = DEFAULT_RESTART_GRACE
    weight: int = 1
    # the options of each provider and source kind (their own FlagGroups), by group name
    groups: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def options(self, group: FlagGroup[T]) -> T:
        """The options value of `group` (its defaults when it was not parsed)."""
        value = self.groups.get(group.name)
        return value if isinstance(value, group.options) else group.options()


FLAGS: tuple[Flag, ...] = (
    mirrored("sources", "source of endpoints (repeatable)", repeat=True, choices=SOURCES, flag="source"),
    mirrored("provider", "DNS provider", choices=tuple(PROVIDERS)),
    mirrored("policy", "what may change in DNS: sync, upsert-only or create-only", choices=POLICIES),
    mirrored(
        "registry", "ownership registry: txt (external-dns compatible) or noop", choices=("txt", "noop")
    ),
    mirrored("txt_owner_id", "owner id written into TXT ownership records (same as external-dns's)"),
    mirrored("txt_prefix", "prefix of TXT ownership record names (%{record_type} is replaced)"),
    mirrored("txt_suffix", "suffix of TXT ownership record names (%{record_type} is replaced)"),
    mirrored("txt_wildcard_replacement", "label that replaces '*' in TXT ownership record names"),
    mirrored(
        "migrate_from_txt_owner",
        "old owner id: its records become ours and their TXT records are rewritten to --txt-owner-id",
    ),
    mirrored("dry_run", "plan and log changes, write nothing", switch=True),
    mirrored("once", "reconcile every owned zone once, then exit", switch=True),
    mirrored("interval", "time between two reconciles of one zone", kind=duration),
    mirrored("events", "also reconcile a zone soon after a source change touching it", switch=True),
    Flag("concurrency", "zones reconciled at the same time by one replica", kind=int),
    Flag(
        "provider_rate_limit",
        "provider API calls a second for the whole deployment (the account's limit, e.g. 10 for Route53), "
        "shared by the replicas by the zones each owns; 0: no limit",
        kind=float,
    ),
    Flag(
        "provider_burst",
        "provider API calls the account allows at once above --provider-rate-limit (Route53: 50); "
        "0: one second's worth",
        kind=int,
    ),
    mirrored(
        "provider_cache_time",
        "how long a zone's listed records are used (kept up to date from our own writes) before it is "
        "listed again; 0s: list on every reconcile",
        kind=duration,
    ),
    mirrored("namespace", "only read sources in this namespace (default: all)"),
    mirrored("label_filter", "only read source objects matching this label selector"),
    mirrored("annotation_filter", "only read source objects whose annotations match this selector"),
    mirrored("domain_filter", "only manage names under these domains (repeatable)", repeat=True),
    mirrored("exclude_domains", "never manage names under these domains (repeatable)", repeat=True),
    mirrored(
        "regex_domain_filter",
        "only manage names matching this regular expression; overrides --domain-filter",
        kind=regex,
    ),
    mirrored(
        "regex_domain_exclusion",
        "never manage names matching this regular expression (with --regex-domain-filter)",
        kind=regex,
    ),
    mirrored(
        "managed_record_types",
        "record types managed (repeatable)",
        kind=str.upper,
        repeat=True,
        choices=sorted(SUPPORTED_TYPES),
    ),
    mirrored(
        "exclude_record_types",
        "record types never managed, even if --managed-record-types names them (repeatable)",
        kind=str.upper,
        repeat=True,
    ),
    mirrored("kubeconfig", "kubeconfig file (default: in-cluster, else ~/.kube/config)"),
    mirrored(
        "request_timeout", "timeout of one Kubernetes API request (not of a watch); 0s: none", kind=duration
    ),
    mirrored(
        "kube_api_qps",
        "requests a second to the Kubernetes API (client-side token bucket, watches included)",
        kind=int,
    ),
    mirrored(
        "kube_api_burst", "requests to the Kubernetes API allowed at once above --kube-api-qps", kind=int
    ),
    Flag(
        "kube_api_status_qps",
        "DNSEndpoint status writes a second (a token bucket of their own, burst twice that, not "
        "--kube-api-qps's); 0: no client-side limit",
        kind=float,
    ),
    Flag("identity", "this replica's identity (default: $POD_NAME, else the host name)"),
    Flag(
        "lease_namespace",
        "namespace of the leases and the assignment (default: $POD_NAMESPACE, else default)",
    ),
    Flag("instance", "name shared by the replicas of one deployment; prefixes their objects"),
    mirrored("metrics_address", "address of /metrics, /healthz, /readyz and /shards"),
    mirrored("log_level", "debug, info, warning or error", choices=LOG_LEVELS),
    mirrored(
        "log_format",
        "text (logfmt key=value lines) or json (one JSON object per line, same keys)",
        choices=LOG_FORMATS,
    ),
    Flag("sharding", "on: every replica syncs its own zones; off: only the coordinator syncs", kind=boolean),
    Flag(
        "lease_duration",
        "member and coordinator lease duration (default: "
        f"{format_duration(FENCED.lease_duration)} with a fencing provider, "
        f"{format_duration(UNFENCED.lease_duration)} with one that cannot fence: webhook without the fence "
        "extension)",
        kind=duration,
    ),
    Flag(
        "renew_interval",
        "how often a replica renews its leases (default: a third of the lease duration)",
        kind=duration,
    ),
    Flag(
        "settle_delay",
        "how long the coordinator batches membership changes (default: "
        f"{format_duration(FENCED.settle)} with a fencing provider, {format_duration(UNFENCED.settle)} "
        "with one that cannot fence)",
        kind=duration,
    ),
    Flag("restart_grace", "how long a restarting replica's zones stay parked for it", kind=duration),
    Flag("weight", "this replica's share of zones relative to the others", kind=int),
)


CORE = FlagGroup("core", "shardsync run", Settings, FLAGS)


def flag_groups() -> tuple[FlagGroup[Any], ...]:
    """Every group of `shardsync run`: the core flags first, then each provider's, then each source kind's."""
    return (CORE, *(kind.flags for kind in PROVIDERS.values()), *source_table.flag_groups())


def all_flags() -> list[tuple[FlagGroup[Any], Flag]]:
    """Every flag of `shardsync run` once (flag_args.all_flags)."""
    return flag_args.all_flags(flag_groups())


def configure(parser: argparse.ArgumentParser, env: Mapping[str, str] | None = None) -> None:
    """Declare every flag on `parser`, with defaults taken from the environment."""
    flag_args.declare(parser, flag_groups(), env, top=CORE)


def settings_from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Settings:
    """Build and validate Settings from parsed flags; fill identity and namespace from the pod."""
    env = os.environ if env is None else env
    origins: dict[str, str] = {}
    values = flag_args.group_values(args, CORE, origins, top=CORE)
    if not values["identity"]:
        values["identity"] = env.get("POD_NAME") or socket.gethostname()
    if values["lease_namespace"] == Settings().lease_namespace and env.get("POD_NAMESPACE"):
        values["lease_namespace"] = env["POD_NAMESPACE"]
    groups: dict[str, Any] = {}
    for group in flag_groups():
        if group is not CORE:
            options = group.options(**flag_args.group_values(args, group, origins))
            groups[group.name] = options
    settings = Settings(**values, groups=groups)
    try:
        validate(settings)
    except ConfigError as exc:
        raise ConfigError(flag_args.with_origin(str(exc), origins)) from None
    return settings


def validate(s: Settings) -> None:
    """Refuse combinations that cannot work, naming the flag, before anything starts."""
    for name, allowed, given in (
        ("--source", SOURCES, s.sources),
        ("--managed-record-types", SUPPORTED_TYPES, s.managed_record_types),
    ):
        unknown = sorted(set(given) - set(allowed))
        if unknown:
            raise ConfigError(
                f"{name}: unknown {', '.join(unknown)} (choose from {', '.join(sorted(allowed))})"
            )
    if s.provider not in PROVIDERS:
        raise ConfigError(f"--provider: unknown {s.provider} (choose from {', '.join(PROVIDERS)})")
    if s.txt_prefix and s.txt_suffix:
        raise ConfigError("--txt-prefix and --txt-suffix are mutually exclusive")
    if s.migrate_from_txt_owner and s.registry != "txt":
        raise ConfigError("--migrate-from-txt-owner needs --registry=txt: only TXT records name an owner")
    if s.migrate_from_txt_owner == s.txt_owner_id:
        raise ConfigError("--migrate-from-txt-owner is --txt-owner-id itself: there is nothing to migrate")
    if s.interval <= 0:
        raise ConfigError("--interval must be positive")
    if s.kube_api_qps <= 0 or s.kube_api_burst <= 0:  # external-dns's messages
        flag = "--kube-api-qps" if s.kube_api_qps <= 0 else "--kube-api-burst"
        raise ConfigError(f"{flag} must be greater than 0")
    if s.kube_api_status_qps < 0:
        raise ConfigError("--kube-api-status-qps must not be negative (0: no client-side limit)")
    if s.provider_rate_limit < 0 or s.provider_burst < 0 or s.provider_cache_time < 0:
        flag = (
            "--provider-rate-limit"
            if s.provider_rate_limit < 0
            else "--provider-burst"
            if s.provider_burst < 0
            else "--provider-cache-time"
        )
        raise ConfigError(f"{flag} must not be negative")
    if s.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    if s.weight < 1:
        raise ConfigError("--weight must be at least 1")
    try:
        # Both kinds: whether the provider fences its writes is learned only once it runs (webhook).
        for fenced in (True, False):
            timings_of(s, fenced)
    except ValueError:
        raise ConfigError(
            "--renew-interval must be positive and shorter than --lease-duration (unset, "
            f"{format_duration(FENCED.lease_duration)} where the provider fences its writes)"
        ) from None
    if not s.identity:
        raise ConfigError("no identity: set --identity or POD_NAME")
    validate_selectors(s.label_filter, s.annotation_filter)
    for name, domains in (("--domain-filter", s.domain_filter), ("--exclude-domains", s.exclude_domains)):
        for domain in domains:
            validate_domain(name, domain)
    validate_address(s.metrics_address)
    for name, value in (("--namespace", s.namespace), ("--lease-namespace", s.lease_namespace)):
        if value and not DNS_LABEL.match(value):
            raise ConfigError(f"{name}={value}: not a namespace name (lower-case letters, digits and '-')")
    if not DNS_LABEL.match(s.instance) or len(s.instance) > 40:
        raise ConfigError(
            f"--instance={s.instance}: not usable in object names (at most 40 lower-case letters, digits "
            "and '-', starting and ending with a letter or digit)"
        )
    provider = PROVIDERS[s.provider].flags
    provider.validate(s.options(provider))
    chosen = {name: source_table.SOURCES[name] for name in s.sources}
    for group in source_table.flag_groups(chosen):
        group.validate(s.options(group))
    if s.options(source_table.SHARED_FLAGS).create_ptr and "PTR" not in s.managed_record_types:
        raise ConfigError("--create-ptr requires PTR in --managed-record-types (as in external-dns)")


def settings_fields() -> list[str]:
    return [f.name for f in fields(Settings) if f.name != "groups"]


def timings_of(s: Settings, fenced: bool) -> Timings:
    """The sharding timings: the flags given, the rest from the defaults for a provider that fences its
    writes or not (`fenced`: the built provider's answer, providers.base.fences_writes)."""
    return Timings.resolve(
        fenced,
        s.lease_duration,
        s.renew_interval,
        s.settle_delay,
        s.restart_grace,
    )
