"""`shardsync run --once` as a real process (a CronJob's run) with a source whose CRD is not installed: the
HTTPRoute kind waits for its CRD (one error logged), the Services and DNSEndpoints are synced into every
zone, and the process exits 0 instead of waiting for the missing CRD forever. A kind with no CRD has no
objects, so the zones lose nothing by not waiting for it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.cluster import Cluster, zone_names
from bench.records import actual_records, desired_by_zone
from shardsync.local.children import Child
from shardsync.local.infra import free_port
from tests.multiprocess.harness import START_WITHIN

pytestmark = pytest.mark.multiprocess

ZONES = 3


def test_once_with_a_missing_crd_syncs_the_other_kinds_and_exits(cluster: Cluster, tmp_path: Path) -> None:
    zones = zone_names(ZONES)
    cluster.seed_objects(zones, per_zone=2)
    cluster.open_zones(ZONES)
    args = [*cluster.launcher.replica_command("once-0", free_port()), "--source=gateway-httproute", "--once"]
    child = Child("once-0", args, tmp_path / "once.log")
    try:
        try:
            code = child.proc.wait(timeout=START_WITHIN)
        except subprocess.TimeoutExpired:
            pytest.fail(f"--once still running after {START_WITHIN:.0f}s:\n{child.tail(20)}")
        assert code == 0, child.tail(20)
        assert "not installed" in child.output()  # the waiting kind said what to install
        desired = desired_by_zone(cluster.kube, zones)
        for zone in zones:
            assert desired[zone], "nothing asks for records: the check would prove nothing"
            assert actual_records(cluster.admin.records(zone)) == desired[zone], zone
    finally:
        if child.alive():
            child.kill()
