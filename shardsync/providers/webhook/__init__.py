"""`--provider=webhook`: a server of external-dns's webhook provider protocol, with shardsync's optional
fence extension. This module holds the flags and the construction; the rest is imported from the module
doing that job:

- protocol.py: the wire format (media type, the fence extension's header, call and status codes), shared
  by the client and the server;
- client.py: `WebhookProvider`, the zone-scoped Provider over such a server;
- server.py: the server side of the protocol over any Provider (served.py: which zones, and listings and
  writes split over them), used by the fake provider's webhook face and by command.py, `shardsync
  webhook-server`; neither is imported by a replica.

A replica runs sharded over any webhook server: fenced when the server advertises the extension, else
lease-timed on the conservative timings (client.py's docstring; shardsync.replica.command learns which at
start). `--webhook-allow-unfenced`, once needed for sharded replicas to write at all, is accepted and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from shardsync.flags import Flag, FlagGroup, mirrored
from shardsync.logs import get_logger
from shardsync.providers.webhook.client import WebhookProvider

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class WebhookOptions:
    """The `--webhook-*` flags."""

    provider_url: str = "http://localhost:8888"
    allow_unfenced: bool = False  # no effect: kept so that deployments that set it still start


FLAGS = FlagGroup(
    "webhook",
    "webhook provider (--provider=webhook)",
    WebhookOptions,
    (
        mirrored("provider_url", "URL of an external-dns webhook provider", flag="webhook-provider-url"),
        Flag(
            "allow_unfenced",
            "no effect, no longer needed: sharded replicas write through any webhook provider (fenced when "
            "it offers the fence extension, else lease-timed)",
            switch=True,
            flag="webhook-allow-unfenced",
        ),
    ),
)


def build(options: WebhookOptions, identity: str) -> WebhookProvider:
    if options.allow_unfenced:
        log.info(
            "--webhook-allow-unfenced is no longer needed and has no effect: sharded replicas write through "
            "any webhook provider"
        )
    return WebhookProvider(options.provider_url, identity=identity)
