"""Several client processes at once: 4 processes doing get+replace on one Lease, retrying on 409, lose no
update; a sanity floor on the bench figure."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from kubernetes import client

from bench.apiserver import get_replace_rate
from shardsync.local.apiserver import ApiServer
from tests.kubeclient import meta, present, raw_body

WORKER = textwrap.dedent("""
    import sys
    from kubernetes import client
    from kubernetes.client import ApiException
    from shardsync.local.apiserver.client import api_client

    url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    leases = client.CoordinationV1Api(api_client(url, user_agent=name))
    leases.read_namespaced_lease("contended", "default")
    print("ready", flush=True)
    sys.stdin.readline()  # start together, so the workers really contend
    conflicts = 0
    for _ in range(count):
        for _attempt in range(1000):
            lease = leases.read_namespaced_lease("contended", "default")
            n = int(lease.metadata.annotations["count"])
            lease.metadata.annotations["count"] = str(n + 1)
            try:
                leases.replace_namespaced_lease("contended", "default", lease)
                break
            except ApiException as exc:
                if exc.status != 409:
                    raise
                conflicts += 1
        else:
            sys.exit("gave up after 1000 conflicts")
    print(conflicts)
""")


@pytest.mark.multiprocess
def test_four_processes_contending_on_one_lease_lose_no_update(apiserver: ApiServer) -> None:
    per_process = 60
    leases = client.CoordinationV1Api(apiserver.api_client())
    leases.create_namespaced_lease(
        "default",
        raw_body(
            client.V1Lease, {"metadata": {"name": "contended", "annotations": {"count": "0"}}, "spec": {}}
        ),
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, apiserver.url, f"worker-{i}", str(per_process)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    conflicts = 0
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            conflicts += int(out.strip())
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    final = leases.read_namespaced_lease("contended", "default")
    assert present(meta(final).annotations)["count"] == str(4 * per_process)
    assert conflicts > 0, "the workers never actually contended"


def test_bench_function_reports_a_rate() -> None:
    assert get_replace_rate(seconds=0.5, in_process=True) > 100
