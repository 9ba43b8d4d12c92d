"""End to end, against BIND 9: the TSIG secret and the Kubernetes credentials never leave the process. A full
run (a record written, an invalid object reported, the replica's status pages read, `shardsync shards`
asked, a graceful stop), a run whose secret the server refuses (given on the command line) and a run whose
secret is not even base64: every log line, Event, metric and `/shards` answer is searched for the secrets.

What this cannot prove: the embedded API server ignores the bearer token, so an API server's 401 answer (the
path where a client might echo its headers) is not exercised."""

from __future__ import annotations

import base64
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client as k8s

from shardsync.local.apiserver import ApiServer
from tests.dnsservers import DnsTestServer, running_bind
from tests.processes import Processes, free_port, wait_ready
from tests.waits import eventually_sync

from .test_tenancy import ZONE_A, ZONE_B, publish, rfc2136_args

pytestmark = pytest.mark.bind

TOKEN = "kube-bearer-token-6f1d2c9a7e"
WRONG = base64.b64encode(b"not-the-servers-key-0123456789ab").decode()
NOT_BASE64 = "tsig-secret-that-is-not-base64!"


@pytest.fixture(scope="module")
def dns_server() -> Iterator[DnsTestServer]:
    yield from running_bind([ZONE_A, ZONE_B])


def with_token(kubeconfig: Path, into: Path) -> Path:
    """The embedded server's kubeconfig plus a user with a bearer token."""
    text = kubeconfig.read_text().replace(
        "    cluster: shardsync\n", "    cluster: shardsync\n    user: me\n"
    )
    into.write_text(text + f"users:\n- name: me\n  user:\n    token: {TOKEN}\n")
    return into


def secrets_in(text: str, secrets: list[str]) -> list[str]:
    return [s for s in secrets if s in text]


def test_no_secret_in_logs_events_metrics_or_shards(
    apiserver: ApiServer, dns_server: DnsTestServer, procs: Processes, tmp_path: Path
) -> None:
    secrets = [dns_server.secret, TOKEN, WRONG, NOT_BASE64]
    assert apiserver.kubeconfig is not None
    kubeconfig = with_token(apiserver.kubeconfig, tmp_path / "kubeconfig")
    core = k8s.CoreV1Api(apiserver.api_client())
    publish(core, "default", "web", f"web.{ZONE_A}", "192.0.2.10")
    publish(core, "default", "bad", f"bad..{ZONE_A}", "192.0.2.11")  # an invalid name: a Warning Event

    secret_file = tmp_path / "tsig"
    secret_file.write_text(dns_server.secret)
    port = free_port()
    base = [
        "run",
        f"--kubeconfig={kubeconfig}",
        "--source=service",
        *rfc2136_args(dns_server, secret_file),
        "--txt-owner-id=secrets",
        "--identity=shardsync-0",
        "--lease-namespace=default",
        "--lease-duration=6s",
        "--renew-interval=1s",
        "--settle-delay=200ms",
    ]
    replica = procs.start(
        "replica", [*base, f"--metrics-address=127.0.0.1:{port}", "--events", "--log-level=debug"]
    )
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, replica)
    eventually_sync(lambda: dns_server.texts(f"web.{ZONE_A}", "A") == {"192.0.2.10"}, within=30)
    eventually_sync(
        lambda: any(e.reason == "InvalidEndpoint" for e in core.list_namespaced_event("default").items)
    )

    answers = [
        httpx.get(url + path, timeout=5).text for path in ("/metrics", "/shards", "/readyz", "/healthz")
    ]
    shards = subprocess.run(
        [sys.executable, "-m", "shardsync", "shards", f"--url={url}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    answers += [shards.stdout, shards.stderr]
    replica.signal(signal.SIGTERM)
    assert replica.wait(timeout=60) == 0
    events = [str(e.to_dict()) for e in core.list_event_for_all_namespaces().items]
    assert events

    # The server refuses a wrong secret given on the command line; one not base64 is refused at start-up.
    wrong = [a for a in base if not a.startswith("--rfc2136-tsig-secret-file")]
    refused = procs.start(
        "refused", [*wrong, f"--rfc2136-tsig-secret={WRONG}", "--once", "--metrics-address=127.0.0.1:0"]
    )
    refused.wait(timeout=60)
    garbled = procs.start("garbled", [*wrong, f"--rfc2136-tsig-secret={NOT_BASE64}", "--once"])
    assert garbled.wait(timeout=60) != 0

    logs = [replica.log(), refused.log(), garbled.log()]
    assert "zone=a.example" in logs[0] and "a.example" in logs[1]
    for where, text in (
        [("log", t) for t in logs] + [("event", e) for e in events] + [("answer", a) for a in answers]
    ):
        assert not secrets_in(text, secrets), f"a secret in a {where}: {text[:2000]}"
