"""`shardsync shards` against real replicas: the `--url` form (a replica's /shards) and the `--kubeconfig`
form (the assignment ConfigMap and member Leases in the embedded API server) name the same owner for every
zone and predict the same scale, and the prediction is what a real scale from 3 to 4 replicas then moves:
the same number of zones, between the same members.

Each form runs as the real command: `--what-if-replicas` as a child process (`python -m shardsync shards`),
`--explain` for every zone in this process through the command's own entry point (a child process per
zone would cost a second each on a loaded machine; the code path is the same).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from typing import Any

import orjson
import pytest

from bench import observe
from shardsync.cli import main as cli_main
from shardsync.local import seed
from tests.multiprocess.conftest import StartCluster
from tests.multiprocess.harness import identity

pytestmark = pytest.mark.multiprocess

ZONES = 50


def shards_process(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "shardsync", "shards", *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    doc: dict[str, Any] = orjson.loads(done.stdout)
    return doc


def shards_here(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = cli_main(["shards", *args, "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict[str, Any] = orjson.loads(out)
    return doc


def test_url_and_cluster_agree_and_predict_a_real_scale(
    start_cluster: StartCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    h = start_cluster(zones=ZONES, replicas=3)
    before = h.wait_owned(within=30, what="three replicas")
    generation = observe.generation(before)
    infra = h.cluster.launcher.infra
    assert infra is not None
    url = h.replica(identity(1)).url  # not necessarily the coordinator: any replica holds the document
    by_url = ["--url", url]
    by_cluster = [
        "--kubeconfig",
        str(infra.kubeconfig),
        "--namespace",
        seed.NAMESPACE,
        "--instance",
        seed.INSTANCE,
        "--zones-from-url",
        url,
    ]

    disagree = []
    for zone in h.zones:
        url_owner = shards_here(capsys, *by_url, "--explain", zone)["owner"]
        cluster_owner = shards_here(capsys, *by_cluster, "--explain", zone)["owner"]
        if not url_owner == cluster_owner == before.owner_map()[zone]:
            disagree.append((zone, url_owner, cluster_owner, before.owner_map()[zone]))
    assert not disagree, disagree

    predicted = shards_process(*by_url, "--what-if-replicas", "4")
    assert predicted == shards_process(*by_cluster, "--what-if-replicas", "4")
    assert predicted["zones"] == ZONES and not predicted["estimated"]

    up_at = time.time()
    h.cluster.scale(4)
    h.cluster.wait_ready(ordinals=[3])
    members = [identity(i) for i in range(4)]
    after = h.wait_owned(
        within=30, expected=members, after=up_at, min_generation=generation + 1, what="scale up"
    )
    assert observe.generation(after) == generation + 1  # one generation: the one predicted
    moved = observe.moved(before.owner_map(), after.owner_map())
    flows = Counter((before.owner_map()[z], after.owner_map()[z]) for z in moved)
    predicted_flows = ", ".join(f"{m['from']}->{m['to']} {m['zones']}" for m in predicted["moves"])
    real_flows = ", ".join(f"{a}->{b} {n}" for (a, b), n in sorted(flows.items()))
    print(
        f"\nscale 3 -> 4 over {ZONES} zones: predicted {predicted['moved']} ({predicted_flows}), "
        f"moved {len(moved)} ({real_flows})"
    )
    assert predicted["moved"] == len(moved)
    assert {(m["from"], m["to"]): m["zones"] for m in predicted["moves"]} == dict(flows)
