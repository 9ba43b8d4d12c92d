"""A real BIND 9 for tests: `named -g` in the foreground from a temp folder, on a free loopback port.

`BindServer(zones).start()` writes `named.conf`, one zone file per zone (SOA + NS, plus any extra lines)
and a TSIG key, starts `named`, and returns once every zone answers. Updates and transfers are allowed by
that key only (unsigned ones are REFUSED). `stop()` terminates named and waits for the process to exit;
`regenerate()` rewrites the zone files, drops the journals (`*.jnl`) so stale dynamic records do not come
back, and starts again. Options follow /work/shared/field-notes.md: no recursion, no validation, no NOTIFY,
no rndc control channel (several test runs may share a machine), unlimited records per RRset, a raised
update quota.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType

import dns.exception
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.tsig

NAMED_CANDIDATES = ("/usr/sbin/named", "/usr/local/sbin/named")
READY_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0


def find_named() -> str | None:
    """Path of the `named` binary, or None when BIND is not installed."""
    found = shutil.which("named")
    if found:
        return found
    for candidate in NAMED_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def named_version(named: str) -> tuple[int, int, int]:
    out = subprocess.run([named, "-v"], capture_output=True, text=True, timeout=10, check=False).stdout
    match = re.search(r"BIND (\d+)\.(\d+)\.(\d+)", out)
    return (int(match[1]), int(match[2]), int(match[3])) if match else (0, 0, 0)


def free_port() -> int:
    """A loopback port free for both TCP and UDP at the time of asking (named needs both)."""
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


class BindError(RuntimeError):
    """named could not be started (the message carries the tail of its log)."""


class BindServer:
    """One named process serving `zones` (canonical names) with one TSIG key."""

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
        named: str | None = None,
    ) -> None:
        self.zones = [z.rstrip(".").lower() for z in zones]
        self.records = {z: list(lines) for z, lines in (records or {}).items()}
        self.key_name = key_name
        self.algorithm = algorithm
        self.secret = secret or base64.b64encode(os.urandom(32)).decode()
        self.named = named or find_named() or "named"
        self._own_dir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="shardsync-bind-"))
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = self.workdir / "named.log"

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> BindServer:
        """Write the configuration, start named on a free port and wait until every zone answers."""
        if self._proc is not None:
            raise BindError("already running")
        self._write_zone_files()
        last: BindError | None = None
        # Another process can grab the port between free_port() and named's bind: retry on a new one.
        for _ in range(3):
            self.port = free_port()
            self._write_conf()
            try:
                self._spawn_and_wait()
                return self
            except BindError as exc:
                last = exc
                self._terminate()
        assert last is not None
        raise last

    def stop(self) -> None:
        """Stop named and wait for it to exit (SIGTERM, then SIGKILL after a bound)."""
        self._terminate()

    def close(self) -> None:
        """Stop and remove the working folder if this object created it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def regenerate(self, records: Mapping[str, Iterable[str]] | None = None) -> None:
        """Restart from freshly written zone files: journals and the new-zone database are removed first,
        or named would replay the old dynamic updates over the new files."""
        self.stop()
        if records is not None:
            self.records = {z: list(lines) for z, lines in records.items()}
        for path in self.workdir.iterdir():
            if path.suffix == ".jnl" or path.name.startswith("_default.nz"):
                path.unlink()
        self.start()

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

    def __enter__(self) -> BindServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

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

    # -- internals --------------------------------------------------------------------------------------

    def _write_zone_files(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for zone in self.zones:
            lines = [
                "$TTL 300",
                "@ IN SOA ns.shardsync.test. hostmaster.shardsync.test. 1 3600 600 86400 60",
                "@ IN NS ns.shardsync.test.",
                *self.records.get(zone, []),
            ]
            (self.workdir / f"{zone}.db").write_text("\n".join(lines) + "\n")

    def _write_conf(self) -> None:
        d = self.workdir
        version = named_version(self.named)
        # max-records-per-type appeared in 9.18.28; older releases have no such limit to lift.
        limits = "max-records-per-type 0;\n    max-types-per-name 0;" if version >= (9, 18, 28) else ""
        zones = "\n".join(
            f'zone "{zone}" {{ type primary; file "{d}/{zone}.db"; '
            f"allow-update {{ key {self.key_name}; }}; allow-transfer {{ key {self.key_name}; }}; }};"
            for zone in self.zones
        )
        conf = f"""
key "{self.key_name}" {{ algorithm {self.algorithm}; secret "{self.secret}"; }};
controls {{ }};
options {{
    directory "{d}";
    pid-file "{d}/named.pid";
    session-keyfile "{d}/session.key";
    managed-keys-directory "{d}";
    dump-file "{d}/named_dump.db";
    statistics-file "{d}/named.stats";
    listen-on port {self.port} {{ 127.0.0.1; }};
    listen-on-v6 {{ none; }};
    recursion no;
    dnssec-validation no;
    notify no;
    update-quota 10000;
    {limits}
}};
{zones}
"""
        (d / "named.conf").write_text(conf)

    def _spawn_and_wait(self) -> None:
        log = self._log.open("ab")
        try:
            self._proc = subprocess.Popen(
                [self.named, "-g", "-c", str(self.workdir / "named.conf")],
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
                raise BindError(f"named exited with {self._proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise BindError(f"named did not answer within {READY_TIMEOUT}s:\n{self.log_tail()}")
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


@contextlib.contextmanager
def running_bind(zones: Iterable[str], **kwargs: object) -> Iterator[BindServer]:
    """`with running_bind(["example.test"]) as bind: ...` — started, and always stopped and cleaned up."""
    server = BindServer(zones, **kwargs)  # type: ignore[arg-type]
    try:
        server.start()
        yield server
    finally:
        server.close()
