"""Builds the provider that `--provider` and its flags describe."""

from __future__ import annotations

from shardsync.config import Settings
from shardsync.providers.base import Provider
from shardsync.providers.fake import FakeProvider, FakeStore
from shardsync.providers.fake_client import FakeHTTPProvider
from shardsync.providers.rfc2136 import Rfc2136Provider
from shardsync.providers.webhook import WebhookProvider


def build_provider(settings: Settings) -> Provider:
    """The configured provider; the replica's identity is its client identity (fake audit, user agents)."""
    if settings.provider == "rfc2136":
        return Rfc2136Provider.from_settings(settings)
    if settings.provider == "webhook":
        return WebhookProvider(
            settings.webhook_provider_url,
            identity=settings.identity,
            allow_unfenced=settings.webhook_allow_unfenced,
        )
    if settings.fake_provider_url:
        return FakeHTTPProvider(settings.fake_provider_url, settings.identity)
    store = FakeStore()
    for zone in settings.fake_zone:
        store.add_zone(zone)
    return FakeProvider(store, settings.identity)
