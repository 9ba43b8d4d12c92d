"""The Cloudflare provider, `--provider=cloudflare`: this module holds its flags (external-dns's names and
meanings) and its construction.

- api.py: the Cloudflare calls through the official SDK (credentials, endpoint, error mapping, the
  metric), imported only when `--provider=cloudflare` is built; errors.py: its errors;
- records.py: records and endpoints both ways, and external-dns's AdjustEndpoints;
- batches.py: a plan as `dns_records/batch` requests within `--batch-change-size`, and the fence;
- provider.py: `CloudflareProvider`, the Provider protocol over them.
"""

from __future__ import annotations

from dataclasses import dataclass

from shardsync.flags import ConfigError, FlagGroup, duration, mirrored
from shardsync.providers.cloudflare.batches import FENCE_OPS
from shardsync.providers.cloudflare.provider import CloudflareProvider
from shardsync.providers.zone_ids import ZONE_ID_FILTER

MAX_PER_PAGE = 5000  # the records list's largest page


@dataclass(frozen=True, slots=True)
class CloudflareOptions:
    """The `--cloudflare-*` flags, `--zone-id-filter` and the batch flags; defaults are external-dns's."""

    zone_id_filter: tuple[str, ...] = ()
    proxied: bool = False
    dns_records_per_page: int = 100
    record_comment: str = ""
    batch_change_size: int = 200
    batch_change_interval: float = 1.0


def _validate(o: CloudflareOptions) -> None:
    if not 1 <= o.dns_records_per_page <= MAX_PER_PAGE:
        raise ConfigError(f"--cloudflare-dns-records-per-page={o.dns_records_per_page}: 1 to {MAX_PER_PAGE}")
    if o.batch_change_size <= FENCE_OPS:
        raise ConfigError(
            f"--batch-change-size={o.batch_change_size}: at least {FENCE_OPS + 1} (room for the fence's "
            "two operations and one record)"
        )
    if o.batch_change_interval < 0:
        raise ConfigError("--batch-change-interval must not be negative")


FLAGS = FlagGroup(
    "cloudflare",
    "cloudflare provider (--provider=cloudflare)",
    CloudflareOptions,
    (
        ZONE_ID_FILTER,
        mirrored(
            "proxied",
            "records are proxied by Cloudflare unless their cloudflare-proxied annotation says otherwise",
            switch=True,
            flag="cloudflare-proxied",
        ),
        mirrored(
            "dns_records_per_page",
            f"records listed per request (at most {MAX_PER_PAGE}: fewer requests against the limit)",
            kind=int,
            flag="cloudflare-dns-records-per-page",
        ),
        mirrored(
            "record_comment",
            "comment written on records without a cloudflare-record-comment annotation",
            flag="cloudflare-record-comment",
        ),
        mirrored(
            "batch_change_size",
            "most record operations in one Cloudflare batch (200 on a free plan, 3,500 on a paid one)",
            kind=int,
            flag="batch-change-size",
        ),
        mirrored(
            "batch_change_interval",
            "pause between two Cloudflare batches of one zone",
            kind=duration,
            flag="batch-change-interval",
        ),
    ),
    _validate,
)


def build(options: CloudflareOptions, identity: str) -> CloudflareProvider:
    """The provider `--provider=cloudflare` and its flags describe (credentials as external-dns reads them:
    CF_API_TOKEN, else CF_API_KEY and CF_API_EMAIL)."""
    from shardsync.providers.cloudflare.api import CloudflareApi  # the SDK is imported only when used

    return CloudflareProvider(
        CloudflareApi(),
        zone_ids=options.zone_id_filter,
        per_page=options.dns_records_per_page,
        batch_size=options.batch_change_size,
        batch_interval=options.batch_change_interval,
        proxied=options.proxied,
        comment=options.record_comment,
    )
