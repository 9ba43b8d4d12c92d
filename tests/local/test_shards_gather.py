"""`shardsync shards` as an operator uses it on `shardsync local`: `--url` of one replica gathers the sync
state of the other replicas' zones from their own /shards ("unknown", not "-", where one cannot be read),
`--zones-from-url` takes a replica's base URL as well as its /shards, and `--explain` of a name that is not
a managed zone says so."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from anyio.from_thread import start_blocking_portal

from shardsync.cli import main as cli_main
from shardsync.replica.server import StatusEndpoints, StatusServer
from shardsync.shards import gather as gather_module
from shardsync.shards.command import ShardsError, shards_url, zone_list
from shardsync.shards.gather import member_urls
from shardsync.shards.view import parse_view
from tests.local.test_shards_command import replica_doc
from tests.processes import free_port


def as_seen_by(me: str, zones: int = 30) -> dict[str, Any]:
    """replica_doc's cluster as `me` answers: sync figures for its own zones only."""
    doc = replica_doc(zones)
    doc["self"] = me
    for z in doc["zones"]:
        mine = z["owner"] == me
        z["lastSync"] = f"2026-03-01T12:00:0{int(me[-1])}Z" if mine else None
        z["lastSyncSeconds"] = 0.5 if mine else None
        z["records"] = 7 if mine else None
    return doc


def answer(doc: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    return lambda: doc


@pytest.fixture
def replicas() -> Iterator[dict[str, str]]:
    """shardsync-0 and shardsync-1 answering /shards on their own ports: identity → base URL."""
    urls = {}
    with start_blocking_portal() as portal:
        servers = []
        for me in ("shardsync-0", "shardsync-1"):
            doc = as_seen_by(me)
            server = StatusServer("127.0.0.1:0", StatusEndpoints(lambda: (True, ""), answer(doc)), portal)
            server.start()
            servers.append(server)
            urls[me] = f"http://127.0.0.1:{server.port}"
        try:
            yield urls
        finally:
            for server in servers:
                server.stop()


def shards(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli_main(["shards", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_url_of_one_replica_gathers_every_owners_sync_state(
    replicas: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As under `shardsync local`: its run.json lists every replica's status URL.
    monkeypatch.setattr(gather_module, "local_status_urls", lambda run_dir=None: dict(replicas))
    code, out, err = shards(capsys, "--url", replicas["shardsync-1"] + "/shards", "-o", "json", "--zones")
    assert code == 0 and err == ""
    doc = orjson.loads(out)
    rows = doc["zones"]
    assert {r["owner"] for r in rows} == {"shardsync-0", "shardsync-1"}
    for row in rows:
        assert row["lastSync"] == f"2026-03-01T12:00:0{int(row['owner'][-1])}Z" and row["records"] == 7
    assert doc["notes"] == ["sync state of other owners' zones read from their /shards: shardsync-0"]

    # shardsync-0 cannot be reached: its zones read "unknown", not "-" (never synced), and a note says why.
    gone = dict(replicas, **{"shardsync-0": f"http://127.0.0.1:{free_port()}"})
    monkeypatch.setattr(gather_module, "local_status_urls", lambda run_dir=None: gone)
    code, out, _ = shards(capsys, "--url", replicas["shardsync-1"], "--zones")
    assert code == 0
    theirs = [line for line in out.splitlines() if line.startswith("zone-") and " shardsync-0 " in line]
    assert theirs and all(line.split()[3:6] == ["unknown"] * 3 for line in theirs)
    mine = [line for line in out.splitlines() if line.startswith("zone-") and " shardsync-1 " in line]
    assert mine and all("2026-03-01T12:00:01Z" in line for line in mine)
    assert "zones shardsync-0 owns unknown: http://127.0.0.1:" in out


def test_member_urls_only_for_the_deployment_asked_about() -> None:
    view = parse_view(as_seen_by("shardsync-1"))
    local = {"shardsync-0": "http://127.0.0.1:1001", "shardsync-1": "http://127.0.0.1:1002"}
    assert member_urls(view, "http://127.0.0.1:1002/shards", None, local) == {
        "shardsync-0": local["shardsync-0"]
    }
    assert member_urls(view, "http://127.0.0.1:9999", None, local) == {}  # another `shardsync local`
    template = "http://{identity}.shardsync:7979"
    assert member_urls(view, "http://x:1", template, local) == {
        "shardsync-0": "http://shardsync-0.shardsync:7979"
    }


def test_zones_from_url_takes_a_base_url_or_shards(replicas: dict[str, str]) -> None:
    base = replicas["shardsync-0"]
    expected = sorted(z["zone"] for z in replica_doc(30)["zones"])
    for url in (base, base + "/", base + "/shards", base + "/shards/"):
        args = argparse.Namespace(zones_file=None, zones_from_url=url, fake_provider_url=None, timeout=5.0)
        assert sorted(zone_list(args) or []) == expected, url
    closed = f"http://127.0.0.1:{free_port()}"
    assert shards_url(closed) == closed + "/shards"
    assert shards_url(closed + "/shards") == closed + "/shards"
    with pytest.raises(ShardsError, match="not an http"):
        shards_url("ftp://x")


def test_explain_says_when_a_name_is_not_a_managed_zone(
    replicas: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url = replicas["shardsync-1"]
    code, out, _ = shards(capsys, "--url", url, "--explain", "zone-0003.example", "-o", "json")
    assert code == 0 and orjson.loads(out)["managed"] is True
    code, out, _ = shards(capsys, "--url", url, "--explain", "www.zone-0003.example")
    assert code == 0
    assert "note: www.zone-0003.example is not a managed zone but a name in zone zone-0003.example" in out
    code, out, _ = shards(capsys, "--url", url, "--explain", "elsewhere.test", "-o", "json")
    doc = orjson.loads(out)
    assert code == 0 and doc["managed"] is False
    assert any(
        n.startswith("elsewhere.test is not a managed zone (not among the 30 zones)") for n in doc["notes"]
    )
