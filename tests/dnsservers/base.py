"""What every RFC 2136 test server offers the tests, and the process handling they share.

A `DnsTestServer` is one real DNS server process (BIND 9, Knot DNS, PowerDNS: one subclass each) serving
`zones` on a free loopback port with one TSIG key. Each zone starts as SOA (serial 1) + apex NS
`ns.shardsync.test.` + the zone-file lines given in `records`. UPDATE and AXFR are allowed with the key only.

- `start()` writes the data and configuration in its own temp folder, starts the server in the foreground
  and returns once every zone answers its SOA (bounded by READY_TIMEOUT). A port taken by someone else in
  the meantime is retried on another free port.
- `stop()` terminates the process and waits for the pid to exit (SIGTERM, then SIGKILL after a bound);
  `close()` also removes the folder. The context manager does both.
- `restart()` stops and starts again on the same port; dynamic updates survive (journal or database).
- `reset_zone(zone, records)` puts one zone back to its initial content (or to `records`), serial 1,
  while the server runs where it can (Knot, PowerDNS) or by a restart on the same port (BIND).
- `regenerate(records)` restarts from freshly written data for every zone: no dynamic record survives.
- `query`, `rrset`, `texts`, `axfr` and `serial` read the server directly (plain queries, signed AXFR),
  never through the provider under test.

`require(cls)` (and `require_command(name)` for a client such as dig) skips a test when the server is not
installed, except in CI (`CI` set) or as root, where it fails: `.ci/run` installs every server, so a
missing one there is a broken run, not a reason to skip.
"""

from __future__ import annotations

import abc
import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Self

import dns.exception
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.tsig
import pytest

READY_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0
SOA_LINE = "@ IN SOA ns.shardsync.test. hostmaster.shardsync.test. 1 3600 600 86400 60"
NS_LINE = "@ IN NS ns.shardsync.test."
DEFAULT_TTL = 300


def free_port() -> int:
    """A loopback port free for both TCP and UDP at the time of asking (the servers bind both)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            tcp.bind(("127.0.0.1", 0))
            port = int(tcp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    raise RuntimeError("no free loopback port for both TCP and UDP")


def find_binary(name: str, candidates: Sequence[str]) -> str | None:
    """`name` on PATH, else the first executable candidate (sbin is often not on a user's PATH)."""
    found = shutil.which(name)
    if found:
        return found
    return next((c for c in candidates if os.access(c, os.X_OK)), None)


def strict() -> bool:
    """In CI (`CI` set) or as root a missing server fails the test run instead of skipping."""
    return bool(os.environ.get("CI")) or os.geteuid() == 0


def require(cls: type[DnsTestServer]) -> None:
    """Skip the calling test (fail it when `strict()`) unless `cls`'s server is installed."""
    _require(cls.title, cls.missing(), cls.packages)


def require_command(name: str, *packages: str) -> None:
    """Skip the calling test (fail it when `strict()`) unless the command `name` is installed."""
    _require(name, [] if shutil.which(name) else [name], packages)


def _require(what: str, missing: list[str], packages: Sequence[str]) -> None:
    if missing:
        message = (
            f"{what} is not installed ({', '.join(missing)} missing): "
            f"apt-get install {' '.join(packages)} (.ci/run installs it)"
        )
        if strict():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


class ServerError(RuntimeError):
    """The server could not be started (the message carries the tail of its log)."""


class DnsTestServer(abc.ABC):
    """One server process serving `zones` (canonical names) with one TSIG key; see the module docstring."""

    kind: ClassVar[str]  # the pytest marker and parameter id: bind, knot, pdns
    title: ClassVar[str]  # for messages: "BIND 9 (named)"
    packages: ClassVar[tuple[str, ...]]  # Debian packages that provide it
    host = "127.0.0.1"

    def __init__(
        self,
        zones: Iterable[str],
        *,
        records: Mapping[str, Iterable[str]] | None = None,
        key_name: str = "shardsync-test-key",
        algorithm: str = "hmac-sha256",
        secret: str | None = None,
        workdir: Path | None = None,
    ) -> None:
        self.zones = [z.rstrip(".").lower() for z in zones]
        self.records = {z: list(lines) for z, lines in (records or {}).items()}
        self.key_name = key_name
        self.algorithm = algorithm
        self.secret = secret or base64.b64encode(os.urandom(32)).decode()
        self._own_dir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix=f"shardsync-{self.kind}-"))
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = self.workdir / f"{self.kind}.log"
        self._data_written = False

    # -- what each server defines ---------------------------------------------------------------------

    @classmethod
    @abc.abstractmethod
    def missing(cls) -> list[str]:
        """What is missing to run this server here (binaries, modules); empty when it can run."""

    @abc.abstractmethod
    def _write_data(self) -> None:
        """Write every zone's initial data, discarding any dynamic state (journals, database)."""

    @abc.abstractmethod
    def _write_conf(self) -> None:
        """Write the configuration for `self.port`."""

    @abc.abstractmethod
    def _command(self) -> list[str]:
        """The command line that runs the server in the foreground."""

    @abc.abstractmethod
    def _reset_zone(self, zone: str) -> None:
        """Put `zone` back to `zone_text(zone)` with serial 1, dynamic records gone."""

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start on `self.port` if it is set (a restart), else on a free port, and wait for every zone."""
        if self._proc is not None:
            raise ServerError(f"{self.kind}: already running")
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not self._data_written:
            self._write_data()
            self._data_written = True
        fixed = self.port != 0
        last: ServerError | None = None
        # Another process can grab the port between free_port() and the server's bind: retry on a new one.
        for _ in range(1 if fixed else 3):
            if not fixed:
                self.port = free_port()
            self._write_conf()
            try:
                self._spawn_and_wait()
                return self
            except ServerError as exc:
                last = exc
                self._terminate()
        assert last is not None
        raise last

    def stop(self) -> None:
        """Stop the server and wait for its process to exit (SIGTERM, then SIGKILL after a bound)."""
        self._terminate()

    def close(self) -> None:
        """Stop and remove the working folder if this object created it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def restart(self) -> None:
        """Stop and start again on the same port, keeping every record (dynamic updates included)."""
        self.stop()
        self.start()

    def regenerate(self, records: Mapping[str, Iterable[str]] | None = None) -> None:
        """Restart on the same port from freshly written data: no dynamic record comes back."""
        self.stop()
        if records is not None:
            self.records = {z: list(lines) for z, lines in records.items()}
        self._write_data()
        self._data_written = True
        self.start()

    def reset_zone(self, zone: str, records: Iterable[str] | None = None) -> None:
        """Put one zone back to SOA (serial 1) + NS + its zone-file lines: `records` when given (they become
        the zone's lines from then on, for later resets and restarts), else the ones it has."""
        zone = zone.rstrip(".").lower()
        if zone not in self.zones:
            raise ValueError(f"{zone} is not served by this {self.kind} server")
        if records is not None:
            self.records[zone] = list(records)
        self._reset_zone(zone)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self._log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- zone data -------------------------------------------------------------------------------------

    def zone_text(self, zone: str) -> str:
        """The zone in zone-file form, relative to its origin: what every server starts the zone with."""
        lines = [f"$ORIGIN {zone}.", f"$TTL {DEFAULT_TTL}", SOA_LINE, NS_LINE, *self.records.get(zone, [])]
        return "\n".join(lines) + "\n"

    # -- client helpers for assertions ----------------------------------------------------------------

    def tsig_key(self) -> dns.tsig.Key:
        return dns.tsig.Key(self.key_name, self.secret, self.algorithm)

    def query(self, name: str, rdtype: str, *, timeout: float = 5.0) -> dns.message.Message:
        """A plain (unsigned) TCP query, as any resolver would send it."""
        msg = dns.message.make_query(name if name.endswith(".") else name + ".", rdtype)
        return dns.query.tcp(msg, self.host, port=self.port, timeout=timeout)

    def rrset(self, name: str, rdtype: str) -> dns.rrset.RRset | None:
        """The RRset at (name, type) as the server answers it, or None."""
        answer = self.query(name, rdtype)
        qname = dns.name.from_text(name if name.endswith(".") else name + ".")
        try:
            return answer.find_rrset(answer.answer, qname, dns.rdataclass.IN, dns.rdatatype.from_text(rdtype))
        except KeyError:
            return None

    def texts(self, name: str, rdtype: str) -> set[str]:
        """The presentation form of each record at (name, type)."""
        found = self.rrset(name, rdtype)
        return {rd.to_text() for rd in found} if found is not None else set()

    def serial(self, zone: str) -> int:
        soa = self.rrset(zone, "SOA")
        assert soa is not None, f"{zone} has no SOA on {self.kind}"
        return int(soa[0].serial)

    def axfr(self, zone: str, *, timeout: float = 10.0) -> list[dns.rrset.RRset]:
        """Every RRset of the zone by a TSIG-signed AXFR."""
        key = self.tsig_key()
        out: list[dns.rrset.RRset] = []
        for message in dns.query.xfr(
            self.host,
            zone + ".",
            port=self.port,
            keyring={key.name: key},
            keyname=key.name,
            keyalgorithm=key.algorithm,
            relativize=False,
            timeout=timeout,
            lifetime=timeout * 3,
        ):
            out.extend(message.answer)
        return out

    # -- the process -----------------------------------------------------------------------------------

    def _spawn_and_wait(self) -> None:
        log = self._log.open("ab")
        try:
            self._proc = subprocess.Popen(
                self._command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,  # a Ctrl-C aimed at pytest must not race our own shutdown
            )
        finally:
            log.close()
        deadline = time.monotonic() + READY_TIMEOUT
        pending = list(self.zones)
        while pending:
            if self._proc.poll() is not None:
                raise ServerError(f"{self.kind} exited with {self._proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise ServerError(f"{self.kind} did not answer within {READY_TIMEOUT}s:\n{self.log_tail()}")
            with contextlib.suppress(OSError, EOFError, dns.exception.DNSException):
                answer = self.query(pending[0], "SOA", timeout=0.5)
                if answer.rcode() == dns.rcode.NOERROR and answer.answer:
                    pending.pop(0)
                    continue
            time.sleep(0.02)

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT)
