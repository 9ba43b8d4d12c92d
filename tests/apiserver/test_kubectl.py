"""kubectl (when installed) through an ordinary kubeconfig: get -A, apply --validate=false, scale, delete."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from shardsync.local.apiserver import ApiServer

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

MANIFESTS = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: dnsendpoints.externaldns.k8s.io}
spec:
  group: externaldns.k8s.io
  names: {kind: DNSEndpoint, listKind: DNSEndpointList, plural: dnsendpoints, singular: dnsendpoint}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    subresources: {status: {}}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: lease1, namespace: kube-system}
spec: {holderIdentity: me}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  serviceName: web
  template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, image: nginx}]}}
"""

ENDPOINT = """
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: ep1}
spec:
  endpoints:
  - {dnsName: a.example.org, recordType: A, targets: [192.0.2.1]}
"""


def kubectl(server: ApiServer, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None and server.kubeconfig is not None
    return subprocess.run(
        [
            KUBECTL,
            "--kubeconfig",
            str(server.kubeconfig),
            "--cache-dir",
            str(tmp / "cache"),
            "--request-timeout",
            "20s",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_kubectl_apply_get_scale_delete(apiserver: ApiServer, tmp_path: Path) -> None:
    manifests = tmp_path / "m.yaml"
    manifests.write_text(MANIFESTS)
    endpoint = tmp_path / "ep.yaml"
    endpoint.write_text(ENDPOINT)

    applied = kubectl(apiserver, tmp_path, "apply", "--validate=false", "-f", str(manifests))
    assert applied.returncode == 0, applied.stderr
    assert "lease.coordination.k8s.io/lease1 created" in applied.stdout
    assert kubectl(apiserver, tmp_path, "apply", "--validate=false", "-f", str(endpoint)).returncode == 0

    leases = kubectl(apiserver, tmp_path, "get", "leases", "-A")
    assert leases.returncode == 0, leases.stderr
    assert "kube-system" in leases.stdout and "lease1" in leases.stdout
    eps = kubectl(apiserver, tmp_path, "get", "dnsendpoints", "-A")
    assert eps.returncode == 0 and "ep1" in eps.stdout, eps.stderr

    reapplied = kubectl(apiserver, tmp_path, "apply", "--validate=false", "-f", str(manifests))
    assert reapplied.returncode == 0 and "lease1 unchanged" in reapplied.stdout, reapplied.stderr
    changed = MANIFESTS.replace("holderIdentity: me", "holderIdentity: you")
    manifests.write_text(changed)
    configured = kubectl(apiserver, tmp_path, "apply", "--validate=false", "-f", str(manifests))
    assert "lease1 configured" in configured.stdout, configured.stderr
    holder = kubectl(
        apiserver,
        tmp_path,
        "get",
        "lease",
        "lease1",
        "-n",
        "kube-system",
        "-o",
        "jsonpath={.spec.holderIdentity}",
    )
    assert holder.stdout == "you"

    scaled = kubectl(apiserver, tmp_path, "scale", "statefulset", "web", "--replicas=5")
    assert scaled.returncode == 0, scaled.stderr
    replicas = kubectl(apiserver, tmp_path, "get", "sts", "web", "-o", "jsonpath={.spec.replicas}")
    assert replicas.stdout == "5"

    deleted = kubectl(apiserver, tmp_path, "delete", "lease", "lease1", "-n", "kube-system")
    assert deleted.returncode == 0, deleted.stderr
    assert kubectl(apiserver, tmp_path, "delete", "-f", str(endpoint)).returncode == 0
    after = kubectl(apiserver, tmp_path, "get", "leases,dnsendpoints", "-A", "-o", "name")
    assert after.returncode == 0 and after.stdout.strip() == "", after.stdout + after.stderr


def test_kubectl_protobuf_create_is_refused_with_415(apiserver: ApiServer, tmp_path: Path) -> None:
    created = kubectl(apiserver, tmp_path, "create", "configmap", "x", "--from-literal=a=b")
    assert created.returncode != 0 and "unknown format" in created.stderr
