"""The azure provider's parts: the config file and the credential external-dns would pick, record sets and
endpoints both ways (byte for byte what external-dns writes), a plan as ordered record-set writes in
batches, and the zones kept; then each credential kind over the wire against the contract fake (a service
principal's secret refused, workload identity's federated token, managed identity's metadata endpoint)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from shardsync.flags import ConfigError
from shardsync.providers.azure import AzureOptions, provider_from
from shardsync.providers.azure.config import PUBLIC, Credential, cloud_of, credential_of, load, parse
from shardsync.providers.azure.provider import AzureProvider
from shardsync.providers.azure.records import (
    METADATA_KEYS,
    METADATA_PREFIX,
    TAGS,
    InvalidTargetError,
    adjust,
    body_of,
    endpoint_of,
    relative_name,
)
from shardsync.providers.azure.writes import batches, units
from shardsync.providers.azure.zones import Zone, select
from shardsync.providers.base import ProviderError, fences_writes
from shardsync.providers.table import PROVIDERS
from shardsync.records.endpoint import OWNED_RECORD_LABEL, Changes, Endpoint
from tests.cloudfakes.azure import SUBSCRIPTION, AzureFake
from tests.cloudfakes.tls import LoopbackCert
from tests.providers.azure.helpers import GROUP, ZONE, config_file

# ---- the config file ----


def test_the_config_file_is_read_as_external_dns_reads_it_and_the_flags_win(tmp_path: Path) -> None:
    path = tmp_path / "azure.json"
    text = {
        "TenantID": "t",
        "subscriptionId": "s1",
        "resourceGroup": "g1",
        "aadClientId": "c",
        "location": "x",
    }
    path.write_text(json.dumps(text))
    config = load(str(path), subscription_id="s2", user_assigned_identity_client_id="u")
    assert config is not None
    assert (config.tenant_id, config.subscription_id, config.resource_group) == ("t", "s2", "g1")
    assert config.user_assigned_identity_id == "u"
    assert load(str(tmp_path / "absent.json")) is None  # then: DefaultAzureCredential
    with pytest.raises(ConfigError, match="useManagedIdentityExtension must be a bool"):
        parse('{"useManagedIdentityExtension": "yes"}')
    with pytest.raises(ConfigError, match="not JSON"):
        parse("tenantId: t")
    assert "secret" not in repr(parse('{"aadClientSecret": "secret"}'))


def test_the_credential_is_the_one_external_dns_picks() -> None:
    def kind(**fields: object) -> Credential:
        return credential_of(parse(json.dumps(fields)))

    assert kind(aadClientId="c", aadClientSecret="s", useManagedIdentityExtension=True) is (
        Credential.SERVICE_PRINCIPAL
    )
    assert kind(aadClientId="msi", aadClientSecret="msi", useManagedIdentityExtension=True) is (
        Credential.MANAGED_IDENTITY
    )
    assert kind(useWorkloadIdentityExtension=True, useManagedIdentityExtension=True) is (
        Credential.WORKLOAD_IDENTITY
    )
    assert credential_of(None) is Credential.DEFAULT
    with pytest.raises(ConfigError, match="no credentials"):
        kind(aadClientId="c")


def test_the_cloud_names_its_endpoints() -> None:
    assert cloud_of(None) is PUBLIC and cloud_of(parse('{"cloud": "AzurePublicCloud"}')) is PUBLIC
    china = cloud_of(parse('{"cloud": "AzureChinaCloud"}'))
    assert china.resource_manager == "https://management.chinacloudapi.cn/"
    fields = {
        "cloud": "AZURESTACKCLOUD",
        "resourceManagerEndpoint": "https://arm.local",
        "activeDirectoryAuthorityHost": "https://login.local/",
    }
    stack = cloud_of(parse(json.dumps(fields)))
    assert (stack.resource_manager, stack.authority_host, stack.scope, stack.custom) == (
        "https://arm.local/",
        "https://login.local",
        "https://arm.local/.default",
        True,
    )
    with pytest.raises(ConfigError, match="unknown cloud"):
        cloud_of(parse('{"cloud": "Mars"}'))


# ---- record sets and endpoints ----


def test_record_sets_read_as_external_dns_reads_them() -> None:
    def read(rtype: str, name: str, props: dict[str, object]) -> Endpoint | None:
        return endpoint_of(
            {"name": name, "type": f"Microsoft.Network/dnszones/{rtype}", "properties": props}, ZONE
        )

    a = read("A", "@", {"TTL": 60, "ARecords": [{"ipv4Address": "192.0.2.2"}, {"ipv4Address": "192.0.2.1"}]})
    assert a == Endpoint.new(ZONE, "A", ["192.0.2.1", "192.0.2.2"], ttl=60)
    assert read("MX", "m", {"MXRecords": [{"preference": 10, "exchange": "mail.ex.org"}]}) == Endpoint.new(
        f"m.{ZONE}", "MX", ["10 mail.ex.org"]
    )
    wildcard = read("CNAME", "*", {"TTL": 300, "CNAMERecord": {"cname": "LB.ex.net."}})
    assert wildcard == Endpoint.new(f"*.{ZONE}", "CNAME", ["lb.ex.net"], ttl=300)
    assert read("SOA", "@", {"SOARecord": {"host": "ns"}}) is None
    assert read("A", "alias", {"TTL": 300, "targetResource": {"id": "/subscriptions/x"}}) is None


def test_records_are_written_as_external_dns_writes_them_and_read_back_the_same() -> None:
    txt = Endpoint.new(f"a-web.{ZONE}", "TXT", ['"heritage=external-dns,external-dns/owner=default"'])
    assert body_of(txt) == {
        "properties": {
            "TTL": 300,
            "TXTRecords": [{"value": ['"heritage=external-dns,external-dns/owner=default"']}],
        }
    }
    long = Endpoint.new(f"long.{ZONE}", "TXT", ["x" * 300, "short"], ttl=60)
    strings = [r["value"] for r in body_of(long)["properties"]["TXTRecords"]]
    assert sorted(map(len, strings[0] + strings[1])) == [5, 45, 255]  # at most 255 characters a string
    srv = Endpoint.new(f"_s._tcp.{ZONE}", "SRV", ["0 5 443 t.ex.org"])
    mx = Endpoint.new(ZONE, "MX", ["10 mail.ex.org", "20 b.ex.org"])
    for ep in (long, srv, mx):
        name = relative_name(ep.dns_name, ZONE)
        read = endpoint_of(
            {"name": name, "type": f"Microsoft.Network/dnszones/{ep.record_type}", **body_of(ep)}, ZONE
        )
        assert read == (ep if ep.ttl else Endpoint.new(ep.dns_name, ep.record_type, ep.targets, ttl=300))
    for bad in (
        Endpoint.new(f"c.{ZONE}", "CNAME", ["a.ex.org", "b.ex.org"]),
        Endpoint.new(f"a.{ZONE}", "A", ["2001:db8::1"]),
        Endpoint.new(f"m.{ZONE}", "MX", ["mail.ex.org"]),
    ):
        with pytest.raises(InvalidTargetError):
            body_of(bad)


def test_adjust_makes_tags_metadata_and_drops_what_azure_does_not_keep() -> None:
    props = [(TAGS, " team=a , env=prod,bad, =x"), ("aws/weight", "10"), ("alias", "true")]
    ep = adjust(Endpoint.new(f"w.{ZONE}", "A", ["192.0.2.1"], provider_specific=props))
    assert dict(ep.provider_specific) == {
        METADATA_PREFIX + "env": "prod",
        METADATA_PREFIX + "team": "a",
        METADATA_KEYS: "env,team",
    }
    assert list(ep.provider_specific) == sorted(ep.provider_specific)
    assert adjust(ep) == ep
    assert body_of(ep)["properties"]["metadata"] == {"env": "prod", "team": "a"}


# ---- writes ----


def test_a_plan_becomes_writes_records_before_their_txt_records_and_batches_keep_them_together() -> None:
    def rec(name: str, rtype: str = "A", owned: str = "") -> Endpoint:
        labels = {OWNED_RECORD_LABEL: owned} if owned else {}
        target = '"heritage=external-dns"' if rtype == "TXT" else "192.0.2.1"
        return Endpoint.new(f"{name}.{ZONE}", rtype, [target], labels=labels)

    read_txt = rec("a-old", "TXT")  # a TXT record read back: no label names its record
    plan = Changes(
        create=[rec("a-new", "TXT", f"new.{ZONE}"), rec("new")],
        update_old=[rec("moved")],
        update_new=[Endpoint.new(f"moved.{ZONE}", "AAAA", ["2001:db8::1"])],
        delete=[read_txt, rec("old")],
    )
    found = units(plan)
    order = [[(w.action, w.endpoint.dns_name.split(".")[0], w.create) for w in unit] for unit in found]
    assert order == [
        [("delete", "moved", False)],
        [("delete", "old", False)],
        [("delete", "a-old", False)],  # TXT records are deleted last
        [("put", "moved", True)],
        [("put", "new", True), ("put", "a-new", True)],  # the record, then its TXT record
    ]
    packed = batches(found, size=2)
    assert [[len(u) for u in batch] for batch in packed] == [[1, 1], [1, 1], [2]]


def test_zones_of_one_name_in_two_groups_keep_the_first_by_id() -> None:
    path = "/subscriptions/s/resourceGroups/{}/providers/Microsoft.Network/dnszones/ex.org"
    first, second = (Zone(path.format(g), "ex.org", g) for g in "ab")
    chosen, shadowed = select([second, first])
    assert chosen == {"ex.org": first} and shadowed == [second]
    assert select([second, first], ["resourceGroups/b/providers/Microsoft.Network/dnszones/ex.org"])[0] == {
        "ex.org": second
    }


# ---- credentials over the wire ----


def zones_with(cert: LoopbackCert, options: AzureOptions, fake: AzureFake) -> list[str]:
    async def main() -> list[str]:
        p = provider_from(options, connection_verify=str(cert.cert))
        try:
            return await p.zones()
        finally:
            await p.close()

    found = anyio.run(main)
    assert fake.requests  # asked the fake's Resource Manager
    return found


def test_each_credential_kind_gets_a_token_from_its_endpoint(
    cert: LoopbackCert, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with AzureFake(assertions={"wi-client": "federated-jwt"}).serve(cert) as fake:
        fake.add_zone(ZONE, GROUP)
        wrong = AzureOptions(config_file=str(config_file(tmp_path, fake, aadClientSecret="wrong")))
        with pytest.raises(ProviderError, match=r"credential: .*AADSTS7000215"):
            zones_with(cert, wrong, fake)
        token = tmp_path / "token"
        token.write_text("federated-jwt")
        monkeypatch.setenv("AZURE_CLIENT_ID", "wi-client")
        monkeypatch.setenv("AZURE_FEDERATED_TOKEN_FILE", str(token))
        fields: dict[str, Any] = {
            "aadClientId": "",
            "aadClientSecret": "",
            "useWorkloadIdentityExtension": True,
        }
        workload = AzureOptions(config_file=str(config_file(tmp_path, fake, **fields)))
        assert zones_with(cert, workload, fake) == [ZONE]
        # AAD pod identity's variable points the managed identity credential at the metadata endpoint
        monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", fake.url)
        fields = {"aadClientId": "msi", "aadClientSecret": "msi", "useManagedIdentityExtension": True}
        managed = AzureOptions(
            config_file=str(config_file(tmp_path, fake, **fields)), user_assigned_identity_client_id="mi-1"
        )
        assert zones_with(cert, managed, fake) == [ZONE]
        assert {client for client, _ in fake.requests} == {"wi-client", "mi-1"}


def test_without_a_config_file_the_subscription_must_be_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)
    absent = str(tmp_path / "absent.json")
    with pytest.raises(ConfigError, match="no subscription"):
        provider_from(AzureOptions(config_file=absent))
    kind = PROVIDERS["azure"]  # as `shardsync run --provider=azure` builds it
    built = kind.create(kind.flags.options(config_file=absent, subscription_id=SUBSCRIPTION), "shardsync-0")
    assert isinstance(built, AzureProvider) and built.resource_group == ""  # the subscription's zones
    # the fence guards each batch's start, not its writes: the replicas take the conservative timing
    assert anyio.run(fences_writes, built) is False
    anyio.run(built.close)
