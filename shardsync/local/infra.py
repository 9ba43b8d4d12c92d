"""What `shardsync local` sets up before its replicas start: the embedded API server and the fake provider
as child processes, the seeded objects and the StatefulSet, and the `shardsync run` arguments every replica
(and the bench's) is started with.

Blocking (child processes, the kubernetes client): it runs before the launcher's event loop.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from shardsync.durations import format_duration
from shardsync.kube.client import BlockingKube, KubeError
from shardsync.local import seed
from shardsync.local.apiserver.client import api_client
from shardsync.local.children import Child, ChildFailed


@dataclass(frozen=True, slots=True)
class LocalOptions:
    run_dir: Path
    replicas: int = 3
    zones: int = 50
    records_per_zone: int = 20
    desired_per_zone: int = 5
    owner_id: str = "shardsync-local"
    latency: float = 0.05
    duration: float | None = None
    live: bool = True  # redraw in place (a terminal) rather than print a table every `every` seconds
    keys: bool = True
    refresh: float = 1.0
    every: float = 5.0
    termination_grace: float = 30.0
    start_timeout: float = 30.0
    replica_args: tuple[str, ...] = ()
    # The replicas' --source values; gateway-*, istio-*, node and pod ones seed more.
    sources: tuple[str, ...] = ("service", "crd")
    provider: str = "fake"  # the replicas' --provider: fake (its native API) or webhook (its webhook face)
    webhook_fence: bool = False  # the fake provider's webhook face speaks shardsync's fence extension
    # The API server keeps its objects in run_dir/apiserver-state across a restart (`restart_apiserver`).
    keep_api_state: bool = False


class SetupFailed(Exception):
    """The launcher could not get its environment up; the message says what failed."""


@dataclass(slots=True)
class Infrastructure:
    """The API server and fake provider processes and where to reach them."""

    apiserver: Child
    provider: Child
    api_url: str
    provider_url: str
    kubeconfig: Path
    kube: BlockingKube
    child: Callable[[str, Sequence[str]], Child]  # how the launcher starts a child (`restart_apiserver`)
    zones: list[str] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start(
    o: LocalOptions,
    replicas: int,
    child: Callable[[str, Sequence[str]], Child],
    say: Callable[[str], None],
) -> Infrastructure:
    """API server, fake provider, seeded objects and the StatefulSet; SetupFailed on any failure."""
    o.run_dir.mkdir(parents=True, exist_ok=True)
    kubeconfig = o.run_dir / "kubeconfig"
    apiserver = child("apiserver", _apiserver_args(o, kubeconfig, 0))
    provider = child(
        "fake-provider",
        [
            "fake-provider",
            "--port",
            "0",
            "--zones",
            str(o.zones),
            "--records-per-zone",
            str(o.records_per_zone),
            "--latency",
            format_duration(o.latency),
            *(["--webhook-fence"] if o.webhook_fence else []),
        ],
    )
    try:
        api_url = apiserver.wait_for_line(r"^listening on (http://\S+)$", o.start_timeout)[1]
        provider_url = provider.wait_for_line(r"^(http://127\.0\.0\.1:\d+)$", o.start_timeout)[1]
    except ChildFailed as exc:
        raise SetupFailed(str(exc)) from None
    kube = BlockingKube(api_client(api_url))
    infra = Infrastructure(apiserver, provider, api_url, provider_url, kubeconfig, kube, child)
    say(f"api server:     {api_url}   kubeconfig {kubeconfig}")
    infra.zones = _provider_zones(provider_url)
    say(
        f"fake provider:  {provider_url}   {len(infra.zones)} zones x {o.records_per_zone} "
        f"records, latency {format_duration(o.latency)}"
    )
    try:
        seed.install_crd(kube)
        names = seed.seed_objects(kube, infra.zones, o.desired_per_zone)
        routes = seed.seed_gateway_routes(kube, infra.zones, o.sources)
        istio = seed.seed_istio(kube, infra.zones, o.sources)
        hosts = seed.seed_nodes_and_pods(kube, infra.zones, o.sources)
        seed.set_replicas(kube, replicas)
    except KubeError as exc:
        raise SetupFailed(f"seeding the API server failed: {type(exc).__name__}: {exc}") from None
    gateway = f" + a Gateway with {routes} routes" if routes else ""
    gateway += f" + Istio objects for {istio} names" if istio else ""
    gateway += f" + Nodes and Pods for {hosts} names" if hosts else ""
    say(
        f"seeded:         {len(infra.zones)} Services + {len(infra.zones)} DNSEndpoints{gateway} asking "
        f"for {names + routes + istio + hosts} names, owner id {o.owner_id}; "
        f"StatefulSet {seed.STATEFULSET} replicas {replicas}"
    )
    return infra


def _apiserver_args(o: LocalOptions, kubeconfig: Path, port: int) -> list[str]:
    state = ["--data-dir", str(o.run_dir / "apiserver-state")] if o.keep_api_state else []
    return ["apiserver", "--port", str(port), "--kubeconfig-out", str(kubeconfig), *state]


def restart_apiserver(infra: Infrastructure, o: LocalOptions) -> None:
    """Start the API server again after it was stopped (`infra.apiserver.stop`, which saves its objects
    with `keep_api_state`), on the same port: as a real one's restart, every connection was dropped and a
    watch from before it answers 410 Expired."""
    if not o.keep_api_state:
        raise SetupFailed("the API server keeps no state across a restart (LocalOptions.keep_api_state)")
    port = int(infra.api_url.rsplit(":", 1)[1])
    infra.apiserver = infra.child("apiserver", _apiserver_args(o, infra.kubeconfig, port))
    try:
        infra.apiserver.wait_for_line(r"^listening on ", o.start_timeout)
    except ChildFailed as exc:
        raise SetupFailed(str(exc)) from None


def _provider_zones(provider_url: str) -> list[str]:
    try:
        resp = httpx.get(provider_url + "/v1/zones", timeout=10)
        resp.raise_for_status()
        return [str(z) for z in resp.json()["zones"]]
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        raise SetupFailed(f"cannot list the fake provider's zones: {exc}") from None


def replica_command(infra: Infrastructure, o: LocalOptions, identity: str, port: int) -> list[str]:
    """The `shardsync run` arguments of replica `identity` serving status on `port` (the bench starts its
    replicas with exactly these)."""
    url_flag = "webhook-provider-url" if o.provider == "webhook" else "fake-provider-url"
    return [
        "run",
        f"--provider={o.provider}",
        f"--{url_flag}={infra.provider_url}",
        f"--kubeconfig={infra.kubeconfig}",
        f"--identity={identity}",
        f"--metrics-address=127.0.0.1:{port}",
        f"--lease-namespace={seed.NAMESPACE}",
        f"--instance={seed.INSTANCE}",
        f"--txt-owner-id={o.owner_id}",
        *(f"--source={source}" for source in o.sources),
        "--events",
        *o.replica_args,
    ]
