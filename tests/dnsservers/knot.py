"""Knot DNS 3 as the RFC 2136 test server: `knotd` in the foreground from a temp folder (see base.py).

One zone file per zone (`<zone>.zone`), the TSIG key, and one ACL that allows `update` and `transfer` by
that key only (unsigned or wrongly signed requests are answered NOTAUTH, where BIND says REFUSED).
Updates go to the journal (an LMDB database in the folder) and never back to the zone files
(`zonefile-sync: -1`), so a restart replays the journal over the unchanged zone files and keeps every
dynamic record. `reset_zone` rewrites one zone file, purges that zone's journal and reloads it through
the control socket (`knotc`, a Unix socket in the folder: no port is shared). Knot commits each UPDATE
with a floor of ~10 ms (field notes), which keeps fenced batches of many messages slower than on BIND.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import ClassVar

from tests.dnsservers.base import DnsTestServer, ServerError, find_binary

KNOTD_CANDIDATES = ("/usr/sbin/knotd", "/usr/local/sbin/knotd")
KNOTC_CANDIDATES = ("/usr/sbin/knotc", "/usr/local/sbin/knotc")
CONTROL_TIMEOUT = 10.0


def find_knotd() -> str | None:
    return find_binary("knotd", KNOTD_CANDIDATES)


def find_knotc() -> str | None:
    return find_binary("knotc", KNOTC_CANDIDATES)


class KnotServer(DnsTestServer):
    """One knotd process; see the module docstring."""

    kind: ClassVar[str] = "knot"
    title: ClassVar[str] = "Knot DNS (knotd)"
    packages: ClassVar[tuple[str, ...]] = ("knot",)

    @classmethod
    def missing(cls) -> list[str]:
        return [name for name, found in (("knotd", find_knotd()), ("knotc", find_knotc())) if not found]

    @property
    def _socket(self) -> str:
        return str(self.workdir / "knot.sock")

    def _write_data(self) -> None:
        shutil.rmtree(self.workdir / "db", ignore_errors=True)  # the journal and timers of every zone
        (self.workdir / "db").mkdir()
        for zone in self.zones:
            self._write_zone_file(zone)

    def _write_zone_file(self, zone: str) -> None:
        (self.workdir / f"{zone}.zone").write_text(self.zone_text(zone))

    def _reset_zone(self, zone: str) -> None:
        self._write_zone_file(zone)
        # Without the journal, the reload takes the zone file as it is (serial 1, nothing dynamic).
        self._control("zone-purge", "-f", "+journal", zone)
        self._control("-b", "zone-reload", zone)

    def _control(self, *args: str) -> None:
        command = [find_knotc() or "knotc", "-s", self._socket, "-t", str(int(CONTROL_TIMEOUT)), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=CONTROL_TIMEOUT, check=False)
        if done.returncode != 0:
            raise ServerError(f"knotc {' '.join(args)} failed: {done.stdout}{done.stderr}\n{self.log_tail()}")

    def _command(self) -> list[str]:
        return [find_knotd() or "knotd", "-c", str(self.workdir / "knot.conf")]

    def _write_conf(self) -> None:
        d = self.workdir
        zones = "\n".join(f"  - domain: {zone}" for zone in self.zones)
        conf = f"""
server:
    rundir: "{d}"
    listen: 127.0.0.1@{self.port}
log:
  - target: stderr
    any: info
database:
    storage: "{d}/db"
control:
    listen: "{self._socket}"
key:
  - id: {self.key_name}
    algorithm: {self.algorithm}
    secret: {self.secret}
acl:
  - id: by-key
    key: {self.key_name}
    action: [update, transfer]
template:
  - id: default
    storage: "{d}"
    file: "%s.zone"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: changes
    acl: by-key
zone:
{zones}
"""
        (d / "knot.conf").write_text(conf)
