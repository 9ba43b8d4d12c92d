"""What the cloud providers' end-to-end tests share: a LoadBalancer Service annotated with a hostname, its
load-balancer address, and the arguments of one quick `shardsync run` replica watching Services
(`--domain-filter=example.org` unless told other domains, short leases, `--events`), to which a test adds
its provider's."""

from __future__ import annotations

from kubernetes import client as k8s

from tests.kubeclient import raw_body


def load_balancer(core: k8s.CoreV1Api, name: str, host: str, ingress: dict[str, str]) -> None:
    """A Service in `default` asking for `host`, with `ingress` (`{"ip": …}` or `{"hostname": …}`) as its
    load balancer."""
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "annotations": {"external-dns.alpha.kubernetes.io/hostname": host}},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
    }
    core.create_namespaced_service("default", raw_body(k8s.V1Service, body))
    set_ingress(core, name, ingress)


def set_ingress(core: k8s.CoreV1Api, name: str, ingress: dict[str, str]) -> None:
    core.patch_namespaced_service_status(
        name, "default", {"status": {"loadBalancer": {"ingress": [ingress]}}}
    )


def replica_args(
    kubeconfig: str, port: int, owner: str, *provider: str, domains: tuple[str, ...] = ("example.org",)
) -> list[str]:
    """`shardsync run` as the tests start one replica, with the provider's arguments."""
    return [
        "run",
        f"--kubeconfig={kubeconfig}",
        "--source=service",
        *provider,
        *(f"--domain-filter={domain}" for domain in domains),
        f"--txt-owner-id={owner}",
        f"--metrics-address=127.0.0.1:{port}",
        "--identity=shardsync-0",
        "--lease-namespace=default",
        "--lease-duration=6s",
        "--renew-interval=1s",
        "--settle-delay=200ms",
        "--events",
        "--interval=1m",
    ]
