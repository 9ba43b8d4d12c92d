"""The bench's processes: the embedded API server, the fake provider and N `shardsync run` replicas, started
exactly as `shardsync local` starts them, and stopped for sure.

`shardsync local`'s Launcher sets up the API server, the fake provider, the DNSEndpoint CRD and the
StatefulSet; every replica runs with `Launcher.replica_command`'s arguments plus the scenario's flags.
Replicas are kept the way a StatefulSet keeps pods, driven step by step by the scenario instead of a
control loop: `scale(n)` writes spec.replicas first (so a replica told to stop can tell a scale-down from
a restart), then starts the missing ordinals or sends SIGTERM to the highest ones; `restart(ordinal)` is one
step of a rolling update (SIGTERM, wait, start again at once); `kill(ordinal)` is SIGKILL and nothing else.

Zones are opened late on purpose: the provider starts with none, the API objects that ask for records
are seeded first, and `open_zones` adds every zone in one admin call once the replicas are up, so a
convergence is timed from one instant instead of from staggered process start-ups.

Blocking throughout (child processes, the official client, sync HTTP): the scenarios are plain sequential
code; `stop()` (also on KeyboardInterrupt) ends every process this cluster started.
"""

from __future__ import annotations

import contextlib
import io
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families

from shardsync.kube.client import BlockingKube, KubeError
from shardsync.kube.objects import CONFIGMAPS
from shardsync.local import seed
from shardsync.local.apiserver.client import api_client
from shardsync.local.children import Child, stop_all
from shardsync.local.infra import LocalOptions, SetupFailed, free_port, restart_apiserver
from shardsync.local.launcher import Launcher
from shardsync.providers.fake.audit import AuditEntry
from shardsync.providers.fake.client import FakeAdmin
from shardsync.providers.fake.seed import zone_name
from shardsync.sharding.assignment import Assignment, CorruptAssignment, configmap_name
from shardsync.sources.service import SERVICES

OWNER_ID = "bench"


class ClusterError(RuntimeError):
    """A process did not start, did not become ready, or the API server refused the seeding."""


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """How one cluster runs: the provider's limits and the flags every replica gets."""

    latency: float = 0.02  # seconds per provider call
    provider_concurrency: int | None = 2  # provider calls in flight per replica
    replica_flags: tuple[str, ...] = ()
    termination_grace: float = 30.0
    start_timeout: float = 60.0
    provider: str = "fake"  # the replicas' --provider: fake, or webhook (the fake provider's webhook face)
    webhook_fence: bool = False  # that face speaks shardsync's fence extension
    keep_api_state: bool = False  # the API server may be stopped and started again (`stop_apiserver`)


@dataclass(slots=True)
class Replica:
    """One StatefulSet ordinal and its current process."""

    ordinal: int
    identity: str
    port: int
    child: Child

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.child.alive()


@contextlib.contextmanager
def _interrupts_ignored() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def zone_names(count: int) -> list[str]:
    """The names `open_zones(count)` will add, known before the zones exist."""
    return [zone_name(i, count) for i in range(count)]


class Cluster:
    """One API server, one fake provider, replicas on demand; `stop()` ends them all."""

    def __init__(self, run_dir: Path, spec: ClusterSpec) -> None:
        self.run_dir = run_dir
        self.spec = spec
        self.replicas: dict[int, Replica] = {}
        self.desired = 0
        self.retired: list[Child] = []  # earlier processes of an ordinal (restarts, kills)
        self._launcher_out = io.StringIO()
        self.launcher = Launcher(
            LocalOptions(
                run_dir=run_dir,
                replicas=0,
                zones=0,
                records_per_zone=0,
                desired_per_zone=0,
                owner_id=OWNER_ID,
                latency=spec.latency,
                live=False,
                keys=False,
                termination_grace=spec.termination_grace,
                start_timeout=spec.start_timeout,
                replica_args=spec.replica_flags,
                provider=spec.provider,
                webhook_fence=spec.webhook_fence,
                keep_api_state=spec.keep_api_state,
            ),
            out=self._launcher_out,
        )
        self._kube: BlockingKube | None = None
        self._admin: FakeAdmin | None = None
        self._http = httpx.Client(timeout=5.0)

    # ---- infrastructure ------------------------------------------------------------------------------

    def start(self) -> Cluster:
        try:
            self.launcher.start_infrastructure()
        except SetupFailed as exc:
            raise ClusterError(str(exc)) from None
        infra = self.launcher.infra
        assert infra is not None
        self._kube = BlockingKube(api_client(infra.api_url))
        self._admin = FakeAdmin(infra.provider_url)
        limits: dict[str, Any] = {"latency": self.spec.latency, "concurrency": self.spec.provider_concurrency}
        self._admin.set_limits(limits)
        return self

    @property
    def kube(self) -> BlockingKube:
        assert self._kube is not None, "cluster not started"
        return self._kube

    @property
    def admin(self) -> FakeAdmin:
        assert self._admin is not None, "cluster not started"
        return self._admin

    @property
    def provider_url(self) -> str:
        assert self.launcher.infra is not None
        return self.launcher.infra.provider_url

    def stop_apiserver(self) -> None:
        """Stop the API server (SIGTERM: it saves its objects); `start_apiserver` brings it back."""
        infra = self.launcher.infra
        assert infra is not None
        infra.apiserver.stop(10.0)

    def start_apiserver(self) -> None:
        """Start the stopped API server again on its port, with its objects (ClusterSpec.keep_api_state);
        this cluster's own client starts afresh (its pooled connections died with the server)."""
        infra = self.launcher.infra
        assert infra is not None
        try:
            restart_apiserver(infra, self.launcher.o)
        except SetupFailed as exc:
            raise ClusterError(str(exc)) from None
        if self._kube is not None:
            self._kube.close()
        self._kube = BlockingKube(api_client(infra.api_url))

    def infra_pids(self) -> dict[str, int]:
        infra = self.launcher.infra
        assert infra is not None
        return {"apiserver": infra.apiserver.pid, "fake-provider": infra.provider.pid}

    def seed_objects(self, zones: Sequence[str], per_zone: int, threads: int = 4) -> None:
        """What `shardsync local` seeds, for `zones`: per zone a Service (one name) and a DNSEndpoint with
        `per_zone` names. Created from a few threads: the API server is a separate process."""
        try:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                jobs = [
                    pool.submit(seed.seed_one, self.kube, i, zone, per_zone) for i, zone in enumerate(zones)
                ]
                for future in jobs:
                    future.result()
        except KubeError as exc:
            raise ClusterError(f"seeding the API server failed: {exc.status} {exc.reason}") from None

    def set_service_address(self, index: int, address: str) -> None:
        """Point Service `web-<index>` at a new address (its record `web.<zone>` follows)."""
        name = seed.service(index, "x")["metadata"]["name"]
        self.kube.patch(SERVICES, name, {"spec": {"externalIPs": [address]}}, namespace=seed.NAMESPACE)

    def open_zones(self, count: int, foreign_per_zone: int = 0) -> list[str]:
        """Add zones 0..count-1 to the provider in one call (see the module docstring)."""
        return self.admin.seed(count, foreign_per_zone)

    def audit(self) -> list[AuditEntry]:
        return self.admin.audit()

    # ---- replicas -------------------------------------------------------------------------------------

    def start_ordinal(self, ordinal: int) -> Replica:
        """Start a process for an empty ordinal (a StatefulSet creating its pod)."""
        if ordinal in self.replicas and self.replicas[ordinal].alive():
            raise ClusterError(f"ordinal {ordinal} is running already")
        identity = f"{seed.STATEFULSET}-{ordinal}"
        port = free_port()
        args = self.launcher.replica_command(identity, port)
        child = Child(identity, args, self.run_dir / f"{identity}.log")
        replica = Replica(ordinal, identity, port, child)
        self.replicas[ordinal] = replica
        return replica

    def scale(self, count: int, *, wait: bool = True) -> None:
        """StatefulSet scale: spec.replicas first, then start ordinals < count or send SIGTERM to those
        >= count. With `wait`, wait for them to exit (SIGKILL after the termination grace); otherwise they
        stay listed (and observed) until `reap()`."""
        seed.set_replicas(self.kube, count)
        self.desired = count
        leaving = [r for o, r in sorted(self.replicas.items()) if o >= count]
        for replica in leaving:
            replica.child.terminate()
        for ordinal in range(count):
            if ordinal not in self.replicas:
                self.start_ordinal(ordinal)
        if wait and leaving:
            self.wait_exited([r.ordinal for r in leaving], self.spec.termination_grace)
        self.reap()

    def reap(self) -> None:
        """Forget replicas that exited after a scale-down."""
        for ordinal, replica in sorted(self.replicas.items()):
            if ordinal >= self.desired and not replica.alive():
                self._retire(ordinal)

    def wait_exited(self, ordinals: Iterable[int], within: float) -> None:
        """Wait for these replicas to exit; SIGKILL the ones still running after `within` seconds."""
        children = [self.replicas[o].child for o in ordinals if o in self.replicas]
        deadline = time.monotonic() + within
        for child in children:
            while child.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            if child.alive():
                child.kill()

    def _retire(self, ordinal: int) -> None:
        replica = self.replicas.pop(ordinal, None)
        if replica is not None:
            self.retired.append(replica.child)

    def kill(self, ordinal: int) -> None:
        """SIGKILL, as a node failure would; the ordinal stays empty until `start_ordinal`."""
        replica = self.replicas[ordinal]
        replica.child.kill()
        self._retire(ordinal)

    def restart(self, ordinal: int) -> Replica:
        """One rolling-update step: SIGTERM, wait for the exit (SIGKILL after the grace), start again."""
        self.replicas[ordinal].child.terminate()
        self.wait_exited([ordinal], self.spec.termination_grace)
        self._retire(ordinal)
        return self.start_ordinal(ordinal)

    def live(self) -> list[Replica]:
        return [r for _, r in sorted(self.replicas.items()) if r.alive()]

    def pids(self) -> dict[str, int]:
        return {r.identity: r.child.pid for r in self.live()}

    def wait_ready(self, within: float | None = None, ordinals: Iterable[int] | None = None) -> None:
        """Wait until the replicas answer /readyz with 200; ClusterError (with the log tail) otherwise."""
        wanted = [self.replicas[o] for o in (ordinals if ordinals is not None else sorted(self.replicas))]
        deadline = time.monotonic() + (self.spec.start_timeout if within is None else within)
        for replica in wanted:
            while True:
                if not replica.alive():
                    raise ClusterError(
                        f"{replica.identity} exited with {replica.child.returncode}:\n{replica.child.tail()}"
                    )
                try:
                    if self._http.get(replica.url + "/readyz", timeout=1.0).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise ClusterError(f"{replica.identity} not ready in time:\n{replica.child.tail()}")
                time.sleep(0.1)

    def shards(self, replica: Replica, timeout: float = 5.0) -> dict[str, Any] | None:
        """The replica's /shards document, None when it does not answer."""
        try:
            resp = self._http.get(replica.url + "/shards", timeout=timeout)
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        doc: dict[str, Any] = orjson.loads(resp.content)
        return doc

    def metric(self, replica: Replica, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        """Sum of one metric's samples on the replica's /metrics carrying `labels` (None: no answer)."""
        try:
            text = self._http.get(replica.url + "/metrics", timeout=5.0).text
        except httpx.HTTPError:
            return None
        wanted = dict(labels or {}).items()
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name and wanted <= sample.labels.items()
        )

    def assignment(self) -> Assignment | None:
        """The published assignment (None: none yet, or unreadable)."""
        try:
            cm = self.kube.get(CONFIGMAPS, configmap_name(seed.INSTANCE), namespace=seed.NAMESPACE)
        except KubeError:
            return None
        if cm is None:
            return None
        data = cm.get("data")
        try:
            return Assignment.from_configmap_data(data if isinstance(data, dict) else None)
        except CorruptAssignment:
            return None

    def settled(self, sharded: bool) -> tuple[bool, str]:
        """Whether the live replicas agree on one coordinator and (sharded) on one published generation
        listing exactly them, acknowledged by all; else what is still missing."""
        live = self.live()
        if not live:
            return False, "no replica running"
        identities = {r.identity for r in live}
        docs = {r.identity: self.shards(r) for r in live}
        missing = sorted(i for i, d in docs.items() if d is None)
        if missing:
            return False, f"no /shards answer from {', '.join(missing)}"
        coordinators = {str(d.get("coordinator") or "") for d in docs.values() if d is not None}
        if len(coordinators) != 1 or not coordinators <= identities:
            return False, f"coordinator not agreed: {sorted(coordinators)}"
        if not sharded:
            return True, ""
        current = self.assignment()
        if current is None:
            return False, "no assignment published yet"
        if current.identities != identities:
            return False, f"assignment generation {current.generation} lists {sorted(current.identities)}"
        for identity, doc in docs.items():
            assert doc is not None
            if int(doc.get("generation") or 0) != current.generation:
                return False, f"{identity} works under generation {doc.get('generation')}"
            for member in doc.get("members") or []:
                if (
                    member.get("identity") in identities
                    and member.get("observedGeneration") != current.generation
                ):
                    return (
                        False,
                        f"{member.get('identity')} has not acknowledged generation {current.generation}",
                    )
        return True, ""

    def wait_settled(self, sharded: bool, within: float) -> float:
        """Wait for `settled`; returns the seconds it took, ClusterError with the last reason on time-out."""
        started = time.monotonic()
        why = ""
        while time.monotonic() - started < within:
            for replica in self.replicas.values():
                if not replica.alive():
                    raise ClusterError(
                        f"{replica.identity} exited with {replica.child.returncode}:\n{replica.child.tail()}"
                    )
            ok, why = self.settled(sharded)
            if ok:
                return time.monotonic() - started
            time.sleep(0.2)
        raise ClusterError(f"replicas did not settle within {within:.0f}s: {why}")

    def reconciles_ok(self, replica: Replica) -> float:
        """Successful zone reconciles so far (0.0 when the replica does not answer)."""
        return self.metric(replica, "shardsync_reconciles_total", {"result": "ok"}) or 0.0

    # ---- stopping --------------------------------------------------------------------------------------

    def stop(self, graceful: bool = False) -> None:
        """Every process this cluster started: replicas first, then the provider and API server. Replicas
        get SIGKILL (the cluster is thrown away and its figures are read already), or with `graceful`
        SIGTERM and up to 10 s. A second Ctrl-C while stopping is ignored, so it cannot leave processes
        behind."""
        with _interrupts_ignored():
            self._stop(graceful)

    def _stop(self, graceful: bool) -> None:
        try:
            running = [r.child for r in self.replicas.values() if r.alive()]
            if graceful:
                stop_all(running, min(10.0, self.spec.termination_grace))
            for child in [*running, *self.retired]:
                if child.alive():
                    child.kill()
        finally:
            self.replicas.clear()
            try:
                self.launcher.shutdown()
            finally:
                if self._admin is not None:
                    self._admin.close()
                if self._kube is not None:
                    self._kube.close()
                self._http.close()

    def __enter__(self) -> Cluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
