"""Server-side printing (`kubectl get`'s Table answers): column choice, JSONPath cells, ages, and the
shipped DNSEndpoint CRD's printer columns as kubectl shows them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from shardsync.kube.client import BlockingKube
from shardsync.local import seed
from shardsync.local.apiserver import ApiServer
from shardsync.local.apiserver.tables import AGE, PrinterColumn, human_duration, lookup, table, wants_table
from shardsync.sources.crd import DNS_ENDPOINTS

TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "<invalid>"),
        (0, "0s"),
        (119, "119s"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 7200, "3d2h"),
        (20 * 86400, "20d"),
        (3 * 365 * 86400, "3y"),
    ],
)
def test_ages_read_like_kubectl(seconds: int, shown: str) -> None:
    assert human_duration(seconds) == shown


def test_simple_json_paths_and_missing_values() -> None:
    obj = {"spec": {"endpoints": [{"dnsName": "a.example"}]}, "status": {}}
    assert lookup(obj, ".spec.endpoints[0].dnsName") == "a.example"
    assert lookup(obj, "{.spec.endpoints[0].dnsName}") == "a.example"
    assert lookup(obj, ".spec.endpoints[3].dnsName") is None
    assert lookup(obj, ".status.observedGeneration") is None


def test_table_has_name_first_and_age_when_no_columns_are_declared() -> None:
    obj = {"metadata": {"name": "x", "creationTimestamp": "2000-01-01T00:00:00Z"}}
    doc = table([], [obj], {"resourceVersion": "7"})
    assert [c["name"] for c in doc["columnDefinitions"]] == ["Name", "Age"]
    assert doc["rows"][0]["cells"][0] == "x" and doc["rows"][0]["cells"][1].endswith("y")
    assert doc["rows"][0]["object"]["metadata"]["name"] == "x"
    gen = PrinterColumn("Gen", "integer", ".metadata.generation")
    assert table([gen, AGE], [{"metadata": {"name": "y", "generation": 3}}], {})["rows"][0]["cells"][:2] == [
        "y",
        3,
    ]
    assert wants_table(TABLE_ACCEPT) and not wants_table("application/json") and not wants_table(None)


def test_dnsendpoints_list_as_a_table_with_the_shipped_printer_columns(apiserver: ApiServer) -> None:
    kube = BlockingKube(apiserver.api_client())
    seed.install_crd(kube)
    body = seed.dns_endpoint(0, "zone-0.example", 2)
    kube.create(DNS_ENDPOINTS, body, namespace="default")
    status = {"status": {"observedGeneration": 1}}
    kube.patch(DNS_ENDPOINTS, "app-0000", status, namespace="default", subresource="status")
    url = f"{apiserver.url}{DNS_ENDPOINTS.path('default')}"
    doc = httpx.get(url, headers={"Accept": TABLE_ACCEPT}, timeout=5).json()
    assert doc["kind"] == "Table"
    assert [c["name"] for c in doc["columnDefinitions"]] == ["Name", "Generation", "Observed", "Age"]
    assert doc["rows"][0]["cells"][:3] == ["app-0000", 1, 1]
    one = httpx.get(f"{url}/app-0000", headers={"Accept": TABLE_ACCEPT}, timeout=5)
    assert one.json()["rows"][0]["cells"][0] == "app-0000"
    # A Table-only Accept is served; plain JSON still answers a plain Accept.
    only = httpx.get(url, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}, timeout=5)
    assert only.status_code == 200 and only.json()["kind"] == "Table"
    assert httpx.get(url, timeout=5).json()["kind"] == "DNSEndpointList"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_get_dnsendpoints_shows_generation_and_observed(apiserver: ApiServer, tmp_path: Path) -> None:
    kube = BlockingKube(apiserver.api_client())
    seed.install_crd(kube)
    kube.create(DNS_ENDPOINTS, seed.dns_endpoint(0, "zone-0.example", 1), namespace="default")
    assert apiserver.kubeconfig is not None
    out = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(apiserver.kubeconfig),
            "--cache-dir",
            str(tmp_path),
            "get",
            "dnsendpoints",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    header, row = out.stdout.splitlines()[:2]
    assert header.split() == ["NAME", "GENERATION", "OBSERVED", "AGE"]
    assert row.split()[:2] == ["app-0000", "1"]
