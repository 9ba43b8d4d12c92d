"""The AWS Route53 provider, `--provider=aws`: this module holds its flags (external-dns's names and
meanings) and its construction.

- api.py: the Route53 calls through boto3 (credentials, endpoint, retries, error mapping, the metric),
  imported only when `--provider=aws` is built; errors.py: its errors;
- canonical.py: the canonical hosted zones of load balancers and other alias targets;
- records.py: RRsets and endpoints both ways, and external-dns's AdjustEndpoints;
- batches.py: a plan as change batches within the limits, and the fence compare-and-swap;
- zones.py: which hosted zones are managed (`--zone-id-filter`, `--aws-zone-type`, `--aws-zone-tags`);
- provider.py: `AwsProvider`, the Provider protocol over them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shardsync.flags import ConfigError, FlagGroup, duration, mirrored
from shardsync.providers.aws.batches import Limits
from shardsync.providers.aws.provider import AwsProvider
from shardsync.providers.aws.zones import ZoneFilter, parse_tags
from shardsync.providers.zone_ids import ZONE_ID_FILTER


@dataclass(frozen=True, slots=True)
class AwsOptions:
    """The `--aws-*` flags and `--zone-id-filter`; defaults are external-dns's."""

    zone_id_filter: tuple[str, ...] = ()
    zone_type: str = ""
    zone_tags: tuple[str, ...] = ()
    batch_change_size: int = 1000
    batch_change_size_bytes: int = 32_000
    batch_change_size_values: int = 1000
    batch_change_interval: float = 1.0
    api_retries: int = 3
    prefer_cname: bool = False
    evaluate_target_health: bool = True
    assume_role: str = ""
    assume_role_external_id: str = field(default="", repr=False)
    zones_cache_duration: float = 0.0
    # a zone is kept when --domain-filter names a domain under it; external-dns does so only with this flag
    zone_match_parent: bool = False


def _validate(o: AwsOptions) -> None:
    if o.zone_type not in ("", "public", "private"):
        raise ConfigError(f"--aws-zone-type={o.zone_type}: use public or private (or leave it unset: any)")
    # Each batch also carries the fence's two changes (3 values: its UPSERT counts twice).
    for flag, value, least in (
        ("--aws-batch-change-size", o.batch_change_size, 3),
        ("--aws-batch-change-size-values", o.batch_change_size_values, 4),
        ("--aws-batch-change-size-bytes", o.batch_change_size_bytes, 512),
    ):
        if value < least:
            raise ConfigError(
                f"{flag}={value}: at least {least} (room for the fence's changes and one record)"
            )
    if o.api_retries < 0:
        raise ConfigError("--aws-api-retries must be 0 or more")
    if o.batch_change_interval < 0:
        raise ConfigError("--aws-batch-change-interval must not be negative")
    if o.zones_cache_duration < 0:
        raise ConfigError("--aws-zones-cache-duration must not be negative")
    if o.assume_role_external_id and not o.assume_role:
        raise ConfigError("--aws-assume-role-external-id needs --aws-assume-role")


FLAGS = FlagGroup(
    "aws",
    "aws provider (--provider=aws)",
    AwsOptions,
    (
        ZONE_ID_FILTER,
        mirrored(
            "zone_type",
            "only manage hosted zones of this type: public or private (default: any)",
            flag="aws-zone-type",
        ),
        mirrored(
            "zone_tags",
            "only manage hosted zones with these tags, key or key=value (repeatable)",
            repeat=True,
            flag="aws-zone-tags",
        ),
        mirrored(
            "batch_change_size", "most changes in one change batch", kind=int, flag="aws-batch-change-size"
        ),
        mirrored(
            "batch_change_size_bytes",
            "most characters of record values in one change batch",
            kind=int,
            flag="aws-batch-change-size-bytes",
        ),
        mirrored(
            "batch_change_size_values",
            "most record values in one change batch (an UPSERT counts twice)",
            kind=int,
            flag="aws-batch-change-size-values",
        ),
        mirrored(
            "batch_change_interval",
            "pause between two change batches of one zone",
            kind=duration,
            flag="aws-batch-change-interval",
        ),
        mirrored(
            "api_retries",
            "retries of a throttled or failed Route53 call before giving up",
            kind=int,
            flag="aws-api-retries",
        ),
        mirrored(
            "prefer_cname",
            "write CNAMEs to load balancers as CNAMEs, not alias records",
            switch=True,
            flag="aws-prefer-cname",
        ),
        mirrored(
            "evaluate_target_health",
            "alias records evaluate their target's health (default on)",
            switch=True,
            flag="aws-evaluate-target-health",
        ),
        mirrored(
            "assume_role",
            "IAM role (ARN) to assume, e.g. for hosted zones of another account",
            flag="aws-assume-role",
        ),
        mirrored(
            "assume_role_external_id",
            "external id when assuming --aws-assume-role",
            flag="aws-assume-role-external-id",
            secret=True,
        ),
        mirrored(
            "zones_cache_duration",
            "how long the list of hosted zones is reused before it is listed again (0s: every time)",
            kind=duration,
            flag="aws-zones-cache-duration",
        ),
        mirrored(
            "zone_match_parent",
            "accepted from external-dns manifests; zones above a --domain-filter domain are always kept",
            switch=True,
            flag="aws-zone-match-parent",
        ),
    ),
    _validate,
)


def build(options: AwsOptions, identity: str) -> AwsProvider:
    """The provider `--provider=aws` and its flags describe (boto3's default credential chain)."""
    from shardsync.providers.aws.api import Route53Api  # boto3 is imported only when aws is used

    api = Route53Api(
        retries=options.api_retries,
        assume_role=options.assume_role,
        external_id=options.assume_role_external_id,
    )
    return AwsProvider(
        api,
        zone_filter=ZoneFilter(
            ids=options.zone_id_filter, zone_type=options.zone_type, tags=parse_tags(options.zone_tags)
        ),
        limits=Limits(
            changes=options.batch_change_size,
            values=options.batch_change_size_values,
            chars=options.batch_change_size_bytes,
        ),
        batch_interval=options.batch_change_interval,
        zones_cache=options.zones_cache_duration,
        prefer_cname=options.prefer_cname,
        evaluate_target_health=options.evaluate_target_health,
    )
