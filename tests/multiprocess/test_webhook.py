"""`shardsync run --provider=webhook` as real replica processes against the fake provider's webhook face (the
real protocol over HTTP), with default flags — no timing flag, no `--webhook-allow-unfenced`:

- a webhook server without shardsync's fence extension: the replicas run sharded on the conservative lease
  timing and say so once each; 3 replicas converge 200 zones with no failed zone; after kill -9 of one, the
  others write its zones within the lease plus 2 s (the margin is 0.5 s and a crash is published at once);
- a webhook server with the extension: the replicas take each zone's fence at the server and use the short
  leases; the dead replica's token is refused (409, in the audit), and its zones are taken within 5 s;
- `--once` and `--sharding=off` (one writer, the coordinator) work with default flags too.

Either way the audit shows no two writers writing one zone at once.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import pytest

from bench.cluster import Cluster, ClusterSpec, zone_names
from bench.records import actual_records, desired_by_zone
from shardsync.local.children import Child, stop_all
from shardsync.local.infra import free_port
from shardsync.providers.base import FencedError, FenceToken
from shardsync.providers.fake.audit import AuditEntry
from shardsync.providers.webhook.client import WebhookProvider
from shardsync.providers.webhook.protocol import FENCE_HEADER, MEDIA_TYPE, fence_value
from shardsync.records.endpoint import Changes, Endpoint
from shardsync.sharding.timings import Timings
from tests.multiprocess.conftest import StartCluster
from tests.multiprocess.failover import kill_and_fail_over
from tests.multiprocess.harness import START_WITHIN, Harness, fenced, overlaps, wait_for, writes_ok

pytestmark = pytest.mark.multiprocess

ZONES = 200
CONVERGE_WITHIN = 60.0
SLACK = 2.0  # beyond the crash handoff: publish, acknowledge, read, plan, write on two busy cores
FENCED_TAKEOVER = 5.0  # the bound for a fenced provider at the default timing


def fencing_lines(child: Child) -> list[str]:
    """The lines of a replica's log about how its writes are fenced: those mentioning fencing that are not
    about one zone (the worker logs each zone's token as it takes the zone: an event per zone, not a
    statement about the mode)."""
    lines = [line for line in child.output().splitlines() if re.search("fenc", line, re.I)]
    return [line for line in lines if " zone=" not in line]


def lease_timed_lines(child: Child) -> int:
    return sum("writes are lease-timed" in line for line in fencing_lines(child))


def has_said_lease_timed(child: Child) -> Callable[[], bool]:
    return lambda: lease_timed_lines(child) > 0


def errors(child: Child) -> list[str]:
    return [line for line in child.output().splitlines() if "level=error" in line]


def assert_converged(h: Harness, mode_line: str) -> None:
    """Every zone holds the records its objects ask for, no zone's last sync failed, and each replica said
    how its writes are fenced once, in at most 5 lines about fencing."""
    took = h.wait_records(within=CONVERGE_WITHIN)
    failed = []
    for replica in h.cluster.live():
        doc = h.cluster.shards(replica)
        assert doc is not None, replica.identity
        mine = [row for row in doc["zones"] if row["owner"] == replica.identity]
        failed += [row for row in mine if row["lastError"] or row["lastSync"] is None]
    lines = {r.identity: fencing_lines(r.child) for r in h.cluster.live()}
    print(
        f"\n{len(h.zones)} zones as desired {took:.2f}s after settling; failed zones {len(failed)}; lines "
        f"about fencing per replica {[len(v) for v in lines.values()]}: {next(iter(lines.values()))}"
    )
    assert not failed, failed[:5]
    for ident, said in lines.items():
        assert len(said) <= 5, (ident, said)
        assert sum(mode_line in line for line in said) == 1, (ident, said)
    assert not [line for r in h.cluster.live() for line in errors(r.child)]


def victim_of(h: Harness) -> str:
    coordinator = h.coordinator()
    return max(i for i in h.live() if i != coordinator)


def test_webhook_without_the_fence_extension_runs_sharded_on_lease_timing(
    start_cluster: StartCluster,
) -> None:
    h = start_cluster(zones=ZONES, replicas=3, default_timing=True, provider="webhook")
    assert_converged(h, "writes are lease-timed, not fenced")
    base = h.wait_owned(within=30, what="three replicas")
    timings = Timings.resolve(fences=False)
    # The bound: the lease plus 2 s after the kill (at worst the kill follows a renewal at once).
    kill_and_fail_over(h, victim_of(h), base, "lease-timed webhook", timings.lease_duration + SLACK)
    audit = h.cluster.audit()
    assert not [e for e in audit if e.op == "fence"]  # the server holds no fence: the tokens stay local
    assert all(e.fence is None for e in audit)
    assert not overlaps(audit)
    assert not fenced(audit)


def test_webhook_with_the_fence_extension_is_fenced_on_short_leases(start_cluster: StartCluster) -> None:
    h = start_cluster(zones=ZONES, replicas=3, default_timing=True, provider="webhook", webhook_fence=True)
    assert_converged(h, "writes fenced")
    base = h.wait_owned(within=30, what="three replicas")
    owners = base.owner_map()
    assert not h.fence_problems(owners)  # each zone's fence, at the server, is its owner's
    victim = victim_of(h)
    zone = min(z for z, owner in owners.items() if owner == victim)
    token = last_fence(h.cluster.audit(), zone, victim)
    kill_and_fail_over(h, victim, base, "fenced webhook", FENCED_TAKEOVER)

    # The dead replica's late write and a retaken fence, as its process would have sent them: refused.
    stale = {FENCE_HEADER: fence_value(zone, token), "X-Shardsync-Client": victim}
    late = httpx.post(
        f"{h.cluster.provider_url}/records",
        json=Changes(create=[Endpoint.new(f"late.{zone}", "A", ["192.0.2.99"])]).to_json(),
        headers={**stale, "Content-Type": MEDIA_TYPE},
        timeout=10,
    )
    assert late.status_code == 409, late.text
    with pytest.raises(FencedError, match="409"):
        retake(h.cluster.provider_url, victim, zone, token)
    audit = h.cluster.audit()
    refused = [(e.op, e.zone, e.generation) for e in fenced(audit) if e.writer == victim]
    assert refused == [("apply", zone, token.generation), ("fence", zone, token.generation)]
    assert f"late.{zone}" not in {r.dns_name for r in h.cluster.admin.records(zone)}
    assert not overlaps(audit)
    assert not [e for e in fenced(audit) if e.writer != victim]  # no live replica was ever refused
    assert all(e.fence is not None for e in writes_ok(audit))  # every replica write carried its token


def test_webhook_once_and_sharding_off_work_with_default_flags(tmp_path: Path) -> None:
    spec = ClusterSpec(
        latency=0.005,
        provider_concurrency=None,
        replica_flags=("--interval=10s",),
        termination_grace=30.0,
        start_timeout=START_WITHIN,
        provider="webhook",
    )
    cluster = Cluster(tmp_path / "cluster", spec)
    children: list[Child] = []

    def start(name: str, *flags: str) -> Child:
        args = [*cluster.launcher.replica_command(name, free_port()), *flags]
        children.append(Child(name, args, tmp_path / f"{name}.log"))
        return children[-1]

    def as_desired() -> bool:
        desired = desired_by_zone(cluster.kube, zones)
        return all(actual_records(cluster.admin.records(z)) == desired[z] for z in zones)

    try:
        cluster.start()
        zones = zone_names(20)
        cluster.seed_objects(zones, per_zone=1)
        cluster.open_zones(len(zones))
        once = start("once-0", "--once")
        try:
            assert once.proc.wait(timeout=START_WITHIN) == 0, once.tail(20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"--once still running after {START_WITHIN:.0f}s:\n{once.tail(20)}")
        assert as_desired() and not errors(once)

        for index in range(len(zones)):
            cluster.set_service_address(index, f"198.18.0.{index + 1}")
        started = time.time()
        passive = [start(f"passive-{i}", "--sharding=off") for i in range(2)]
        took = wait_for(as_desired, START_WITHIN, "--sharding=off writes the changes", poll=0.2)
        writers = {e.writer for e in writes_ok(cluster.audit()) if e.start_wall >= started}
        print(f"\n--sharding=off: changes written {took:.2f}s after start by {sorted(writers)}")
        assert len(writers) == 1 and writers <= {c.name for c in passive}  # the coordinator alone
        for child in passive:
            # The coordinator may have written before the other process finished starting: wait for its line.
            wait_for(has_said_lease_timed(child), START_WITHIN, f"{child.name}'s fencing line")
            assert child.alive(), child.tail(20)
            assert lease_timed_lines(child) == 1
            assert not errors(child)
    finally:
        stop_all([c for c in children if c.alive()], grace=10.0)
        cluster.stop()


def last_fence(audit: list[AuditEntry], zone: str, writer: str) -> FenceToken:
    """The token `writer` last took `zone`'s fence with."""
    taken = [e.fence for e in writes_ok(audit) if (e.op, e.zone, e.writer) == ("fence", zone, writer)]
    assert taken and taken[-1] is not None, f"{writer} never took {zone}'s fence"
    return FenceToken.from_text(taken[-1])


def retake(url: str, identity: str, zone: str, token: FenceToken) -> None:
    """`acquire_fence(zone, token)` through a fresh webhook client named `identity` (a restarted process)."""

    async def run() -> None:
        client = WebhookProvider(url, identity=identity, timeout=10)
        try:
            await client.acquire_fence(zone, token)
        finally:
            await client.close()

    anyio.run(run)
