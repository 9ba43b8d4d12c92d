"""What every cluster scenario does the same way: the replica flags, a cluster brought to "Z zones synced"
(start, seed, scale, settle, open the zones, wait until each zone got its records), and the safety figures
read from the provider's audit when the cluster is done."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import observe
from bench.cluster import Cluster, ClusterError, ClusterSpec, zone_names
from bench.procstat import CpuMeter, CpuUse
from bench.profiles import Profile
from bench.progress import Progress
from shardsync.durations import format_duration
from shardsync.local import seed
from shardsync.providers.fake.audit import AuditEntry


class ScenarioError(RuntimeError):
    """A scenario could not produce its figures; the message says which step failed and why."""


@dataclass(slots=True)
class Context:
    """Shared by the scenarios of one bench run."""

    profile: Profile
    run_dir: Path
    progress: Progress
    safety: dict[str, dict[str, int]] = field(default_factory=dict)
    # Peak RSS (MiB) by process name, of sharded runs that were synced and then resynced for a while, keyed
    # by (replicas, zones, records per zone): the memory scenario reuses runs it would otherwise repeat.
    peaks: dict[tuple[int, int, int], dict[str, float | None]] = field(default_factory=dict)

    def cluster_dir(self, name: str) -> Path:
        path = self.run_dir / name.replace("/", "-")
        path.mkdir(parents=True, exist_ok=True)
        return path


def replica_flags(
    profile: Profile, *, sharded: bool, interval: float, extra: tuple[str, ...] = ()
) -> tuple[str, ...]:
    return (
        f"--sharding={'on' if sharded else 'off'}",
        f"--interval={format_duration(interval)}",
        f"--concurrency={profile.worker_concurrency}",
        *(
            f"--{name}={format_duration(value)}"
            for name, value in (
                ("lease-duration", profile.lease_duration),
                ("renew-interval", profile.renew_interval),
                ("settle-delay", profile.settle_delay),
            )
            if value is not None
        ),
        *extra,
    )


def cluster_spec(profile: Profile, flags: tuple[str, ...]) -> ClusterSpec:
    t = profile.timings()
    return ClusterSpec(
        latency=profile.latency,
        provider_concurrency=profile.provider_concurrency,
        replica_flags=flags,
        termination_grace=max(10.0, 2 * t.lease_duration + t.settle + 5),
    )


@dataclass(slots=True)
class Synced:
    """A cluster whose zones were all written once, and how that went."""

    cluster: Cluster
    zones: list[str]
    records_per_zone: int
    opened_at: float  # Unix time the zones appeared in the provider
    first_apply: dict[str, AuditEntry]
    converge_seconds: float
    phases: dict[str, float]  # seconds each setup step took: start, seed, ready, settle, converge
    cpu: CpuUse | None = None

    @property
    def zones_per_second(self) -> float:
        return len(self.zones) / self.converge_seconds if self.converge_seconds > 0 else 0.0


def wait_converged(
    cluster: Cluster, zones: list[str], opened_at: float, within: float, progress: Progress
) -> dict[str, AuditEntry]:
    """Poll the audit until every zone has a successful apply started after `opened_at`."""
    wanted = set(zones)
    found: dict[str, AuditEntry] = {}
    since = 0
    deadline = time.monotonic() + within
    while True:
        entries = cluster.admin.audit(since=since)
        if entries:
            since = entries[-1].seq + 1
        for zone, entry in observe.first_apply(entries, after=opened_at).items():
            if zone in wanted and zone not in found:
                found[zone] = entry
        progress.status(f"converging: {len(found)}/{len(zones)} zones written")
        if len(found) == len(wanted):
            return found
        for replica in cluster.replicas.values():
            if not replica.alive():
                raise ScenarioError(
                    f"{replica.identity} exited with {replica.child.returncode}:\n{replica.child.tail()}"
                )
        if time.monotonic() > deadline:
            raise ScenarioError(f"only {len(found)} of {len(zones)} zones were written within {within:.0f}s")
        time.sleep(0.1)


def check_records(cluster: Cluster, zones: list[str], records_per_zone: int, sample: int = 5) -> list[str]:
    """Problems found in up to `sample` zones (spread over the list): each must hold the records its
    Service and DNSEndpoint ask for."""
    problems = []
    step = max(1, len(zones) // max(sample, 1))
    for index in range(0, len(zones), step)[:sample]:
        zone = zones[index]
        names = {ep.dns_name for ep in cluster.admin.records(zone) if ep.record_type == "A"}
        wanted = {f"web.{zone}"} | {f"app-{j}.{zone}" for j in range(records_per_zone - 1)}
        if not wanted <= names:
            problems.append(f"{zone}: missing {sorted(wanted - names)[:3]}")
    return problems


@contextmanager
def synced_cluster(
    ctx: Context,
    name: str,
    *,
    replicas: int,
    zones: int,
    records_per_zone: int,
    sharded: bool,
    interval: float,
    extra_flags: tuple[str, ...] = (),
    measure_cpu: bool = False,
    gate: bool = False,
) -> Iterator[Synced]:
    """Start a cluster, bring `zones` zones of `records_per_zone` records each to the provider with
    `replicas` replicas, yield it, and stop it; the audit's safety figures land in ctx.safety[name].

    With `gate`, the zones appear only once the replicas have settled, so the convergence is timed from
    one instant (replicas find new zones within `interval`: keep it short); otherwise they are there
    from the start and the convergence time includes the replicas' start-up."""
    profile = ctx.profile
    progress = ctx.progress
    flags = replica_flags(profile, sharded=sharded, interval=interval, extra=extra_flags)
    cluster = Cluster(ctx.cluster_dir(name), cluster_spec(profile, flags))
    phases: dict[str, float] = {}  # also filled after the yield: the caller's result may hold it
    mark = time.monotonic()
    try:
        # Progress lines already name the scenario; a run within one (scaling/sharded-4) adds its own name.
        label = name.partition("/")[2] + ": " if "/" in name else ""

        def phase(what: str) -> None:
            nonlocal mark
            now = time.monotonic()
            phases[what] = round(now - mark, 3)
            mark = now

        progress.status(f"{label}starting the API server and the fake provider")
        cluster.start()
        phase("start")
        names = zone_names(zones)
        progress.status(f"{label}seeding {zones} Services and DNSEndpoints")
        cluster.seed_objects(names, records_per_zone - 1)
        phase("seed")
        opened_at = time.time()
        if not gate:
            cluster.open_zones(zones)
        progress.status(f"{label}starting {replicas} replica(s)")
        cluster.scale(replicas)
        cluster.wait_ready()
        phase("ready")
        progress.status(f"{label}waiting for the replicas to settle")
        cluster.wait_settled(sharded, profile.settle_timeout)
        phase("settle")
        pids = {**cluster.pids(), **cluster.infra_pids(), "bench": os.getpid()}
        meter = CpuMeter(pids) if measure_cpu else None
        if meter is not None:
            meter.start()
        if gate:
            opened_at = time.time()
            cluster.open_zones(zones)
        first = wait_converged(cluster, names, opened_at, profile.converge_timeout, progress)
        cpu = meter.stop() if meter is not None else None
        converge = max(e.end_wall for e in first.values()) - opened_at
        phase("converge")
        yield Synced(cluster, names, records_per_zone, opened_at, first, converge, phases, cpu)
    except ClusterError as exc:
        raise ScenarioError(f"{name}: {exc}") from None
    finally:
        try:
            if cluster.launcher.infra is not None and cluster.launcher.infra.provider.alive():
                ctx.safety[name] = observe.safety(cluster.audit())
        except Exception as exc:  # the safety figures are best effort once the scenario failed
            ctx.progress.step(f"{name}: could not read the audit: {exc}")
        finally:
            stopping = time.monotonic()
            cluster.stop()
            phases["stop"] = round(time.monotonic() - stopping, 3)


def members_of(cluster: Cluster) -> set[str]:
    return {r.identity for r in cluster.live()}


def identity(ordinal: int) -> str:
    return f"{seed.STATEFULSET}-{ordinal}"


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def percentile(values: list[float], q: int) -> float:
    """The q-th percentile (1..99) by linear interpolation between data points; 0.0 for no values."""
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def error_result(exc: BaseException) -> dict[str, Any]:
    return {"error": f"{type(exc).__name__}: {exc}"}


def targets(cluster: Cluster) -> Callable[[], dict[str, str]]:
    """What a Sampler polls: every live replica of the cluster, as it is at each round."""
    return lambda: {r.identity: r.url for r in cluster.live()}


def wait_owned(
    sampler: observe.Sampler,
    zones: list[str],
    expected: list[str],
    *,
    within: float,
    after: float = 0.0,
    min_generation: int = 0,
    what: str,
) -> observe.Sample:
    """The first sample after `after` in which `expected` run every zone (see observe.fully_owned)."""
    found = sampler.wait_for(observe.full_ownership(zones, expected, min_generation), within, after)
    if found is None:
        latest = sampler.latest()
        holders = latest.holders() if latest else {}
        unowned = sum(1 for z in zones if z not in holders)
        generations = sorted({v.generation for v in latest.views.values()}) if latest else []
        answering = sorted(latest.views) if latest else []
        raise ScenarioError(
            f"{what}: {', '.join(expected)} did not run all {len(zones)} zones within {within:.0f}s "
            f"(last sample: {unowned} unowned, generations {generations}, answering {answering})"
        )
    return found
