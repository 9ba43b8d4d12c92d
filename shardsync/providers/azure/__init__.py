"""The Azure DNS provider, `--provider=azure`: this module holds its flags (external-dns's names and
meanings) and its construction.

- config.py: external-dns's azure.json, the flags over it, the cloud and which credential it asks for;
- auth.py: that credential, on azure-identity; api.py: the Azure DNS calls through the official SDK
  (endpoint, retries, error mapping, the metric); both imported only when `--provider=azure` is built;
  errors.py: its errors;
- zones.py: which zones are managed (`--azure-resource-group`, `--zone-id-filter`);
- records.py: record sets and endpoints both ways, and external-dns's AdjustEndpoints;
- writes.py: a plan as record-set writes in batches, and the fence record set;
- provider.py: `AzureProvider`, the Provider protocol over them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from shardsync.flags import ConfigError, FlagGroup, duration, mirrored
from shardsync.logs import get_logger
from shardsync.providers.azure.config import DEFAULT_CONFIG_FILE, cloud_of, credential_of, load
from shardsync.providers.azure.provider import AzureProvider
from shardsync.providers.zone_ids import ZONE_ID_FILTER

log = get_logger("shardsync.providers.azure")


@dataclass(frozen=True, slots=True)
class AzureOptions:
    """The `--azure-*` flags and `--zone-id-filter`; defaults are external-dns's."""

    config_file: str = DEFAULT_CONFIG_FILE
    resource_group: str = ""
    subscription_id: str = ""
    user_assigned_identity_client_id: str = ""
    zones_cache_duration: float = 0.0
    maxretries_count: int = 3
    zone_id_filter: tuple[str, ...] = ()


def _validate(o: AzureOptions) -> None:
    if o.zones_cache_duration < 0:
        raise ConfigError("--azure-zones-cache-duration must not be negative")


FLAGS = FlagGroup(
    "azure",
    "azure provider (--provider=azure)",
    AzureOptions,
    (
        mirrored(
            "config_file",
            "Azure configuration file (external-dns's azure.json: tenantId, subscriptionId, resourceGroup, "
            "aadClientId/aadClientSecret, useManagedIdentityExtension, useWorkloadIdentityExtension, "
            "userAssignedIdentityID, cloud); when absent, credentials come from the environment",
            flag="azure-config-file",
        ),
        mirrored(
            "resource_group",
            "resource group of the DNS zones, over the config file's (without one: the subscription's zones)",
            flag="azure-resource-group",
        ),
        mirrored(
            "subscription_id",
            "Azure subscription, over the config file's (or AZURE_SUBSCRIPTION_ID without one)",
            flag="azure-subscription-id",
        ),
        mirrored(
            "user_assigned_identity_client_id",
            "client id of the user-assigned managed identity, over the config file's",
            flag="azure-user-assigned-identity-client-id",
        ),
        mirrored(
            "zones_cache_duration",
            "how long the list of DNS zones is reused before it is listed again (0s: every time)",
            kind=duration,
            flag="azure-zones-cache-duration",
        ),
        mirrored(
            "maxretries_count",
            "retries of an Azure request that failed in transit or with a 5xx (never of a 429, which the "
            "provider budget answers); below 0: none",
            kind=int,
            flag="azure-maxretries-count",
        ),
        ZONE_ID_FILTER,
    ),
    _validate,
)


def build(options: AzureOptions, identity: str) -> AzureProvider:
    """The provider `--provider=azure` and its flags describe (credentials as external-dns picks them from
    its config file, else DefaultAzureCredential)."""
    return provider_from(options)


def provider_from(options: AzureOptions, **transport: Any) -> AzureProvider:
    """`build`'s work; `transport` goes to the SDK's HTTP pipelines (tests: `connection_verify`, the CA
    bundle of their loopback fake)."""
    # the SDKs are imported only when used
    from shardsync.providers.azure.api import AzureApi
    from shardsync.providers.azure.auth import credential

    config = load(
        options.config_file,
        subscription_id=options.subscription_id,
        resource_group=options.resource_group,
        user_assigned_identity_client_id=options.user_assigned_identity_client_id,
    )
    if config is not None:
        subscription, group = config.subscription_id, config.resource_group
    else:
        subscription = options.subscription_id or os.environ.get("AZURE_SUBSCRIPTION_ID", "")
        group = options.resource_group
    if not subscription:
        raise ConfigError(
            "--provider=azure: no subscription: set subscriptionId in --azure-config-file, "
            "--azure-subscription-id or AZURE_SUBSCRIPTION_ID"
        )
    cloud, kind = cloud_of(config), credential_of(config)
    log.info(
        "azure credentials",
        credential=kind.value,
        cloud=cloud.name,
        subscription=subscription,
        config_file=options.config_file if config is not None else f"{options.config_file} (absent)",
    )
    api = AzureApi(
        credential(config, cloud, **transport),
        subscription,
        cloud,
        retries=options.maxretries_count,
        transport=transport,
    )
    return AzureProvider(
        api,
        resource_group=group,
        zone_ids=options.zone_id_filter,
        zones_cache=options.zones_cache_duration,
    )
