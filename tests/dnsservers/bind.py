"""BIND 9 as the RFC 2136 test server: `named -g` in the foreground from a temp folder (see base.py).

One zone file per zone and a TSIG key; updates and transfers are allowed by that key only (unsigned ones
are REFUSED). Options: no recursion, no DNSSEC validation, no NOTIFY (else named notifies NS addresses),
no rndc control channel (several test runs may share a machine), unlimited records per RRset, a raised
update quota. Dynamic zones keep a journal (`<zone>.db.jnl`): `reset_zone` and `regenerate` rewrite the zone
files and drop the journals (and the new-zone database) so stale dynamic records do not come back; with no
control channel, named is restarted on the same port to load them.
"""

from __future__ import annotations

import re
import subprocess
from typing import ClassVar

from tests.dnsservers.base import DnsTestServer, find_binary

NAMED_CANDIDATES = ("/usr/sbin/named", "/usr/local/sbin/named")


def find_named() -> str | None:
    """Path of the `named` binary, or None when BIND is not installed."""
    return find_binary("named", NAMED_CANDIDATES)


def named_version(named: str) -> tuple[int, int, int]:
    out = subprocess.run([named, "-v"], capture_output=True, text=True, timeout=10, check=False).stdout
    match = re.search(r"BIND (\d+)\.(\d+)\.(\d+)", out)
    return (int(match[1]), int(match[2]), int(match[3])) if match else (0, 0, 0)


class BindServer(DnsTestServer):
    """One named process; see the module docstring."""

    kind: ClassVar[str] = "bind"
    title: ClassVar[str] = "BIND 9 (named)"
    packages: ClassVar[tuple[str, ...]] = ("bind9", "bind9-utils")

    @classmethod
    def missing(cls) -> list[str]:
        return [] if find_named() else ["named"]

    @property
    def named(self) -> str:
        return find_named() or "named"

    def _write_data(self) -> None:
        for path in self.workdir.iterdir():
            if path.suffix == ".jnl" or path.name.startswith("_default.nz"):
                path.unlink()
        for zone in self.zones:
            self._write_zone_file(zone)

    def _write_zone_file(self, zone: str) -> None:
        (self.workdir / f"{zone}.db").write_text(self.zone_text(zone))

    def _reset_zone(self, zone: str) -> None:
        self.stop()
        self._write_zone_file(zone)
        (self.workdir / f"{zone}.db.jnl").unlink(missing_ok=True)
        self.start()

    def _command(self) -> list[str]:
        return [self.named, "-g", "-c", str(self.workdir / "named.conf")]

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
