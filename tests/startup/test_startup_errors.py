"""`shardsync run` refusing bad input: one line on stderr naming the flag or file, no traceback.

Each case runs the real command as a child process (`python -m shardsync run ...`) and asserts its exit
code (2 for a bad flag value, 1 for the environment: a file that is missing or unreadable, a busy port),
that stderr is exactly one line naming what is wrong, and that no "Traceback" appears anywhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

USAGE, ENVIRONMENT = 2, 1

# A kubeconfig that loads (its server is never reached before these errors).
KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: x}}]
current-context: c
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {
        "good.kc": KUBECONFIG,
        "string.kc": "just a string\n",
        "empty.kc": "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\ncurrent-context: x\n",
        "bad.secret": "%%% not base64\n",
    }
    for name, text in paths.items():
        (tmp_path / name).write_text(text)
    return {name: str(tmp_path / name) for name in paths}


def run(
    *args: str, kubeconfig: str, provider: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> tuple[int, list[str], str]:
    base = provider or ("--provider=fake", "--fake-zone=a.com")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SHARDSYNC_", "EXTERNAL_DNS_"))}
    clean.pop("KUBERNETES_SERVICE_HOST", None)
    env = {**clean, **(env or {})}
    command = [sys.executable, "-m", "shardsync", "run", *base, "--identity=t"]
    command += [f"--kubeconfig={kubeconfig}"] if kubeconfig else []
    out = subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    return out.returncode, out.stderr.splitlines(), out.stdout + out.stderr


RFC2136 = ("--provider=rfc2136", "--rfc2136-host=127.0.0.1", "--rfc2136-zone=a.com")


def check(result: tuple[int, list[str], str], code: int, *words: str) -> None:
    rc, lines, everything = result
    assert rc == code, everything
    assert len(lines) == 1, everything
    assert "Traceback" not in everything
    assert lines[0].startswith("shardsync run: ")
    for word in words:
        assert word in lines[0], lines[0]


def test_missing_kubeconfig(files: dict[str, str]) -> None:
    check(run(kubeconfig="/nonexistent/kubeconfig"), ENVIRONMENT, "--kubeconfig=/nonexistent", "no such file")


def test_no_kubeconfig_at_all(tmp_path: Path) -> None:
    result = run(kubeconfig="", env={"HOME": str(tmp_path), "KUBECONFIG": ""})
    check(result, ENVIRONMENT, "no kubeconfig", "--kubeconfig")


def test_in_a_cluster_without_a_service_account() -> None:
    result = run(kubeconfig="", env={"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"})
    check(result, ENVIRONMENT, "service account", "--kubeconfig")


@pytest.mark.parametrize("name", ["string.kc", "empty.kc"])
def test_a_kubeconfig_that_is_not_one(files: dict[str, str], name: str) -> None:
    check(run(kubeconfig=files[name]), ENVIRONMENT, f"--kubeconfig={files[name]}", "not a usable kubeconfig")


@pytest.mark.parametrize("address", ["notanaddress", ":99999", "127.0.0.1:-1"])
def test_bad_metrics_address(files: dict[str, str], address: str) -> None:
    result = run(f"--metrics-address={address}", kubeconfig=files["good.kc"])
    check(result, USAGE, f"--metrics-address={address}")


def test_busy_metrics_port(files: dict[str, str], busy_port: int) -> None:
    address = f"127.0.0.1:{busy_port}"
    result = run(f"--metrics-address={address}", kubeconfig=files["good.kc"])
    check(result, ENVIRONMENT, f"--metrics-address={address}", "cannot listen")


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--label-filter", "app in (a"), ("--annotation-filter", "=="), ("--label-filter", "a b")],
)
def test_bad_selector(files: dict[str, str], flag: str, value: str) -> None:
    check(run(f"{flag}={value}", kubeconfig=files["good.kc"]), USAGE, f"{flag}={value}", "selector")


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--domain-filter", "bad..domain"), ("--exclude-domains", "a b.com"), ("--domain-filter", "-a.com")],
)
def test_bad_domain(files: dict[str, str], flag: str, value: str) -> None:
    check(run(f"{flag}={value}", kubeconfig=files["good.kc"]), USAGE, f"{flag}={value}", "domain")


def test_good_domains_are_accepted() -> None:
    from shardsync.replica.config_checks import validate_domain

    for domain in ("example.com", ".example.com", "Example.COM.", "*.a.example.com", "_tcp.a.com", "com"):
        validate_domain("--domain-filter", domain)


def test_bad_duration(files: dict[str, str]) -> None:
    check(run("--interval=abc", kubeconfig=files["good.kc"]), USAGE, "--interval", "abc")


def test_bad_tsig_secret(files: dict[str, str]) -> None:
    args = ("--rfc2136-tsig-keyname=k", "--rfc2136-tsig-secret=not base64!")
    result = run(*args, kubeconfig=files["good.kc"], provider=RFC2136)
    check(result, USAGE, "--rfc2136-tsig-secret", "base64")
    assert "not base64!" not in result[2]  # the secret itself is never echoed


def test_bad_tsig_secret_file(files: dict[str, str]) -> None:
    args = ("--rfc2136-tsig-keyname=k", f"--rfc2136-tsig-secret-file={files['bad.secret']}")
    result = run(*args, kubeconfig=files["good.kc"], provider=RFC2136)
    check(result, USAGE, f"--rfc2136-tsig-secret-file={files['bad.secret']}", "base64")


def test_missing_tsig_secret_file(files: dict[str, str]) -> None:
    args = ("--rfc2136-tsig-keyname=k", "--rfc2136-tsig-secret-file=/nonexistent/secret")
    result = run(*args, kubeconfig=files["good.kc"], provider=RFC2136)
    check(result, ENVIRONMENT, "--rfc2136-tsig-secret-file=/nonexistent/secret", "cannot read")


def test_bad_tsig_algorithm(files: dict[str, str]) -> None:
    secret = "--rfc2136-tsig-secret=c2VjcmV0"
    args = ("--rfc2136-tsig-keyname=k", secret, "--rfc2136-tsig-secret-alg=hmac-foo")
    result = run(*args, kubeconfig=files["good.kc"], provider=RFC2136)
    check(result, USAGE, "--rfc2136-tsig-secret-alg=hmac-foo", "hmac-sha256")


def test_tsig_key_name_without_a_secret(files: dict[str, str]) -> None:
    result = run("--rfc2136-tsig-keyname=k", kubeconfig=files["good.kc"], provider=RFC2136)
    check(result, USAGE, "--rfc2136-tsig-keyname")


def test_debug_shows_the_trace(files: dict[str, str]) -> None:
    rc, _, everything = run("--log-level=debug", kubeconfig=files["string.kc"])
    assert rc == ENVIRONMENT
    assert "Traceback" in everything and "not a usable kubeconfig" in everything.splitlines()[-1]


@pytest.mark.parametrize(
    ("flag", "value"), [("--instance", "Bad_Name"), ("--lease-namespace", "no/slash"), ("--namespace", "A")]
)
def test_bad_object_names(files: dict[str, str], flag: str, value: str) -> None:
    check(run(f"{flag}={value}", kubeconfig=files["good.kc"]), USAGE, f"{flag}={value}")


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["run", "--bogus"], "shardsync run: unrecognized arguments: --bogus; see shardsync run --help"),
        (
            ["shards", "--nope"],
            "shardsync shards: unrecognized arguments: --nope; see shardsync shards --help",
        ),
        (
            ["local", "--replicas=x"],
            "shardsync local: argument --replicas: expected a whole number, got 'x'; "
            "see shardsync local --help",
        ),
        ([], "shardsync: the following arguments are required: COMMAND; see shardsync --help"),
    ],
)
def test_usage_mistakes_of_every_command_are_one_line(argv: list[str], line: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "shardsync", *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stdout == "" and done.stderr.splitlines() == [line]
