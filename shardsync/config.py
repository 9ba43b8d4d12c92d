"""Flags and environment variables of `shardsync run` → one frozen Settings object.

Flag names follow external-dns where they mean the same thing, so an external-dns manifest's args carry
over. Every flag can also come from the environment: `SHARDSYNC_<FLAG>` (upper case, `-` → `_`), or
external-dns's own `EXTERNAL_DNS_<FLAG>` for a migrating user; a flag on the command line wins. Repeatable
flags take a comma-separated list from the environment. Identity and namespace come from the downward API
(`POD_NAME`, `POD_NAMESPACE`), as in a StatefulSet.
"""

from __future__ import annotations

import argparse
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from shardsync.durations import format_duration, parse_duration
from shardsync.endpoint import DEFAULT_MANAGED_TYPES, SUPPORTED_TYPES

SOURCES = ("service", "ingress", "crd")
PROVIDERS = ("fake", "rfc2136", "webhook")
POLICIES = ("sync", "upsert-only", "create-only")


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything one replica needs to know, parsed and validated once at start-up."""

    # what to read and where to write
    sources: tuple[str, ...] = ("service",)
    provider: str = "fake"
    policy: str = "sync"
    registry: str = "txt"
    txt_owner_id: str = "default"
    txt_prefix: str = ""
    txt_suffix: str = ""
    txt_wildcard_replacement: str = ""
    dry_run: bool = False
    once: bool = False
    interval: float = 60.0
    events: bool = False
    concurrency: int = 8
    # source filters
    namespace: str = ""
    label_filter: str = ""
    annotation_filter: str = ""
    domain_filter: tuple[str, ...] = ()
    exclude_domains: tuple[str, ...] = ()
    managed_record_types: tuple[str, ...] = DEFAULT_MANAGED_TYPES
    publish_internal_services: bool = False
    ingress_class: tuple[str, ...] = ()
    # the cluster and this replica
    kubeconfig: str = ""
    identity: str = ""
    lease_namespace: str = "default"
    instance: str = "shardsync"
    metrics_address: str = ":7979"
    log_level: str = "info"
    # sharding
    sharding: bool = True
    lease_duration: float = 15.0
    renew_interval: float = 5.0
    settle_delay: float = 2.0
    restart_grace: float = 30.0
    weight: int = 1
    # providers
    fake_provider_url: str = ""
    fake_zone: tuple[str, ...] = ()
    rfc2136_host: str = ""
    rfc2136_port: int = 53
    rfc2136_zone: tuple[str, ...] = ()
    rfc2136_tsig_keyname: str = ""
    rfc2136_tsig_secret: str = field(default="", repr=False)
    rfc2136_tsig_secret_file: str = ""
    rfc2136_tsig_secret_alg: str = "hmac-sha256"
    rfc2136_min_ttl: float = 0.0
    rfc2136_batch_change_size: int = 50
    rfc2136_timeout: float = 10.0
    webhook_provider_url: str = "http://localhost:8888"
    webhook_allow_unfenced: bool = False

    def tsig_secret(self) -> str:
        """The TSIG secret from the flag/environment, else read from the file (never logged)."""
        if self.rfc2136_tsig_secret:
            return self.rfc2136_tsig_secret
        if self.rfc2136_tsig_secret_file:
            with open(self.rfc2136_tsig_secret_file, encoding="utf-8") as fh:
                return fh.read().strip()
        return ""


class ConfigError(ValueError):
    """A flag value that cannot work; the message names the flag."""


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


@dataclass(frozen=True, slots=True)
class Flag:
    name: str  # the Settings field
    help: str
    kind: Callable[[str], Any] = str
    repeat: bool = False
    switch: bool = False  # a boolean flag: --x, --x=true/false, --no-x
    choices: Sequence[str] | None = None
    flag: str = ""  # the command-line name when it differs from the field's

    @property
    def option(self) -> str:
        return "--" + (self.flag or self.name.replace("_", "-"))


FLAGS: tuple[Flag, ...] = (
    Flag("sources", "source of endpoints (repeatable)", repeat=True, choices=SOURCES, flag="source"),
    Flag("provider", "DNS provider", choices=PROVIDERS),
    Flag("policy", "what may change in DNS: sync, upsert-only or create-only", choices=POLICIES),
    Flag("registry", "ownership registry: txt (external-dns compatible) or noop", choices=("txt", "noop")),
    Flag("txt_owner_id", "owner id written into TXT ownership records (same as external-dns's)"),
    Flag("txt_prefix", "prefix of TXT ownership record names (%{record_type} is replaced)"),
    Flag("txt_suffix", "suffix of TXT ownership record names (%{record_type} is replaced)"),
    Flag("txt_wildcard_replacement", "label that replaces '*' in TXT ownership record names"),
    Flag("dry_run", "plan and log changes, write nothing", switch=True),
    Flag("once", "reconcile every owned zone once, then exit", switch=True),
    Flag("interval", "time between two reconciles of one zone", kind=_duration),
    Flag("events", "also reconcile a zone soon after a source change touching it", switch=True),
    Flag("concurrency", "zones reconciled at the same time by one replica", kind=int),
    Flag("namespace", "only read sources in this namespace (default: all)"),
    Flag("label_filter", "only read source objects matching this label selector"),
    Flag("annotation_filter", "only read source objects whose annotations match this selector"),
    Flag("domain_filter", "only manage names under these domains (repeatable)", repeat=True),
    Flag("exclude_domains", "never manage names under these domains (repeatable)", repeat=True),
    Flag(
        "managed_record_types",
        "record types managed (repeatable)",
        kind=str.upper,
        repeat=True,
        choices=sorted(SUPPORTED_TYPES),
    ),
    Flag("publish_internal_services", "publish ClusterIP services too", switch=True),
    Flag("ingress_class", "only read ingresses of these classes (repeatable)", repeat=True),
    Flag("kubeconfig", "kubeconfig file (default: in-cluster, else ~/.kube/config)"),
    Flag("identity", "this replica's identity (default: $POD_NAME, else the host name)"),
    Flag("lease_namespace", "namespace of the leases and the assignment (default: $POD_NAMESPACE)"),
    Flag("instance", "name shared by the replicas of one deployment; prefixes their objects"),
    Flag("metrics_address", "address of /metrics, /healthz, /readyz and /shards"),
    Flag("log_level", "debug, info, warning or error", choices=("debug", "info", "warning", "error")),
    Flag("sharding", "on: every replica syncs its own zones; off: only the coordinator syncs", kind=_bool),
    Flag("lease_duration", "member and coordinator lease duration", kind=_duration),
    Flag("renew_interval", "how often a replica renews its leases", kind=_duration),
    Flag("settle_delay", "how long the coordinator batches membership changes", kind=_duration),
    Flag("restart_grace", "how long a restarting replica's zones stay parked for it", kind=_duration),
    Flag("weight", "this replica's share of zones relative to the others", kind=int),
    Flag("fake_provider_url", "URL of a shared `shardsync fake-provider` (else an in-process one)"),
    Flag("fake_zone", "zone of the in-process fake provider (repeatable)", repeat=True),
    Flag("rfc2136_host", "DNS server receiving UPDATEs and answering AXFR"),
    Flag("rfc2136_port", "its port", kind=int),
    Flag("rfc2136_zone", "zone managed on that server (repeatable)", repeat=True),
    Flag("rfc2136_tsig_keyname", "TSIG key name"),
    Flag("rfc2136_tsig_secret", "TSIG secret, base64 (prefer the file or the environment)"),
    Flag("rfc2136_tsig_secret_file", "file holding the TSIG secret"),
    Flag("rfc2136_tsig_secret_alg", "TSIG algorithm"),
    Flag("rfc2136_min_ttl", "lowest TTL written (lower ones are raised)", kind=_duration),
    Flag("rfc2136_batch_change_size", "changes per UPDATE message", kind=int),
    Flag("rfc2136_timeout", "timeout of one DNS exchange", kind=_duration),
    Flag("webhook_provider_url", "URL of an external-dns webhook provider"),
    Flag(
        "webhook_allow_unfenced",
        "let sharded replicas write through the webhook provider, which cannot fence writes",
        switch=True,
    ),
)


def _env_value(flag: Flag, env: Mapping[str, str]) -> str | None:
    base = (flag.flag or flag.name).replace("-", "_").upper()
    for key in (f"SHARDSYNC_{base}", f"EXTERNAL_DNS_{base}"):
        if key in env:
            return env[key]
    return None


def configure(parser: argparse.ArgumentParser, env: Mapping[str, str] | None = None) -> None:
    """Declare every flag on `parser`, with defaults taken from the environment."""
    env = os.environ if env is None else env
    defaults = Settings()
    for flag in FLAGS:
        default = getattr(defaults, flag.name)
        raw = _env_value(flag, env)
        shown = format_duration(default) if flag.kind is _duration else default
        help_text = f"{flag.help} (default: {shown!r})" if default not in ("", ()) else flag.help
        help_text = help_text.replace("%", "%%")  # argparse formats help with %: `%{record_type}` is text
        if flag.switch:
            parser.add_argument(
                flag.option,
                dest=flag.name,
                nargs="?",
                const=True,
                type=_bool,
                default=_bool(raw) if raw is not None else default,
                help=help_text,
            )
            parser.add_argument(
                "--no-" + flag.option[2:], dest=flag.name, action="store_false", help=argparse.SUPPRESS
            )
        elif flag.repeat:
            env_list = [v.strip() for v in raw.split(",") if v.strip()] if raw is not None else None
            parser.add_argument(
                flag.option,
                dest=flag.name,
                action="append",
                type=flag.kind,
                choices=flag.choices,
                default=None,
                help=help_text,
            )
            parser.set_defaults(**{f"_env_{flag.name}": env_list})
        else:
            parser.add_argument(
                flag.option,
                dest=flag.name,
                type=flag.kind,
                choices=flag.choices,
                default=flag.kind(raw) if raw is not None else default,
                help=help_text,
            )


def settings_from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Settings:
    """Build and validate Settings from parsed flags; fill identity and namespace from the pod."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for flag in FLAGS:
        value = getattr(args, flag.name)
        if flag.repeat:
            if value is None:
                value = getattr(args, f"_env_{flag.name}", None)
            value = tuple(value) if value is not None else getattr(Settings(), flag.name)
            if flag.kind is str.upper:
                value = tuple(v.upper() for v in value)
        values[flag.name] = value
    if not values["identity"]:
        values["identity"] = env.get("POD_NAME") or socket.gethostname()
    if values["lease_namespace"] == Settings().lease_namespace and env.get("POD_NAMESPACE"):
        values["lease_namespace"] = env["POD_NAMESPACE"]
    settings = Settings(**values)
    validate(settings)
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
    if s.txt_prefix and s.txt_suffix:
        raise ConfigError("--txt-prefix and --txt-suffix are mutually exclusive")
    if s.interval <= 0:
        raise ConfigError("--interval must be positive")
    if s.concurrency < 1:
        raise ConfigError("--concurrency must be at least 1")
    if s.weight < 1:
        raise ConfigError("--weight must be at least 1")
    if not 0 < s.renew_interval < s.lease_duration:
        raise ConfigError("--renew-interval must be positive and shorter than --lease-duration")
    if s.provider == "rfc2136" and not (s.rfc2136_host and s.rfc2136_zone):
        raise ConfigError("--provider=rfc2136 needs --rfc2136-host and at least one --rfc2136-zone")
    if s.provider == "fake" and not (s.fake_provider_url or s.fake_zone):
        raise ConfigError("--provider=fake needs --fake-provider-url or at least one --fake-zone")
    if s.rfc2136_batch_change_size < 1:
        raise ConfigError("--rfc2136-batch-change-size must be at least 1")
    if not s.identity:
        raise ConfigError("no identity: set --identity or POD_NAME")


def settings_fields() -> list[str]:
    return [f.name for f in fields(Settings)]
