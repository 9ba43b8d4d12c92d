"""The providers `--provider` can name: one line each. A provider's module, or its package's `__init__`
(aws, fake, rfc2136), owns its flags (a FlagGroup) and its construction (`build(options, identity)`); adding a
provider is its module or package plus one line here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from shardsync.flags import FlagGroup
from shardsync.providers import aws, cloudflare, fake, rfc2136, webhook
from shardsync.providers.base import Provider

OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True, slots=True)
class ProviderKind(Generic[OptionsT]):
    name: str  # the value of --provider
    flags: FlagGroup[OptionsT]
    build: Callable[[OptionsT, str], Provider]  # (its options, the replica's identity) -> the provider
    # Every write is conditional on the zone's fence at the DNS server: the sharding loops may then use
    # short leases (shardsync.sharding.timings); an unfenced provider keeps the conservative timing.
    fences: bool = True

    def create(self, options: Any, identity: str) -> Provider:
        return self.build(options, identity)


PROVIDERS: dict[str, ProviderKind[Any]] = {
    kind.name: kind
    for kind in (
        ProviderKind("aws", aws.FLAGS, aws.build),
        ProviderKind("cloudflare", cloudflare.FLAGS, cloudflare.build),
        ProviderKind("fake", fake.FLAGS, fake.build),
        ProviderKind("rfc2136", rfc2136.FLAGS, rfc2136.build),
        ProviderKind("webhook", webhook.FLAGS, webhook.build, fences=False),
    )
}
