"""A LoadBalancer Service with a hostname annotation and its load balancer's address, as the end-to-end
tests of the cloud providers create them (the replica publishes `host` → `ip`)."""

from __future__ import annotations

from kubernetes import client as k8s

from tests.kubeclient import raw_body


def load_balancer(core: k8s.CoreV1Api, name: str, host: str, ip: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "annotations": {"external-dns.alpha.kubernetes.io/hostname": host}},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }
    core.create_namespaced_service("default", raw_body(k8s.V1Service, body))
    core.patch_namespaced_service_status(
        name, "default", {"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}
    )
