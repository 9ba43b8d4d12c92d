"""`shardsync shards` end to end: from a replica's status server, from cluster objects in the embedded API
server (zones from a fake provider server), and every bad input ends in one message and exit status 1."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from anyio.from_thread import start_blocking_portal
from kubernetes import client as k8s

from shardsync.cli import main as cli_main
from shardsync.local.apiserver import ApiServer
from shardsync.providers.fake.server import FakeServer
from shardsync.providers.fake.store import FakeStore
from shardsync.replica.server import StatusEndpoints, StatusServer
from shardsync.sharding.assignment import Assignment, Member
from shardsync.sharding.balance import rebalance
from shardsync.sharding.membership import MemberLease
from shardsync.shards.view import parse_view
from tests.kubeclient import raw_body
from tests.processes import free_port

GENERATION = 4


def names_of(zones: int) -> list[str]:
    return [f"zone-{i:04d}.example" for i in range(zones)]


def slotted(
    generation: int, members: dict[str, int], zones: list[str], pins: dict[str, str] | None = None
) -> Assignment:
    """An assignment as a coordinator publishes it: a slot table (and overrides) balanced on `zones`."""
    balanced = rebalance((), members, zones, pins=pins)
    return Assignment(
        generation,
        tuple(Member(i, w) for i, w in members.items()),
        pins=pins or {},
        slots=balanced.owners,
        overrides=balanced.overrides,
    )


def replica_doc(zones: int, a: Assignment | None = None) -> dict[str, Any]:
    names = names_of(zones)
    a = a or slotted(GENERATION, {"shardsync-0": 1, "shardsync-1": 1}, names)
    return {
        "generation": GENERATION,
        "coordinator": "shardsync-0",
        "self": "shardsync-1",
        "members": [
            {
                "identity": m,
                "state": "ready",
                "weight": 1,
                "zones": len(a.zones_of(m, names)),
                "observedGeneration": GENERATION,
                "lastRenewSeen": "2026-03-01T12:00:00Z",
            }
            for m in ("shardsync-0", "shardsync-1")
        ],
        "zones": [
            {
                "zone": z,
                "owner": a.owner_of(z),
                "state": "active",
                "lastSync": "2026-03-01T12:00:00Z" if a.owner_of(z) == "shardsync-1" else None,
                "lastSyncSeconds": 0.01 if a.owner_of(z) == "shardsync-1" else None,
                "records": 3 if a.owner_of(z) == "shardsync-1" else None,
                "lastError": "",
            }
            for z in names
        ],
        "assignment": a.to_document(),
    }


@pytest.fixture
def replica() -> Iterator[tuple[str, dict[str, Any]]]:
    """A status server answering /shards like a replica (the same server class `shardsync run` uses)."""
    state: dict[str, Any] = {"doc": replica_doc(30)}
    with start_blocking_portal() as portal:
        server = StatusServer(
            "127.0.0.1:0", StatusEndpoints(lambda: (True, ""), lambda: state["doc"]), portal
        )
        server.start()
        try:
            yield f"http://127.0.0.1:{server.port}", state
        finally:
            server.stop()


def shards(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli_main(["shards", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_from_a_replica_is_its_answer(
    replica: tuple[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = replica
    code, out, err = shards(capsys, "--url", url, "-o", "json", "--member-url", "http://{identity}.invalid:1")
    assert code == 0 and err == ""
    answer = orjson.loads(out)
    # Its answer, plus a note on what could not be gathered from the other member.
    [note] = answer.pop("notes")
    assert answer == state["doc"]
    assert (
        note.startswith("sync state of the ")
        and "zones shardsync-0 owns unknown: http://shardsync-0.invalid:1" in note
    )


def test_table_from_a_replica(
    replica: tuple[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = replica
    code, out, _ = shards(capsys, "--url", url + "/")
    assert code == 0
    assert out.startswith(f"generation {GENERATION}   coordinator shardsync-0   answered by shardsync-1")
    assert "30 zones summarised" in out
    counts = {m["identity"]: m["zones"] for m in state["doc"]["members"]}
    for identity, n in counts.items():
        row = next(line for line in out.splitlines() if line.startswith(identity) and "ready" in line)
        assert row.split()[:4] == [identity, "ready", "1", str(n)]
    code, out, _ = shards(capsys, "--url", url, "--zones")
    assert code == 0 and "zone-0029.example" in out


def test_explain_and_what_if_from_a_replica(
    replica: tuple[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = replica
    # The replica's assignment has a pin and the coordinator's overrides: both must be seen from its URL.
    names = names_of(30)
    a = slotted(GENERATION, {"shardsync-0": 1, "shardsync-1": 1}, names, {"zone-0003.example": "shardsync-0"})
    state["doc"] = replica_doc(30, a)
    code, out, _ = shards(capsys, "--url", url, "--explain", "zone-0003.example", "-o", "json")
    assert code == 0
    doc = orjson.loads(out)
    assert doc["owner"] == "shardsync-0" and doc["pinEffective"] and doc["generation"] == GENERATION
    assert doc["managed"] is True and "notes" not in doc
    code, out, _ = shards(capsys, "--url", url, "--what-if-replicas", "3", "-o", "json")
    what_if = orjson.loads(out)
    assert code == 0 and what_if["zones"] == 30 and not what_if["estimated"]
    assert what_if["idealFraction"] == pytest.approx(1 / 3, abs=1e-6)
    assert {m["to"] for m in what_if["moves"]} == {"shardsync-2"}
    three = a.with_members((Member(f"shardsync-{i}") for i in range(3)), names)
    assert what_if["moved"] == len(a.moved(three, names))


def test_url_and_cluster_give_the_same_answers(
    apiserver: ApiServer, replica: tuple[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    """The same assignment published in the cluster and served by a replica: every zone's --explain owner
    and every --what-if count agree between the two forms."""
    url, state = replica
    names = names_of(20)
    a = slotted(
        7, {"shardsync-0": 1, "shardsync-1": 2, "shardsync-2": 1}, names, {"zone-0005.example": "shardsync-2"}
    )
    state["doc"] = replica_doc(20, a)
    publish(apiserver, a, {m.identity: {"observed_generation": 7, "weight": m.weight} for m in a.members})
    cluster = ["--kubeconfig", str(apiserver.kubeconfig), "--zones-from-url", url]

    def ask(*args: str) -> dict[str, Any]:
        code, out, err = shards(capsys, *args, "-o", "json")
        assert code == 0, err
        doc: dict[str, Any] = orjson.loads(out)
        return doc

    for zone in [*names, "not-managed.example", "www.zone-0001.example"]:
        by_url, by_cluster = ask("--url", url, "--explain", zone), ask(*cluster, "--explain", zone)
        assert by_url["owner"] == by_cluster["owner"] == a.owner_of(zone), zone
        assert by_url == by_cluster, zone
    for replicas in (2, 5):
        by_url = ask("--url", url, "--what-if-replicas", str(replicas))
        assert by_url == ask(*cluster, "--what-if-replicas", str(replicas)), replicas
        assert by_url["zones"] == 20 and not by_url["estimated"] and by_url["moved"] > 0


def test_a_replica_without_an_assignment_is_refused(
    replica: tuple[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    """An older replica (no `assignment` key) or one not sharding: a one-line refusal, never a guess."""
    url, state = replica
    del state["doc"]["assignment"]
    for ask in (["--explain", "zone-0001.example"], ["--what-if-replicas", "3"]):
        code, out, err = shards(capsys, "--url", url, *ask)
        assert code == 1 and out == ""
        assert err.splitlines() == [
            f"shardsync shards: {url} serves no assignment document (a replica older than this command, or "
            "one running --sharding=off or --once): read the cluster instead (--kubeconfig, --namespace)"
        ]
    code, out, _ = shards(capsys, "--url", url)  # the view itself still reads
    assert code == 0 and "generation 4" in out
    state["doc"]["assignment"] = {"version": 99}
    code, _, err = shards(capsys, "--url", url, "--what-if-replicas", "3")
    assert code == 1 and "the assignment from" in err and "unsupported assignment version 99" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "http://127.0.0.1:{closed}"], "cannot reach http://127.0.0.1:{closed}/shards"),
        (["--url", "ftp://x"], "is not an http(s) URL"),
        (["--url", "{replica}/nothing"], "answered 404"),
        (["--url", "{replica}/healthz"], "did not answer JSON"),
        (["--url", "{replica}", "--explain", "bad..name"], "--explain 'bad..name'"),
        (["--kubeconfig", "/nonexistent/kubeconfig"], "cannot load the kubeconfig"),
    ],
)
def test_bad_input_is_one_message_and_status_1(
    replica: tuple[str, dict[str, Any]], capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    url, _ = replica
    closed = free_port()
    filled = [a.format(replica=url, closed=closed) for a in args]
    code, out, err = shards(capsys, *filled)
    assert code == 1 and out == ""
    assert err.startswith("shardsync shards: ") and message.format(closed=closed) in err
    assert "Traceback" not in err


def test_not_a_shards_answer(replica: tuple[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    url, state = replica
    state["doc"] = {"generation": "seven"}
    code, _, err = shards(capsys, "--url", url)
    assert code == 1 and "is not a shardsync /shards answer: /shards: 'generation' must be int" in err


def test_real_process_exit_status_and_no_traceback() -> None:
    closed = free_port()
    proc = subprocess.run(
        [sys.executable, "-m", "shardsync", "shards", "--url", f"http://127.0.0.1:{closed}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "cannot reach" in proc.stderr and "Traceback" not in proc.stderr


# ---- straight from the cluster ---------------------------------------------------------------------------


@pytest.fixture
def provider() -> Iterator[FakeServer]:
    store = FakeStore()
    store.seed(40, 0)
    with FakeServer(store, port=0) as server:
        yield server


def publish(apiserver: ApiServer, a: Assignment, members: dict[str, dict[str, Any]]) -> None:
    """Write what a coordinator and its members would: the assignment, member leases, coordinator lease."""
    api = apiserver.api_client()
    core, coordination = k8s.CoreV1Api(api), k8s.CoordinationV1Api(api)
    core.create_namespaced_config_map("default", raw_body(k8s.V1ConfigMap, a.to_configmap("shardsync")))
    now = datetime.now(UTC)
    for identity, changes in members.items():
        from dataclasses import replace

        lease = replace(MemberLease.new("shardsync", identity, now), **changes)
        coordination.create_namespaced_lease("default", raw_body(k8s.V1Lease, lease.to_object()))
    coordination.create_namespaced_lease(
        "default",
        raw_body(
            k8s.V1Lease,
            {
                "metadata": {"name": "shardsync-coordinator"},
                "spec": {"holderIdentity": "shardsync-0", "leaseDurationSeconds": 15},
            },
        ),
    )


def test_from_cluster_objects(
    apiserver: ApiServer, provider: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    a = Assignment(
        9,
        (Member("shardsync-0"), Member("shardsync-1"), Member("shardsync-2", 2)),
        pins={"zone-0000.example": "shardsync-0"},
    )
    publish(
        apiserver,
        a,
        {
            "shardsync-0": {"observed_generation": 9},
            "shardsync-1": {"observed_generation": 9, "draining": True},
            "shardsync-2": {"observed_generation": 8, "weight": 2},
        },
    )
    base = ["--kubeconfig", str(apiserver.kubeconfig), "--instance", "shardsync"]
    code, out, err = shards(capsys, *base, "--fake-provider-url", provider.url, "-o", "json")
    assert code == 0, err
    view = parse_view(orjson.loads(out))
    assert view.generation == 9 and view.coordinator == "shardsync-0" and view.self_identity is None
    assert {m.identity: (m.state, m.weight) for m in view.members} == {
        "shardsync-0": ("ready", 1),
        "shardsync-1": ("draining", 1),
        "shardsync-2": ("ready", 2),
    }
    assert len(view.zones) == 40
    for row in view.zones:
        assert row.owner == a.owner_of(row.zone)
        assert row.state == ("pending" if row.owner == "shardsync-2" else "active")
    assert {r.zone: r.owner for r in view.zones}["zone-0000.example"] == "shardsync-0"

    # the table without a zone list: members and the assignment only, and a note saying so
    code, out, _ = shards(capsys, *base)
    assert code == 0 and "generation 9" in out and "note: zone list unknown" in out
    member_line = next(line for line in out.splitlines() if line.startswith("shardsync-1 "))
    assert member_line.split()[:5] == ["shardsync-1", "draining", "1", "-", "9"]

    # --explain is exact from the cluster: the pin is seen
    code, out, _ = shards(capsys, *base, "--explain", "zone-0000.example")
    assert code == 0 and "pinned to shardsync-0 (in effect)" in out

    # --what-if-replicas over the provider's zones, and estimated without them
    code, out, _ = shards(capsys, *base, "--fake-provider-url", provider.url, "--what-if-replicas", "4")
    assert code == 0 and "scale shardsync: 3 -> 4 replicas, over 40 zones" in out
    assert "between members that stay: 0" in out
    code, out, _ = shards(capsys, *base, "--what-if-replicas", "4", "-o", "json")
    assert code == 0 and orjson.loads(out)["estimated"] is True


def test_from_cluster_zone_file_and_missing_objects(
    apiserver: ApiServer, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    base = ["--kubeconfig", str(apiserver.kubeconfig)]
    code, out, _ = shards(capsys, *base)
    assert code == 0 and "generation 0" in out and "no assignment published yet" in out
    code, _, err = shards(capsys, *base, "--explain", "a.example")
    assert code == 1 and "no assignment published yet" in err

    zones = tmp_path / "zones"
    zones.write_text("a.example\n# a comment\nB.Example.\n\n")
    publish(apiserver, Assignment(1, (Member("shardsync-0"),)), {"shardsync-0": {"observed_generation": 1}})
    code, out, _ = shards(capsys, *base, "--zones-file", str(zones), "-o", "json")
    assert code == 0
    assert [(z["zone"], z["owner"]) for z in orjson.loads(out)["zones"]] == [
        ("a.example", "shardsync-0"),
        ("b.example", "shardsync-0"),
    ]
    zones.write_text("not a zone!\n")
    code, _, err = shards(capsys, *base, "--zones-file", str(zones))
    assert code == 1 and "'not a zone!' is not a zone name" in err

    # a corrupt assignment is an error message, not a traceback
    core = k8s.CoreV1Api(apiserver.api_client())
    core.patch_namespaced_config_map("shardsync-assignment", "default", {"data": {"assignment.json": "{"}})
    code, _, err = shards(capsys, *base)
    assert code == 1 and "the assignment ConfigMap cannot be read" in err


def test_from_an_unreachable_cluster(
    apiserver: ApiServer, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    from shardsync.local.apiserver import kubeconfig

    path = kubeconfig.write(tmp_path / "kc", f"http://127.0.0.1:{free_port()}")
    code, _, err = shards(capsys, "--kubeconfig", str(path), "--timeout", "2")
    assert code == 1 and "cannot reach the API server" in err
