"""The fake DNS provider, `--provider=fake`: this module holds its flags and its construction (an in-process
store, or a shared `shardsync fake-provider`); everything else is imported from the module doing that job.

- limits.py: `Limits` and the per-client gate every provider call passes (throttling, rate, concurrency,
  latency);
- faults.py: `Faults`, the errors injected on purpose;
- audit.py: `AuditEntry` and the bounded audit of writes;
- seed.py: the layout of seeded zones and records;
- store.py: `FakeStore`, zones, records and fences under one lock, shared by both faces below;
  staging.py: checking a batch against a zone before the store commits it;
- provider.py: `FakeProvider`, the store in this process;
- profile.py: `Profile`, a real API's documented rules the store enforces (`--profile route53`);
  enforcer.py: their state (account buckets, request windows, zones processing a change);
- server.py: the store over HTTP (native API and webhook face: webhook_face.py, the store as the Provider
  shardsync's webhook server serves); command.py: `shardsync fake-provider`;
- client.py: `FakeHTTPProvider`, a replica's client of that server, and `FakeAdmin`, its admin client.
"""

from __future__ import annotations

from dataclasses import dataclass

from shardsync.flags import ConfigError, Flag, FlagGroup
from shardsync.providers.base import Provider


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
    # Imported only when fake is the provider: a replica of a real provider never loads aiohttp.
    from shardsync.providers.fake.client import FakeHTTPProvider
    from shardsync.providers.fake.provider import FakeProvider
    from shardsync.providers.fake.store import FakeStore

    if options.provider_url:
        return FakeHTTPProvider(options.provider_url, identity)
    store = FakeStore()
    for zone in options.zones:
        store.add_zone(zone)
    return FakeProvider(store, identity)
