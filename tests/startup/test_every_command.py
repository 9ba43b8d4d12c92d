"""Every `shardsync` command refusing a startup mistake in one line: each case runs the real command as a
child process and asserts its exit status (2 for the command line, 1 for the environment: a busy port, a
file or directory it cannot use), that stderr is exactly one line beginning with the command's name, and
that no "Traceback" appears anywhere. A closed output (`shardsync shards | head`) ends a command quietly
with 141, and `shardsync local` stops everything it started first. `shardsync run`'s own flag and file
cases are in test_startup_errors.py.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from shardsync import cli
from shardsync.local.apiserver import ApiServer
from shardsync.local.apiserver.snapshot import FILE_NAME
from tests.processes import pid_alive

USAGE, ENVIRONMENT, OUTPUT_CLOSED = 2, 1, 141
CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("SHARDSYNC_", "EXTERNAL_DNS_"))}


def shardsync(
    *argv: str, env: dict[str, str] | None = None, stdout: int = subprocess.PIPE, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shardsync", *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=timeout,
        env={**CLEAN_ENV, **(env or {})},
    )


def one_line(done: subprocess.CompletedProcess[str], code: int, prefix: str, *words: str) -> str:
    everything = (done.stdout or "") + done.stderr
    assert done.returncode == code, everything
    assert "Traceback" not in everything
    [line] = done.stderr.splitlines()
    assert line.startswith(prefix + ": "), line
    for word in words:
        assert word in line, line
    return line


def closed_output(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The command with its stdout a pipe nobody reads any more (the reader is closed before it starts,
    so its first write fails: `shardsync ... | head` once head has exited)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return shardsync(*argv, stdout=write_end, timeout=timeout)
    finally:
        os.close(write_end)


# ---- every parser ---------------------------------------------------------------------------------------


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from parsers(sub)


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_every_parser_takes_full_flag_names_only(command: str) -> None:
    found = list(parsers(cli.build_parser([command])))
    assert len(found) >= 1 + len(cli.COMMANDS)
    assert all(p.allow_abbrev is False for p in found), [p.prog for p in found if p.allow_abbrev]


@pytest.mark.parametrize(
    ("argv", "prefix", "flag"),
    [
        (["run", "--txt-owner=x"], "shardsync run", "--txt-owner=x"),
        (["--vers", "run"], "shardsync run", "--vers"),
        (["apiserver", "--kubeconfig=x"], "shardsync apiserver", "--kubeconfig=x"),
        (["fake-provider", "--record=2"], "shardsync fake-provider", "--record=2"),
        (["webhook-server", "--provider=fake", "--fake-zon=a"], "shardsync webhook-server", "--fake-zon=a"),
        (["local", "--replica=2"], "shardsync local", "--replica=2"),
        (["shards", "--expl=a.example"], "shardsync shards", "--expl=a.example"),
    ],
)
def test_an_abbreviated_flag_is_refused(argv: list[str], prefix: str, flag: str) -> None:
    """`--txt-owner` is not taken for `--txt-owner-id` (external-dns refuses it too)."""
    one_line(shardsync(*argv), USAGE, prefix, f"unrecognized arguments: {flag}")


# ---- shardsync run: the environment ----------------------------------------------------------------------


def test_a_bad_environment_value_names_the_variable() -> None:
    done = shardsync(
        "run", "--provider=fake", "--fake-zone=a.com", "--identity=t", env={"SHARDSYNC_INTERVAL": "bogus"}
    )
    line = one_line(done, USAGE, "shardsync run", "SHARDSYNC_INTERVAL=bogus")
    assert line.endswith(": invalid duration 'bogus' (use e.g. 30s, 1m, 500ms, 1h30m)")


# ---- busy ports and addresses ----------------------------------------------------------------------------


def test_fake_provider_on_a_busy_port(busy_port: int) -> None:
    done = shardsync("fake-provider", "--port", str(busy_port))
    line = one_line(done, ENVIRONMENT, "shardsync fake-provider", f"cannot listen on 127.0.0.1:{busy_port}")
    assert line.endswith("Address already in use")


def test_apiserver_on_a_busy_port(busy_port: int) -> None:
    done = shardsync("apiserver", "--port", str(busy_port))
    one_line(done, ENVIRONMENT, "shardsync apiserver", f"cannot listen on 127.0.0.1:{busy_port}", "in use")


@pytest.mark.parametrize("command", ["apiserver", "fake-provider"])
def test_an_address_this_host_does_not_have(command: str) -> None:
    done = shardsync(command, "--host", "192.0.2.1", "--port", "0")  # TEST-NET-1: on no host
    one_line(done, ENVIRONMENT, f"shardsync {command}", "cannot listen on 192.0.2.1:0", "assign")


WEBHOOK_SERVER = ["webhook-server", "--provider=fake", "--fake-zone=a.example"]


@pytest.mark.parametrize("flag", ["--listen-address", "--metrics-address"])
def test_webhook_server_on_a_busy_port(busy_port: int, flag: str) -> None:
    other = "--metrics-address" if flag == "--listen-address" else "--listen-address"
    done = shardsync(*WEBHOOK_SERVER, f"{flag}=127.0.0.1:{busy_port}", f"{other}=127.0.0.1:0")
    line = one_line(done, ENVIRONMENT, "shardsync webhook-server", f"127.0.0.1:{busy_port}", "cannot listen")
    assert "in use" in line


def test_webhook_server_on_an_address_this_host_does_not_have() -> None:
    done = shardsync(*WEBHOOK_SERVER, "--listen-address=192.0.2.1:0", "--metrics-address=127.0.0.1:0")
    one_line(done, ENVIRONMENT, "shardsync webhook-server", "cannot listen on 192.0.2.1:0", "assign")


# ---- flag values out of range ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["fake-provider", "--port", "99999"], ["--port", "0 to 65535"]),
        (["fake-provider", "--zones", "-1"], ["--zones", "must not be negative"]),
        (["fake-provider", "--rate-limit", "nan"], ["--rate-limit", "'nan'"]),
        (["fake-provider", "--log-level", "loud"], ["--log-level", "invalid choice"]),
        (["fake-provider", "--latency", "soon"], ["--latency", "invalid duration"]),
        (["apiserver", "--port", "-1"], ["--port", "must not be negative"]),
        (["apiserver", "--window", "many"], ["--window", "expected a whole number"]),
        (["apiserver", "--bookmark-interval", "0"], ["--bookmark-interval", "above 0"]),
        (["apiserver", "--log-level", "loud"], ["--log-level", "invalid choice"]),
        (["local", "--replicas", "33"], ["--replicas", "at most 32"]),
        (["local", "--every", "nan"], ["--every", "invalid duration"]),
        (["local", "scale", "x"], ["replicas", "expected a whole number"]),
        (["shards", "--timeout", "-1"], ["--timeout", "'-1'"]),
        (["shards", "--what-if-replicas", "-1"], ["--what-if-replicas", "must not be negative"]),
        (["webhook-server"], ["--provider is required", "pdns"]),
        (["webhook-server", "--provider=webhook"], ["--provider", "invalid choice: 'webhook'"]),
        (["webhook-server", "--provider=pdns"], ["--pdns-api-key"]),
        (
            ["webhook-server", "--provider=fake", "--listen-address=8888"],
            ["--listen-address=8888", "HOST:PORT"],
        ),
        (["webhook-server", "--provider=fake", "--domain-filter=a..b"], ["--domain-filter=a..b"]),
        (["webhook-server", "--log-level", "loud"], ["--log-level", "invalid choice"]),
    ],
)
def test_a_bad_flag_value_is_a_usage_error(argv: list[str], words: list[str]) -> None:
    prog = " ".join(["shardsync", *argv[:2]] if argv[:2] == ["local", "scale"] else ["shardsync", argv[0]])
    one_line(shardsync(*argv), USAGE, prog, *words, f"see {prog} --help")


# ---- files and directories -------------------------------------------------------------------------------


def test_apiserver_data_dir_that_cannot_be_used(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    done = shardsync("apiserver", "--port", "0", "--data-dir", str(a_file))
    one_line(done, ENVIRONMENT, "shardsync apiserver", f"--data-dir={a_file}", "not a directory")
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / FILE_NAME).write_text("{")
    done = shardsync("apiserver", "--port", "0", "--data-dir", str(corrupt))
    one_line(done, ENVIRONMENT, "shardsync apiserver", f"--data-dir={corrupt}", "cannot read its snapshot")


def test_apiserver_kubeconfig_out_that_cannot_be_written(tmp_path: Path) -> None:
    done = shardsync("apiserver", "--port", "0", "--kubeconfig-out", str(tmp_path))
    one_line(done, ENVIRONMENT, "shardsync apiserver", f"--kubeconfig-out={tmp_path}", "a directory")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    done = shardsync("apiserver", "--port", "0", "--kubeconfig-out", str(a_file / "kubeconfig"))
    one_line(done, ENVIRONMENT, "shardsync apiserver", "--kubeconfig-out=", "not a directory")


def test_local_run_dir_that_cannot_be_written(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    done = shardsync("local", "--run-dir", str(a_file), "--duration", "1s")
    one_line(done, ENVIRONMENT, "shardsync local", f"--run-dir={a_file}", "cannot write there")


def test_local_refuses_a_run_dir_in_use_and_stops_all_on_a_closed_output(tmp_path: Path) -> None:
    """A second `shardsync local` in the run directory of a running one is refused (it would take the
    first one's control socket and logs); the first, whose output is then closed, stops every process it
    started and exits 141."""
    run_dir = tmp_path / "run"
    first = subprocess.Popen(
        [
            *(sys.executable, "-m", "shardsync", "local", "--run-dir", str(run_dir), "--replicas", "1"),
            *("--zones", "2", "--duration", "120s", "--no-tty", "--every", "1s"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=CLEAN_ENV,
    )
    try:
        assert first.stdout is not None and first.stderr is not None
        deadline = time.monotonic() + 60
        while not (run_dir / "control").exists():  # its control socket answers from here on
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()
            time.sleep(0.1)
        done = shardsync("local", "--run-dir", str(run_dir), "--duration", "1s")
        one_line(done, ENVIRONMENT, "shardsync local", f"--run-dir={run_dir}", "a running `shardsync local`")

        first.stdout.close()  # its reader goes away, as `| head` does
        code = first.wait(timeout=60)
        errors = first.stderr.read().decode()
        assert code == OUTPUT_CLOSED and errors == "", errors
        started = orjson.loads((run_dir / "run.json").read_bytes())["pids"]
        assert len(started) >= 3  # API server, fake provider, the replica
        alive = [pid for pid in started if pid_alive(pid)]
        assert not alive, alive
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=10)


# ---- a closed output ---------------------------------------------------------------------------------------


def test_shards_into_a_closed_pipe(apiserver: ApiServer) -> None:
    done = closed_output("shards", "--kubeconfig", str(apiserver.kubeconfig))
    assert (done.returncode, done.stderr) == (OUTPUT_CLOSED, "")


@pytest.mark.parametrize(
    "argv",
    [
        ["apiserver", "--port", "0"],
        ["fake-provider", "--port", "0"],
        [*WEBHOOK_SERVER, "--listen-address=127.0.0.1:0", "--metrics-address=127.0.0.1:0"],
    ],
    ids=lambda argv: argv[0],
)
def test_a_server_whose_output_is_closed_stops_quietly(argv: list[str]) -> None:
    """Each prints where it listens on stdout; with nobody reading, it stops (as any process would on
    SIGPIPE), leaving only its log lines (started, stopped) on stderr."""
    done = closed_output(*argv)
    assert done.returncode == OUTPUT_CLOSED
    assert all(line.startswith("ts=") for line in done.stderr.splitlines()), done.stderr


def test_local_control_into_a_closed_pipe(tmp_path: Path) -> None:
    done = closed_output("local", "status", "--run-dir", str(tmp_path))  # no launcher: one line, exit 1
    one_line(done, ENVIRONMENT, "shardsync local", f"no launcher is running in {tmp_path}")


# ---- anything else --------------------------------------------------------------------------------------


def test_an_unforeseen_error_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What no command foresaw still ends in one line and exit 1 (the trace only with --log-level=debug)."""
    module = types.ModuleType("tests_broken_command")

    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--log-level", default="info")

    def main(args: argparse.Namespace) -> int:
        raise ExceptionGroup("task group", [KeyError("zone-0001.example")])

    module.configure, module.main = configure, main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(cli.COMMANDS, "broken", (module.__name__, "always fails"))
    assert cli.main(["broken"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == "shardsync broken: KeyError: 'zone-0001.example'\n"
    assert cli.main(["broken", "--log-level=debug"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.splitlines()[-1] == "shardsync broken: KeyError: 'zone-0001.example'"
