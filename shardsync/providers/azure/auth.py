"""The Entra ID credential the Azure provider signs its requests with, built as external-dns builds it
(config.credential_of picks which), on azure-identity's asynchronous credentials. Imported only when
`--provider=azure` is built.

- a service principal: ClientSecretCredential(tenantId, aadClientId, aadClientSecret);
- workload identity: WorkloadIdentityCredential, its tenant and client from the config when set, else from
  AZURE_TENANT_ID / AZURE_CLIENT_ID, the token from AZURE_FEDERATED_TOKEN_FILE (what the workload identity
  webhook injects);
- managed identity: ManagedIdentityCredential, user-assigned when userAssignedIdentityID (or
  `--azure-user-assigned-identity-client-id`) names its client id;
- no config file: DefaultAzureCredential (environment, workload identity, managed identity, …).
A cloud other than the public one sets the authority; an Azure Stack authority is not checked by instance
discovery (it is the operator's own). `transport` (tests: `connection_verify`) goes to the credential's
HTTP pipeline as to the DNS client's.
"""

from __future__ import annotations

from typing import Any

from azure.core.credentials_async import AsyncTokenCredential
from azure.identity.aio import (
    ClientSecretCredential,
    DefaultAzureCredential,
    ManagedIdentityCredential,
    WorkloadIdentityCredential,
)

from shardsync.flags import ConfigError
from shardsync.providers.azure.config import AzureConfig, Cloud, Credential, credential_of


def credential(config: AzureConfig | None, cloud: Cloud, **transport: Any) -> AsyncTokenCredential:
    """The credential `config` asks for (module docstring); ConfigError when it cannot be built."""
    kind = credential_of(config)
    options: dict[str, Any] = dict(transport)
    if cloud.authority_host:
        options["authority"] = cloud.authority_host
    if cloud.custom:
        options["disable_instance_discovery"] = True
    try:
        if kind is Credential.DEFAULT or config is None:
            return DefaultAzureCredential(**options)
        if kind is Credential.SERVICE_PRINCIPAL:
            return ClientSecretCredential(config.tenant_id, config.client_id, config.client_secret, **options)
        if kind is Credential.WORKLOAD_IDENTITY:
            if config.tenant_id:
                options["tenant_id"] = config.tenant_id
            if config.client_id:
                options["client_id"] = config.client_id
            return WorkloadIdentityCredential(**options)
        options.pop("disable_instance_discovery", None)  # managed identity asks no authority
        options.pop("authority", None)
        if config.user_assigned_identity_id:
            options["client_id"] = config.user_assigned_identity_id
        return ManagedIdentityCredential(**options)
    except ValueError as exc:  # a missing tenant, client or token file
        raise ConfigError(f"--provider=azure: {kind.value} credential: {exc}") from None
