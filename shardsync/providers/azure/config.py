"""The Azure provider's configuration as external-dns reads it: its `azure.json` (`--azure-config-file`), the
flags that override it, the cloud it names and which credential it asks for. Pure: no SDK is imported.

- `load(path, …)`: the file's fields (external-dns's `config` struct: tenantId, subscriptionId,
  resourceGroup, aadClientId, aadClientSecret, useManagedIdentityExtension, useWorkloadIdentityExtension,
  userAssignedIdentityID, cloud, activeDirectoryAuthorityHost, resourceManagerEndpoint,
  resourceManagerAudience), with `--azure-subscription-id`, `--azure-resource-group` and
  `--azure-user-assigned-identity-client-id` winning when set; None when the file does not exist (then
  the credential comes from the environment: `Credential.DEFAULT`).
- `cloud_of(config)`: the Resource Manager endpoint, the Entra ID authority and the token scope of the
  named cloud (AzurePublicCloud when none; AzureStackCloud takes them from the file).
- `credential_of(config)`: external-dns's choice, in its order: a service principal (aadClientId and
  aadClientSecret, neither the placeholder "msi"), else workload identity, else managed identity, else
  none (ConfigError, as external-dns fails).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shardsync.flags import ConfigError

DEFAULT_CONFIG_FILE = "/etc/kubernetes/azure.json"


@dataclass(frozen=True, slots=True)
class AzureConfig:
    """external-dns's azure.json, with the flags that override it applied."""

    subscription_id: str = ""
    resource_group: str = ""
    tenant_id: str = ""
    client_id: str = ""
    client_secret: str = ""
    use_managed_identity: bool = False
    use_workload_identity: bool = False
    user_assigned_identity_id: str = ""
    cloud: str = ""
    authority_host: str = ""
    resource_manager_endpoint: str = ""
    resource_manager_audience: str = ""

    def __repr__(self) -> str:  # the secret never reaches a log line
        return (
            f"AzureConfig(subscription_id={self.subscription_id!r}, resource_group={self.resource_group!r})"
        )


_FIELDS = {  # azure.json key -> AzureConfig field (external-dns's json tags)
    "subscriptionId": "subscription_id",
    "resourceGroup": "resource_group",
    "tenantId": "tenant_id",
    "aadClientId": "client_id",
    "aadClientSecret": "client_secret",
    "useManagedIdentityExtension": "use_managed_identity",
    "useWorkloadIdentityExtension": "use_workload_identity",
    "userAssignedIdentityID": "user_assigned_identity_id",
    "cloud": "cloud",
    "activeDirectoryAuthorityHost": "authority_host",
    "resourceManagerEndpoint": "resource_manager_endpoint",
    "resourceManagerAudience": "resource_manager_audience",
}


def parse(text: str, source: str = "azure.json") -> AzureConfig:
    """The config file's fields (ConfigError when it is not a JSON object of the right kinds)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"--azure-config-file: {source} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--azure-config-file: {source} is not a JSON object")
    fields: dict[str, Any] = {}
    for key, name in _FIELDS.items():
        # Go's json.Unmarshal matches keys without regard to case
        value = next((v for k, v in data.items() if k.lower() == key.lower()), None)
        if value is None:
            continue
        kind = bool if name.startswith("use_") else str
        if not isinstance(value, kind):
            raise ConfigError(f"--azure-config-file: {source}: {key} must be a {kind.__name__}")
        fields[name] = value
    return AzureConfig(**fields)


def load(
    path: str,
    *,
    subscription_id: str = "",
    resource_group: str = "",
    user_assigned_identity_client_id: str = "",
) -> AzureConfig | None:
    """The config file at `path` with the flags applied over it; None when there is no such file."""
    file = Path(path)
    if not file.exists():
        return None
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--azure-config-file: cannot read {path}: {exc}") from None
    config = parse(text, path)
    overrides = {
        "subscription_id": subscription_id,
        "resource_group": resource_group,
        "user_assigned_identity_id": user_assigned_identity_client_id,
    }
    return _with(config, **{k: v for k, v in overrides.items() if v})


def _with(config: AzureConfig, **changes: Any) -> AzureConfig:
    fields = {name: getattr(config, name) for name in _FIELDS.values()}
    return AzureConfig(**{**fields, **changes})


@dataclass(frozen=True, slots=True)
class Cloud:
    """Where a cloud's Resource Manager and Entra ID answer."""

    name: str
    resource_manager: str  # the SDK's base URL
    authority_host: str  # "" : the identity library's default (or AZURE_AUTHORITY_HOST)
    scope: str  # the token scope of Resource Manager
    custom: bool = False  # endpoints from the config file (Azure Stack): no instance discovery for them


PUBLIC = Cloud(
    "AzurePublicCloud", "https://management.azure.com/", "", "https://management.azure.com/.default"
)
_CLOUDS = {
    name: cloud
    for cloud, names in (
        (PUBLIC, ("AZURECLOUD", "AZUREPUBLICCLOUD", "")),
        (
            Cloud(
                "AzureUSGovernment",
                "https://management.usgovcloudapi.net/",
                "https://login.microsoftonline.us",
                "https://management.core.usgovcloudapi.net/.default",
            ),
            ("AZUREUSGOVERNMENT", "AZUREUSGOVERNMENTCLOUD"),
        ),
        (
            Cloud(
                "AzureChinaCloud",
                "https://management.chinacloudapi.cn/",
                "https://login.chinacloudapi.cn",
                "https://management.chinacloudapi.cn/.default",
            ),
            ("AZURECHINACLOUD",),
        ),
    )
    for name in names
}


def cloud_of(config: AzureConfig | None) -> Cloud:
    """The cloud the config names (external-dns's getCloudConfiguration); ConfigError for an unknown one."""
    name = (config.cloud if config else "").strip().upper()
    if name in _CLOUDS:
        return _CLOUDS[name]
    if name == "AZURESTACKCLOUD" and config is not None:
        endpoint = config.resource_manager_endpoint.strip()
        if not endpoint:
            raise ConfigError("--azure-config-file: cloud AzureStackCloud needs resourceManagerEndpoint")
        audience = (config.resource_manager_audience or endpoint).rstrip("/")
        return Cloud(
            "AzureStackCloud",
            endpoint.rstrip("/") + "/",
            config.authority_host.strip().rstrip("/"),
            audience + "/.default",
            custom=True,
        )
    raise ConfigError(f"--azure-config-file: unknown cloud name: {name}")


class Credential(enum.Enum):
    """Which credential external-dns builds from the config (module docstring)."""

    SERVICE_PRINCIPAL = "client secret"
    WORKLOAD_IDENTITY = "workload identity"
    MANAGED_IDENTITY = "managed identity"
    DEFAULT = "default chain"  # no config file: the identity library's DefaultAzureCredential


def credential_of(config: AzureConfig | None) -> Credential:
    if config is None:
        return Credential.DEFAULT
    # Clusters built with a managed identity write "msi" in both fields as a placeholder.
    if (
        config.client_id
        and config.client_secret
        and config.client_id.lower() != "msi"
        and config.client_secret.lower() != "msi"
    ):
        return Credential.SERVICE_PRINCIPAL
    if config.use_workload_identity:
        return Credential.WORKLOAD_IDENTITY
    if config.use_managed_identity:
        return Credential.MANAGED_IDENTITY
    raise ConfigError(
        "--azure-config-file: no credentials provided for Azure API: set aadClientId and aadClientSecret, "
        "useWorkloadIdentityExtension or useManagedIdentityExtension"
    )
