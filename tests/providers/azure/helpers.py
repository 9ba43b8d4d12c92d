"""What the azure provider's tests share: the contract fake served over HTTPS with a certificate they trust,
external-dns's azure.json pointing at it (an AzureStackCloud, whose endpoints the file names: the
supported way to reach a Resource Manager other than management.azure.com), a provider built from that
file as `--provider=azure` builds it, and one worker reconcile of a zone through it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shardsync.providers.azure import AzureOptions, provider_from
from shardsync.providers.azure.provider import AzureProvider
from shardsync.providers.base import FenceToken
from shardsync.reconcile.worker import Worker
from shardsync.records.desired import DesiredIndex
from tests.cloudfakes.azure import SUBSCRIPTION, TENANT, AzureFake
from tests.cloudfakes.tls import LoopbackCert
from tests.providers.reconcile import reconcile_once

ZONE = "ex.org"
GROUP = "rg-dns"
OWNER = "default"
CLIENTS = {"client-1": "secret-1", "client-2": "secret-2"}
VOLATILE = ("fqdn", "provisioningState")  # what Azure adds to a stored record set's properties


@contextmanager
def served(cert: LoopbackCert) -> Iterator[AzureFake]:
    """The fake over HTTPS with ZONE in GROUP (each test module's `fake` fixture)."""
    with AzureFake(clients=CLIENTS).serve(cert) as server:
        server.add_zone(ZONE, GROUP)
        yield server


def config_file(folder: Path, fake: AzureFake, client: str = "client-1", **fields: Any) -> Path:
    """external-dns's azure.json for a service principal of the fake (fields added or replacing)."""
    data = {
        "cloud": "AzureStackCloud",
        "tenantId": TENANT,
        "subscriptionId": SUBSCRIPTION,
        "resourceGroup": GROUP,
        "aadClientId": client,
        "aadClientSecret": CLIENTS.get(client, ""),
        "resourceManagerEndpoint": fake.url,
        "activeDirectoryAuthorityHost": fake.url,
        **fields,
    }
    path = folder / f"azure-{client}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def provider(
    folder: Path,
    fake: AzureFake,
    cert: LoopbackCert,
    client: str = "client-1",
    config: dict[str, Any] | None = None,
    **options: Any,
) -> AzureProvider:
    """A provider as `--provider=azure --azure-config-file=…` builds it (the file's `config` fields added
    or replaced), trusting the fake's certificate. Build it on the event loop that uses it (aiohttp's
    connections belong to one loop)."""
    opts = AzureOptions(config_file=str(config_file(folder, fake, client, **(config or {}))), **options)
    built = provider_from(opts, connection_verify=str(cert.cert))
    built.fence_max_age = 60.0  # the tests' bumps: one per batch, whatever the machine's load
    return built


def stored(fake: AzureFake, zone: str = ZONE) -> dict[tuple[str, str], dict[str, Any]]:
    """The zone's record sets but the fence and the apex SOA and NS, by (type, name): their properties as
    written (without what Azure adds)."""
    out = {}
    for (rtype, name), record_set in fake.record_sets(zone).items():
        if name == "_shardsync-fence" or (name == "@" and rtype in ("SOA", "NS")):
            continue
        out[(rtype, name)] = {k: v for k, v in record_set["properties"].items() if k not in VOLATILE}
    return out


def owner_txt(resource: str) -> str:
    return f'"heritage=external-dns,external-dns/owner={OWNER},external-dns/resource={resource}"'


def sync(
    folder: Path, fake: AzureFake, cert: LoopbackCert, desired: DesiredIndex, token: FenceToken | None
) -> Worker:
    """One worker reconcile of ZONE through a fresh provider."""
    return reconcile_once(lambda: provider(folder, fake, cert), desired, ZONE, token, OWNER)
