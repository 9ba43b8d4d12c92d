"""`--provider=fake`: its flags and its construction (an in-process store, or a shared fake-provider)."""

from __future__ import annotations

from dataclasses import dataclass

from shardsync.flags import ConfigError, Flag, FlagGroup
from shardsync.providers.base import Provider
from shardsync.providers.fake import FakeProvider, FakeStore
from shardsync.providers.fake_client import FakeHTTPProvider


@dataclass(frozen=True, slots=True)
class FakeOptions:
    """The `--fake-*` flags."""

    provider_url: str = ""
    zones: tuple[str, ...] = ()


def _validate(o: FakeOptions) -> None:
    if not (o.provider_url or o.zones):
        raise ConfigError("--provider=fake needs --fake-provider-url or at least one --fake-zone")


FLAGS = FlagGroup(
    "fake",
    "fake provider (--provider=fake)",
    FakeOptions,
    (
        Flag(
            "provider_url",
            "URL of a shared `shardsync fake-provider` (else an in-process one)",
            flag="fake-provider-url",
        ),
        Flag(
            "zones",
            "zone of the in-process fake provider (repeatable)",
            repeat=True,
            flag="fake-zone",
            external_dns="--inmemory-zone",
        ),
    ),
    _validate,
)


def build(options: FakeOptions, identity: str) -> Provider:
    if options.provider_url:
        return FakeHTTPProvider(options.provider_url, identity)
    store = FakeStore()
    for zone in options.zones:
        store.add_zone(zone)
    return FakeProvider(store, identity)
