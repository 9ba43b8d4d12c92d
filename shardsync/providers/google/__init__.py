"""The Google Cloud DNS provider, `--provider=google`: this module holds its flags (external-dns's names and
meanings) and its construction.

- api.py: the Cloud DNS calls through `google-cloud-dns` (credentials, project, endpoint, error mapping,
  the metric), imported only when `--provider=google` is built; errors.py: its errors;
- records.py: record sets and endpoints both ways;
- batches.py: a plan as changes within the limits, and the fence compare-and-swap;
- zones.py: which managed zones are managed (`--zone-id-filter`, `--google-zone-visibility`);
- provider.py: `GoogleProvider`, the Provider protocol over them.
"""

from __future__ import annotations

from dataclasses import dataclass

from shardsync.flags import ConfigError, Flag, FlagGroup, duration, mirrored
from shardsync.providers.google.batches import Limits
from shardsync.providers.google.provider import GoogleProvider
from shardsync.providers.google.zones import VISIBILITIES, ZoneFilter
from shardsync.providers.zone_ids import ZONE_ID_FILTER


@dataclass(frozen=True, slots=True)
class GoogleOptions:
    """The `--google-*` flags and `--zone-id-filter`; defaults are external-dns's."""

    project: str = ""
    batch_change_size: int = 1000
    batch_change_interval: float = 1.0
    zone_visibility: str = ""
    zone_id_filter: tuple[str, ...] = ()
    api_endpoint: str = "https://dns.googleapis.com"


def _validate(o: GoogleOptions) -> None:
    # Each change also carries the fence's deletion and addition.
    if o.batch_change_size < 3:
        raise ConfigError(
            f"--google-batch-change-size={o.batch_change_size}: at least 3 (room for the fence's deletion "
            "and addition and one record)"
        )
    if o.batch_change_interval < 0:
        raise ConfigError("--google-batch-change-interval must not be negative")
    if o.zone_visibility not in VISIBILITIES:
        raise ConfigError(
            f"--google-zone-visibility={o.zone_visibility}: use public or private (or leave it unset: any)"
        )
    if not o.api_endpoint.startswith(("https://", "http://")):
        raise ConfigError(f"--google-api-endpoint={o.api_endpoint}: not an http(s) URL")


FLAGS = FlagGroup(
    "google",
    "google provider (--provider=google)",
    GoogleOptions,
    (
        mirrored(
            "project",
            "the Google Cloud project of the managed zones (default: detected from the credentials or, on "
            "GCP, the metadata server)",
            flag="google-project",
        ),
        mirrored(
            "batch_change_size",
            "most additions plus deletions in one change",
            kind=int,
            flag="google-batch-change-size",
        ),
        mirrored(
            "batch_change_interval",
            "pause between two changes of one zone",
            kind=duration,
            flag="google-batch-change-interval",
        ),
        mirrored(
            "zone_visibility",
            "only manage zones of this visibility: public or private (default: any)",
            flag="google-zone-visibility",
        ),
        ZONE_ID_FILTER,
        Flag(
            "api_endpoint",
            "the Cloud DNS API's base URL (a private endpoint, or a test server)",
            flag="google-api-endpoint",
        ),
    ),
    _validate,
)


def build(options: GoogleOptions, identity: str) -> GoogleProvider:
    """The provider `--provider=google` and its flags describe (application default credentials)."""
    from shardsync.providers.google.api import CloudDnsApi  # the client library only when google is used

    api = CloudDnsApi(project=options.project, endpoint=options.api_endpoint, identity=identity)
    return GoogleProvider(
        api,
        zone_filter=ZoneFilter(ids=options.zone_id_filter, visibility=options.zone_visibility),
        limits=Limits(changes=options.batch_change_size),
        batch_interval=options.batch_change_interval,
    )
