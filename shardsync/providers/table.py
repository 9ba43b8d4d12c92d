"""The providers `--provider` can name: one line each. A provider's package `__init__` owns its flags (a
FlagGroup) and its construction (`build(options, identity)`); adding a provider is its package plus one line
here. Whether a built provider fences its writes is asked of it (base.fences_writes: every provider does
unless it says otherwise), since for some (webhook) only its server can tell."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from shardsync.flags import FlagGroup
from shardsync.providers import aws, azure, cloudflare, fake, google, pdns, rfc2136, webhook
from shardsync.providers.base import Provider

OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True, slots=True)
class ProviderKind(Generic[OptionsT]):
    name: str  # the value of --provider
    flags: FlagGroup[OptionsT]
    build: Callable[[OptionsT, str], Provider]  # (its options, the replica's identity) -> the provider

    def create(self, options: Any, identity: str) -> Provider:
        return self.build(options, identity)


PROVIDERS: dict[str, ProviderKind[Any]] = {
    kind.name: kind
    for kind in (
        ProviderKind("aws", aws.FLAGS, aws.build),
        ProviderKind("azure", azure.FLAGS, azure.build),
        ProviderKind("cloudflare", cloudflare.FLAGS, cloudflare.build),
        ProviderKind("fake", fake.FLAGS, fake.build),
        ProviderKind("google", google.FLAGS, google.build),
        ProviderKind("pdns", pdns.FLAGS, pdns.build),
        ProviderKind("rfc2136", rfc2136.FLAGS, rfc2136.build),
        ProviderKind("webhook", webhook.FLAGS, webhook.build),
    )
}
